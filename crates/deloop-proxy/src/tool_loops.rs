//! Tool-call loops seen through the proxy: pure functions, no I/O.
//!
//! Every chat request carries the agent's history. [`History::read`] turns
//! its messages into the typed events of [`deloop_core::loops::replay`]
//! (assistant `tool_calls` and `role: tool` results; Anthropic `tool_use`
//! and `tool_result` blocks), tolerantly: a message the parser refuses is
//! skipped and counted, never an error, since the request belongs to the
//! upstream. [`LoopJudge`] replays that history through a fresh
//! [`Guard`] with the configured profile and OpenClaw config (no state is
//! shared between requests) and judges:
//! * the **history**: the verdicts of the latest assistant message's
//!   calls, the round the agent has just run ([`LoopJudge::history`]);
//! * the **reply**: the calls the model asks for now, judged in order
//!   against that history before the agent can run them
//!   ([`LoopJudge::judge_calls`]).
//!
//! Streamed calls are reassembled by [`OpenAiCalls`] (deltas by index; a
//! new `id` starts a new call even at a reused index; a name resent in
//! every chunk is kept once) and [`AnthropicCalls`] (`input_json_delta`).
//! The texts the model is given ([`warning_note`], [`block_message`]) and
//! the byte-exact splice that appends the note ([`append_message`]) live
//! here too.
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

use std::ops::Range;

use deloop_core::loops::replay::{CallVerdict, Event, Replay};
use deloop_core::loops::transcript::{message_events, TranscriptFormat};
use deloop_core::loops::{Guard, Level, LoopConfig, Profile, ToolCall, Verdict};
use serde_json::{json, Value};

use crate::api::Api;

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

/// Longest excerpt of a call's arguments quoted in a note.
const ARGS_EXCERPT: usize = 200;

/// The history of one request, as replay events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    /// The events, in message order.
    pub events: Vec<Event>,
    /// The call events (0-based among calls) of the latest assistant
    /// message, when it asked for tools.
    pub last_round: Range<usize>,
    /// Messages skipped because they could not be read (no role, a tool
    /// result without its call id, a call without a name, …).
    pub skipped: usize,
    /// The last message is the assistant's (a prefill): a note appended
    /// after it would change what the model continues, so none is.
    pub ends_with_assistant: bool,
}

impl History {
    /// Reads a request's `messages` (OpenAI chat or Anthropic Messages).
    /// Never fails: unreadable messages are skipped and counted.
    pub fn read(api: Api, messages: &[Value]) -> History {
        let format = match api {
            Api::OpenAi => TranscriptFormat::OpenAi,
            Api::Anthropic => TranscriptFormat::Anthropic,
        };
        let mut h = History::default();
        let mut calls = 0usize;
        for (i, m) in messages.iter().enumerate() {
            let is_assistant = m.get("role").and_then(Value::as_str) == Some("assistant");
            h.ends_with_assistant = is_assistant;
            match message_events(format, m, i + 1) {
                Ok(events) => {
                    let start = calls;
                    for e in events {
                        if matches!(e, Event::Call { .. }) {
                            calls += 1;
                        }
                        h.events.push(e);
                    }
                    if is_assistant {
                        h.last_round = start..calls;
                    }
                }
                Err(_) => {
                    h.skipped += 1;
                    if is_assistant {
                        h.last_round = calls..calls;
                    }
                }
            }
        }
        h
    }

    /// Reads the `messages` of a request body; an empty history when there
    /// are none.
    pub fn from_body(api: Api, body: &Value) -> History {
        match body.get("messages") {
            Some(Value::Array(m)) => History::read(api, m),
            _ => History::default(),
        }
    }

    /// Number of calls in the history.
    pub fn calls(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::Call { .. }))
            .count()
    }
}

/// A tool call the model asks for in its reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplyCall {
    /// The call id, when the server gave one.
    pub id: Option<String>,
    /// The tool's name.
    pub name: String,
    /// The arguments (a string that is not JSON is kept as a string).
    pub args: Value,
}

