//! What deloop's HTTP services share: `deloop serve` (deloop-server) and
//! `deloop proxy` (deloop-proxy) both use it, and neither imports the other.
//!
//! * [`auth`]: API keys, compared in constant time and never logged;
//! * [`metrics`]: the Prometheus registry both services count in (one
//!   registry when the proxy is mounted inside `deloop serve`), and the
//!   request-tracking middleware;
//! * [`limits`]: load shedding, a permit held until the response ends;
//! * [`trace`]: request ids and the request span;
//! * [`conn`]: client connections under deadlines and a cap (slow and
//!   silent clients cannot hold them);
//! * [`serve`]: serving with those, and a graceful shutdown that has a
//!   deadline.
//!
//! Each service keeps its own middleware (its own header for the key, its
//! own error shape) on top of these pieces.
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use std::time::Duration;
//! use axum::http::HeaderName;
//! use deloop_http::auth::{Access, ApiKeys};
//!
//! let keys = ApiKeys::parse(Some("k1,k2"), None);
//! assert_eq!(keys.check(Some("k2")), Access::Granted);
//! let app = axum::Router::new();
//! let app = deloop_http::trace::request_ids(app, HeaderName::from_static("x-request-id"), |m, p, id| {
//!     tracing::info_span!("request", method = %m, path = %p, request_id = %id)
//! });
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let limits = deloop_http::conn::ConnectionLimits::from_settings(&Default::default());
//! deloop_http::serve::serve_app(listener, app, limits, Duration::from_secs(30), deloop_http::serve::shutdown_signal()).await
//! # }
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod auth;
pub mod conn;
pub mod limits;
pub mod metrics;
pub mod serve;
pub mod trace;
