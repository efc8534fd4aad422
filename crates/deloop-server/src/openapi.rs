//! The OpenAPI 3.1 document served at `GET /openapi.json`, generated from
//! the code.
//!
//! Every route is registered through `utoipa_axum`'s `OpenApiRouter` with
//! `routes!` (see [`crate::router`]): the path and method that axum serves
//! are read from the handler's `#[utoipa::path]` annotation, so a route
//! cannot be served without being documented, and the document lists only
//! the routes this server serves (no `/api/*` without an oracle). Request
//! and response schemas are derived from the types the handlers read and
//! write (`deloop_oracle::AskReport`, `deloop_render`'s JSON values, the
//! session verdicts, …).
//!
//! What the layers do to every route is added here, by the same rule the
//! layers follow ([`crate::layers::is_open_path`]): the optional bearer
//! auth (401, 403), the whole-request deadline (408) and the concurrency
//! limit (503 with `Retry-After`). Errors are `application/problem+json`
//! ([`Problem`]).

use std::borrow::Cow;

use utoipa::openapi::extensions::ExtensionsBuilder;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr};
use utoipa::{PartialSchema, ToResponse, ToSchema};

use crate::error::Problem;

/// The name of the bearer security scheme.
pub const BEARER: &str = "bearer";

/// The document's base: info, tags and the shared components. The routes
/// add their paths and schemas to it.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "deloop",
        description = "deloop over HTTP: the documentation oracle (`/api/oracle`, `/api/help`, \
`/api/tutor`), the guards against LLM loops as endpoints (`/v1/clamp`, `/v1/rescue`, \
`/v1/repair`, `/v1/check`), the live-agent session API (`/v1/sessions/{session}/...`), the MCP \
server (`/mcp`) and operations. Each guard answers the same JSON value as the command line's \
`--json`. Errors are `application/problem+json` (RFC 9457) whose `detail` names the problem.\n\n\
Auth is optional: when the server has API keys (`DELOOP_API_KEYS` or `server.api_keys_file`), \
every route but `/healthz` and `/readyz` needs `Authorization: Bearer <key>` (401 without one, \
403 with a wrong one); without keys every route is open.",
        license(name = "MIT OR Apache-2.0"),
    ),
    tags(
        (name = "oracle", description = "The documentation oracle (the seed's endpoints)."),
        (name = "guards", description = "The guards: the same JSON values as `deloop clamp|rescue|repair|check --json`."),
        (name = "sessions", description = "Live-agent sessions: judge each tool call before it runs."),
        (name = "mcp", description = "The MCP server over streamable HTTP."),
        (name = "operations", description = "Probes, metrics and this document."),
    ),
    components(schemas(Problem)),
)]
pub struct ApiDoc;

fn problem_response(description: &str, retry_after: bool) -> RefOr<Response> {
    let mut r = ResponseBuilder::new().description(description).content(
        "application/problem+json",
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name(Problem::name())))
            .build(),
    );
    if retry_after {
        r = r.header(
            "Retry-After",
            HeaderBuilder::new()
                .schema(
                    ObjectBuilder::new()
                        .schema_type(Type::Integer)
                        .minimum(Some(0)),
                )
                .description(Some("Seconds to wait before retrying."))
                .build(),
        );
    }
    r.build().into()
}

