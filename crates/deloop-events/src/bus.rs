//! The bus: a bounded ring of recent events, a broadcast channel to the
//! live feeds, running totals, and the "not a loop" reports.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::sync::broadcast;

use crate::event::{EventKind, GuardEvent};

/// The ring's default budget: 4 MiB of recent events.
pub const DEFAULT_RING_BYTES: usize = 4 << 20;
/// Reports of "not a loop" kept for review; the oldest go first.
pub const MAX_REPORTS: usize = 256;
/// Bytes kept of a report's note.
const MAX_NOTE_BYTES: usize = 1000;
/// Events a subscriber may fall behind before it misses some.
const CHANNEL_DEPTH: usize = 1024;

/// Totals since the process started (not bounded by the ring).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Text loops cut.
    pub loops_cut: u64,
    /// Tool-call verdicts above `ok`.
    pub tool_loops: u64,
    /// JSON replies closed or repaired.
    pub json_rescues: u64,
    /// Bytes cut and not forwarded.
    pub bytes_saved: u64,
    /// Tokens saved (estimated, four bytes a token).
    pub tokens_saved: u64,
    /// "Not a loop" reports recorded.
    pub reports: u64,
}

/// A "not a loop" report: the event as it was, and the reviewer's note.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// When it was reported (milliseconds since the Unix epoch).
    pub at_ms: u64,
    /// The note (may be empty).
    pub note: String,
    /// The event reported.
    pub event: GuardEvent,
}

/// Why a report was not recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportError {
    /// No event with that id is in the ring any more (or ever was).
    UnknownEvent(u64),
    /// The event is not a loop (nothing to dispute).
    NotALoop(u64),
}

impl std::fmt::Display for ReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReportError::UnknownEvent(id) => write!(
                f,
                "event {id} is not among the recent events (the ring keeps the newest); \
                 report it while it is listed"
            ),
            ReportError::NotALoop(id) => {
                write!(f, "event {id} is not a loop cut or a loop verdict")
            }
        }
    }
}

impl std::error::Error for ReportError {}

struct Ring {
    events: VecDeque<Arc<GuardEvent>>,
    bytes: usize,
    reports: VecDeque<Report>,
    totals: Totals,
}

/// The bus every guard publishes on. Share it as an `Arc`.
pub struct EventBus {
    tx: broadcast::Sender<Arc<GuardEvent>>,
    ring: Mutex<Ring>,
    max_bytes: usize,
    next_id: AtomicU64,
}

