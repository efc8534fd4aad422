//! The MCP server: deloop's guards (and, when an oracle is configured, the
//! documentation oracle) as Model Context Protocol tools.
//!
//! One handler, [`McpServer`], serves both transports: standard input and
//! output ([`serve_stdio`], what `deloop mcp` runs) and streamable HTTP
//! ([`http_service`], mounted at `/mcp` by [`crate::router`] behind the same
//! auth, limits and metrics layers as the rest of the API).
//!
//! Every tool answers the same JSON value as the matching HTTP endpoint,
//! twice: as JSON text content and as `structuredContent`. Bad arguments are
//! tool errors (`isError: true`) whose text names the argument; they never
//! panic and never become protocol errors, so the model reads them.
//!
//! The live-agent tools are keyed by a `session_id` argument, not by the MCP
//! session, and share the HTTP server's session store: an agent may judge
//! calls over MCP and record results over HTTP, or the other way round.
//!
//! `ask` and `search` need the documentation oracle. They are listed only
//! when one is attached with [`McpServer::with_ask`] (see [`AskService`]).

use std::borrow::Cow;
use std::sync::Arc;

use deloop_render::check::{CheckError, CheckOptions};
use futures_util::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::routes::guards::{
    clamp_value, repair_value, rescue_value, ClampRequest, RepairRequest, RescueRequest,
};
use crate::sessions::{CallInput, ResultInput, SessionError};
use crate::state::AppState;

/// A tool failure the model should read: the text of an `isError` result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError(pub String);

impl ToolError {
    /// A tool error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        ToolError(message.into())
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ToolError {}

impl From<ApiError> for ToolError {
    fn from(e: ApiError) -> Self {
        ToolError(e.detail)
    }
}

impl From<SessionError> for ToolError {
    fn from(e: SessionError) -> Self {
        ToolError(e.to_string())
    }
}

/// Answer style of the `ask` tool (the seed's `/api/oracle`, `/api/help`
/// and `/api/tutor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AskMode {
    /// Rich markdown that cites its sources (the default).
    #[default]
    Oracle,
    /// Short, plain answers.
    Help,
    /// Teaches step by step and ends with open questions.
    Tutor,
}

impl AskMode {
    /// `oracle`, `help` or `tutor`.
    pub fn as_str(self) -> &'static str {
        match self {
            AskMode::Oracle => "oracle",
            AskMode::Help => "help",
            AskMode::Tutor => "tutor",
        }
    }
}

/// Answer language asked of the `ask` tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AskLang {
    /// Detect it from the question (the default).
    #[default]
    Auto,
    /// Spanish.
    Es,
    /// English.
    En,
}

impl AskLang {
    /// `auto`, `es` or `en`.
    pub fn as_str(self) -> &'static str {
        match self {
            AskLang::Auto => "auto",
            AskLang::Es => "es",
            AskLang::En => "en",
        }
    }
}

/// How `ask` and `search` retrieve passages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AskRetrieval {
    /// BM25 and vectors fused by reciprocal rank fusion (the default).
    #[default]
    Hybrid,
    /// BM25 only.
    Lexical,
    /// Cosine similarity of embeddings only.
    Vector,
}

impl AskRetrieval {
    /// `hybrid`, `lexical` or `vector`.
    pub fn as_str(self) -> &'static str {
        match self {
            AskRetrieval::Hybrid => "hybrid",
            AskRetrieval::Lexical => "lexical",
            AskRetrieval::Vector => "vector",
        }
    }
}

/// Who said an earlier turn of a tutor dialogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TurnRole {
    /// The person asking.
    User,
    /// The oracle.
    Assistant,
}

/// One earlier turn of the dialogue (`history` of `ask`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// `user` or `assistant`.
    pub role: TurnRole,
    /// What was said.
    pub content: String,
}

/// The checked arguments of the `ask` tool (the body of `POST /api/oracle`
/// plus `mode`). Absent options are `None`: the oracle's defaults apply.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskArgs {
    /// The question (not empty).
    pub question: String,
    /// Answer style.
    pub mode: Option<AskMode>,
    /// Answer language.
    pub lang: Option<AskLang>,
    /// Passages to retrieve (at least 1).
    pub k: Option<usize>,
    /// Retrieve with a HyDE passage generated by the LLM.
    pub hyde: Option<bool>,
    /// Retrieval method.
    pub retrieval: Option<AskRetrieval>,
    /// Earlier turns, oldest first (the tutor's dialogue).
    #[serde(default)]
    pub history: Vec<Turn>,
}

/// The checked arguments of the `search` tool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// The query (not empty).
    pub query: String,
    /// Passages to return (at least 1).
    pub k: Option<usize>,
    /// Retrieval method.
    pub retrieval: Option<AskRetrieval>,
    /// Expand the query with a HyDE passage from the LLM.
    pub hyde: Option<bool>,
}

