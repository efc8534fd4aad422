//! What every handler shares.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use axum::extract::FromRef;
use deloop_console::Console;
use deloop_core::repetition::ClampConfig;
use deloop_events::EventBus;
use deloop_oracle::Oracle;
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
    /// `Some` when this server answers `/api/*` and the MCP `ask` tool;
    /// the oracle is set once it has opened.
    pub oracle: Option<OnceLock<Result<Oracle, String>>>,
    /// Why the oracle is not open yet when its index cannot be reached
    /// (the server retries); `None` while it simply opens.
    pub oracle_waiting: std::sync::Mutex<Option<String>>,
    /// The guard decisions the console's Live page shows.
    pub events: Arc<EventBus>,
    /// The web console: its logins and navigation.
    pub console: Console,
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
        let ring = usize::try_from(settings.console_ring_bytes)
            .unwrap_or(deloop_events::DEFAULT_RING_BYTES);
        let events = Arc::new(EventBus::new(ring));
        let console = crate::console::console(events.clone(), keys.clone());
        AppState(Arc::new(Inner {
            settings,
            clamp,
            guard,
            sessions,
            metrics,
            keys,
            permits,
            ready: AtomicBool::new(false),
            oracle_waiting: std::sync::Mutex::new(None),
            oracle: None,
            events,
            console,
        }))
    }

    /// This state, for a server that also answers the documentation oracle
    /// (`/api/oracle`, `/api/help`, `/api/tutor`, the MCP `ask` and
    /// `search` tools). The oracle itself comes later, with
    /// [`AppState::set_oracle`]; until then those routes answer 503 and
    /// `/readyz` is not ready.
    pub fn serving_oracle(self) -> Self {
        let i = &self.0;
        AppState(Arc::new(Inner {
            settings: i.settings.clone(),
            clamp: i.clamp.clone(),
            guard: i.guard.clone(),
            sessions: i.sessions.clone(),
            metrics: i.metrics.clone(),
            keys: i.keys.clone(),
            permits: i.permits.clone(),
            ready: AtomicBool::new(false),
            oracle_waiting: std::sync::Mutex::new(None),
            oracle: Some(OnceLock::new()),
            events: i.events.clone(),
            console: i.console.clone(),
        }))
    }

    /// Hands the opened oracle to the server and marks it ready. Returns
    /// false (and changes nothing) when the state does not serve the oracle
    /// or already has one.
    pub fn set_oracle(&self, oracle: Oracle) -> bool {
        match &self.0.oracle {
            Some(slot) if slot.set(Ok(oracle)).is_ok() => {
                self.set_ready();
                true
            }
            _ => false,
        }
    }

    /// Records that the oracle could not open: the oracle's routes and
    /// tools then answer with `reason` (the server stays not ready).
    pub fn set_oracle_failed(&self, reason: String) -> bool {
        match &self.0.oracle {
            Some(slot) => slot.set(Err(reason)).is_ok(),
            None => false,
        }
    }

    /// Records why the oracle is not open yet while its index cannot be
    /// reached and the server retries (`/readyz` and the oracle's routes
    /// answer 503 with it); `None` clears it.
    pub fn set_oracle_waiting(&self, reason: Option<String>) {
        *self
            .0
            .oracle_waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = reason;
    }

    /// Why the oracle is not open yet, when its index cannot be reached.
    pub fn oracle_waiting(&self) -> Option<String> {
        self.0
            .oracle_waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether this server answers the documentation oracle.
    pub fn serves_oracle(&self) -> bool {
        self.0.oracle.is_some()
    }

    pub(crate) fn oracle_slot(&self) -> Option<&OnceLock<Result<Oracle, String>>> {
        self.0.oracle.as_ref()
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

    /// The bus of guard decisions (the console's Live page); `deloop
    /// serve` hands it to the proxy it mounts.
    pub fn events(&self) -> &Arc<EventBus> {
        &self.0.events
    }

    /// The web console.
    pub fn console(&self) -> &Console {
        &self.0.console
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

impl FromRef<AppState> for Console {
    fn from_ref(state: &AppState) -> Console {
        state.0.console.clone()
    }
}
