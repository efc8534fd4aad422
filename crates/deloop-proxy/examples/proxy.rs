//! The proxy with its default settings, for benchmarks that need a
//! release build without building the whole `deloop` binary (its index,
//! oracle and console): `proxy <upstream URL> <listen address>`. Prints
//! `listening on <addr>` once it accepts connections. `deloop proxy
//! --upstream URL --listen ADDR` serves the same router.

use std::sync::Arc;

use deloop_config::ProxySettings;
use deloop_proxy::ProxyState;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(upstream), Some(listen)) = (args.next(), args.next()) else {
        return Err("usage: proxy <upstream URL> <listen address>".into());
    };
    let settings = ProxySettings {
        upstream,
        ..Default::default()
    };
    let state = ProxyState::new(
        settings,
        Default::default(),
        None,
        Default::default(),
        Arc::new(deloop_http::metrics::Metrics::new()),
    )?;
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    println!("listening on {}", listener.local_addr()?);
    axum::serve(listener, deloop_proxy::router(state)).await?;
    Ok(())
}