/// Arguments as sent on the wire: a JSON text, parsed when it is JSON.
pub fn parse_args(text: &str) -> Value {
    if text.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// Replays histories through a fresh guard per request.
#[derive(Debug, Clone)]
pub struct LoopJudge {
    profile: Profile,
    config: LoopConfig,
}

/// The worst of the latest round's verdicts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundVerdict {
    /// The call's tool, as written.
    pub tool: String,
    /// Its arguments, compact JSON, cut to a short excerpt.
    pub args: String,
    /// The verdict.
    pub verdict: Verdict,
}

impl LoopJudge {
    /// A judge with this profile and config.
    pub fn new(profile: Profile, config: LoopConfig) -> Self {
        LoopJudge { profile, config }
    }

    /// The profile.
    pub fn profile(&self) -> Profile {
        self.profile
    }

    fn replay(&self, history: &History) -> Replay {
        let mut r = Replay::new(Guard::new(self.profile, self.config.clone()));
        for e in &history.events {
            // A result for a call the history does not hold (trimmed
            // history) is ignored, as a runtime would.
            let _ = r.push(e.clone());
        }
        r
    }

    /// The worst verdict among the latest assistant message's calls (the
    /// first one at that level), `None` when it asked for none or all are
    /// ok.
    pub fn history(&self, history: &History) -> Option<RoundVerdict> {
        if history.last_round.is_empty() {
            return None;
        }
        let r = self.replay(history);
        let worst: &CallVerdict = r
            .verdicts()
            .iter()
            .filter(|v| history.last_round.contains(&v.index))
            .filter(|v| v.verdict.level > Level::Ok)
            .fold(None::<&CallVerdict>, |best, v| match best {
                Some(b) if b.verdict.level >= v.verdict.level => Some(b),
                _ => Some(v),
            })?;
        let args = history
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Call { args, .. } => Some(args),
                _ => None,
            })
            .nth(worst.index)
            .map(excerpt_args)
            .unwrap_or_default();
        Some(RoundVerdict {
            tool: worst.tool.to_string(),
            args,
            verdict: worst.verdict.clone(),
        })
    }

    /// The verdicts of the reply's calls, judged in order after the
    /// history (as the agent would run them).
    pub fn judge_calls(&self, history: &History, calls: &[ReplyCall]) -> Vec<Verdict> {
        if calls.is_empty() {
            return Vec::new();
        }
        let mut r = self.replay(history);
        calls
            .iter()
            .map(|c| {
                let mut call = ToolCall::new(&c.name, &c.args);
                if let Some(id) = &c.id {
                    call = call.id(id);
                }
                let i = r.push_call(&call);
                r.verdict(i)
                    .map(|v| v.verdict.clone())
                    .unwrap_or_else(Verdict::ok)
            })
            .collect()
    }
}

/// A call's arguments as compact JSON, cut at [`ARGS_EXCERPT`] characters.
pub fn excerpt_args(args: &Value) -> String {
    let s = args.to_string();
    if s.chars().count() <= ARGS_EXCERPT {
        return s;
    }
    let mut out: String = s.chars().take(ARGS_EXCERPT).collect();
    out.push('…');
    out
}

/// The note appended to a request whose latest round of calls repeats:
/// which call, what the guard saw, and what to do instead.
pub fn warning_note(round: &RoundVerdict) -> String {
    let v = &round.verdict;
    let what = match v.detector {
        Some(d) => d.as_str(),
        None => "loop",
    };
    let severity = if v.is_critical() {
        "is looping"
    } else {
        "is starting to loop"
    };
    format!(
        "[deloop loop guard] Your tool use {severity} ({what}). The repeating call is `{tool}` \
         with arguments {args}. {message} Do not make this call again with the same \
         arguments: use the results you already have, change the arguments or the approach, \
         or, if you are stuck, stop and tell the user what is blocking you.",
        tool = round.tool,
        args = round.args,
        message = v.message,
    )
}

/// The assistant text that replaces a blocked reply's tool calls.
pub fn block_message(tool: &str, args: &Value, v: &Verdict) -> String {
    format!(
        "[deloop loop guard] I did not run the tool call `{tool}` with arguments {args}: it \
         repeats a loop ({what}) and running it again would not make progress. {message} \
         The turn ends here; tell me how to continue, or change the task.",
        args = excerpt_args(args),
        what = v.detector.map_or("loop", |d| d.as_str()),
        message = v.message,
    )
}

