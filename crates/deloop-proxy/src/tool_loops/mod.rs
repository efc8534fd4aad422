//! Tool-call loops seen through the proxy: pure functions, no I/O.
//!
//! Every chat request carries the agent's history. [`History::read`] turns
//! its messages into the typed events of [`deloop_core::loops::replay`]
//! (assistant `tool_calls` and `role: tool` results; Anthropic `tool_use`
//! and `tool_result` blocks), tolerantly: a message the parser refuses is
//! skipped and counted, never an error, since the request belongs to the
//! upstream. [`LoopJudge`] replays that history through a fresh
//! [`Guard`](deloop_core::loops::Guard) with the configured profile and
//! OpenClaw config (no state is shared between requests) and judges:
//! * the **history**: the verdicts of the latest assistant message's
//!   calls, the round the agent has just run ([`LoopJudge::history`]);
//! * the **reply**: the calls the model asks for now, judged in order
//!   against that history before the agent can run them
//!   ([`LoopJudge::judge_calls`]).
//!
//! One module per concern:
//! * `history`: the request's messages read as replay events ([`History`]);
//! * `judge`: the replay and its verdicts ([`LoopJudge`], [`ReplyCall`]);
//! * `reassembly`: the reply's calls, from stream deltas ([`OpenAiCalls`]:
//!   deltas by index, a new `id` starts a new call even at a reused index, a
//!   name resent in every chunk is kept once; [`AnthropicCalls`]:
//!   `input_json_delta`) or from a whole message;
//! * `notes`: the texts the model is given ([`warning_note`],
//!   [`block_message`]);
//! * `splice`: the byte-exact splice that appends the note to the request
//!   ([`append_message`]).
//!
//! This module keeps what the proxy does about a loop
//! ([`ToolLoopAction`]) and how it reports one ([`log_found`]).
//!
//! ```
//! use deloop_core::loops::{Level, LoopConfig, Profile};
//! use deloop_proxy::api::Api;
//! use deloop_proxy::tool_loops::{History, LoopJudge, ReplyCall};
//! use serde_json::json;
//!
//! let mut messages = vec![json!({"role": "user", "content": "list the files"})];
//! for i in 0..6 {
//!     messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
//!         {"id": format!("c{i}"), "type": "function",
//!          "function": {"name": "ls", "arguments": "{\"path\":\"/\"}"}}]}));
//!     messages.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": "a b"}));
//! }
//! let history = History::read(Api::OpenAi, &messages);
//! let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
//! assert_eq!(judge.history(&history).unwrap().verdict.level, Level::Warning);
//! let call = ReplyCall { id: Some("c6".into()), name: "ls".into(), args: json!({"path": "/"}) };
//! assert!(judge.judge_calls(&history, &[call])[0].level >= Level::Warning);
//! ```

mod history;
mod judge;
mod notes;
mod reassembly;
mod splice;

use deloop_core::loops::Verdict;

pub use history::History;
pub use judge::{first_critical, worst, LoopJudge, ReplyCall, RoundVerdict};
pub use notes::{block_message, excerpt_args, note_message, verdict_json, warning_note};
pub use reassembly::{
    anthropic_message_calls, openai_message_calls, parse_args, AnthropicCalls, OpenAiCalls,
    MAX_ARGS_BYTES, MAX_STREAM_CALLS,
};
pub use splice::append_message;

/// What the proxy does about a tool-call loop (`proxy.tool_loops`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ToolLoopAction {
    /// Metrics and `x-deloop-*` headers only.
    Observe,
    /// Also append a note to the request when the latest round of calls
    /// is at warning level or worse.
    Warn,
    /// Also replace the reply's tool calls by an explanation when one is
    /// critical.
    Block,
}

impl ToolLoopAction {
    /// Reads `observe`, `warn` or `block`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "observe" => Some(ToolLoopAction::Observe),
            "warn" => Some(ToolLoopAction::Warn),
            "block" => Some(ToolLoopAction::Block),
            _ => None,
        }
    }
}

/// Logs a loop found and counts it in `metrics` (`source`: `history` or
/// `reply`; `action`: `observed`, `warned`, `blocked`).
pub fn log_found(
    source: &str,
    tool: &str,
    v: &Verdict,
    action: &str,
    metrics: Option<&deloop_http::metrics::Metrics>,
) {
    let detector = v.detector.map_or("none", |d| d.as_str());
    tracing::info!(
        source,
        tool,
        level = v.level.as_str(),
        detector,
        count = v.count,
        action,
        "tool-call loop"
    );
    if let Some(m) = metrics {
        m.tool_loop(source, v.level.as_str(), detector, action);
    }
}

/// Request histories the tests of several modules share.
#[cfg(test)]
pub(crate) mod fixtures {
    use serde_json::{json, Value};

    pub(crate) fn openai_round(i: usize, tool: &str, args: &str, result: &str) -> [Value; 2] {
        [
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": format!("c{i}"), "type": "function",
                 "function": {"name": tool, "arguments": args}}]}),
            json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": result}),
        ]
    }

    pub(crate) fn repeated(n: usize) -> Vec<Value> {
        let mut m = vec![json!({"role": "user", "content": "go"})];
        for i in 0..n {
            m.extend(openai_round(i, "read", "{\"path\":\"/a\"}", "same"));
        }
        m
    }
}
