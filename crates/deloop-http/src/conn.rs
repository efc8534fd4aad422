//! Client connections, each with deadlines and all under one cap, so that
//! slow or silent clients cannot hold sockets (or file descriptors) for
//! ever:
//!
//! * a connection must send a complete request head within the header
//!   deadline, counted from its first byte (or from the accept);
//! * a kept-alive connection with no request in flight is closed after the
//!   idle deadline;
//! * at the connection cap, the connection waiting longest without a
//!   request in flight (idle, or still sending its head) is closed to make
//!   room, so that a flood of half-open sockets cannot lock out a probe;
//!   when every connection has a request in flight, the newcomer gets a
//!   503 and is closed.
//!
//! A request in flight is bounded by the services' own deadlines (the body
//! deadline of [`crate::limits::read_body_within`], the request and stream
//! deadlines).

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

/// The deadlines and the cap, from `[server.connections]` or
/// `[proxy.connections]`.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Time to send a complete request head.
    pub header_read: Duration,
    /// Time a connection may stay open with no request in flight.
    pub keep_alive: Duration,
    /// Connections open at once.
    pub max_connections: usize,
}

impl ConnectionLimits {
    /// The limits of a `connections` settings table.
    pub fn from_settings(s: &deloop_config::ConnectionSettings) -> Self {
        ConnectionLimits {
            header_read: Duration::from_secs(s.header_read_timeout_secs),
            keep_alive: Duration::from_secs(s.keep_alive_timeout_secs),
            max_connections: s.max_connections,
        }
    }
}

/// Where a connection stands.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Waiting for a request head since then (it started arriving, or
    /// the connection was just accepted).
    Head(Instant),
    /// No request in flight and no byte of the next one since then.
    Idle(Instant),
    /// This many requests in flight.
    Busy(usize),
}

/// One open connection, as the watchdog and the cap see it.
#[derive(Debug)]
pub(crate) struct Conn {
    phase: Mutex<Phase>,
    wake: Notify,
    evicted: AtomicBool,
}

impl Conn {
    fn new(now: Instant) -> Self {
        Conn {
            phase: Mutex::new(Phase::Head(now)),
            wake: Notify::new(),
            evicted: AtomicBool::new(false),
        }
    }

    fn phase(&self) -> std::sync::MutexGuard<'_, Phase> {
        // A poisoned lock still holds a valid phase.
        self.phase.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes arrived: an idle connection starts its next head.
    fn on_read(&self) {
        let mut p = self.phase();
        if let Phase::Idle(_) = *p {
            *p = Phase::Head(Instant::now());
            drop(p);
            self.wake.notify_one();
        }
    }

    /// A request head is complete; the guard ends the request.
    pub(crate) fn begin(self: &Arc<Self>) -> InFlight {
        let mut p = self.phase();
        *p = match *p {
            Phase::Busy(n) => Phase::Busy(n + 1),
            _ => Phase::Busy(1),
        };
        drop(p);
        self.wake.notify_one();
        InFlight(self.clone())
    }

    fn end(&self) {
        let mut p = self.phase();
        *p = match *p {
            Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
            _ => Phase::Idle(Instant::now()),
        };
        drop(p);
        self.wake.notify_one();
    }

    /// When the connection is to be closed, if it stays as it is.
    fn deadline(&self, limits: &ConnectionLimits) -> Option<Instant> {
        match *self.phase() {
            Phase::Head(since) => Some(since + limits.header_read),
            Phase::Idle(since) => Some(since + limits.keep_alive),
            Phase::Busy(_) => None,
        }
    }

    /// Since when a connection without a request in flight has waited.
    fn waiting_since(&self) -> Option<Instant> {
        match *self.phase() {
            Phase::Head(since) | Phase::Idle(since) => Some(since),
            Phase::Busy(_) => None,
        }
    }

    fn evict(&self) {
        self.evicted.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    /// Resolves when the connection must be closed: a deadline passed, or
    /// it was evicted to make room.
    pub(crate) async fn expired(&self, limits: ConnectionLimits) {
        loop {
            if self.evicted.load(Ordering::Acquire) {
                return;
            }
            match self.deadline(&limits) {
                None => self.wake.notified().await,
                Some(d) if Instant::now() >= d => return,
                Some(d) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(d) => {}
                        () = self.wake.notified() => {}
                    }
                }
            }
        }
    }
}

