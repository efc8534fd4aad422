//! `deloop proxy`: the guarding OpenAI- and Anthropic-compatible proxy
//! (see docs/proxy.md).

use std::path::PathBuf;
use std::sync::Arc;

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
    super::serve::init_logging(&config.server.log_format);
    let list = std::env::var("DELOOP_API_KEYS").ok();
    let keys = deloop_server::build::api_keys(&config.server, list.as_deref()).map_err(bad)?;
    let auth = !keys.is_empty();
    let key = deloop_config::ProxySettings::upstream_key(env);
    let guard = deloop_server::build::guard_settings(&config.server).map_err(bad)?;
    let state = deloop_proxy::ProxyState::new(
        config.proxy.clone(),
        config.guards.clamp.clone(),
        key.as_deref(),
        keys,
        Arc::new(deloop_http::metrics::Metrics::new()),
    )
    .map_err(bad)?
    .with_loop_guard(guard.profile, guard.config);
    let grace = std::time::Duration::from_secs(config.server.shutdown_grace_secs);
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
        deloop_proxy::serve(listener, state, deloop_http::serve::shutdown_signal(), grace).await?;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(Exit::Ok)
}
