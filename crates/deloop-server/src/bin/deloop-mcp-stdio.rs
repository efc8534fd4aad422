//! Test support: deloop's MCP guard tools over stdio with the default
//! settings, for the MCP client tests (`CARGO_BIN_EXE_deloop-mcp-stdio`).
//! Users run `deloop mcp`, which reads the config file and environment.

use std::sync::Arc;
use std::time::Duration;

use deloop_core::loops::{LoopConfig, Profile};
use deloop_core::repetition::ClampConfig;
use deloop_server::auth::ApiKeys;
use deloop_server::metrics::Metrics;
use deloop_server::sessions::{GuardSettings, MemoryStore};
use deloop_server::{AppState, ServerSettings};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let settings = ServerSettings::default();
    let metrics = Arc::new(Metrics::new());
    let guard = GuardSettings {
        profile: Profile::Default,
        config: LoopConfig::default(),
        max_open_calls: settings.sessions.max_open_calls,
    };
    let store = MemoryStore::new(
        guard.clone(),
        settings.sessions.max_sessions,
        Duration::from_secs(settings.sessions.idle_ttl_secs),
        metrics.clone(),
    );
    let state = AppState::new(
        settings,
        ClampConfig::default(),
        guard,
        Arc::new(store),
        metrics,
        ApiKeys::default(),
    );
    state.set_ready();
    deloop_server::serve_stdio(state).await
}