/// The verdict as the `deloop.tool_loop` object of a changed reply.
pub fn verdict_json(tool: &str, v: &Verdict, action: &str) -> Value {
    json!({
        "tool": tool,
        "level": v.level.as_str(),
        "detector": v.detector.map(|d| d.as_str()),
        "count": v.count,
        "fingerprint": v.fingerprint,
        "action": action,
    })
}

/// Appends `message` at the end of the top-level `messages` array of a
/// JSON request body, leaving every other byte as it was (so a cached
/// prompt prefix stays valid). `None` when the body is not an object with
/// a `messages` array.
///
/// ```
/// use deloop_proxy::tool_loops::append_message;
/// let body = br#"{"model":"m", "messages": [ {"role":"user","content":"hi"} ] ,"n":1}"#;
/// let out = append_message(body, &serde_json::json!({"role": "user", "content": "note"})).unwrap();
/// assert_eq!(
///     std::str::from_utf8(&out).unwrap(),
///     r#"{"model":"m", "messages": [ {"role":"user","content":"hi"} ,{"role":"user","content":"note"}] ,"n":1}"#
/// );
/// ```
pub fn append_message(body: &[u8], message: &Value) -> Option<Vec<u8>> {
    let top: std::collections::HashMap<&str, &serde_json::value::RawValue> =
        serde_json::from_slice(body).ok()?;
    let raw = top.get("messages")?.get();
    let trimmed = raw.trim_end();
    if !trimmed.starts_with('[') || !trimmed.ends_with(']') {
        return None;
    }
    let start = (raw.as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
    let close = start + trimmed.len() - 1;
    if body.get(close) != Some(&b']') {
        return None;
    }
    let empty = trimmed[1..trimmed.len() - 1].trim().is_empty();
    let mut out = Vec::with_capacity(body.len() + 256);
    out.extend_from_slice(&body[..close]);
    if !empty {
        out.push(b',');
    }
    out.extend_from_slice(message.to_string().as_bytes());
    out.extend_from_slice(&body[close..]);
    Some(out)
}

/// The note as a message of the API: an OpenAI `user` message, or an
/// Anthropic `user` message with one text block (consecutive user turns
/// are merged by the Messages API).
pub fn note_message(api: Api, note: &str) -> Value {
    match api {
        Api::OpenAi => json!({"role": "user", "content": note}),
        Api::Anthropic => json!({"role": "user", "content": [{"type": "text", "text": note}]}),
    }
}

/// One call being reassembled from stream deltas.
#[derive(Debug, Clone, Default, PartialEq)]
struct Partial {
    index: Option<u64>,
    id: Option<String>,
    name: String,
    args: String,
}

/// Caps on what a reassembler keeps: calls per choice, and bytes of
/// arguments per call (beyond them the rest is dropped and the call is
/// judged on what was kept).
pub const MAX_STREAM_CALLS: usize = 1024;
/// See [`MAX_STREAM_CALLS`].
pub const MAX_ARGS_BYTES: usize = 4 << 20;

/// Reassembles one choice's streamed OpenAI `tool_calls` deltas.
///
/// ```
/// use deloop_proxy::tool_loops::OpenAiCalls;
/// use serde_json::json;
/// let mut calls = OpenAiCalls::default();
/// calls.push(&json!([{"index": 0, "id": "a", "function": {"name": "read", "arguments": "{\"p\""}}]));
/// calls.push(&json!([{"index": 0, "function": {"name": "read", "arguments": ":1}"}}]));
/// // A new id at the reused index 0 is a new call.
/// calls.push(&json!([{"index": 0, "id": "b", "function": {"name": "ls", "arguments": "{}"}}]));
/// let done = calls.finish();
/// assert_eq!(done.len(), 2);
/// assert_eq!((done[0].name.as_str(), &done[0].args), ("read", &json!({"p": 1})));
/// assert_eq!(done[1].id.as_deref(), Some("b"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct OpenAiCalls {
    calls: Vec<Partial>,
}

