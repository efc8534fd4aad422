//! deloop's guarding proxy: it sits between any OpenAI- or
//! Anthropic-compatible client and server, cuts looping streams as they
//! happen (and drops the upstream request, so the server stops
//! generating), clamps whole replies, and repairs JSON replies.
//!
//! * `POST /v1/chat/completions`, `POST /v1/completions` and
//!   `POST /v1/messages` are guarded, streamed or not;
//! * every other method and path (`/v1/models`, `/v1/embeddings`,
//!   `/v1/responses`, …) is passed through untouched;
//! * `POST /beta/litellm_basic_guardrail_api` is LiteLLM's Generic
//!   Guardrail API ([`litellm`]);
//! * `GET /deloop/healthz` and `GET /deloop/metrics` are the proxy's own.
//!
//! The stream logic lives in pure modules ([`sse`], [`openai_stream`],
//! [`anthropic_stream`], [`reply`], [`json_closer`], [`json_reply`]); the
//! handlers ([`routes`]) only move bytes. See docs/proxy.md.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use deloop_config::ProxySettings;
//! use deloop_proxy::ProxyState;
//! let settings = ProxySettings { upstream: "http://127.0.0.1:8080".into(), ..Default::default() };
//! let state = ProxyState::new(
//!     settings,
//!     Default::default(),                      // [guards.clamp]
//!     None,                                    // DELOOP_PROXY_UPSTREAM_KEY
//!     Default::default(),                      // deloop's own keys: none
//!     Arc::new(deloop_http::metrics::Metrics::new()),
//! )?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8787").await?;
//! axum::serve(listener, deloop_proxy::router(state)).await?;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod anthropic_stream;
pub mod api;
pub mod feed;
pub mod guard;
pub mod history_text;
/// Closing a JSON document that a cut left unfinished: the core's
/// [`deloop_core::rescue::JsonCloser`], re-exported where it used to live.
pub mod json_closer {
    pub use deloop_core::rescue::JsonCloser;
    pub use deloop_core::rescue::MAX_CLOSER_DEPTH as MAX_DEPTH;
}
pub mod json_reply;
pub mod layers;
pub mod litellm;
mod marks;
pub mod openai_stream;
pub mod relay;
pub mod reply;
pub mod request;
pub mod routes;
pub mod sse;
pub mod state;
pub mod tool_args;
pub mod tool_loops;
pub mod tool_reply;
pub mod tool_stream;
pub mod upstream;

use axum::http::HeaderName;
use axum::routing::{any, get, post};
use axum::{middleware, Router};

pub use api::{Api, ProxyError};
pub use state::ProxyState;

/// What a stream guard tells the relay after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep reading the upstream.
    Continue,
    /// The stream is over for the client: drop the upstream.
    Stop,
}

/// The header carrying deloop's own request id on every response (the
/// upstream's `x-request-id` passes through untouched).
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-deloop-request-id");

/// The proxy: the guarded routes, the pass-through fallback and the
/// proxy's own `/deloop/*` routes, with auth (`x-deloop-key`), the
/// concurrency limit, request ids, tracing and metrics as layers.
pub fn router(state: ProxyState) -> Router {
    let app = Router::new()
        .route("/v1/chat/completions", any(routes::chat))
        .route("/v1/completions", any(routes::completions))
        .route("/v1/messages", any(routes::messages))
        .route(litellm::PATH, post(routes::litellm_guardrail))
        .route("/deloop/healthz", get(routes::healthz))
        .route("/deloop/metrics", get(routes::metrics))
        .fallback(routes::proxied)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            layers::limits,
        ))
        // Counted after auth: a request without a valid key leaves no trace
        // in the metrics, whatever its method or path.
        .layer(middleware::from_fn_with_state(state.clone(), layers::track))
        .layer(middleware::from_fn_with_state(state.clone(), layers::auth))
        // Before auth: what must never be forwarded is refused first.
        .layer(middleware::from_fn(layers::request_target))
        .with_state(state);
    deloop_http::trace::request_ids(
        app,
        REQUEST_ID,
        |method, path, id| tracing::info_span!("proxy", method = %method, path = %path, request_id = %id),
    )
}

/// Serves the proxy on `listener` until `shutdown` resolves, each client
/// connection under `[proxy.connections]`; then stops accepting, lets
/// in-flight requests and streams finish for up to `grace`, and returns.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: ProxyState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    grace: std::time::Duration,
) -> std::io::Result<()> {
    let limits = deloop_http::conn::ConnectionLimits::from_settings(&state.settings().connections);
    deloop_http::serve::serve_app(listener, router(state), limits, grace, shutdown).await
}