macro_rules! problem_responses {
    ($($(#[$doc:meta])* $name:ident = $status:literal, $retry:literal, $description:literal;)*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $name;

            impl<'r> ToResponse<'r> for $name {
                fn response() -> (&'r str, RefOr<Response>) {
                    (stringify!($name), problem_response($description, $retry))
                }
            }
        )*

        /// Every error response, as `(status, component name, response)`.
        pub fn problem_responses() -> Vec<(u16, &'static str, RefOr<Response>)> {
            vec![$(($status, stringify!($name), problem_response($description, $retry))),*]
        }
    };
}

problem_responses! {
    /// 400: malformed JSON, a missing or invalid field, a bad query parameter.
    BadRequest = 400, false, "The request is malformed: not JSON, a missing, unknown or invalid field, or a bad query parameter. `detail` names it.";
    /// 401: auth is on and no key was sent.
    Unauthorized = 401, false, "The server has API keys and the request sent none: send `Authorization: Bearer <key>`. Only when auth is on.";
    /// 403: the key is wrong.
    Forbidden = 403, false, "The API key is not accepted. Only when auth is on.";
    /// 404: no such thing.
    NotFound = 404, false, "No such session.";
    /// 408: the whole-request deadline passed.
    RequestTimeout = 408, false, "The request took longer than `server.request_timeout_secs` (streams are governed by an idle timeout instead).";
    /// 409: the event does not fit the session.
    Conflict = 409, false, "The event does not fit the session: a result for an id no call waits for.";
    /// 413: the body is over the limit.
    PayloadTooLarge = 413, false, "The body is larger than `server.max_body_bytes` (default 16 MiB).";
    /// 415: not `application/json`.
    UnsupportedMediaType = 415, false, "The body is not sent as `Content-Type: application/json`.";
    /// 422: well-formed, but nothing can be done with it.
    Unprocessable = 422, false, "Well-formed, but nothing can be done with it: no JSON at all in the text, input past the rescue limits (size, nesting depth), or a guard setting outside its bounds (the detail names the key and its range).";
    /// 503: at the concurrency limit, or not ready yet.
    Unavailable = 503, true, "The server is at `server.concurrency_limit`, or (for `/readyz` and `/api/*`) the index is still opening; retry after `Retry-After` seconds.";
    /// 500: the documentation oracle failed (its index or embedder), not the request.
    OracleFailed = 500, false, "The documentation oracle failed (its index or embedder): a server fault, never bad input. `detail` names it.";
}

/// The `text/event-stream` answer of `/api/*`: server-sent events whose
/// `data` is one JSON object each, named by the event (`x-events` maps each
/// name to the schema of its data).
#[derive(Debug, Clone, Copy)]
pub struct AskEventStream;

/// The SSE events of an ask, in the order they come, with their data.
fn ask_events() -> [(&'static str, Cow<'static, str>, &'static str); 6] {
    use deloop_oracle::{AskReport, CutEvent, DeltaEvent, ErrorEvent, MetaEvent, SourcesEvent};
    [
        ("meta", MetaEvent::name(), "the settings the ask runs with, first"),
        (
            "sources",
            SourcesEvent::name(),
            "the retrieved passages, before any text",
        ),
        (
            "delta",
            DeltaEvent::name(),
            "answer text as the model writes it (one delta for extractive answers and `stream: false`)",
        ),
        (
            "cut",
            CutEvent::name(),
            "the loop watcher fired and the LLM request was cancelled",
        ),
        (
            "done",
            AskReport::name(),
            "the final report, exactly the JSON answer (`deloop ask --json`); the stream ends",
        ),
        (
            "error",
            ErrorEvent::name(),
            "the ask failed (`kind`: `bad_request`, `index`, …, or `timeout` after `server.stream_idle_timeout_secs` without an event); the stream ends",
        ),
    ]
}

impl PartialSchema for AskEventStream {
    fn schema() -> RefOr<Schema> {
        let events = ask_events();
        let mut description = String::from(
            "Server-sent events, sent when the request has `Accept: text/event-stream` or \
             `\"stream\": true`. Each event's `data` is one JSON object:",
        );
        let mut map = serde_json::Map::new();
        for (event, schema, what) in &events {
            description.push_str(&format!("\n- `{event}` ({schema}): {what};"));
            map.insert(
                (*event).to_string(),
                serde_json::json!({ "$ref": format!("#/components/schemas/{schema}") }),
            );
        }
        description.push_str(
            "\n\nA comment line keeps an idle connection alive every 15 s. The `delta` texts \
             are the raw answer; the `done` report's `answer` is the one to keep.",
        );
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(description))
            .extensions(Some(
                ExtensionsBuilder::new()
                    .add("x-events", serde_json::Value::Object(map))
                    .build(),
            ))
            .into()
    }
}

impl ToSchema for AskEventStream {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        use deloop_oracle::{AskReport, CutEvent, DeltaEvent, ErrorEvent, MetaEvent, SourcesEvent};
        fn add<T: ToSchema>(schemas: &mut Vec<(String, RefOr<Schema>)>) {
            schemas.push((T::name().into_owned(), T::schema()));
            T::schemas(schemas);
        }
        add::<MetaEvent>(schemas);
        add::<SourcesEvent>(schemas);
        add::<DeltaEvent>(schemas);
        add::<CutEvent>(schemas);
        add::<AskReport>(schemas);
        add::<ErrorEvent>(schemas);
    }
}