/// A request in flight on a connection; dropped when its response body
/// has been sent (or abandoned).
#[derive(Debug)]
pub(crate) struct InFlight(Arc<Conn>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// A response body that ends its request when it is dropped, keeping the
/// inner body's size and end (a complete body keeps its length header).
pub(crate) struct TrackedBody {
    inner: Body,
    _in_flight: InFlight,
}

impl TrackedBody {
    pub(crate) fn wrap(inner: Body, in_flight: InFlight) -> Body {
        Body::new(TrackedBody {
            inner,
            _in_flight: in_flight,
        })
    }
}

impl HttpBody for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The open connections, for the cap.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    next: AtomicU64,
}

/// What to do with a newly accepted connection.
pub(crate) enum Admit {
    /// Serve it; the entry leaves the registry when dropped.
    Serve(Entry),
    /// Every connection has a request in flight: refuse it.
    Refuse,
}

/// A connection's place in the registry.
pub(crate) struct Entry {
    registry: Arc<Registry>,
    id: u64,
    /// The connection's state.
    pub(crate) conn: Arc<Conn>,
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.id);
    }
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits a new connection under the cap `max`, evicting the
    /// connection that has waited longest without a request in flight when
    /// the cap is reached.
    pub(crate) fn admit(self: &Arc<Self>, max: usize) -> Admit {
        let mut conns = self.lock();
        let live = conns
            .values()
            .filter(|c| !c.evicted.load(Ordering::Acquire))
            .count();
        if live >= max && !Self::evict_oldest_waiting(&conns) {
            return Admit::Refuse;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn::new(Instant::now()));
        conns.insert(id, conn.clone());
        Admit::Serve(Entry {
            registry: self.clone(),
            id,
            conn,
        })
    }

    /// Evicts the connection waiting longest without a request in flight
    /// (when accepting fails for want of file descriptors, for one).
    pub(crate) fn evict_one(&self) -> bool {
        Self::evict_oldest_waiting(&self.lock())
    }

    fn evict_oldest_waiting(conns: &HashMap<u64, Arc<Conn>>) -> bool {
        let victim = conns
            .values()
            .filter(|c| !c.evicted.load(Ordering::Acquire))
            .filter_map(|c| c.waiting_since().map(|t| (t, c)))
            .min_by_key(|(t, _)| *t);
        match victim {
            Some((_, c)) => {
                c.evict();
                true
            }
            None => false,
        }
    }

    /// Connections open now (evicted ones still closing included).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// A socket that tells its connection when bytes arrive.
pub(crate) struct Watched<S> {
    inner: S,
    conn: Arc<Conn>,
}

impl<S> Watched<S> {
    pub(crate) fn new(inner: S, conn: Arc<Conn>) -> Self {
        Watched { inner, conn }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.conn.on_read();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ConnectionLimits {
        ConnectionLimits {
            header_read: Duration::from_secs(10),
            keep_alive: Duration::from_secs(60),
            max_connections: 2,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn phases_move_the_deadline() {
        let c = Arc::new(Conn::new(Instant::now()));
        let start = Instant::now();
        assert_eq!(c.deadline(&limits()), Some(start + Duration::from_secs(10)));
        let req = c.begin();
        assert_eq!(c.deadline(&limits()), None, "busy: no deadline here");
        c.on_read();
        assert_eq!(c.deadline(&limits()), None, "body bytes change nothing");
        drop(req);
        assert_eq!(c.deadline(&limits()), Some(start + Duration::from_secs(60)));
        tokio::time::advance(Duration::from_secs(5)).await;
        c.on_read();
        assert_eq!(c.deadline(&limits()), Some(start + Duration::from_secs(15)));
    }

    #[tokio::test(start_paused = true)]
    async fn the_cap_evicts_the_oldest_waiting_and_refuses_when_all_are_busy() {
        let r = Arc::new(Registry::default());
        let Admit::Serve(a) = r.admit(2) else {
            panic!("room")
        };
        tokio::time::advance(Duration::from_secs(1)).await;
        let Admit::Serve(b) = r.admit(2) else {
            panic!("room")
        };
        let Admit::Serve(_c) = r.admit(2) else {
            panic!("a is evicted")
        };
        assert!(a.conn.evicted.load(Ordering::Acquire));
        assert!(!b.conn.evicted.load(Ordering::Acquire));
        drop(a);
        let _busy_b = b.conn.begin();
        let _busy_c = _c.conn.begin();
        assert!(matches!(r.admit(2), Admit::Refuse));
        assert_eq!(r.len(), 2);
    }
}
