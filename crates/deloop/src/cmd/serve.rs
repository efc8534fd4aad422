//! `deloop serve`: deloop over HTTP (see docs/server.md).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::exit::{BadInput, Exit};
use deloop_config::Config;

/// Flags of `deloop serve`.
///
/// Serves the documentation oracle (`/api/oracle`, `/api/help`,
/// `/api/tutor`, as JSON or server-sent events), the guards (`/v1/clamp`,
/// `/v1/rescue`, `/v1/repair`, `/v1/check`), the live-agent session API
/// (`/v1/sessions/...`), MCP at `/mcp` (with `ask` and `search`),
/// `/healthz`, `/readyz` (ready once the index is open), `/metrics` and
/// `/openapi.json`. Without an LLM key, answers are extractive.
/// Exit codes: 0 after a graceful shutdown (SIGTERM or Ctrl-C), 1 when the
/// server cannot start or fails (address in use, an unreadable index, …),
/// 2 for a bad config or a named index that does not exist.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on (default: `server.listen`, `DELOOP_LISTEN`, else
    /// 127.0.0.1:8080). Port 0 picks a free port; the address is printed.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// The config file (default: `DELOOP_CONFIG`, else `./deloop.toml` if present).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// The index to answer from: a file, or a PostgreSQL database
    /// `postgres://USER@HOST:PORT/DB` that several replicas may share
    /// (password in the URL or DELOOP_DB_PASSWORD). Default: `DELOOP_DB`,
    /// `[index] db`, else `.deloop/index.db`, built from deloop's own docs
    /// when missing.
    #[arg(long, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,
    /// Where live-agent sessions live: `memory` (this process) or a
    /// Valkey/Redis URL (`redis://host:port/db`, `rediss://` for TLS) shared
    /// by every replica (default: `DELOOP_SESSION_STORE`,
    /// `server.sessions.store`, else `memory`). A password comes from the
    /// URL or `DELOOP_REDIS_PASSWORD`.
    #[arg(long, value_name = "URL")]
    pub session_store: Option<String>,
}

/// Loads the config and the server settings with the environment applied.
pub(crate) fn load(config: Option<&std::path::Path>) -> anyhow::Result<Config> {
    let mut config = Config::load(config)?;
    config
        .server
        .apply_env(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
        .map_err(|e| BadInput(e.to_string()))?;
    Ok(config)
}

/// [`load`], then the command's flags applied to the server settings and
/// the result checked again (a flag out of range names its key).
fn load_with(
    config: Option<&std::path::Path>,
    flags: impl FnOnce(&mut deloop_config::ServerSettings),
) -> anyhow::Result<Config> {
    let mut config = load(config)?;
    flags(&mut config.server);
    config
        .server
        .validate()
        .map_err(|e| BadInput(e.to_string()))?;
    Ok(config)
}

/// Sets up logging on stderr in the configured format (`text` or `json`),
/// filtered by `DELOOP_LOG` (default `info` for the server).
pub(crate) fn init_logging(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("DELOOP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// The server's state from the config, and the in-process session store
/// when sessions live here (for its sweeper).
pub(crate) fn state(
    config: &Config,
) -> anyhow::Result<(
    deloop_server::AppState,
    Option<std::sync::Arc<deloop_server::sessions::MemoryStore>>,
)> {
    let settings = config.server.clone();
    let guard =
        deloop_server::build::guard_settings(&settings).map_err(|e| BadInput(e.to_string()))?;
    let list = std::env::var("DELOOP_API_KEYS").ok();
    let keys = deloop_server::build::api_keys(&settings, list.as_deref())
        .map_err(|e| BadInput(e.to_string()))?;
    let password = std::env::var("DELOOP_REDIS_PASSWORD")
        .ok()
        .filter(|p| !p.is_empty());
    Ok(
        deloop_server::build::state(settings, config.guards.clamp.clone(), guard, keys, password)
            .map_err(|e| BadInput(e.to_string()))?,
    )
}

/// Runs `deloop serve`.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let mut config = load_with(args.config.as_deref(), |s| {
        if let Some(listen) = args.listen {
            s.listen = listen;
        }
        if let Some(store) = args.session_store {
            s.sessions.store = store;
        }
    })?;
    init_logging(&config.server.log_format);
    let addr = config
        .server
        .listen_addr()
        .map_err(|e| BadInput(e.to_string()))?;
    let (state, store) = state(&config)?;
    let state = state.serving_oracle();
    let proxy = mounted_proxy(&mut config, &state)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e} (is another server using the port? pick one with --listen)"))?;
        let local = listener.local_addr()?;
        let sweep_every = std::time::Duration::from_secs(config.server.sessions.idle_ttl_secs.clamp(1, 60));
        if let Some(store) = store {
            deloop_server::build::spawn_sweeper(store, sweep_every);
        }
        eprintln!("deloop: listening on http://{local}");
        if let Some(p) = &proxy {
            eprintln!("deloop: proxying the other paths -> {}", p.upstream_url());
            tracing::info!(upstream = p.upstream_url(), "proxy mounted as the fallback");
        }
        tracing::info!(%local, auth = state_keys(&config), "serving");
        let (failed_tx, failed_rx) = tokio::sync::oneshot::channel();
        // Why the server stopped: the oracle's failure, if that was the cause.
        let failure = std::sync::Arc::new(std::sync::Mutex::new(None));
        let slot = std::sync::Arc::clone(&failure);
        open_oracle(config.clone(), args.db, state.clone(), failed_tx, OraclePlace::default());
        let shutdown = async move {
            tokio::select! {
                () = deloop_http::serve::shutdown_signal() => {}
                Ok(e) = failed_rx => {
                    *slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(e);
                }
            }
        };
        let grace = std::time::Duration::from_secs(state.settings().shutdown_grace_secs);
        let limits =
            deloop_http::conn::ConnectionLimits::from_settings(&state.settings().connections);
        let mut app = deloop_server::router(state);
        if let Some(p) = proxy {
            // Added after the server's layers: deloop's routes keep their
            // bearer auth, the proxied paths get the proxy's own layers
            // (`x-deloop-key`, stripped before forwarding).
            app = app.fallback_service(deloop_proxy::router(p));
        }
        deloop_http::serve::serve_app(listener, app, limits, grace, shutdown).await?;
        // The oracle failed to open: the reason, as the exit code says.
        let failed = failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        match failed {
            Some(e) => Err(e),
            None => Ok::<_, anyhow::Error>(()),
        }
    })?;
    Ok(Exit::Ok)
}

