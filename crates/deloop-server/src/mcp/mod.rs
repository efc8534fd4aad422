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

use std::sync::Arc;

use deloop_check::{CheckError, Collect};
use deloop_render::check::CheckReport;
use futures_util::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::oracle::{check_text_and_k, AskArgs, SearchArgs};
use crate::routes::guards::{
    check_options, clamp_value, repair_value, rescue_value, ClampRequest, RepairRequest,
    RescueRequest,
};
use crate::sessions::SessionError;
use crate::state::AppState;

mod args;
mod http;
mod schema;
mod tools;

pub use args::{CallArgs, ForgetArgs, ResultArgs, TranscriptArgs};
pub use http::{http_service, problem_answers, routes, JsonRpcMessage};

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
            tools: tools::guard_tools().into(),
        }
    }

    /// Adds the `ask` and `search` tools, answered by `oracle`.
    pub fn with_ask(mut self, oracle: Arc<dyn AskService>) -> Self {
        let mut tools = self.tools.to_vec();
        tools.extend(tools::oracle_tools());
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
        let (session, call) = parse::<CallArgs>("check_tool_call", args)?.into_call();
        session_name(&session)?;
        let verdict = self.state.sessions().call(&session, call).await?;
        to_value(&verdict)
    }

    async fn record_tool_result(&self, args: JsonObject) -> Result<Value, ToolError> {
        let (session, result) = parse::<ResultArgs>("record_tool_result", args)?.into_result();
        session_name(&session)?;
        let out = self.state.sessions().result(&session, result).await?;
        to_value(&out)
    }

    async fn forget_session(&self, args: JsonObject) -> Result<Value, ToolError> {
        let a: ForgetArgs = parse("forget_session", args)?;
        session_name(&a.session_id)?;
        let forgotten = self.state.sessions().forget(&a.session_id).await?;
        Ok(json!({"session_id": a.session_id, "forgotten": forgotten}))
    }

    async fn check_transcript(&self, args: JsonObject) -> Result<Value, ToolError> {
        let (transcript, query) = parse::<TranscriptArgs>("check_transcript", args)?.into_check();
        let options = check_options(&self.state, &query)
            .map_err(|e| ToolError::new(format!("argument {e}")))?;
        let (verdicts, res) = tokio::task::spawn_blocking(move || {
            let mut verdicts = Collect::default();
            let res = deloop_check::run(transcript.as_bytes(), &options, &mut verdicts);
            (verdicts.into_verdicts(), res)
        })
        .await
        .map_err(|e| ToolError::new(format!("internal error: the check task failed: {e}")))?;
        let summary = res.map_err(|e| {
            ToolError::new(match e {
                CheckError::Input {
                    line: Some(n),
                    message,
                } => format!("argument `transcript`, line {n}: {message}"),
                other => format!("argument `transcript`: {other}"),
            })
        })?;
        to_value(&CheckReport::new(&verdicts, &summary))
    }
}

/// The store checks the session name too; here the error names the
/// argument.
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
    check_text_and_k("question", &a.question, a.k)
        .map_err(|e| ToolError::new(format!("argument {e}")))?;
    Ok(a)
}

fn parse_search(args: JsonObject) -> Result<SearchArgs, ToolError> {
    let a: SearchArgs = parse("search", args)?;
    check_text_and_k("query", &a.query, a.k)
        .map_err(|e| ToolError::new(format!("argument {e}")))?;
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

#[cfg(test)]
mod tests;