impl std::fmt::Debug for EventBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBus")
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl Default for EventBus {
    fn default() -> Self {
        EventBus::new(DEFAULT_RING_BYTES)
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl EventBus {
    /// A bus whose ring keeps at most `max_bytes` of recent events (at
    /// least the newest one, whatever its size).
    pub fn new(max_bytes: usize) -> Self {
        let (tx, _) = broadcast::channel(CHANNEL_DEPTH);
        EventBus {
            tx,
            ring: Mutex::new(Ring {
                events: VecDeque::new(),
                bytes: 0,
                reports: VecDeque::new(),
                totals: Totals::default(),
            }),
            max_bytes,
            next_id: AtomicU64::new(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Ring> {
        // A panic while holding the lock leaves a consistent ring (each
        // update is one push or pop); keep serving.
        self.ring.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records `event` (its id and time are set here, its fields cut to
    /// their bounds), adds it to the totals and sends it to every
    /// subscriber. Returns its id.
    pub fn publish(&self, mut event: GuardEvent) -> u64 {
        event.bound();
        let mut ring = self.lock();
        // Ids are taken under the lock, so the ring stays in id order.
        event.id = self.next_id.fetch_add(1, Ordering::Relaxed);
        event.at_ms = now_ms();
        let id = event.id;
        let t = &mut ring.totals;
        match event.kind {
            EventKind::TextCut => t.loops_cut += 1,
            EventKind::JsonRescue => t.json_rescues += 1,
            EventKind::ToolLoop | EventKind::SessionCall if event.is_loop() => t.tool_loops += 1,
            _ => {}
        }
        if event.kind == EventKind::TextCut {
            t.bytes_saved += event.saved_bytes.unwrap_or(0);
            t.tokens_saved += event.saved_tokens.unwrap_or(0);
        }
        let event = Arc::new(event);
        ring.bytes += event.weight();
        ring.events.push_back(event.clone());
        while ring.bytes > self.max_bytes && ring.events.len() > 1 {
            if let Some(old) = ring.events.pop_front() {
                ring.bytes -= old.weight();
            }
        }
        drop(ring);
        // No subscriber is not an error: the ring still has it.
        let _ = self.tx.send(event);
        id
    }

    /// A receiver of the events published from now on. It holds at most
    /// a fixed number of unread events; past that it misses the oldest and
    /// its next `recv` says how many (`RecvError::Lagged`).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<GuardEvent>> {
        self.tx.subscribe()
    }

    /// The events in the ring, oldest first.
    pub fn recent(&self) -> Vec<Arc<GuardEvent>> {
        self.lock().events.iter().cloned().collect()
    }

    /// One event of the ring.
    pub fn get(&self, id: u64) -> Option<Arc<GuardEvent>> {
        let ring = self.lock();
        let i = ring.events.binary_search_by_key(&id, |e| e.id).ok()?;
        ring.events.get(i).cloned()
    }

    /// The totals since the process started.
    pub fn totals(&self) -> Totals {
        self.lock().totals
    }

    /// The ring's budget in bytes.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// The bytes the ring holds now.
    pub fn ring_bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Records that event `id` was not a loop, with a note, for review:
    /// kept among the last [`MAX_REPORTS`] reports and logged.
    pub fn report(&self, id: u64, note: &str) -> Result<Report, ReportError> {
        let mut ring = self.lock();
        let i = ring
            .events
            .binary_search_by_key(&id, |e| e.id)
            .map_err(|_| ReportError::UnknownEvent(id))?;
        let event = ring.events[i].clone();
        if !event.is_loop() {
            return Err(ReportError::NotALoop(id));
        }
        let mut note = note.trim().to_string();
        if note.len() > MAX_NOTE_BYTES {
            let mut end = MAX_NOTE_BYTES;
            while !note.is_char_boundary(end) {
                end -= 1;
            }
            note.truncate(end);
        }
        let report = Report {
            at_ms: now_ms(),
            note,
            event: (*event).clone(),
        };
        if ring.reports.len() == MAX_REPORTS {
            ring.reports.pop_front();
        }
        ring.reports.push_back(report.clone());
        ring.totals.reports += 1;
        drop(ring);
        tracing::info!(
            target: "deloop::review",
            event = id,
            kind = event.kind.as_str(),
            detector = event.detector.as_deref().unwrap_or(""),
            "reported as not a loop"
        );
        Ok(report)
    }

    /// The reports kept, oldest first.
    pub fn reports(&self) -> Vec<Report> {
        self.lock().reports.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn cut(unit: &str) -> GuardEvent {
        let mut e = GuardEvent::new(EventKind::TextCut, "proxy").with_saved(100);
        e.unit = Some(unit.to_string());
        e
    }

    #[test]
    fn the_ring_keeps_the_newest_within_its_budget() {
        let bus = EventBus::new(4096);
        for i in 0..100 {
            bus.publish(cut(&"x".repeat(i)));
        }
        let recent = bus.recent();
        assert!(bus.ring_bytes() <= 4096);
        assert!(recent.len() < 100 && !recent.is_empty());
        assert_eq!(recent.last().unwrap().id, 100);
        assert!(recent.windows(2).all(|w| w[0].id < w[1].id));
        // Totals count what left the ring too.
        assert_eq!(bus.totals().loops_cut, 100);
        assert_eq!(bus.totals().tokens_saved, 2500);
    }

    #[test]
    fn an_event_larger_than_the_budget_is_kept_alone() {
        let bus = EventBus::new(10);
        bus.publish(cut("a"));
        bus.publish(cut("b"));
        let recent = bus.recent();
        assert_eq!(recent.len(), 1);
        assert_eq!(recent[0].unit.as_deref(), Some("b"));
    }

    #[tokio::test]
    async fn subscribers_get_new_events_and_a_slow_one_lags() {
        let bus = EventBus::new(1 << 20);
        let mut rx = bus.subscribe();
        let id = bus.publish(cut("u"));
        assert_eq!(rx.recv().await.unwrap().id, id);
        for _ in 0..CHANNEL_DEPTH + 10 {
            bus.publish(cut("u"));
        }
        match rx.recv().await {
            Err(broadcast::error::RecvError::Lagged(n)) => assert_eq!(n, 10),
            other => panic!("expected a lag, got {other:?}"),
        }
    }

    #[test]
    fn reports_are_bounded_and_need_a_loop_in_the_ring() {
        let bus = EventBus::new(1 << 20);
        let id = bus.publish(cut("u"));
        let mut ok = GuardEvent::new(EventKind::SessionCall, "sessions");
        ok.level = Some("ok".into());
        let ok = bus.publish(ok);
        assert_eq!(bus.report(ok, ""), Err(ReportError::NotALoop(ok)));
        assert_eq!(bus.report(999, ""), Err(ReportError::UnknownEvent(999)));
        for _ in 0..MAX_REPORTS + 5 {
            bus.report(id, &"n".repeat(5000)).unwrap();
        }
        assert_eq!(bus.reports().len(), MAX_REPORTS);
        assert_eq!(bus.totals().reports, (MAX_REPORTS + 5) as u64);
        assert_eq!(bus.reports()[0].note.len(), MAX_NOTE_BYTES);
        assert!(bus.report(999, "").unwrap_err().to_string().contains("999"));
    }

    proptest! {
        /// Whatever is published, the ring stays within its budget (or
        /// holds one event) and in id order.
        #[test]
        fn the_ring_is_bounded(sizes in proptest::collection::vec(0usize..3000, 1..60), budget in 1usize..20_000) {
            let bus = EventBus::new(budget);
            for s in &sizes {
                let mut e = cut("u");
                e.context = Some("c".repeat(*s));
                bus.publish(e);
            }
            let recent = bus.recent();
            prop_assert!(bus.ring_bytes() <= budget || recent.len() == 1);
            prop_assert!(recent.windows(2).all(|w| w[0].id < w[1].id));
            prop_assert_eq!(recent.last().unwrap().id, sizes.len() as u64);
        }
    }
}
