//! The arguments of the MCP tools that have no HTTP body of the same shape:
//! the live-agent tools carry the session in an argument (HTTP has it in
//! the path), and `check_transcript` carries the transcript as a string.
//! Each converts into the type the HTTP API reads, so both front doors run
//! the same checks. The guard tools read the HTTP bodies themselves
//! ([`crate::routes::guards`]) and `ask`/`search` the oracle's
//! ([`crate::oracle`]).
//!
//! The tools' input schemas are derived from these types
//! ([`super::schema`]): the doc comments are what the model reads.

use serde::Deserialize;
use serde_json::Value;

use crate::routes::guards::CheckQuery;
use crate::sessions::{CallInput, ResultInput};

/// The arguments of `check_tool_call`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CallArgs {
    /// The agent conversation this call belongs to: any string of 1 to 256
    /// bytes that you keep the same for the whole conversation (for example
    /// the conversation's id). Calls are compared only with earlier calls of
    /// the same session. Sessions are shared with the HTTP API's
    /// /v1/sessions/{session_id} and are forgotten after an idle time.
    #[schema(min_length = 1, max_length = 256)]
    pub session_id: String,
    /// Optional: the run (one user turn or task) inside the session. Give it
    /// when your agent has runs; with the openclaw profile, history is
    /// compared within a run.
    pub run_id: Option<String>,
    /// The name of the tool the agent wants to call, for example
    /// "read_file".
    #[schema(min_length = 1)]
    pub tool: String,
    /// The call's arguments exactly as the agent produced them (usually an
    /// object; {} when the tool takes none). Key order does not matter.
    pub args: Value,
    /// Optional: the call id (for example the model's tool_call id). Give it
    /// to record the result by id later.
    pub id: Option<String>,
    /// Optional: which agent made the call, when several agents share a
    /// session (default "main"). Each agent has its own history window.
    pub agent: Option<String>,
}

impl CallArgs {
    /// The session and the call, as `POST /v1/sessions/{session}/calls`
    /// reads them.
    pub fn into_call(self) -> (String, CallInput) {
        let call = CallInput {
            tool: self.tool,
            args: self.args,
            id: self.id,
            agent: self.agent,
            run: self.run_id,
        };
        (self.session_id, call)
    }
}

/// The arguments of `record_tool_result`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResultArgs {
    /// The session, as given to check_tool_call.
    #[schema(min_length = 1, max_length = 256)]
    pub session_id: String,
    /// The run the call belongs to, as given to check_tool_call.
    pub run_id: Option<String>,
    /// The call id, as given to or returned by check_tool_call.
    pub id: Option<String>,
    /// The tool's name; required when `id` is absent.
    pub tool: Option<String>,
    /// The call's arguments as given to check_tool_call; required when `id`
    /// is absent.
    pub args: Option<Value>,
    /// The agent of the call, as given to check_tool_call.
    pub agent: Option<String>,
    /// What the tool returned (any JSON, for example a string or an
    /// object). Give this or `error`.
    #[serde(default, deserialize_with = "present")]
    pub result: Option<Value>,
    /// The tool's error message when it failed. Give this or `result`.
    pub error: Option<String>,
}

impl ResultArgs {
    /// The session and the result, as `POST /v1/sessions/{session}/results`
    /// reads them.
    pub fn into_result(self) -> (String, ResultInput) {
        let result = ResultInput {
            id: self.id,
            tool: self.tool,
            args: self.args,
            agent: self.agent,
            run: self.run_id,
            result: self.result,
            error: self.error,
        };
        (self.session_id, result)
    }
}

/// A field that is present, even as `null`, is `Some` (`result: null` is a
/// result).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// The arguments of `forget_session`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ForgetArgs {
    /// The session to forget, as given to check_tool_call.
    #[schema(min_length = 1, max_length = 256)]
    pub session_id: String,
}

/// The arguments of `check_transcript`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TranscriptArgs {
    /// The whole transcript as text: JSON lines or one JSON document (a JSON
    /// array or object serialised to a string).
    pub transcript: String,
    /// The transcript format; default auto (detected).
    #[schema(value_type = Option<deloop_core::loops::transcript::TranscriptFormat>)]
    pub format: Option<String>,
    /// The loop-detection profile; default: the server's profile. openclaw
    /// matches OpenClaw's tools.loopDetection; strict also ends runs on
    /// repeated failures.
    #[schema(value_type = Option<deloop_core::loops::Profile>)]
    pub profile: Option<String>,
}

impl TranscriptArgs {
    /// The transcript and the options, as `POST /v1/check` reads them.
    pub fn into_check(self) -> (String, CheckQuery) {
        let query = CheckQuery {
            format: self.format,
            profile: self.profile,
        };
        (self.transcript, query)
    }
}