/// The documentation oracle as the `ask` and `search` tools need it.
///
/// The MCP handler checks the arguments (names, types, enums, `k >= 1`,
/// non-empty text) before calling; an implementation maps them onto the
/// oracle and answers the JSON value the HTTP API answers for the same
/// request (`ask`: the object `deloop ask --json` prints). An `Err` becomes a
/// tool error the model reads.
pub trait AskService: Send + Sync + 'static {
    /// Answers a question.
    fn ask(&self, args: AskArgs) -> BoxFuture<'_, Result<Value, ToolError>>;
    /// Retrieves passages for a query, without synthesis.
    fn search(&self, args: SearchArgs) -> BoxFuture<'_, Result<Value, ToolError>>;
}

/// What the server tells a client about itself at initialisation.
const INSTRUCTIONS: &str = "deloop guards LLM output and agent tool loops. \
Before each tool call your agent makes, call check_tool_call with one session_id per agent \
conversation; do not run the call when the verdict's level is \"critical\", and end the run when \
terminate_run is true. After the tool ran, call record_tool_result. Use clamp_text on a model \
answer that may repeat itself, rescue_json or repair_json on broken JSON output, and \
check_transcript to audit a finished transcript for tool-call loops.";

/// The MCP handler: the guard tools over a server's [`AppState`], plus
/// `ask` and `search` when an [`AskService`] is attached.
///
/// Cheap to clone (two `Arc`s and the state's `Arc`).
#[derive(Clone)]
pub struct McpServer {
    state: AppState,
    ask: Option<Arc<dyn AskService>>,
    tools: Arc<[Tool]>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field(
                "tools",
                &self.tools.iter().map(|t| &t.name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// The guard tools over `state` (no `ask` or `search`).
    pub fn new(state: AppState) -> Self {
        McpServer {
            state,
            ask: None,
            tools: guard_tools().into(),
        }
    }

    /// Adds the `ask` and `search` tools, answered by `oracle`.
    pub fn with_ask(mut self, oracle: Arc<dyn AskService>) -> Self {
        let mut tools = self.tools.to_vec();
        tools.extend(oracle_tools());
        self.tools = tools.into();
        self.ask = Some(oracle);
        self
    }

    /// The tools this server lists, in order.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// Runs one tool: `Ok` is the value to return, `Err` a tool error.
    /// `None` when no tool has this name.
    pub async fn call(&self, name: &str, args: JsonObject) -> Option<Result<Value, ToolError>> {
        let state = &self.state;
        Some(match name {
            "clamp_text" => match parse::<ClampRequest>(name, args) {
                Ok(req) => clamp_value(state, req).await.map_err(ToolError::from),
                Err(e) => Err(e),
            },
            "rescue_json" => match parse::<RescueRequest>(name, args) {
                Ok(req) => rescue_value(state, req).await.map_err(ToolError::from),
                Err(e) => Err(e),
            },
            "repair_json" => match parse::<RepairRequest>(name, args) {
                Ok(req) => repair_value(state, req).await.map_err(ToolError::from),
                Err(e) => Err(e),
            },
            "check_tool_call" => self.check_tool_call(args).await,
            "record_tool_result" => self.record_tool_result(args).await,
            "forget_session" => self.forget_session(args).await,
            "check_transcript" => self.check_transcript(args).await,
            "ask" | "search" => {
                let oracle = self.ask.as_ref()?;
                if name == "ask" {
                    match parse_ask(args) {
                        Ok(a) => oracle.ask(a).await,
                        Err(e) => Err(e),
                    }
                } else {
                    match parse_search(args) {
                        Ok(a) => oracle.search(a).await,
                        Err(e) => Err(e),
                    }
                }
            }
            _ => return None,
        })
    }

    async fn check_tool_call(&self, args: JsonObject) -> Result<Value, ToolError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            session_id: String,
            run_id: Option<String>,
            tool: String,
            args: Value,
            id: Option<String>,
            agent: Option<String>,
        }
        let a: Args = parse("check_tool_call", args)?;
        session_name(&a.session_id)?;
        let call = CallInput {
            tool: a.tool,
            args: a.args,
            id: a.id,
            agent: a.agent,
            run: a.run_id,
        };
        let verdict = self.state.sessions().call(&a.session_id, call).await?;
        to_value(&verdict)
    }

