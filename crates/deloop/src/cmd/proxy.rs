//! `deloop proxy`: the guarding OpenAI- and Anthropic-compatible proxy
//! (see docs/proxy.md).

use std::path::PathBuf;
use std::sync::Arc;

use deloop_config::Config;
use deloop_http::auth::ApiKeys;
use deloop_http::metrics::Metrics;
use deloop_proxy::ProxyState;

use crate::exit::{BadInput, Exit};

/// Flags of `deloop proxy`.
///
/// Sits between any OpenAI- or Anthropic-compatible client and server:
/// `POST /v1/chat/completions`, `/v1/completions` and `/v1/messages` are
/// guarded (looping streams are cut and the upstream request dropped, whole
/// replies clamped, JSON replies repaired); every other path is passed
/// through untouched. Point the client's base URL at the listen address.
/// Exit codes: 0 after a graceful shutdown (SIGTERM or Ctrl-C), 1 when the
/// proxy cannot start or fails (address in use, …), 2 for a bad config.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The upstream server's root URL, e.g. http://127.0.0.1:8080 (a
    /// trailing /v1 is accepted). Default: `proxy.upstream`,
    /// `DELOOP_PROXY_UPSTREAM`.
    #[arg(long, value_name = "URL")]
    pub upstream: Option<String>,
    /// Address to listen on (default: `proxy.listen`, `DELOOP_PROXY_LISTEN`,
    /// else 127.0.0.1:8787). Port 0 picks a free port; the address is printed.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// The config file (default: `DELOOP_CONFIG`, else `./deloop.toml` if present).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
}

/// Runs `deloop proxy`.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let mut config = super::serve::load(args.config.as_deref())?;
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let bad = |e: deloop_config::SettingsError| BadInput(e.to_string());
    config.proxy.apply_env(env).map_err(bad)?;
    if let Some(u) = args.upstream {
        config.proxy.upstream = u;
    }
    if let Some(l) = args.listen {
        config.proxy.listen = l;
    }
    config.proxy.validate().map_err(bad)?;
    config.proxy.upstream_url().map_err(|e| {
        BadInput(format!(
            "{e} (pass --upstream URL or set proxy.upstream / DELOOP_PROXY_UPSTREAM)"
        ))
    })?;
    let addr = config.proxy.listen_addr().map_err(bad)?;
    super::serve::init_logging(&config.proxy.log_format);
    let bus = Arc::new(deloop_events::EventBus::default());
    let state = state(&config, Arc::new(Metrics::new()))?.with_events(bus.clone());
    let auth = state.has_keys();
    // The console's Live page at /ui/, behind the proxy's own keys.
    let list = std::env::var("DELOOP_API_KEYS").ok();
    let keys = ApiKeys::load(
        list.as_deref(),
        config.proxy.api_keys_file.as_deref(),
        "proxy.api_keys_file",
    )
    .map_err(|e| BadInput(e.to_string()))?;
    let console = deloop_console::Console::live_only(bus, keys);
    let grace = config.proxy.shutdown_grace();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
            anyhow::anyhow!(
                "cannot listen on {addr}: {e} (is another server using the port? pick one with --listen)"
            )
        })?;
        let local = listener.local_addr()?;
        eprintln!(
            "deloop: proxying http://{local} -> {}",
            state.upstream_url()
        );
        tracing::info!(%local, upstream = state.upstream_url(), auth, "proxying");
        let limits =
            deloop_http::conn::ConnectionLimits::from_settings(&state.settings().connections);
        let app = deloop_console::router::<deloop_console::Console>()
            .with_state(console)
            .fallback_service(deloop_proxy::router(state));
        deloop_http::serve::serve_app(
            listener,
            app,
            limits,
            grace,
            deloop_http::serve::shutdown_signal(),
        )
        .await?;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(Exit::Ok)
}

/// The proxy of `config.proxy` (its environment already applied), counting
/// in `metrics`, for `deloop proxy` and for `deloop serve`, which mounts it
/// behind its own routes. The proxy reads only `[proxy]`: deloop's own keys
/// are `DELOOP_API_KEYS` and `proxy.api_keys_file`, the tool-loop guard is
/// `proxy.loop_profile` and `proxy.loop_config`.
pub(crate) fn state(config: &Config, metrics: Arc<Metrics>) -> anyhow::Result<ProxyState> {
    moved_keys(config)?;
    let bad = |e: deloop_config::SettingsError| BadInput(e.to_string());
    let list = std::env::var("DELOOP_API_KEYS").ok();
    let keys = ApiKeys::load(
        list.as_deref(),
        config.proxy.api_keys_file.as_deref(),
        "proxy.api_keys_file",
    )
    .map_err(bad)?;
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let key = deloop_config::ProxySettings::upstream_key(env);
    Ok(ProxyState::new(
        config.proxy.clone(),
        config.guards.clamp.clone(),
        key.as_deref(),
        keys,
        metrics,
    )
    .map_err(bad)?)
}

/// `[server]` keys the proxy read before it had its own: a key file set
/// only for the server would leave the proxy without keys, so that is an
/// error; a loop profile or config set only for the server is a warning
/// (the proxy judges with the defaults).
fn moved_keys(config: &Config) -> anyhow::Result<()> {
    let (server, proxy) = (&config.server, &config.proxy);
    if server.api_keys_file.is_some() && proxy.api_keys_file.is_none() {
        return Err(BadInput(
            "server.api_keys_file is set but proxy.api_keys_file is not: the proxy no longer \
             reads the server's key file; set proxy.api_keys_file (or \
             DELOOP_PROXY_API_KEYS_FILE) to the same file to keep one set of keys"
                .into(),
        )
        .into());
    }
    for (set, unset, server_key, proxy_key) in [
        (
            server.sessions.profile.is_some(),
            proxy.loop_profile.is_none(),
            "server.sessions.profile",
            "proxy.loop_profile",
        ),
        (
            server.sessions.loop_config.is_some(),
            proxy.loop_config.is_none(),
            "server.sessions.loop_config",
            "proxy.loop_config",
        ),
    ] {
        if set && unset {
            tracing::warn!(
                "{server_key} applies to the session API only; the proxy judges tool calls \
                 with {proxy_key}, which is not set (the default is used)"
            );
        }
    }
    Ok(())
}