impl OpenAiCalls {
    /// Reads one delta's `tool_calls` value (anything that is not an array
    /// of objects is ignored).
    pub fn push(&mut self, tool_calls: &Value) {
        let Some(list) = tool_calls.as_array() else {
            return;
        };
        for (pos, d) in list.iter().enumerate() {
            if !d.is_object() {
                continue;
            }
            let index = d.get("index").and_then(Value::as_u64).or(Some(pos as u64));
            let id = d
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty());
            // The call this delta continues: the latest one at its index,
            // unless the delta brings an id of its own that differs.
            let at = self.calls.iter().rposition(|c| c.index == index);
            let continues = match (at, id) {
                (Some(i), Some(id)) => self.calls[i].id.as_deref().is_none_or(|c| c == id),
                (Some(_), None) => true,
                (None, _) => false,
            };
            let i = match at {
                Some(i) if continues => i,
                _ => {
                    if self.calls.len() >= MAX_STREAM_CALLS {
                        continue;
                    }
                    self.calls.push(Partial {
                        index,
                        ..Partial::default()
                    });
                    self.calls.len() - 1
                }
            };
            let call = &mut self.calls[i];
            if call.id.is_none() {
                call.id = id.map(String::from);
            }
            let f = d.get("function");
            if let Some(name) = f.and_then(|f| f.get("name")).and_then(Value::as_str) {
                merge_name(&mut call.name, name);
            }
            match f.and_then(|f| f.get("arguments")) {
                Some(Value::String(s)) => push_capped(&mut call.args, s),
                // Non-string arguments (some servers send an object).
                Some(v @ (Value::Object(_) | Value::Array(_))) => {
                    call.args = v.to_string();
                    call.args.truncate(MAX_ARGS_BYTES.min(call.args.len()));
                }
                _ => {}
            }
        }
    }

    /// True when no call was seen.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// The calls, in the order they started.
    pub fn finish(&self) -> Vec<ReplyCall> {
        self.calls
            .iter()
            .map(|c| ReplyCall {
                id: c.id.clone(),
                name: c.name.clone(),
                args: parse_args(&c.args),
            })
            .collect()
    }
}

/// A name sent again whole is kept once; a name sent in pieces is joined.
fn merge_name(have: &mut String, piece: &str) {
    if have.is_empty() || piece.starts_with(have.as_str()) {
        if piece.len() <= 1024 {
            *have = piece.to_string();
        }
    } else if have.as_str() != piece && have.len() + piece.len() <= 1024 {
        have.push_str(piece);
    }
}

fn push_capped(buf: &mut String, s: &str) {
    if buf.len() + s.len() <= MAX_ARGS_BYTES {
        buf.push_str(s);
    } else {
        let mut room = MAX_ARGS_BYTES.saturating_sub(buf.len());
        while room > 0 && !s.is_char_boundary(room) {
            room -= 1;
        }
        buf.push_str(&s[..room]);
    }
}

/// Reassembles the `tool_use` blocks of an Anthropic stream
/// (`content_block_start`, `input_json_delta`, by block index).
///
/// ```
/// use deloop_proxy::tool_loops::AnthropicCalls;
/// use serde_json::json;
/// let mut calls = AnthropicCalls::default();
/// calls.on_event(&json!({"type": "content_block_start", "index": 1,
///     "content_block": {"type": "tool_use", "id": "t1", "name": "read", "input": {}}}));
/// calls.on_event(&json!({"type": "content_block_delta", "index": 1,
///     "delta": {"type": "input_json_delta", "partial_json": "{\"p\": "}}));
/// calls.on_event(&json!({"type": "content_block_delta", "index": 1,
///     "delta": {"type": "input_json_delta", "partial_json": "2}"}}));
/// let done = calls.finish();
/// assert_eq!(done[0].args, json!({"p": 2}));
/// ```
#[derive(Debug, Clone, Default)]
pub struct AnthropicCalls {
    calls: Vec<(Partial, Value, bool)>,
}