    async fn record_tool_result(&self, args: JsonObject) -> Result<Value, ToolError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            session_id: String,
            run_id: Option<String>,
            id: Option<String>,
            tool: Option<String>,
            args: Option<Value>,
            agent: Option<String>,
            #[serde(default, deserialize_with = "present")]
            result: Option<Value>,
            error: Option<String>,
        }
        let a: Args = parse("record_tool_result", args)?;
        session_name(&a.session_id)?;
        match (&a.result, &a.error) {
            (None, None) => {
                return Err(ToolError::new(
                    "missing argument `result` (or `error` when the tool failed)",
                ))
            }
            (Some(_), Some(_)) => {
                return Err(ToolError::new(
                    "send one of the arguments `result` and `error`, not both",
                ))
            }
            _ => {}
        }
        if a.id.is_none() && (a.tool.is_none() || a.args.is_none()) {
            return Err(ToolError::new(
                "a result without argument `id` needs arguments `tool` and `args` to find its call",
            ));
        }
        let input = ResultInput {
            id: a.id,
            tool: a.tool,
            args: a.args,
            agent: a.agent,
            run: a.run_id,
            result: a.result,
            error: a.error,
        };
        let out = self.state.sessions().result(&a.session_id, input).await?;
        to_value(&out)
    }

    async fn forget_session(&self, args: JsonObject) -> Result<Value, ToolError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            session_id: String,
        }
        let a: Args = parse("forget_session", args)?;
        session_name(&a.session_id)?;
        let forgotten = self.state.sessions().forget(&a.session_id).await?;
        Ok(json!({"session_id": a.session_id, "forgotten": forgotten}))
    }

    async fn check_transcript(&self, args: JsonObject) -> Result<Value, ToolError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            transcript: String,
            format: Option<String>,
            profile: Option<String>,
        }
        let a: Args = parse("check_transcript", args)?;
        let format = match a.format.as_deref() {
            None => deloop_core::loops::transcript::TranscriptFormat::Auto,
            Some(f) => f.parse().map_err(|_| {
                ToolError::new(format!(
                    "argument `format`: {f:?} is not one of auto, events, openai, anthropic"
                ))
            })?,
        };
        let profile = match a.profile.as_deref() {
            None => self.state.guard().profile,
            Some(p) => p.parse().map_err(|_| {
                ToolError::new(format!(
                    "argument `profile`: {p:?} is not one of {}",
                    deloop_core::loops::Profile::names_list()
                ))
            })?,
        };
        let options = CheckOptions {
            format,
            profile,
            config: Some(self.state.guard().config.clone()),
            json: true,
            lossy: false,
        };
        let transcript = a.transcript;
        let (out, res) = tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            let res = deloop_render::check::run(transcript.as_bytes(), &options, &mut out);
            (out, res)
        })
        .await
        .map_err(|e| ToolError::new(format!("internal error: the check task failed: {e}")))?;
        if let Err(e) = res {
            return Err(ToolError::new(match e {
                CheckError::Input {
                    line: Some(n),
                    message,
                } => format!("argument `transcript`, line {n}: {message}"),
                other => format!("argument `transcript`: {other}"),
            }));
        }
        let mut verdicts = Vec::new();
        let mut summary = Value::Null;
        for line in out.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let v: Value = serde_json::from_slice(line).map_err(|e| {
                ToolError::new(format!("internal error: a check line is not JSON: {e}"))
            })?;
            match v {
                Value::Object(mut o) if o.contains_key("summary") => {
                    summary = o.remove("summary").unwrap_or(Value::Null);
                }
                other => verdicts.push(other),
            }
        }
        Ok(json!({"verdicts": verdicts, "summary": summary}))
    }
}

/// A field that is present, even as `null`, is `Some` (`result: null` is a
/// result).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

fn session_name(session: &str) -> Result<(), ToolError> {
    crate::sessions::limits::check_session(session)
        .map_err(|e| ToolError::new(format!("argument `session_id`: {e}")))
}

fn to_value(v: &impl serde::Serialize) -> Result<Value, ToolError> {
    serde_json::to_value(v)
        .map_err(|e| ToolError::new(format!("internal error: cannot serialise the answer: {e}")))
}

/// Reads a tool's arguments into `T`; the error names the argument.
fn parse<T: DeserializeOwned>(tool: &str, args: JsonObject) -> Result<T, ToolError> {
    serde_path_to_error::deserialize(Value::Object(args)).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if path == "." || inner.starts_with("missing field") || inner.starts_with("unknown field") {
            // serde already names the field: `missing field `text``.
            ToolError::new(format!(
                "invalid arguments for {tool}: {}",
                inner.replace(" field ", " argument ")
            ))
        } else {
            ToolError::new(format!(
                "invalid arguments for {tool}: argument `{path}`: {inner}"
            ))
        }
    })
}

fn parse_ask(args: JsonObject) -> Result<AskArgs, ToolError> {
    let a: AskArgs = parse("ask", args)?;
    if a.question.trim().is_empty() {
        return Err(ToolError::new("argument `question` is empty"));
    }
    if a.k == Some(0) {
        return Err(ToolError::new("argument `k` must be at least 1"));
    }
    Ok(a)
}

