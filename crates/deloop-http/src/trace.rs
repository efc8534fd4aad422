//! Request ids and the request span: every response carries an id (the
//! client's, or a new UUID), and every log line of a request carries it.

use axum::body::Body;
use axum::http::{HeaderName, Method, Request};
use axum::Router;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

/// How a service names its request span, from the method, the path and
/// the request id (`tracing::info_span!` needs the span's name written
/// out, so each service writes its own).
pub type MakeSpan = fn(&Method, &str, &str) -> tracing::Span;

/// `app` with request ids in the `header` header (kept when the client
/// sends one, else a new UUID; copied onto the response) and a span per
/// request made by `span`. The outermost layers: the id is set before any
/// other layer runs.
pub fn request_ids(app: Router, header: HeaderName, span: MakeSpan) -> Router {
    let read = header.clone();
    app.layer(
        TraceLayer::new_for_http().make_span_with(move |req: &Request<Body>| {
            let id = req
                .headers()
                .get(&read)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            span(req.method(), req.uri().path(), id)
        }),
    )
    .layer(PropagateRequestIdLayer::new(header.clone()))
    .layer(SetRequestIdLayer::new(header, MakeRequestUuid))
}