impl AnthropicCalls {
    /// Reads one event; true when it belongs to a `tool_use` block.
    pub fn on_event(&mut self, v: &Value) -> bool {
        let index = v.get("index").and_then(Value::as_u64);
        match v.get("type").and_then(Value::as_str) {
            Some("content_block_start") => {
                let b = v.get("content_block");
                if b.and_then(|b| b.get("type")).and_then(Value::as_str) != Some("tool_use") {
                    return false;
                }
                if self.calls.len() >= MAX_STREAM_CALLS {
                    return true;
                }
                let b = b.unwrap_or(&Value::Null);
                self.calls.push((
                    Partial {
                        index,
                        id: b.get("id").and_then(Value::as_str).map(String::from),
                        name: b
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .chars()
                            .take(1024)
                            .collect(),
                        args: String::new(),
                    },
                    b.get("input").cloned().unwrap_or(Value::Null),
                    false,
                ));
                true
            }
            Some("content_block_delta") | Some("content_block_stop") => {
                let Some(c) = self.calls.iter_mut().rev().find(|c| c.0.index == index) else {
                    return false;
                };
                if let Some(p) = v
                    .pointer("/delta/partial_json")
                    .and_then(Value::as_str)
                    .filter(|_| {
                        v.pointer("/delta/type").and_then(Value::as_str) == Some("input_json_delta")
                    })
                {
                    push_capped(&mut c.0.args, p);
                    c.2 = true;
                }
                true
            }
            _ => false,
        }
    }

    /// True when a `tool_use` block was seen.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// The block indexes of the `tool_use` blocks.
    pub fn indexes(&self) -> Vec<u64> {
        self.calls.iter().filter_map(|c| c.0.index).collect()
    }

    /// The calls (input from the deltas when there were any, else the
    /// start block's `input`).
    pub fn finish(&self) -> Vec<ReplyCall> {
        self.calls
            .iter()
            .map(|(p, input, streamed)| ReplyCall {
                id: p.id.clone(),
                name: p.name.clone(),
                args: if *streamed {
                    parse_args(&p.args)
                } else {
                    match input {
                        Value::Null => json!({}),
                        v => v.clone(),
                    }
                },
            })
            .collect()
    }
}

/// The calls of a whole OpenAI message (`tool_calls`).
pub fn openai_message_calls(message: &Value) -> Vec<ReplyCall> {
    let Some(list) = message.get("tool_calls").and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|c| {
            let f = c.get("function")?;
            let name = f.get("name").and_then(Value::as_str)?;
            let args = match f.get("arguments") {
                Some(Value::String(s)) => parse_args(s),
                Some(v) => v.clone(),
                None => json!({}),
            };
            Some(ReplyCall {
                id: c.get("id").and_then(Value::as_str).map(String::from),
                name: name.to_string(),
                args,
            })
        })
        .collect()
}

/// The calls of a whole Anthropic message (`tool_use` blocks).
pub fn anthropic_message_calls(content: &[Value]) -> Vec<ReplyCall> {
    content
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
        .filter_map(|b| {
            Some(ReplyCall {
                id: b.get("id").and_then(Value::as_str).map(String::from),
                name: b.get("name").and_then(Value::as_str)?.to_string(),
                args: b.get("input").cloned().unwrap_or_else(|| json!({})),
            })
        })
        .collect()
}

/// Logs a loop found and counts it in `metrics` (`source`: `history` or
/// `reply`; `action`: `observed`, `warned`, `blocked`).
pub fn log_found(
    source: &str,
    tool: &str,
    v: &Verdict,
    action: &str,
    metrics: Option<&deloop_server::metrics::Metrics>,
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

/// The first critical verdict of a reply's calls, with its call.
pub fn first_critical<'a>(
    calls: &'a [ReplyCall],
    verdicts: &'a [Verdict],
) -> Option<(&'a ReplyCall, &'a Verdict)> {
    calls.iter().zip(verdicts).find(|(_, v)| v.is_critical())
}