fn parse_search(args: JsonObject) -> Result<SearchArgs, ToolError> {
    let a: SearchArgs = parse("search", args)?;
    if a.query.trim().is_empty() {
        return Err(ToolError::new("argument `query` is empty"));
    }
    if a.k == Some(0) {
        return Err(ToolError::new("argument `k` must be at least 1"));
    }
    Ok(a)
}

/// A tool result: the value as JSON text and as `structuredContent`.
fn success(value: Value) -> CallToolResult {
    CallToolResult::structured(value)
}

/// A tool error the model reads.
fn failure(e: &ToolError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(e.0.clone())])
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("deloop", env!("CARGO_PKG_VERSION"))
                    .with_title("deloop")
                    .with_description(
                        "Guards for LLM output (repetition loops, broken JSON) and for agent \
                         tool-call loops",
                    ),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        match self.call(&request.name, args).await {
            Some(Ok(v)) => Ok(success(v).into()),
            Some(Err(e)) => Ok(failure(&e).into()),
            None => Err(ErrorData::invalid_params(
                format!(
                    "unknown tool `{}`; this server has: {}",
                    request.name,
                    self.tools
                        .iter()
                        .map(|t| t.name.as_ref())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None,
            )),
        }
    }
}

/// Serves `server` over standard input and output until the client closes
/// them (what `deloop mcp` runs). Logs must go to stderr: stdout carries
/// the protocol.
pub async fn serve_stdio_with(server: McpServer) -> std::io::Result<()> {
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| std::io::Error::other(format!("MCP over stdio: {e}")))?;
    running
        .waiting()
        .await
        .map_err(|e| std::io::Error::other(format!("MCP over stdio: {e}")))?;
    Ok(())
}

/// Serves the guard tools over `state` on standard input and output until
/// the client closes them (see [`serve_stdio_with`] to add `ask`).
pub async fn serve_stdio(state: AppState) -> std::io::Result<()> {
    serve_stdio_with(McpServer::new(state)).await
}

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

fn schema(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(o) => Arc::new(o),
        _ => Arc::new(JsonObject::new()),
    }
}

fn tool(name: &'static str, title: &str, description: &'static str, input: Value) -> Tool {
    Tool::new(
        Cow::Borrowed(name),
        Cow::Borrowed(description),
        schema(input),
    )
    .with_title(title)
}

/// Pure functions of their input: no state, same answer every time.
fn pure() -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false)
}

/// Changes the session store, nothing outside deloop.
fn session_write(idempotent: bool, destructive: bool) -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(false)
        .destructive(destructive)
        .idempotent(idempotent)
        .open_world(false)
}

const SESSION_ID: &str = "The agent conversation this call belongs to: any string of 1 to 256 \
bytes that you keep the same for the whole conversation (for example the conversation's id). \
Calls are compared only with earlier calls of the same session. Sessions are shared with the HTTP \
API's /v1/sessions/{session_id} and are forgotten after an idle time.";

const RUN_ID: &str = "Optional: the run (one user turn or task) inside the session. Give it when \
your agent has runs; with the openclaw profile, history is compared within a run.";

const AGENT: &str = "Optional: which agent made the call, when several agents share a session \
(default \"main\"). Each agent has its own history window.";

