//! Load shedding: a request runs only with a permit of the service's
//! concurrency limit (`server.concurrency_limit`,
//! `proxy.concurrency_limit`); without one it is answered 503 at once
//! instead of waiting in an unbounded queue. The caller sheds; this module
//! keeps the permit for as long as the response lasts.

use axum::body::{Body, HttpBody};
use axum::response::Response;
use futures_util::StreamExt;
use tokio::sync::OwnedSemaphorePermit;

/// Releases `permit` when `res` is done: at once for a complete body (the
/// usual JSON answer), after the last chunk for a streamed one, so that a
/// long stream counts against the limit until it ends.
pub fn hold_until_end(res: Response, permit: OwnedSemaphorePermit) -> Response {
    if res.body().size_hint().exact().is_some() {
        return res;
    }
    let (parts, body) = res.into_parts();
    let body = Body::from_stream(body.into_data_stream().map(move |chunk| {
        let _held = &permit;
        chunk
    }));
    Response::from_parts(parts, body)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::body::Bytes;
    use tokio::sync::Semaphore;

    use super::*;

    #[tokio::test]
    async fn a_complete_body_frees_its_permit_at_once() {
        let permits = Arc::new(Semaphore::new(1));
        let permit = permits.clone().try_acquire_owned().unwrap();
        let res = hold_until_end(Response::new(Body::from("done")), permit);
        assert_eq!(permits.available_permits(), 1);
        drop(res);
    }

    #[tokio::test]
    async fn a_stream_holds_its_permit_until_its_last_chunk() {
        let permits = Arc::new(Semaphore::new(1));
        let permit = permits.clone().try_acquire_owned().unwrap();
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(2);
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        let res = hold_until_end(Response::new(Body::from_stream(stream)), permit);
        assert_eq!(permits.available_permits(), 0, "held while streaming");
        tx.send(Ok(Bytes::from_static(b"chunk"))).await.unwrap();
        drop(tx);
        let body = axum::body::to_bytes(res.into_body(), 1024).await.unwrap();
        assert_eq!(&body[..], b"chunk");
        assert_eq!(permits.available_permits(), 1, "released at the end");
    }
}