/// The guarding proxy to mount behind deloop's routes, when an upstream is
/// configured (`proxy.upstream`, `DELOOP_PROXY_UPSTREAM`), counting in the
/// server's metrics. It is configured by `[proxy]` as `deloop proxy` is
/// (deloop's key goes in `x-deloop-key` on proxied paths, since
/// `Authorization` belongs to the upstream).
fn mounted_proxy(
    config: &mut Config,
    state: &deloop_server::AppState,
) -> anyhow::Result<Option<deloop_proxy::ProxyState>> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    config
        .proxy
        .apply_env(env)
        .map_err(|e| BadInput(e.to_string()))?;
    if config.proxy.upstream.trim().is_empty() {
        return Ok(None);
    }
    // The proxy's decisions go to the server's bus: the console's Live
    // page shows the proxied traffic of this process.
    super::proxy::state(config, state.metrics().clone())
        .map(|p| Some(p.with_events(state.events().clone())))
}

/// Opens the oracle off the async threads (SQLite; the first start builds
/// the default index from deloop's docs) and hands it to the server, which
/// is then ready. On failure the error goes to `failed`, which stops the
/// server and sets its exit code.
fn open_oracle(
    config: Config,
    db: Option<PathBuf>,
    state: deloop_server::AppState,
    failed: tokio::sync::oneshot::Sender<anyhow::Error>,
    place: OraclePlace,
) {
    tokio::spawn(async move {
        let mut backoff = RETRY_FIRST;
        loop {
            let (config, db, place) = (config.clone(), db.clone(), place.clone());
            let opened = tokio::task::spawn_blocking(move || {
                let on_note = |note: &str| tracing::info!(%note, "opening the index");
                deloop_oracle::Oracle::open_with(
                    &config,
                    db.as_deref(),
                    deloop_oracle::OpenOptions {
                        extractive_only: false,
                        on_note: Some(&on_note),
                        default_db: place.default_db.as_deref(),
                        cancel: place.cancel.as_deref(),
                    },
                )
            })
            .await;
            let opened = match opened {
                Ok(opened) => opened,
                Err(e) => {
                    let _ = failed.send(anyhow::anyhow!("opening the index panicked: {e}"));
                    return;
                }
            };
            match opened {
                Ok(oracle) => {
                    tracing::info!(
                        provider = oracle.provider(),
                        model = oracle.model(),
                        "the oracle is open; ready"
                    );
                    state.set_oracle_waiting(None);
                    state.set_oracle(oracle);
                    return;
                }
                // A database that is down or too slow now may come back:
                // the server keeps serving everything else, answers 503
                // naming it, and tries again.
                Err(e) if e.is_unavailable() => {
                    tracing::warn!(
                        error = %e,
                        retry_in_ms = backoff.as_millis() as u64,
                        "the index cannot be reached; retrying"
                    );
                    state.set_oracle_waiting(Some(e.to_string()));
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(RETRY_MAX);
                }
                Err(e) => {
                    tracing::error!(error = %e, "cannot open the oracle");
                    state.set_oracle_waiting(None);
                    state.set_oracle_failed(e.to_string());
                    let _ = failed.send(if e.is_usage() {
                        BadInput(e.to_string()).into()
                    } else {
                        anyhow::Error::new(e).context("cannot open the index")
                    });
                    return;
                }
            }
        }
    });
}

