//! Stream helpers shared by the streaming routes.

use std::time::Duration;

use futures_util::{Stream, StreamExt};

/// Ends `stream` when no item arrives for `idle` (a long healthy stream is
/// never cut; a silent one is). The last item is an I/O error naming the
/// timeout, so the client sees the stream was cut, not finished.
pub fn idle_timeout<S, T>(
    stream: S,
    idle: Duration,
) -> impl Stream<Item = Result<T, std::io::Error>>
where
    S: Stream<Item = Result<T, std::io::Error>> + Send + 'static,
{
    let timed = tokio_stream::StreamExt::timeout(stream, idle);
    futures_util::stream::unfold((Box::pin(timed), false), |(mut s, done)| async move {
        if done {
            return None;
        }
        match s.next().await {
            None => None,
            Some(Ok(item)) => Some((item, (s, false))),
            Some(Err(_elapsed)) => Some((
                Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "stream idle for longer than server.stream_idle_timeout_secs",
                )),
                (s, true),
            )),
        }
    })
}