/// Completes the document that the router collected: the error responses,
/// the bearer scheme, and on every route that the layers guard (all but
/// [`crate::layers::is_open_path`]) the responses the layers can give
/// (401 and 403 when auth is on, 408, 503) and the optional security
/// requirement. Open paths need no key.
pub fn finish(mut doc: OpenApi) -> OpenApi {
    let components = doc.components.get_or_insert_with(Default::default);
    for (_, name, response) in problem_responses() {
        components.responses.insert(name.to_string(), response);
    }
    components.security_schemes.insert(
        BEARER.to_string(),
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "Optional: needed only when the server has API keys (`DELOOP_API_KEYS` or \
                     `server.api_keys_file`). Keys are compared in constant time and never \
                     logged. `/healthz` and `/readyz` never need one.",
                ))
                .build(),
        ),
    );
    // Optional auth: a bearer key, or nothing when the server has no keys.
    doc.security = Some(vec![
        SecurityRequirement::new(BEARER, Vec::<String>::new()),
        SecurityRequirement::default(),
    ]);
    let layered: [(u16, &str); 4] = [
        (401, "Unauthorized"),
        (403, "Forbidden"),
        (408, "RequestTimeout"),
        (503, "Unavailable"),
    ];
    for (path, item) in doc.paths.paths.iter_mut() {
        let open = crate::layers::is_open_path(path);
        for op in operations_mut(item) {
            optional_body_is_absent_not_null(op);
            if open {
                op.security = Some(vec![SecurityRequirement::default()]);
                continue;
            }
            for (status, name) in layered {
                op.responses
                    .responses
                    .entry(status.to_string())
                    .or_insert_with(|| Ref::from_response_name(name).into());
            }
        }
    }
    doc
}

/// An optional request body (`request_body(content = Option<T>)`, the
/// compaction's) may be left out; it may not be JSON `null`, which utoipa
/// would allow: its schema is `T`, and the body is not required.
fn optional_body_is_absent_not_null(op: &mut utoipa::openapi::path::Operation) {
    use utoipa::openapi::Required;
    let Some(body) = op.request_body.as_mut() else {
        return;
    };
    if body.required == Some(Required::True) {
        return;
    }
    for content in body.content.values_mut() {
        if let Some(RefOr::T(Schema::OneOf(one_of))) = &content.schema {
            let rest: Vec<_> = one_of
                .items
                .iter()
                .filter(|s| !matches!(s, RefOr::T(Schema::Object(o)) if o.schema_type == utoipa::openapi::schema::SchemaType::Type(Type::Null)))
                .cloned()
                .collect();
            if rest.len() == 1 && one_of.items.len() == 2 {
                content.schema = rest.into_iter().next();
            }
        }
    }
    body.required = Some(Required::False);
}

/// Every operation of a path item.
pub fn operations_mut(
    item: &mut utoipa::openapi::path::PathItem,
) -> impl Iterator<Item = &mut utoipa::openapi::path::Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.options,
        &mut item.head,
        &mut item.patch,
        &mut item.trace,
    ]
    .into_iter()
    .filter_map(Option::as_mut)
}

/// The document of `router`'s routes as JSON, ready to serve.
pub fn to_json(doc: &OpenApi) -> axum::body::Bytes {
    // Serialising plain data cannot fail; an empty body would be caught by
    // the tests.
    axum::body::Bytes::from(serde_json::to_vec(doc).unwrap_or_default())
}