/// The worst of a reply's verdicts (first at its level).
pub fn worst<'a>(
    calls: &'a [ReplyCall],
    verdicts: &'a [Verdict],
) -> Option<(&'a ReplyCall, &'a Verdict)> {
    calls
        .iter()
        .zip(verdicts)
        .filter(|(_, v)| v.level > Level::Ok)
        .fold(None, |best: Option<(&ReplyCall, &Verdict)>, x| match best {
            Some(b) if b.1.level >= x.1.level => Some(b),
            _ => Some(x),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn openai_round(i: usize, tool: &str, args: &str, result: &str) -> [Value; 2] {
        [
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": format!("c{i}"), "type": "function",
                 "function": {"name": tool, "arguments": args}}]}),
            json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": result}),
        ]
    }

    fn repeated(n: usize) -> Vec<Value> {
        let mut m = vec![json!({"role": "user", "content": "go"})];
        for i in 0..n {
            m.extend(openai_round(i, "read", "{\"path\":\"/a\"}", "same"));
        }
        m
    }

    #[test]
    fn reads_openai_history_and_last_round() {
        let h = History::read(Api::OpenAi, &repeated(3));
        assert_eq!(h.calls(), 3);
        assert_eq!(h.last_round, 2..3);
        assert_eq!(h.skipped, 0);
        // A final assistant text message has no round.
        let mut m = repeated(3);
        m.push(json!({"role": "assistant", "content": "done"}));
        let h = History::read(Api::OpenAi, &m);
        assert!(h.last_round.is_empty());
        assert!(h.ends_with_assistant);
        assert!(!History::read(Api::OpenAi, &repeated(3)).ends_with_assistant);
    }

    #[test]
    fn reads_anthropic_history() {
        let mut m = vec![json!({"role": "user", "content": "go"})];
        for i in 0..3 {
            m.push(json!({"role": "assistant", "content": [
                {"type": "text", "text": "reading"},
                {"type": "tool_use", "id": format!("t{i}"), "name": "read", "input": {"p": 1}}]}));
            m.push(json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": format!("t{i}"), "content": "x"}]}));
        }
        let h = History::read(Api::Anthropic, &m);
        assert_eq!(h.calls(), 3);
        assert_eq!(h.last_round, 2..3);
    }

    #[test]
    fn hostile_messages_are_skipped_not_errors() {
        let m = vec![
            json!(3),
            json!({"content": "no role"}),
            json!({"role": "tool", "content": "no id"}),
            json!({"role": "assistant", "tool_calls": [{"id": "a"}]}),
            json!({"role": "assistant", "tool_calls": "nope"}),
            json!({"role": "assistant", "tool_calls": [
                {"function": {"name": "x", "arguments": {"not": "a string"}}},
                {"id": 7, "function": {"name": "y", "arguments": 12}}]}),
            json!({"role": "tool", "tool_call_id": "zzz", "content": {"deep": [[[1]]]}}),
        ];
        let h = History::read(Api::OpenAi, &m);
        assert_eq!(h.skipped, 5);
        assert_eq!(h.calls(), 2);
        let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
        assert_eq!(judge.history(&h), None);
        let v = judge.judge_calls(
            &h,
            &[ReplyCall {
                id: None,
                name: "x".into(),
                args: json!({"not": "a string"}),
            }],
        );
        assert_eq!(v[0].level, Level::Ok);
    }

    #[test]
    fn huge_history_is_linear_and_blocks() {
        let h = History::read(Api::OpenAi, &repeated(5000));
        assert_eq!(h.calls(), 5000);
        let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
        let round = judge.history(&h).unwrap();
        assert_eq!(round.verdict.level, Level::Critical);
        assert_eq!(round.tool, "read");
        let call = ReplyCall {
            id: Some("next".into()),
            name: "read".into(),
            args: json!({"path": "/a"}),
        };
        assert!(judge.judge_calls(&h, &[call])[0].is_critical());
    }

    #[test]
    fn deeply_nested_args_do_not_recurse_without_bound() {
        // serde_json refuses nesting over 128 levels when reading text;
        // built values can be deeper, and the guard caps hashing depth.
        let mut args = json!(1);
        for _ in 0..1000 {
            args = json!([args]);
        }
        let calls = vec![ReplyCall {
            id: None,
            name: "x".into(),
            args,
        }];
        let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
        let v = judge.judge_calls(&History::default(), &calls);
        assert_eq!(v[0].level, Level::Ok);
        let nested = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(parse_args(&nested), Value::String(nested.clone()));
    }

    #[test]
    fn ping_pong_history_warns_then_blocks() {
        let mut m = vec![json!({"role": "user", "content": "go"})];
        for i in 0..20 {
            let (tool, args) = if i % 2 == 0 {
                ("read", "{\"p\":1}")
            } else {
                ("list", "{\"d\":2}")
            };
            m.extend(openai_round(i, tool, args, "same"));
        }
        let h = History::read(Api::OpenAi, &m);
        let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
        let round = judge.history(&h).unwrap();
        assert!(round.verdict.level >= Level::Warning);
        let next = ReplyCall {
            id: None,
            name: "read".into(),
            args: json!({"p": 1}),
        };
        let v = &judge.judge_calls(&h, &[next])[0];
        assert!(v.is_critical(), "{v:?}");
    }

    #[test]
    fn notes_name_the_call_and_the_way_out() {
        let h = History::read(Api::OpenAi, &repeated(12));
        let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
        let round = judge.history(&h).unwrap();
        let note = warning_note(&round);
        assert!(note.contains("`read`"), "{note}");
        assert!(note.contains(r#"{"path":"/a"}"#), "{note}");
        assert!(note.contains("generic_repeat"), "{note}");
        assert!(note.contains("tell the user"), "{note}");
        let long = json!({"text": "x".repeat(10_000)});
        let msg = block_message("write", &long, &round.verdict);
        assert!(msg.len() < 2000 && msg.contains('…'));
    }

    #[test]
    fn append_message_edge_cases() {
        let m = json!({"role": "user", "content": "n"});
        assert_eq!(
            append_message(br#"{"messages":[]}"#, &m).unwrap(),
            format!(r#"{{"messages":[{m}]}}"#).into_bytes()
        );
        assert!(append_message(br#"{"messages":{}}"#, &m).is_none());
        assert!(append_message(br#"[1]"#, &m).is_none());
        assert!(append_message(b"not json", &m).is_none());
        assert!(append_message(br#"{"model":"m"}"#, &m).is_none());
        // Escaped strings and nested brackets inside the array.
        let body = br#"{"messages":[{"role":"user","content":"a ] \" ["}],"x":"]"}"#;
        let out = append_message(body, &m).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["messages"].as_array().unwrap().len(), 2);
        assert_eq!(v["x"], "]");
    }

    #[test]
    fn openai_reassembly_rules() {
        let mut c = OpenAiCalls::default();
        // The name resent in every chunk, arguments in pieces.
        for piece in ["{\"a\"", ":", "1}"] {
            c.push(&json!([{"index": 0, "id": "x", "type": "function",
                "function": {"name": "read", "arguments": piece}}]));
        }
        // Parallel calls at distinct indexes, interleaved.
        c.push(&json!([{"index": 1, "id": "y", "function": {"name": "ls", "arguments": ""}}]));
        c.push(&json!([{"index": 2, "id": "z", "function": {"name": "cat", "arguments": "{"}}]));
        c.push(&json!([{"index": 1, "function": {"arguments": "{}"}}]));
        c.push(&json!([{"index": 2, "function": {"arguments": "}"}}]));
        // A name sent in pieces.
        c.push(&json!([{"index": 3, "id": "w", "function": {"name": "get_"}}]));
        c.push(&json!([{"index": 3, "function": {"name": "weather", "arguments": "{}"}}]));
        // Garbage is ignored; an entry without a usable index counts by
        // its position (here 2, continuing `cat` with nothing).
        c.push(&json!("nope"));
        c.push(&json!([1, null, {"index": "x"}]));
        let done = c.finish();
        let names: Vec<&str> = done.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["read", "ls", "cat", "get_weather"]);
        assert_eq!(done[0].args, json!({"a": 1}));
        assert_eq!(done[1].args, json!({}));
        assert_eq!(done[2].args, json!({}));
    }

    proptest! {
        /// However a call's argument text is cut into deltas, with the name
        /// resent or not, reassembly gives the same calls; a new id at a
        /// reused index always starts a new call.
        #[test]
        fn reassembly_is_independent_of_chunking(
            args in proptest::collection::vec("[a-z0-9 {}:\",\\[\\]]{0,40}", 1..5),
            cuts in proptest::collection::vec(0usize..50, 0..6),
            resend in any::<bool>(),
            reuse_index in any::<bool>(),
        ) {
            let mut c = OpenAiCalls::default();
            for (k, a) in args.iter().enumerate() {
                let index = if reuse_index { 0 } else { k };
                let mut points: Vec<usize> = cuts.iter().map(|p| p % (a.len() + 1)).collect();
                points.push(0);
                points.push(a.len());
                points.sort_unstable();
                points.dedup();
                for (j, w) in points.windows(2).enumerate() {
                    let mut f = json!({"arguments": &a[w[0]..w[1]]});
                    if j == 0 || resend {
                        f["name"] = json!(format!("t{k}"));
                    }
                    let mut d = json!({"index": index, "function": f});
                    if j == 0 {
                        d["id"] = json!(format!("id{k}"));
                    }
                    c.push(&json!([d]));
                }
                if points.len() == 1 {
                    c.push(&json!([{"index": index, "id": format!("id{k}"),
                        "function": {"name": format!("t{k}"), "arguments": ""}}]));
                }
            }
            let done = c.finish();
            prop_assert_eq!(done.len(), args.len());
            for (k, (call, a)) in done.iter().zip(&args).enumerate() {
                prop_assert_eq!(&call.name, &format!("t{k}"));
                prop_assert_eq!(call.id.clone(), Some(format!("id{k}")));
                prop_assert_eq!(&call.args, &parse_args(a));
            }
        }

        /// Any JSON value as messages never panics, and the last round is
        /// within the calls read.
        #[test]
        fn any_messages_are_read(v in arb_json()) {
            let msgs = match v { Value::Array(a) => a, other => vec![other] };
            for api in [Api::OpenAi, Api::Anthropic] {
                let h = History::read(api, &msgs);
                prop_assert!(h.last_round.end <= h.calls());
                prop_assert!(h.skipped <= msgs.len());
                let judge = LoopJudge::new(Profile::Strict, LoopConfig::default());
                let _ = judge.history(&h);
            }
        }

        /// Appending keeps the original bytes as a prefix up to the array's
        /// end and yields a valid body with one more message.
        #[test]
        fn append_keeps_the_prefix(n in 0usize..5, pad in "[ \n]{0,3}", text in ".{0,20}") {
            let msgs: Vec<Value> = (0..n).map(|i| json!({"role": "user", "content": format!("{text}{i}")})).collect();
            let body = format!("{{\"model\":\"m\",\"messages\":{pad}{}{pad},\"z\":1}}", serde_json::to_string(&msgs).unwrap());
            let out = append_message(body.as_bytes(), &json!({"role": "user", "content": "note"})).unwrap();
            let close = body.find(&format!("{pad},\"z\"")).unwrap() - 1;
            prop_assert_eq!(&out[..close], &body.as_bytes()[..close]);
            let v: Value = serde_json::from_slice(&out).unwrap();
            prop_assert_eq!(v["messages"].as_array().unwrap().len(), n + 1);
            prop_assert_eq!(&v["z"], &json!(1));
        }
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            prop_oneof![
                Just("assistant"),
                Just("tool"),
                Just("user"),
                Just("tool_calls"),
                Just("function"),
                Just("name"),
                Just("arguments"),
                Just("tool_use"),
                Just("tool_result"),
                Just("id"),
                Just("x")
            ]
            .prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 64, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map(
                    prop_oneof![
                        Just("role".to_string()),
                        Just("content".to_string()),
                        Just("tool_calls".to_string()),
                        Just("function".to_string()),
                        Just("name".to_string()),
                        Just("arguments".to_string()),
                        Just("id".to_string()),
                        Just("tool_call_id".to_string()),
                        Just("type".to_string()),
                        Just("input".to_string()),
                        Just("tool_use_id".to_string())
                    ],
                    inner,
                    0..5
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
