//! deloop over HTTP.
//!
//! `deloop serve` answers the seed's `POST /api/oracle`, `/api/help` and
//! `/api/tutor`, exposes every guard as an endpoint that answers the same
//! JSON as the command line's `--json`, keeps live-agent sessions for
//! tool-call loop detection, and mounts the MCP server at `/mcp`.
//!
//! Handlers are thin: they extract, call a library flow (`deloop-core`,
//! `deloop-render`, `deloop-oracle`) and answer. Auth, the concurrency
//! limit, deadlines, request ids, CORS and metrics are layers.
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use deloop_server::{router, AppState, ServerSettings};
//! # let state: AppState = todo!();
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! deloop_server::serve(listener, state, std::future::pending()).await
//! # }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod build;
pub mod console;
pub mod error;
pub mod layers;
pub mod mcp;
pub mod openapi;
pub mod oracle;
pub mod routes;
pub mod sessions;
pub mod state;
pub mod streams;

use std::future::Future;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderName, Method};
use axum::{middleware, Extension, Router};
use tower_http::cors::{AllowOrigin, CorsLayer};
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The `[server]` table, defined with the rest of `deloop.toml`.
pub use deloop_config::server as settings;
pub use deloop_config::server::{ServerSettings, SessionSettings, SettingsError};
/// API keys and Prometheus metrics, shared with the proxy.
pub use deloop_http::{auth, metrics};
pub use error::{ApiError, ApiJson};
pub use mcp::{serve_stdio, McpServer};
pub use state::AppState;

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The router with every route and layer, and its OpenAPI document
/// (served at `/openapi.json`).
///
/// Every route is added with `routes!` on an [`OpenApiRouter`], which
/// takes the path and method from the handler's `#[utoipa::path]`: a route
/// is served only if it is documented, and the document lists only what is
/// served.
pub fn router(state: AppState) -> Router {
    router_and_document(state).0
}

/// [`router`] and the OpenAPI document of exactly its routes.
pub fn router_and_document(state: AppState) -> (Router, utoipa::openapi::OpenApi) {
    let mut mcp_server = mcp::McpServer::new(state.clone());
    let mut api = OpenApiRouter::with_openapi(openapi::ApiDoc::openapi());
    if state.serves_oracle() {
        mcp_server =
            mcp_server.with_ask(std::sync::Arc::new(oracle::OracleTools::new(state.clone())));
        api = api
            .routes(routes!(routes::oracle::oracle))
            .routes(routes!(routes::oracle::help))
            .routes(routes!(routes::oracle::tutor));
    }
    let api = api
        .routes(routes!(routes::guards::clamp_text))
        .routes(routes!(routes::guards::rescue))
        .routes(routes!(routes::guards::repair))
        .routes(routes!(routes::guards::check))
        .routes(routes!(routes::sessions::call))
        .routes(routes!(routes::sessions::result))
        .routes(routes!(routes::sessions::compaction))
        .routes(routes!(routes::sessions::forget))
        .routes(routes!(routes::sessions::list))
        .merge(
            OpenApiRouter::new()
                .routes(mcp::routes(mcp_server))
                .layer(middleware::from_fn(mcp::problem_answers)),
        )
        .routes(routes!(routes::ops::metrics))
        .routes(routes!(routes::ops::healthz))
        .routes(routes!(routes::ops::readyz))
        .routes(routes!(routes::ops::openapi));
    let (api, doc) = api.split_for_parts();
    let doc = openapi::finish(doc);
    let api = api
        .layer(Extension(routes::ops::OpenApiJson(openapi::to_json(&doc))))
        .route_layer(middleware::from_fn_with_state(state.clone(), layers::track));
    let settings = state.settings();
    let cors = cors_layer(&settings.cors_origins);
    let max_body = settings.max_body_bytes;
    let mut app = api
        .merge(console::router())
        .layer(middleware::from_fn_with_state(
            state.clone(),
            layers::limits,
        ))
        .layer(middleware::from_fn_with_state(state.clone(), layers::auth))
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(state);
    if let Some(cors) = cors {
        app = app.layer(cors);
    }
    let app = deloop_http::trace::request_ids(
        app,
        REQUEST_ID,
        |method, path, id| tracing::info_span!("request", method = %method, path = %path, request_id = %id),
    );
    (app, doc)
}

fn cors_layer(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| o.parse().ok()))
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::POST, Method::DELETE, Method::OPTIONS])
            .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE, header::ACCEPT])
            .expose_headers([REQUEST_ID]),
    )
}

/// Serves `state` on `listener` until `shutdown` resolves, each client
/// connection under `[server.connections]`; then stops accepting, lets
/// in-flight requests and streams finish for up to
/// `server.shutdown_grace_secs`, and returns.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let grace = Duration::from_secs(state.settings().shutdown_grace_secs);
    let limits = deloop_http::conn::ConnectionLimits::from_settings(&state.settings().connections);
    deloop_http::serve::serve_app(listener, router(state), limits, grace, shutdown).await
}
