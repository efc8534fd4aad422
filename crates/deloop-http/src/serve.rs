//! Serving a router with a graceful shutdown that has a deadline.

use std::future::{Future, IntoFuture};
use std::time::Duration;

use axum::serve::ListenerExt;
use axum::Router;

/// Serves `app` on `listener` until `shutdown` resolves; then stops
/// accepting, lets in-flight requests and streams finish for up to
/// `grace`, and returns (a stream still open at the deadline is dropped).
///
/// Connections have `TCP_NODELAY`: streamed events are small writes, and
/// Nagle's algorithm would hold one back until the client acknowledges the
/// previous one.
pub async fn serve_app(
    listener: tokio::net::TcpListener,
    app: Router,
    grace: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let (tx, rx) = tokio::sync::watch::channel(false);
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        shutdown.await;
        tracing::info!("shutting down: no new connections, finishing in-flight requests");
        let _ = tx.send(true);
    });
    let deadline = async move {
        let mut rx = rx;
        let _ = rx.wait_for(|stopping| *stopping).await;
        tokio::time::sleep(grace).await;
        tracing::warn!(
            grace_secs = grace.as_secs(),
            "shutdown grace period over; exiting"
        );
    };
    tokio::select! {
        r = server.into_future() => r,
        () = deadline => Ok(()),
    }
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::body::{Body, Bytes};
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    async fn get_text(addr: std::net::SocketAddr, path: &str) -> String {
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
        tcp.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        tcp.read_to_string(&mut out).await.unwrap();
        out
    }

    /// `app` served on a free port of 127.0.0.1 until the sender fires.
    async fn start(
        app: Router,
        grace: Duration,
    ) -> (
        std::net::SocketAddr,
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<std::io::Result<()>>,
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_app(listener, app, grace, async move {
            let _ = stop_rx.await;
        }));
        (addr, stop_tx, server)
    }

    /// A request in flight when shutdown begins still gets its whole
    /// answer; the server then returns.
    #[tokio::test]
    async fn shutdown_lets_in_flight_streams_finish() {
        let (chunks_tx, chunks_rx) = tokio::sync::mpsc::channel::<Bytes>(4);
        let chunks_rx = std::sync::Arc::new(std::sync::Mutex::new(Some(chunks_rx)));
        let app = Router::new().route(
            "/stream",
            get(move || {
                let rx = chunks_rx.lock().unwrap().take().expect("one request");
                let s = futures_util::stream::unfold(rx, |mut rx| async move {
                    rx.recv().await.map(|b| (Ok::<_, std::io::Error>(b), rx))
                });
                async move { Body::from_stream(s) }
            }),
        );
        let (addr, stop_tx, server) = start(app, Duration::from_secs(60)).await;
        let client = tokio::spawn(get_text(addr, "/stream"));
        chunks_tx.send(Bytes::from_static(b"first;")).await.unwrap();
        // The stream has started; now shut down with it in flight.
        while chunks_tx.capacity() < 4 {
            tokio::task::yield_now().await;
        }
        stop_tx.send(()).unwrap();
        chunks_tx.send(Bytes::from_static(b"last")).await.unwrap();
        drop(chunks_tx);
        let answer = client.await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.contains("first;"), "{answer}");
        assert!(answer.contains("last"), "{answer}");
        server.await.unwrap().unwrap();
    }

    /// A stream that never ends is dropped at the grace deadline, and the
    /// server returns instead of waiting for it.
    #[tokio::test]
    async fn the_grace_period_bounds_the_wait() {
        let app = Router::new().route(
            "/forever",
            get(|| async {
                Body::from_stream(futures_util::stream::pending::<Result<Bytes, std::io::Error>>())
            }),
        );
        let (addr, stop_tx, server) = start(app, Duration::from_millis(50)).await;
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        tcp.write_all(b"GET /forever HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut head = [0u8; 12];
        tcp.read_exact(&mut head).await.unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
        stop_tx.send(()).unwrap();
        server.await.unwrap().unwrap();
    }
}
