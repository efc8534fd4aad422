//! Live-agent sessions: the types, the state machine and the stores live in
//! `deloop-sessions` (in this process, or in Valkey/Redis shared by
//! replicas); the server reports their events as metrics.

use std::sync::Arc;

pub use deloop_sessions::*;

use crate::metrics::Metrics;

/// The server's metrics as a [`SessionEvents`] observer.
pub struct MetricsEvents(pub Arc<Metrics>);

impl SessionEvents for MetricsEvents {
    fn verdict(&self, level: &str, detector: Option<&str>) {
        self.0.verdict(level, detector);
    }

    fn sessions(&self, n: i64) {
        self.0.set_sessions(n);
    }

    fn evicted(&self) {
        self.0.session_evicted();
    }

    fn expired(&self, n: u64) {
        self.0.sessions_expired(n);
    }
}
