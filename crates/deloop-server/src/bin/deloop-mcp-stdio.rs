//! Test support: deloop's MCP guard tools over stdio with the default
//! settings, for the MCP client tests (`CARGO_BIN_EXE_deloop-mcp-stdio`).
//! Users run `deloop mcp`, which reads the config file and environment.

use deloop_core::repetition::ClampConfig;
use deloop_server::auth::ApiKeys;
use deloop_server::ServerSettings;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let settings = ServerSettings::default();
    let guard = deloop_server::build::guard_settings(&settings)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
    let (state, _store) = deloop_server::build::memory_state(
        settings,
        ClampConfig::default(),
        guard,
        ApiKeys::default(),
    );
    state.set_ready();
    deloop_server::serve_stdio(state).await
}