/// The guard tools: text guards, JSON rescue, live tool-call sessions and
/// transcript checks.
fn guard_tools() -> Vec<Tool> {
    vec![
        tool(
            "clamp_text",
            "Cut repetition loops out of text",
            "Cut a degenerate repetition loop out of model-generated text: the same words, \
sentence, paragraph or short character run repeated over and over (a model stuck in a loop). \
Call it on an LLM answer before you show, store or reuse it, whenever the answer may have looped. \
Healthy text (lists, tables, code, deliberate refrains) is left alone. \
Returns the same JSON as `deloop clamp --json` and POST /v1/clamp: {text (the text to use, cut \
after the first copy of the loop and ending with a marker such as \" […]\" when it was cut), \
clamped (true when something was cut), detector (word_period, long_period or substring; null when \
nothing was cut), period, unit, start, keep_bytes, removed_bytes (null when nothing was cut), \
reports (every guard that fired)}.",
            json!({
                "type": "object",
                "properties": {
                    "text": {
                        "type": "string",
                        "description": "The text to guard, complete (for example a model's whole answer)."
                    },
                    "config": {
                        "type": "object",
                        "description": "Optional guard settings; omit it to use the server's defaults. Either {\"seed_compat\": true} (the seed's exact rules) or any of the tables \"words\", \"substring\", \"healthy\" and \"near\" with the keys of the CLI config file (for example {\"words\": {\"min_run\": 24}, \"substring\": {\"min_copies\": 20}}). Unknown keys are an error.",
                        "properties": {
                            "seed_compat": {"type": "boolean", "description": "Use the seed's exact rules instead of the tables."},
                            "words": {"type": "object", "description": "The word guard: enabled, min_chars, max_period, min_run, run_per_period, long_max_period, long_run_per_period, long_last_copy_percent, tail_last_copy_percent, ignore_trailing_punctuation, connectors, marker, rejoin_tokens, split_cjk."},
                            "substring": {"type": "object", "description": "The character-run guard: enabled, min_chars, min_unit, max_unit, min_copies, marker."},
                            "healthy": {"type": "object", "description": "Protections for legitimate repetition (lists, tables, code): enabled and its thresholds."},
                            "near": {"type": "object", "description": "The near-duplicate guard (counted lists, restarted lists, lines going round a few values, codes going round a few values, near-duplicate sentences, counters, long units without white space, blocks repeated in code fences): enabled and its thresholds."}
                        }
                    }
                },
                "required": ["text"],
                "additionalProperties": false
            }),
        )
        .with_annotations(pure()),
        tool(
            "rescue_json",
            "Rescue one field from broken JSON",
            "Extract the value of one key from a model's JSON output that does not parse: \
truncated, wrapped in prose or a markdown fence, with trailing commas, single quotes, comments or \
unescaped newlines. Call it when you asked a model for JSON, need one field (for example \
\"answer\") and json parsing failed. \
Returns the same JSON as `deloop rescue --json` and POST /v1/rescue: {ok (true when the key's \
value was found), value (the rescued value, any JSON; null when not found), repairs (the fixes \
applied, in snake case), error (only when ok is false: why nothing was rescued)}. Not finding the \
key is a normal result with ok false, not a tool error.",
            json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "The model's raw output, as received."},
                    "key": {"type": "string", "description": "The key whose value to rescue, for example \"answer\". The first occurrence at any depth is used."}
                },
                "required": ["text", "key"],
                "additionalProperties": false
            }),
        )
        .with_annotations(pure()),
        tool(
            "repair_json",
            "Repair broken JSON",
            "Turn a model's broken JSON output into one valid JSON document: strips prose and \
markdown fences around it, closes truncated strings, arrays and objects, fixes quotes, commas, \
comments and escapes. Call it when you need the whole document and json parsing failed (use \
rescue_json when you need a single field). \
Returns the same JSON as `deloop repair --json` and POST /v1/repair: {value (the repaired JSON \
value), repairs (the fixes applied, in snake case, in order; empty when the input was already \
valid)}. A text with no JSON in it at all is a tool error.",
            json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "The model's raw output, as received."}
                },
                "required": ["text"],
                "additionalProperties": false
            }),
        )
        .with_annotations(pure()),
        tool(
            "check_tool_call",
            "Check a tool call for a loop before running it",
            "Judge a tool call BEFORE it runs: is the agent stuck repeating the same call, polling \
without progress, or ping-ponging between calls? Call it once for every tool call of the agent, \
in order, with the same session_id for the whole conversation, then run the tool and report its \
outcome with record_tool_result (loops are recognised by calls AND their results). \
Returns the verdict (the same JSON as POST /v1/sessions/{session_id}/calls): {index (0-based \
position of the call in the session), id (the call id; deloop assigns \"deloop-N\" when you gave \
none), level (\"ok\", \"warning\" or \"critical\"), detector (which loop detector fired, or null), \
count (how many repetitions it counted, or null), message (what to tell the model or the \
operator; empty when ok), fingerprint (identifies the loop, or null), terminate_run (true: end \
the run now)}. On \"warning\", let the call run but tell the model it is repeating itself; on \
\"critical\", do NOT run the call and return the message to the model instead.",
            json!({
                "type": "object",
                "properties": {
                    "session_id": {"type": "string", "minLength": 1, "maxLength": 256, "description": SESSION_ID},
                    "run_id": {"type": "string", "description": RUN_ID},
                    "tool": {"type": "string", "minLength": 1, "description": "The name of the tool the agent wants to call, for example \"read_file\"."},
                    "args": {"description": "The call's arguments exactly as the agent produced them (usually an object; {} when the tool takes none). Key order does not matter."},
                    "id": {"type": "string", "description": "Optional: the call id (for example the model's tool_call id). Give it to record the result by id later."},
                    "agent": {"type": "string", "description": AGENT}
                },
                "required": ["session_id", "tool", "args"],
                "additionalProperties": false
            }),
        )
        .with_annotations(session_write(false, false)),
        tool(
            "record_tool_result",
            "Record a tool call's result",
            "Record the outcome of a tool call that check_tool_call judged, AFTER the tool ran. \
Identical calls that keep returning identical results are what the no-progress detectors look \
for, so report every outcome. Name the call by `id` (as given to or returned by \
check_tool_call), or, without an id, by `tool` and `args` (the oldest matching call still waiting \
is used). Send exactly one of `result` and `error`. \
Returns {index (the index of the call the result attached to; null when the call was already \
settled and the result was ignored), verdict (a replacement verdict for that call when the result \
changed it, for example the strict profile ending the run; otherwise null)}, the same JSON as \
POST /v1/sessions/{session_id}/results. An id that no call of the session waits on is a tool error.",
            json!({
                "type": "object",
                "properties": {
                    "session_id": {"type": "string", "minLength": 1, "maxLength": 256, "description": SESSION_ID},
                    "run_id": {"type": "string", "description": "The run the call belongs to, as given to check_tool_call."},
                    "id": {"type": "string", "description": "The call id, as given to or returned by check_tool_call."},
                    "tool": {"type": "string", "description": "The tool's name; required when `id` is absent."},
                    "args": {"description": "The call's arguments as given to check_tool_call; required when `id` is absent."},
                    "agent": {"type": "string", "description": "The agent of the call, as given to check_tool_call."},
                    "result": {"description": "What the tool returned (any JSON, for example a string or an object). Give this or `error`."},
                    "error": {"type": "string", "description": "The tool's error message when it failed. Give this or `result`."}
                },
                "required": ["session_id"],
                "additionalProperties": false
            }),
        )
        .with_annotations(session_write(false, false)),
        tool(
            "forget_session",
            "Forget a session",
            "Forget everything deloop remembers about a session (its call history, all runs and \
agents). Call it when the agent conversation is over, or to start it afresh. Sessions are also \
forgotten on their own after an idle time. \
Returns {session_id, forgotten (true when the session existed)}; forgetting an unknown session is \
not an error.",
            json!({
                "type": "object",
                "properties": {
                    "session_id": {"type": "string", "minLength": 1, "maxLength": 256, "description": "The session to forget, as given to check_tool_call."}
                },
                "required": ["session_id"],
                "additionalProperties": false
            }),
        )
        .with_annotations(session_write(true, true)),
        tool(
            "check_transcript",
            "Find tool-call loops in a transcript",
            "Replay a finished agent transcript and judge every tool call in it, exactly as \
`deloop check --json` and POST /v1/check do. Call it to audit a conversation after the fact \
(where did the agent start looping, how many calls were wasted). The transcript is one string: \
deloop's events as JSON lines ({\"type\": \"call\"|\"result\"|\"compaction\", ...}), or an OpenAI \
or Anthropic messages transcript (a JSON document or JSON lines); the format is detected unless \
given. \
Returns {verdicts: one object per call, in order, {index, tool, level (ok, warning or critical), \
detector, count, message, fingerprint}; summary: {profile, format, calls, warnings, criticals, \
first_critical, terminate_at, detectors (non-ok verdicts per detector)}}. A malformed transcript \
is a tool error naming the line.",
            json!({
                "type": "object",
                "properties": {
                    "transcript": {"type": "string", "description": "The whole transcript as text: JSON lines or one JSON document (a JSON array or object serialised to a string)."},
                    "format": {"type": "string", "enum": ["auto", "events", "openai", "anthropic"], "description": "The transcript format; default auto (detected)."},
                    "profile": {"type": "string", "enum": deloop_core::loops::Profile::names(), "description": "The loop-detection profile; default: the server's profile. openclaw matches OpenClaw's tools.loopDetection; strict also ends runs on repeated failures."}
                },
                "required": ["transcript"],
                "additionalProperties": false
            }),
        )
        .with_annotations(pure()),
    ]
}

