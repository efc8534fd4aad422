//! `/mcp`: the MCP server over streamable HTTP, stateless, behind the API's
//! layers, with the transport's plain-text errors re-answered as problem
//! JSON.

use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use super::McpServer;
use crate::error::ApiError;
use crate::state::AppState;

/// The streamable HTTP MCP endpoint for `server`: a tower service that
/// [`crate::router`] mounts at `/mcp`.
///
/// Stateless: each POST is answered on its own (as `application/json`), so
/// no MCP session is kept in memory and any instance behind a load
/// balancer can answer. Live-agent state lives in the session store, keyed
/// by the tools' `session_id` argument. The body limit is the server's
/// `server.max_body_bytes`; `Host` must be one of `server.mcp_allowed_hosts`
/// (DNS-rebinding protection), unless that list holds `*`.
#[utoipa::path(
    post,
    path = "/mcp",
    operation_id = "mcp",
    tag = "mcp",
    summary = "MCP over streamable HTTP",
    description = "The Model Context Protocol server (streamable HTTP transport, stateless): one \
JSON-RPC 2.0 message per POST, answered as `application/json`. Send `Accept: application/json, \
text/event-stream` and `Content-Type: application/json`. Tools: `clamp_text`, `rescue_json`, \
`repair_json`, `check_tool_call`, `record_tool_result`, `forget_session`, `check_transcript`, and \
`ask` and `search` when the server has a documentation oracle; `tools/list` returns their input \
schemas. Both protocol generations work (`server/discover`, and `initialize` for 2025-11-25 and \
before). No MCP session is kept (no `Mcp-Session-Id`; `GET /mcp` answers 405). Only the `Host` \
names in `server.mcp_allowed_hosts` are accepted (403 otherwise).",
    request_body(content = JsonRpcMessage, content_type = "application/json"),
    responses(
        (status = 200, description = "The JSON-RPC response.", body = JsonRpcMessage, content_type = "application/json"),
        (status = 202, description = "A notification or response was accepted; no body."),
        (status = 400, response = crate::openapi::BadRequest),
        (status = 403, response = crate::openapi::Forbidden),
        (status = 406, description = "The request's `Accept` does not take `application/json` and `text/event-stream`.", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 413, response = crate::openapi::PayloadTooLarge),
        (status = 415, response = crate::openapi::UnsupportedMediaType),
    ),
)]
pub fn http_service(server: McpServer) -> StreamableHttpService<McpServer, NeverSessionManager> {
    let settings = server.state.settings();
    let mut config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_max_request_body_bytes(settings.max_body_bytes);
    config = if settings.mcp_allowed_hosts.iter().any(|h| h == "*") {
        config.disable_allowed_hosts()
    } else {
        config.with_allowed_hosts(settings.mcp_allowed_hosts.iter().cloned())
    };
    StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

/// `/mcp` for [`crate::router`]: [`http_service`] on every method (the
/// transport answers the methods it does not serve), at the path and with
/// the documentation of its `#[utoipa::path]`.
pub fn routes(server: McpServer) -> utoipa_axum::router::UtoipaMethodRouter<AppState> {
    use utoipa::Path;
    let mut paths = utoipa::openapi::path::Paths::new();
    let mut operation = __path_http_service::operation();
    // `routes!` adds an annotation's tags the same way.
    operation.tags = Some(vec!["mcp".to_string()]);
    paths.add_path_operation(
        __path_http_service::path(),
        __path_http_service::methods(),
        operation,
    );
    let mut schemas = Vec::new();
    <JsonRpcMessage as utoipa::ToSchema>::schemas(&mut schemas);
    schemas.push((
        <JsonRpcMessage as utoipa::ToSchema>::name().into_owned(),
        <JsonRpcMessage as utoipa::PartialSchema>::schema(),
    ));
    (
        schemas,
        paths,
        axum::routing::any_service(http_service(server)),
    )
}

/// The body of `POST /mcp` and of its answer, for the OpenAPI document:
/// one JSON-RPC 2.0 message (the MCP SDK reads and writes them).
#[derive(Debug, Clone, Copy)]
pub struct JsonRpcMessage;

impl utoipa::PartialSchema for JsonRpcMessage {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        let any =
            || ObjectBuilder::new().schema_type(utoipa::openapi::schema::SchemaType::AnyValue);
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some(
                "One JSON-RPC 2.0 message of the Model Context Protocol: a request (`method`, \
                 `params`, `id`), a notification (no `id`) or a response (`result` or `error`).",
            ))
            .property(
                "jsonrpc",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some(["2.0"])),
            )
            .required("jsonrpc")
            .property("id", any())
            .property("method", ObjectBuilder::new().schema_type(Type::String))
            .property("params", any())
            .property("result", any())
            .property("error", any())
            .into()
    }
}

impl utoipa::ToSchema for JsonRpcMessage {}

/// Re-answers the MCP transport's plain-text 4xx answers as the API's
/// `application/problem+json` (RFC 9457), and a body that is not JSON-RPC
/// as 400 (the transport says 415), as every other route does.
pub async fn problem_answers(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    let res = next.run(req).await;
    let plain = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|ct| ct.starts_with("text/plain"));
    if !res.status().is_client_error() || !plain {
        return res;
    }
    let (parts, body) = res.into_parts();
    // The transport's reasons are one short line.
    let bytes = axum::body::to_bytes(body, 64 << 10)
        .await
        .unwrap_or_default();
    let detail = String::from_utf8_lossy(&bytes);
    let malformed = detail.starts_with("fail to deserialize request body");
    let status = if parts.status == StatusCode::UNSUPPORTED_MEDIA_TYPE && malformed {
        StatusCode::BAD_REQUEST
    } else {
        parts.status
    };
    let detail = if malformed {
        format!(
            "the body is not a JSON-RPC message: {}",
            detail
                .trim_start_matches("fail to deserialize request body")
                .trim()
        )
    } else {
        detail.trim().to_string()
    };
    let mut out = ApiError::new(status, detail).into_response();
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().insert(name, value.clone());
        }
    }
    out
}