/// The first wait before opening an unreachable index again; it doubles
/// up to [`RETRY_MAX`].
const RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(500);
/// The longest wait between two attempts to reach the index.
const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(10);

/// Where [`open_oracle`] builds a missing default index, and how to stop it.
#[derive(Default, Clone)]
struct OraclePlace {
    /// The default index's location (else `.deloop/index.db`).
    default_db: Option<PathBuf>,
    /// Set when nobody waits for the index any more.
    cancel: Option<Arc<AtomicBool>>,
}

fn state_keys(config: &Config) -> bool {
    std::env::var("DELOOP_API_KEYS").is_ok_and(|v| !v.trim().is_empty())
        || config.server.api_keys_file.is_some()
}

/// Flags of `deloop mcp`.
///
/// Serves MCP over stdio (stdout carries the protocol; logs go to stderr):
/// the tools `ask`, `search`, `clamp_text`, `rescue_json`, `repair_json`,
/// `check_tool_call`, `record_tool_result`, `forget_session` and
/// `check_transcript`. Exit codes:
/// 0 when the client closes the connection, 1 on an I/O failure, 2 for a bad
/// config.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// The config file (default: `DELOOP_CONFIG`, else `./deloop.toml` if present).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// The index `ask` and `search` answer from (as for `deloop serve`).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Where live-agent sessions live: `memory` (this process) or a
    /// Valkey/Redis URL (`redis://host:port/db`, `rediss://` for TLS) shared
    /// by every replica (default: `DELOOP_SESSION_STORE`,
    /// `server.sessions.store`, else `memory`). A password comes from the
    /// URL or `DELOOP_REDIS_PASSWORD`.
    #[arg(long, value_name = "URL")]
    pub session_store: Option<String>,
}

/// Runs `deloop mcp`.
pub fn run_mcp(args: McpArgs) -> anyhow::Result<Exit> {
    let config = load_with(args.config.as_deref(), |s| {
        if let Some(store) = args.session_store {
            s.sessions.store = store;
        }
    })?;
    init_logging(&config.server.log_format);
    let (state, store) = state(&config)?;
    let state = state.serving_oracle();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let sweep_every =
            std::time::Duration::from_secs(config.server.sessions.idle_ttl_secs.clamp(1, 60));
        if let Some(store) = store {
            deloop_server::build::spawn_sweeper(store, sweep_every);
        }
        // The guard tools answer at once; `ask` and `search` once the index
        // is open (until then they say so). A failure to open is logged and
        // `ask` reports it; the guard tools keep working.
        let (failed_tx, _failed_rx) = tokio::sync::oneshot::channel();
        // An MCP client starts `deloop mcp` in any directory: the default
        // index goes to the user's cache, never the client's directory, and
        // a build still running when the session ends is cancelled (it
        // leaves nothing behind). Without HOME (no cache directory) it goes
        // to the temporary directory, still never the client's.
        let cancel = Arc::new(AtomicBool::new(false));
        let cache =
            deloop_index::cache_dir().unwrap_or_else(|| std::env::temp_dir().join("deloop"));
        let place = OraclePlace {
            default_db: Some(cache.join("mcp/index.db")),
            cancel: Some(cancel.clone()),
        };
        open_oracle(config.clone(), args.db, state.clone(), failed_tx, place);
        let tools = deloop_server::oracle::OracleTools::new(state.clone());
        let server = deloop_server::McpServer::new(state).with_ask(std::sync::Arc::new(tools));
        let served = deloop_server::mcp::serve_stdio_with(server).await;
        cancel.store(true, Ordering::Relaxed);
        served
    })?;
    Ok(Exit::Ok)
}