/// `ask` and `search`, listed only when an oracle is attached.
fn oracle_tools() -> Vec<Tool> {
    let read_only = ToolAnnotations::new()
        .read_only(true)
        .destructive(false)
        .idempotent(false)
        .open_world(false);
    vec![
        tool(
            "ask",
            "Ask deloop's documentation oracle",
            "Answer a question from the documentation this deloop server has indexed (by default \
deloop's own documentation), citing the passages it used. It retrieves passages, writes an \
answer with the configured LLM (or, without one, quotes the best passages), and guards the \
answer against loops and broken citations. Call it for questions about the indexed \
documentation; use `search` when you only need the passages. \
Returns the same JSON as `deloop ask --json` and POST /api/oracle: {question, answer (markdown), \
mode, language, citations (the passages cited: source, lines, heading), degraded (true when a \
fallback replaced the model's answer) and degraded_reason, llm_error (when the LLM failed and \
the answer is extractive), clamped, loop_cut, provider, model, retrieval, ...}.",
            json!({
                "type": "object",
                "properties": {
                    "question": {"type": "string", "minLength": 1, "description": "The question, in Spanish or English."},
                    "mode": {"type": "string", "enum": ["oracle", "help", "tutor"], "description": "Answer style: oracle (default: rich markdown that cites its sources), help (short and plain), tutor (teaches step by step and ends with open questions; pass the earlier turns in `history`)."},
                    "lang": {"type": "string", "enum": ["auto", "es", "en"], "description": "Answer language; default auto (the question's language)."},
                    "k": {"type": "integer", "minimum": 1, "description": "Passages to retrieve; default the server's (6)."},
                    "hyde": {"type": "boolean", "description": "Retrieve with a hypothetical answer written by the LLM first (HyDE); helps vague questions, costs one more LLM call. Default false."},
                    "retrieval": {"type": "string", "enum": ["hybrid", "lexical", "vector"], "description": "How passages are found: hybrid (default: keywords and embeddings fused), lexical (BM25 keywords), vector (embeddings)."},
                    "history": {
                        "type": "array",
                        "description": "Earlier turns of the dialogue, oldest first (for tutor mode).",
                        "items": {
                            "type": "object",
                            "properties": {
                                "role": {"type": "string", "enum": ["user", "assistant"]},
                                "content": {"type": "string"}
                            },
                            "required": ["role", "content"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["question"],
                "additionalProperties": false
            }),
        )
        .with_annotations(read_only.clone()),
        tool(
            "search",
            "Search deloop's documentation index",
            "Find the passages of the indexed documentation that best match a query, without \
writing an answer. Call it to read the sources yourself or to check what the index holds. \
Returns the same JSON as `deloop search --json`: {query, retrieval_requested, retrieval_used, \
fallback_reason (why retrieval fell back to lexical, or null), hits: [{id, chunk_id, doc_id, \
score, source (file), start_line, end_line, heading_trail, text}] best first}.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "description": "What to look for, in words (search syntax characters are treated as separators)."},
                    "k": {"type": "integer", "minimum": 1, "description": "Passages to return; default 10."},
                    "retrieval": {"type": "string", "enum": ["hybrid", "lexical", "vector"], "description": "hybrid (default: keywords and embeddings fused), lexical (BM25 keywords) or vector (embeddings)."},
                    "hyde": {"type": "boolean", "description": "Expand the query with a hypothetical answer written by the LLM (HyDE). Default false."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        )
        .with_annotations(read_only),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::ApiKeys;
    use crate::metrics::Metrics;
    use crate::sessions::{GuardSettings, MemoryStore};
    use crate::settings::ServerSettings;
    use deloop_core::loops::{LoopConfig, Profile};
    use deloop_core::repetition::ClampConfig;
    use std::time::Duration;

    fn state() -> AppState {
        let metrics = Arc::new(Metrics::new());
        let guard = GuardSettings {
            profile: Profile::Default,
            config: LoopConfig::default(),
            max_open_calls: 64,
        };
        let store = MemoryStore::new(
            guard.clone(),
            100,
            Duration::from_secs(60),
            Arc::new(crate::sessions::MetricsEvents(metrics.clone())),
        );
        AppState::new(
            ServerSettings::default(),
            ClampConfig::default(),
            guard,
            Arc::new(store),
            metrics,
            ApiKeys::default(),
        )
    }

    fn args(v: Value) -> JsonObject {
        match v {
            Value::Object(o) => o,
            _ => panic!("arguments are an object"),
        }
    }

    /// Answers with the arguments it was given, to test the seam (not an
    /// oracle).
    struct Echo;

    impl AskService for Echo {
        fn ask(&self, a: AskArgs) -> BoxFuture<'_, Result<Value, ToolError>> {
            Box::pin(async move {
                Ok(json!({
                    "question": a.question,
                    "mode": a.mode.map(AskMode::as_str),
                    "lang": a.lang.map(AskLang::as_str),
                    "retrieval": a.retrieval.map(AskRetrieval::as_str),
                    "k": a.k,
                    "turns": a.history.len(),
                }))
            })
        }
        fn search(&self, a: SearchArgs) -> BoxFuture<'_, Result<Value, ToolError>> {
            Box::pin(async move { Err(ToolError::new(format!("no index for {:?}", a.query))) })
        }
    }

    fn names(s: &McpServer) -> Vec<&str> {
        s.tools().iter().map(|t| t.name.as_ref()).collect()
    }

    #[test]
    fn every_tool_has_an_object_schema_that_lists_its_required_arguments() {
        let s = McpServer::new(state()).with_ask(Arc::new(Echo));
        for t in s.tools() {
            let schema = &t.input_schema;
            assert_eq!(schema["type"], "object", "{}", t.name);
            assert_eq!(schema["additionalProperties"], false, "{}", t.name);
            let props = schema["properties"].as_object().unwrap();
            for r in schema["required"].as_array().unwrap() {
                assert!(props.contains_key(r.as_str().unwrap()), "{}: {r}", t.name);
            }
            for (name, p) in props {
                assert!(
                    p.get("description").is_some(),
                    "{}.{name} undocumented",
                    t.name
                );
            }
            assert!(t.description.as_ref().unwrap().len() > 150, "{}", t.name);
        }
    }

    #[tokio::test]
    async fn ask_and_search_are_listed_and_served_only_with_an_oracle() {
        let plain = McpServer::new(state());
        assert!(!names(&plain).contains(&"ask"));
        assert!(plain
            .call("ask", args(json!({"question": "q"})))
            .await
            .is_none());
        let s = plain.with_ask(Arc::new(Echo));
        assert_eq!(&names(&s)[names(&s).len() - 2..], ["ask", "search"]);
        let v = s
            .call(
                "ask",
                args(
                    json!({"question": "¿Qué es deloop?", "mode": "tutor", "lang": "es",
                    "k": 3, "retrieval": "lexical",
                    "history": [{"role": "user", "content": "hola"}]}),
                ),
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            v,
            json!({"question": "¿Qué es deloop?", "mode": "tutor", "lang": "es",
                "retrieval": "lexical", "k": 3, "turns": 1})
        );
        let e = s
            .call("search", args(json!({"query": "loops"})))
            .await
            .unwrap();
        assert_eq!(e.unwrap_err().0, "no index for \"loops\"");
    }

    #[tokio::test]
    async fn bad_ask_arguments_are_tool_errors_naming_the_argument() {
        let s = McpServer::new(state()).with_ask(Arc::new(Echo));
        for (a, named) in [
            (json!({}), "`question`"),
            (json!({"question": "  "}), "`question`"),
            (json!({"question": "q", "mode": "poet"}), "`mode`"),
            (json!({"question": "q", "k": 0}), "`k`"),
            (json!({"question": "q", "k": -1}), "`k`"),
            (
                json!({"question": "q", "history": [{"role": "system", "content": "x"}]}),
                "`history[0].role`",
            ),
            (json!({"question": "q", "stream": true}), "`stream`"),
        ] {
            let e = s.call("ask", args(a.clone())).await.unwrap().unwrap_err();
            assert!(e.0.contains(named), "{a}: {e}");
        }
        let e = s
            .call("search", args(json!({"query": ""})))
            .await
            .unwrap()
            .unwrap_err();
        assert!(e.0.contains("`query`"), "{e}");
    }

    #[tokio::test]
    async fn guard_tools_answer_like_the_http_api_and_name_bad_arguments() {
        let s = McpServer::new(state());
        let v = s
            .call("repair_json", args(json!({"text": "[1, 2"})))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(v["value"], json!([1, 2]));
        for (tool, a, named) in [
            (
                "clamp_text",
                json!({"text": "x", "config": {"words": {"nope": 1}}}),
                "config",
            ),
            (
                "clamp_text",
                json!({"text": "x", "config": {"words": {"max_period": 40}}}),
                "words.max_period = 40 is out of range: expected 1 to 16",
            ),
            ("rescue_json", json!({"text": "{}"}), "`key`"),
            (
                "check_tool_call",
                json!({"session_id": "s", "tool": " ", "args": {}}),
                "`tool`",
            ),
            (
                "check_tool_call",
                json!({"session_id": "s", "tool": "t"}),
                "`args`",
            ),
            (
                "check_tool_call",
                json!({"session_id": "s".repeat(300), "tool": "t", "args": {}}),
                "`session_id`",
            ),
            (
                "check_tool_call",
                json!({"session_id": 7, "tool": "t", "args": {}}),
                "`session_id`",
            ),
            (
                "record_tool_result",
                json!({"session_id": "s", "id": "a"}),
                "`result`",
            ),
            (
                "record_tool_result",
                json!({"session_id": "s", "id": "a", "result": 1, "error": "e"}),
                "`error`",
            ),
            (
                "record_tool_result",
                json!({"session_id": "s", "result": 1}),
                "`id`",
            ),
            (
                "check_transcript",
                json!({"transcript": [1]}),
                "`transcript`",
            ),
            (
                "check_transcript",
                json!({"transcript": "", "format": "xml"}),
                "`format`",
            ),
        ] {
            let e = s.call(tool, args(a.clone())).await.unwrap().unwrap_err();
            assert!(e.0.contains(named), "{tool} {a}: {e}");
        }
        // `result: null` is a result.
        s.call(
            "check_tool_call",
            args(json!({"session_id": "s", "tool": "t", "args": {}, "id": "a"})),
        )
        .await
        .unwrap()
        .unwrap();
        let r = s
            .call(
                "record_tool_result",
                args(json!({"session_id": "s", "id": "a", "result": null})),
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r["index"], 0);
    }

    #[tokio::test]
    async fn an_empty_transcript_has_no_verdicts() {
        let s = McpServer::new(state());
        let v = s
            .call("check_transcript", args(json!({"transcript": ""})))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(v["verdicts"], json!([]));
        assert_eq!(v["summary"]["calls"], 0);
    }
}
