//! Load shedding: a request runs only with a permit of the service's
//! concurrency limit (`server.concurrency_limit`,
//! `proxy.concurrency_limit`); without one it is answered 503 at once
//! instead of waiting in an unbounded queue. The caller sheds; this module
//! keeps the permit for as long as the response lasts.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::response::Response;
use futures_util::StreamExt;
use http_body::Frame;
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

/// Whether a request's body deadline passed ([`read_body_within`]).
#[derive(Debug, Clone, Default)]
pub struct BodyDeadline(Arc<AtomicBool>);

impl BodyDeadline {
    /// True when the body did not arrive whole in time: the handler saw a
    /// read error, and the answer should be a 408 naming the deadline.
    pub fn passed(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// `req` with a body that must arrive whole within `deadline` from now:
/// past it, reading the body fails (so a handler waiting on it returns,
/// and its concurrency permit is freed) and the returned flag is set.
/// A slow body can thus hold a permit for `deadline` at most.
pub fn read_body_within(req: Request, deadline: Duration) -> (Request, BodyDeadline) {
    let flag = BodyDeadline::default();
    let (parts, body) = req.into_parts();
    if body.is_end_stream() {
        return (Request::from_parts(parts, body), flag);
    }
    let body = Body::new(DeadlineBody {
        inner: body,
        sleep: Box::pin(tokio::time::sleep(deadline)),
        deadline,
        flag: flag.clone(),
    });
    (Request::from_parts(parts, body), flag)
}

/// A request body with a deadline for its whole arrival.
struct DeadlineBody {
    inner: Body,
    sleep: Pin<Box<tokio::time::Sleep>>,
    deadline: Duration,
    flag: BodyDeadline,
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if self.flag.passed() {
            return Poll::Ready(None);
        }
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            self.flag.0.store(true, Ordering::Release);
            let secs = self.deadline.as_secs();
            return Poll::Ready(Some(Err(axum::Error::new(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the request body did not arrive within {secs} s"),
            )))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
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

    #[tokio::test(start_paused = true)]
    async fn a_body_past_its_deadline_fails_and_says_so() {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(2);
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        let req = Request::new(Body::from_stream(stream));
        let (req, deadline) = read_body_within(req, Duration::from_secs(5));
        tx.send(Ok(Bytes::from_static(b"{\"a\": "))).await.unwrap();
        // The rest never comes; the sender stays open.
        let err = axum::body::to_bytes(req.into_body(), 1024)
            .await
            .unwrap_err();
        assert!(deadline.passed());
        assert!(
            format!("{err:?}").contains("did not arrive within 5 s"),
            "{err:?}"
        );
        drop(tx);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_in_time_is_untouched() {
        let req = Request::new(Body::from("whole"));
        let (req, deadline) = read_body_within(req, Duration::from_secs(5));
        let body = axum::body::to_bytes(req.into_body(), 1024).await.unwrap();
        assert_eq!(&body[..], b"whole");
        assert!(!deadline.passed());
    }
}
