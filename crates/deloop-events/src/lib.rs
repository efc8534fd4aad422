//! The live feed of guard decisions.
//!
//! Every guard that decides something a person may want to watch (a text
//! loop cut in a proxied stream, a JSON reply repaired, a tool-call loop
//! judged by the session API or found in a proxied history) publishes a
//! [`GuardEvent`] on one [`EventBus`]. The web console reads the bus: the
//! recent events from its ring, new ones as they happen.
//!
//! The bus is bounded twice: the ring of recent events holds at most
//! `max_bytes` of events (the oldest go first), and each subscriber reads
//! from a broadcast channel of fixed depth, so a slow browser misses events
//! (it is told how many) instead of being buffered without bound.
//!
//! `deloop-server` and `deloop-proxy` both publish here and neither imports
//! the other; `deloop serve` hands the proxy it mounts the server's bus.
//!
//! ```
//! use deloop_events::{EventBus, EventKind, GuardEvent};
//! let bus = EventBus::new(64 << 10);
//! let mut rx = bus.subscribe();
//! let mut ev = GuardEvent::new(EventKind::TextCut, "proxy");
//! ev.unit = Some("over and over ".into());
//! ev.saved_bytes = Some(420);
//! bus.publish(ev);
//! assert_eq!(bus.recent().len(), 1);
//! assert_eq!(bus.totals().loops_cut, 1);
//! assert_eq!(rx.try_recv().unwrap().kind, EventKind::TextCut);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod bus;
mod event;

pub use bus::{EventBus, Report, ReportError, Totals, DEFAULT_RING_BYTES, MAX_REPORTS};
pub use event::{EventKind, GuardEvent};
