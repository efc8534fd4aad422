//! Serving a router: every connection under [`crate::conn`]'s deadlines
//! and cap, with a graceful shutdown that has a deadline.

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;

use crate::conn::{Admit, ConnectionLimits, Registry, TrackedBody, Watched};

/// What a connection refused at the cap is told before it is closed.
const REFUSED_BODY: &str =
    "every connection has a request in flight (connections.max_connections); retry shortly\n";

/// Connections being refused at once; beyond it a newcomer is closed
/// without an answer.
const MAX_REFUSING: usize = 64;

/// Answers 503 on a connection refused at the cap, then reads what the
/// client sent for a moment (closing a socket with unread input resets it,
/// and the client could lose the answer), and closes it.
async fn refuse(mut tcp: tokio::net::TcpStream) {
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{REFUSED_BODY}",
        REFUSED_BODY.len()
    );
    let talk = async {
        tcp.write_all(answer.as_bytes()).await?;
        tcp.shutdown().await?;
        let mut sink = [0u8; 4096];
        while tcp.read(&mut sink).await? > 0 {}
        Ok::<(), std::io::Error>(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), talk).await;
}

/// Serves `app` on `listener` until `shutdown` resolves; then stops
/// accepting, lets in-flight requests and streams finish for up to
/// `grace`, and returns (a stream still open at the deadline is dropped).
///
/// Each connection lives under `limits` ([`crate::conn`]). Connections
/// have `TCP_NODELAY`: streamed events are small writes, and Nagle's
/// algorithm would hold one back until the client acknowledges the
/// previous one.
pub async fn serve_app(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: ConnectionLimits,
    grace: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let registry = Arc::new(Registry::default());
    let refusing = Arc::new(AtomicUsize::new(0));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    // The connections' tasks: aborted if still running when this returns.
    let mut tasks = tokio::task::JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        while tasks.try_join_next().is_some() {}
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            a = listener.accept() => a,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of file descriptors (or another transient error):
                // make room by closing the longest-waiting idle
                // connection, and try again shortly.
                let evicted = registry.evict_one();
                tracing::warn!(error = %e, evicted, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let entry = match registry.admit(limits.max_connections) {
            Admit::Serve(entry) => entry,
            Admit::Refuse => {
                tracing::warn!(
                    max_connections = limits.max_connections,
                    "connection refused: every connection has a request in flight"
                );
                if refusing.load(Ordering::Acquire) < MAX_REFUSING {
                    refusing.fetch_add(1, Ordering::AcqRel);
                    let refusing = refusing.clone();
                    tokio::spawn(async move {
                        refuse(tcp).await;
                        refusing.fetch_sub(1, Ordering::AcqRel);
                    });
                }
                continue;
            }
        };
        let app = app.clone();
        let mut stop = stop_rx.clone();
        tasks.spawn(async move {
            let conn = entry.conn.clone();
            let io = TokioIo::new(Watched::new(tcp, conn.clone()));
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let in_flight = conn.begin();
                let app = app.clone();
                async move {
                    let res = app.oneshot(req.map(Body::new)).await;
                    Ok::<Response, Infallible>(match res {
                        Ok(res) => res.map(|b| TrackedBody::wrap(b, in_flight)),
                        Err(never) => match never {},
                    })
                }
            });
            let builder = Builder::new(TokioExecutor::new());
            let served = builder.serve_connection_with_upgrades(io, service);
            let mut served = std::pin::pin!(served);
            let watched = entry.conn.clone();
            let expired = watched.expired(limits);
            let mut expired = std::pin::pin!(expired);
            let mut stopping = false;
            loop {
                tokio::select! {
                    r = served.as_mut() => {
                        if let Err(e) = r {
                            tracing::debug!(error = %e, "connection ended with an error");
                        }
                        break;
                    }
                    // Deadline passed or evicted: dropping the connection
                    // closes the socket.
                    () = expired.as_mut() => break,
                    r = stop.wait_for(|s| *s), if !stopping => {
                        stopping = true;
                        if r.is_ok() {
                            served.as_mut().graceful_shutdown();
                        }
                    }
                }
            }
            // Leaves the registry with the connection.
            drop(entry);
        });
    }
    drop(listener);
    tracing::info!("shutting down: no new connections, finishing in-flight requests");
    let _ = stop_tx.send(true);
    let all_done = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(grace, all_done).await.is_err() {
        tracing::warn!(
            grace_secs = grace.as_secs(),
            "shutdown grace period over; exiting"
        );
    }
    Ok(())
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

    use axum::body::Bytes;
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Generous limits, for the tests that are not about them.
    const LIMITS: ConnectionLimits = ConnectionLimits {
        header_read: Duration::from_secs(300),
        keep_alive: Duration::from_secs(300),
        max_connections: 1000,
    };

    /// A generous bound for the tests themselves, never a speed the code
    /// must meet.
    const PATIENCE: Duration = Duration::from_secs(60);

    /// True once the server has closed `tcp` (reads end or fail).
    async fn closed_by_server(tcp: &mut tokio::net::TcpStream) -> bool {
        let mut buf = [0u8; 1024];
        tokio::time::timeout(PATIENCE, async {
            loop {
                match tcp.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => continue,
                }
            }
        })
        .await
        .is_ok()
    }

    fn probe_app() -> Router {
        Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route(
                "/forever",
                get(|| async {
                    Body::from_stream(
                        futures_util::stream::pending::<Result<Bytes, std::io::Error>>(),
                    )
                }),
            )
    }

    /// Sockets that send half a head, or nothing, are closed at the header
    /// deadline; a kept-alive socket with no request is closed at the idle
    /// deadline; a request in flight is never cut by either.
    #[tokio::test]
    async fn half_open_and_idle_sockets_are_closed_busy_ones_are_not() {
        let limits = ConnectionLimits {
            header_read: Duration::from_secs(1),
            keep_alive: Duration::from_secs(1),
            max_connections: 1000,
        };
        let (addr, _stop, _server) = start(probe_app(), limits, Duration::from_secs(1)).await;
        let mut half = tokio::net::TcpStream::connect(addr).await.unwrap();
        half.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-slow: ")
            .await
            .unwrap();
        let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut idle = tokio::net::TcpStream::connect(addr).await.unwrap();
        idle.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut head = [0u8; 12];
        idle.read_exact(&mut head).await.unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
        let mut busy = tokio::net::TcpStream::connect(addr).await.unwrap();
        busy.write_all(b"GET /forever HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        busy.read_exact(&mut head).await.unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
        assert!(
            closed_by_server(&mut half).await,
            "a half-open head stays open"
        );
        assert!(
            closed_by_server(&mut silent).await,
            "a silent socket stays open"
        );
        assert!(
            closed_by_server(&mut idle).await,
            "an idle socket stays open"
        );
        // The stream in flight outlived both deadlines: after the rest of
        // its head, the socket has nothing to read, and is not closed.
        let mut buf = [0u8; 1024];
        loop {
            match tokio::time::timeout(Duration::from_millis(200), busy.read(&mut buf)).await {
                Err(_) => break,
                Ok(Ok(n)) if n > 0 => continue,
                Ok(r) => panic!("the busy stream was closed: {r:?}"),
            }
        }
    }

    /// At the cap, half-open sockets (held far longer than the test) cannot
    /// lock out a probe: the oldest is closed to make room, and `/healthz`
    /// answers. With every connection busy, a newcomer gets 503.
    #[tokio::test]
    async fn at_the_cap_healthz_stays_reachable() {
        let limits = ConnectionLimits {
            max_connections: 8,
            ..LIMITS
        };
        let (addr, _stop, _server) = start(probe_app(), limits, Duration::from_secs(1)).await;
        let mut half = Vec::new();
        for _ in 0..8 {
            let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            tcp.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n")
                .await
                .unwrap();
            half.push(tcp);
        }
        for _ in 0..3 {
            let answer = get_text(addr, "/healthz").await;
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
            assert!(answer.ends_with("ok"), "{answer}");
        }
        assert!(
            closed_by_server(&mut half[0]).await,
            "the oldest half-open socket was not closed"
        );
        // Every connection busy: the newcomer is refused with 503.
        let mut busy = Vec::new();
        for _ in 0..8 {
            let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            tcp.write_all(b"GET /forever HTTP/1.1\r\nhost: x\r\n\r\n")
                .await
                .unwrap();
            let mut head = [0u8; 12];
            tcp.read_exact(&mut head).await.unwrap();
            assert_eq!(&head, b"HTTP/1.1 200");
            busy.push(tcp);
        }
        let answer = get_text(addr, "/healthz").await;
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(answer.contains("max_connections"), "{answer}");
    }

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
        limits: ConnectionLimits,
        grace: Duration,
    ) -> (
        std::net::SocketAddr,
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<std::io::Result<()>>,
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_app(listener, app, limits, grace, async move {
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
        let (addr, stop_tx, server) = start(app, LIMITS, Duration::from_secs(60)).await;
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
        let (addr, stop_tx, server) = start(app, LIMITS, Duration::from_millis(50)).await;
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
