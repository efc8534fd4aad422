//! What every handler shares.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use deloop_core::repetition::ClampConfig;
use tokio::sync::Semaphore;

use crate::auth::ApiKeys;
use crate::metrics::Metrics;
use crate::sessions::{GuardSettings, SessionStore};
use crate::settings::ServerSettings;

/// The server's shared state: settings, guard defaults, the session store,
/// metrics. Cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct AppState(pub(crate) Arc<Inner>);

pub(crate) struct Inner {
    pub settings: ServerSettings,
    pub clamp: ClampConfig,
    pub guard: GuardSettings,
    pub sessions: Arc<dyn SessionStore>,
    pub metrics: Arc<Metrics>,
    pub keys: ApiKeys,
    pub permits: Arc<Semaphore>,
    pub ready: AtomicBool,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("settings", &self.0.settings)
            .field("keys", &self.0.keys)
            .finish_non_exhaustive()
    }
}

impl AppState {
    /// The state of a server with these parts.
    pub fn new(
        settings: ServerSettings,
        clamp: ClampConfig,
        guard: GuardSettings,
        sessions: Arc<dyn SessionStore>,
        metrics: Arc<Metrics>,
        keys: ApiKeys,
    ) -> Self {
        let permits = Arc::new(Semaphore::new(settings.concurrency_limit));
        AppState(Arc::new(Inner {
            settings,
            clamp,
            guard,
            sessions,
            metrics,
            keys,
            permits,
            ready: AtomicBool::new(false),
        }))
    }

    /// The settings.
    pub fn settings(&self) -> &ServerSettings {
        &self.0.settings
    }

    /// The metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.0.metrics
    }

    /// The default text-guard settings (`[guards.clamp]`).
    pub fn clamp_config(&self) -> &ClampConfig {
        &self.0.clamp
    }

    /// How tool calls are judged (profile, OpenClaw config).
    pub fn guard(&self) -> &GuardSettings {
        &self.0.guard
    }

    /// The session store.
    pub fn sessions(&self) -> &Arc<dyn SessionStore> {
        &self.0.sessions
    }

    /// Marks the server ready (`/readyz` answers 200).
    pub fn set_ready(&self) {
        self.0.ready.store(true, Ordering::Release);
    }

    /// Whether the server is ready.
    pub fn is_ready(&self) -> bool {
        self.0.ready.load(Ordering::Acquire)
    }
}
