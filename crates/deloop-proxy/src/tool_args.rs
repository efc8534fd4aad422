//! Loops inside a reply's tool calls (`proxy.tool_args_loops`): arguments
//! that degenerate while they stream, and one reply asking for the same
//! call many times. The guards are the core's
//! ([`deloop_core::repetition::ToolArgsWatcher`],
//! [`deloop_core::loops::reply_calls::ReplyCalls`]); this module applies
//! them to the calls of a choice ([`CallsGuard`], for the stream layer
//! [`crate::tool_stream`]) and to whole replies ([`guard_openai`],
//! [`guard_anthropic`]). Pure: values in, values out.
//!
//! A cut call is dropped (`drop`, the default: the agent does not run a
//! call whose arguments are a wall) or closed (`close`: its arguments end
//! where the loop was seen, with the guard's marker inside the string it
//! falls in, closed into valid JSON). Arguments that are not a JSON prefix
//! cannot be closed and are dropped. The calls after the cut one are
//! dropped too (a stream ends there), and the choice ends with the
//! configured `finish_reason` (`stop_reason`) and a `deloop.tool_call_cut`
//! object ([`ToolCallCut`]).

use bytes::Bytes;
use deloop_core::loops::reply_calls::{ReplyCalls, IDENTICAL_REPLY_CALLS};
use deloop_core::loops::Verdict;
use deloop_core::repetition::{ArgsCut, ClampConfig, ToolArgsWatcher};
use serde::Serialize;
use serde_json::{json, Value};

/// What happens to a call whose arguments loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgsAction {
    /// The call is removed from the reply.
    Drop,
    /// The call's arguments end at the cut, with the marker, as valid JSON.
    Close,
}

impl ArgsAction {
    /// Reads `drop` or `close` (`off` and anything else: `None`).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "drop" => Some(ArgsAction::Drop),
            "close" => Some(ArgsAction::Close),
            _ => None,
        }
    }
}

/// What the proxy did to a reply's tool calls, sent as
/// `deloop.tool_call_cut`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallCut {
    /// The cut call's tool.
    pub tool: String,
    /// The call's position among the choice's calls (from 0).
    pub call: usize,
    /// The detector: a text detector (`word_period`, `substring`, …) or
    /// `identical_reply_calls`.
    pub detector: String,
    /// `arguments` (the argument text), `values` (its decoded string
    /// values) or `calls` (identical calls).
    pub channel: &'static str,
    /// Byte offset in the call's argument text where the loop starts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<usize>,
    /// Bytes of argument text received past what was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed_bytes: Option<usize>,
    /// Copies of the call in the reply (identical calls).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// `dropped` or `closed`.
    pub action: &'static str,
}

impl ToolCallCut {
    fn args(tool: &str, call: usize, cut: &ArgsCut, closed: bool) -> Self {
        ToolCallCut {
            tool: tool.to_string(),
            call,
            detector: serde_json::to_value(cut.detector)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            channel: match cut.channel {
                deloop_core::repetition::ArgsChannel::Arguments => "arguments",
                deloop_core::repetition::ArgsChannel::Values => "values",
            },
            start: Some(cut.start),
            removed_bytes: Some(cut.removed_bytes()),
            count: None,
            action: if closed { "closed" } else { "dropped" },
        }
    }

    fn repeat(tool: &str, call: usize, v: &Verdict) -> Self {
        ToolCallCut {
            tool: tool.to_string(),
            call,
            detector: v.detector.map_or("", |d| d.as_str()).to_string(),
            channel: "calls",
            start: None,
            removed_bytes: None,
            count: v.count,
            action: "dropped",
        }
    }

    /// The response headers of a cut reply.
    pub fn headers(&self) -> [(&'static str, String); 2] {
        [
            ("x-deloop-tool-call-cut", self.action.to_string()),
            ("x-deloop-tool-call-cut-detector", self.detector.clone()),
        ]
    }
}

/// Logs a cut call and counts it in `metrics`: a looping argument text as
/// a loop cut (`deloop_loops_cut_total{source="proxy"}`, its bytes as
/// chars saved), identical calls as a reply tool loop
/// (`deloop_proxy_tool_loops_total{source="reply"}`).
pub fn log_cut(c: &ToolCallCut, metrics: Option<&deloop_http::metrics::Metrics>) {
    tracing::info!(
        tool = %c.tool,
        call = c.call,
        detector = %c.detector,
        channel = c.channel,
        action = c.action,
        removed_bytes = c.removed_bytes,
        count = c.count,
        "tool call cut"
    );
    if let Some(m) = metrics {
        match c.channel {
            "calls" => m.tool_loop("reply", "critical", &c.detector, c.action),
            _ => m.loop_cut("proxy", &c.detector, c.removed_bytes.unwrap_or(0) as u64),
        }
    }
}

/// A cut in a choice's calls: the call, what to keep of its arguments
/// (`None`: drop it), and the record.
#[derive(Debug, Clone)]
pub struct CallCut {
    /// The call's position (OpenAI) or block index (Anthropic).
    pub call: u64,
    /// The new argument text (kept prefix + closing), when closed.
    pub closed: Option<ClosedArgs>,
    /// The record.
    pub record: ToolCallCut,
}

/// The arguments of a closed call.
#[derive(Debug, Clone)]
pub struct ClosedArgs {
    /// Bytes of the original argument text kept.
    pub keep: usize,
    /// What follows them (marker and closing).
    pub closing: String,
}

impl ClosedArgs {
    /// The whole new argument text, from the original.
    pub fn text(&self, original: &str) -> String {
        let mut keep = self.keep.min(original.len());
        while !original.is_char_boundary(keep) {
            keep -= 1;
        }
        format!("{}{}", &original[..keep], self.closing)
    }
}

/// The watch over one choice's tool calls (one Anthropic message): the
/// arguments of the call being written, and the calls completed so far.
#[derive(Debug)]
pub struct CallsGuard {
    action: ArgsAction,
    config: ClampConfig,
    open: Option<(u64, ToolArgsWatcher)>,
    counted: ReplyCalls,
    /// Position of the next completed call (for the record).
    completed: usize,
    /// Calls already completed (a server that interleaves the deltas of
    /// parallel calls completes one several times; it is counted once).
    done: std::collections::BTreeSet<u64>,
}

impl CallsGuard {
    /// A guard that acts as `action`, with the text guards' `config`.
    pub fn new(action: ArgsAction, config: ClampConfig) -> Self {
        CallsGuard {
            action,
            config,
            open: None,
            counted: ReplyCalls::new(IDENTICAL_REPLY_CALLS),
            completed: 0,
            done: std::collections::BTreeSet::new(),
        }
    }

    /// The call whose arguments are watched, if any.
    pub fn open_call(&self) -> Option<u64> {
        self.open.as_ref().map(|(c, _)| *c)
    }

    /// True while the arguments of `call` are watched.
    pub fn is_open(&self, call: u64) -> bool {
        self.open.as_ref().is_some_and(|(c, _)| *c == call)
    }

    /// A piece of the arguments of `call` (`tool` its name). A different
    /// call than the open one starts a new watch (the caller completes the
    /// open one first).
    pub fn piece(&mut self, call: u64, tool: &str, piece: &str) -> Option<CallCut> {
        if !self.is_open(call) {
            self.open = Some((call, ToolArgsWatcher::new(self.config.clone())));
        }
        let (_, w) = self.open.as_mut()?;
        w.push(piece)?;
        self.args_cut(tool)
    }

    /// The call `call` is complete (`tool` and `args`, its name and
    /// arguments): the guards' last verdict on its arguments, then the
    /// count of identical calls.
    pub fn complete(&mut self, call: u64, tool: &str, args: &Value) -> Option<CallCut> {
        if self.is_open(call) {
            let fired = self
                .open
                .as_mut()
                .and_then(|(_, w)| w.finish().map(|_| ()))
                .is_some();
            if fired {
                return self.args_cut(tool);
            }
            self.open = None;
        }
        if self.done.len() >= crate::tool_loops::MAX_STREAM_CALLS || !self.done.insert(call) {
            return None;
        }
        let pos = self.completed;
        self.completed += 1;
        let v = self.counted.push(tool, args)?;
        Some(CallCut {
            call,
            closed: None,
            record: ToolCallCut::repeat(tool, pos, &v),
        })
    }

    fn args_cut(&mut self, tool: &str) -> Option<CallCut> {
        let (call, w) = self.open.take()?;
        let cut = w.cut()?;
        let closed = match self.action {
            ArgsAction::Close => w.closing().map(|closing| ClosedArgs {
                keep: cut.keep,
                closing,
            }),
            ArgsAction::Drop => None,
        };
        let record = ToolCallCut::args(tool, self.completed, cut, closed.is_some());
        Some(CallCut {
            call,
            closed,
            record,
        })
    }
}

/// What the guard made of a whole reply.
#[derive(Debug, Default)]
pub struct ArgsReply {
    /// The new body, when a call was cut.
    pub body: Option<Bytes>,
    /// The cuts (one per choice at most).
    pub cuts: Vec<ToolCallCut>,
}

/// Checks a whole list of calls (`(name, argument text)`): the first cut,
/// with the new argument text of a closed call.
fn check_calls(
    calls: &[(String, String)],
    action: ArgsAction,
    config: &ClampConfig,
) -> Option<(usize, Option<String>, ToolCallCut)> {
    let mut counted = ReplyCalls::new(IDENTICAL_REPLY_CALLS);
    for (pos, (name, args)) in calls.iter().enumerate() {
        let w = ToolArgsWatcher::check(args, config);
        if let Some(cut) = w.cut() {
            let closed = match action {
                ArgsAction::Close => w.closing().map(|c| format!("{}{c}", w.kept())),
                ArgsAction::Drop => None,
            };
            let record = ToolCallCut::args(name, pos, cut, closed.is_some());
            return Some((pos, closed, record));
        }
        let parsed = crate::tool_loops::parse_args(args);
        if let Some(v) = counted.push(name, &parsed) {
            return Some((pos, None, ToolCallCut::repeat(name, pos, &v)));
        }
    }
    None
}

fn set_cut(v: &mut Value, record: &ToolCallCut) {
    let r = serde_json::to_value(record).unwrap_or(Value::Null);
    match v.get_mut("deloop").filter(|d| d.is_object()) {
        Some(d) => d["tool_call_cut"] = r,
        None => v["deloop"] = json!({ "tool_call_cut": r }),
    }
}

/// Guards the tool calls of an OpenAI chat completion body: a choice whose
/// call loops keeps the calls before it (and the closed call, with
/// `close`), and gets `end_reason` as its `finish_reason`.
pub fn guard_openai(
    body: &[u8],
    action: ArgsAction,
    config: &ClampConfig,
    end_reason: &str,
) -> ArgsReply {
    let mut out = ArgsReply::default();
    let Ok(mut v) = serde_json::from_slice::<Value>(body) else {
        return out;
    };
    let Some(choices) = v.get_mut("choices").and_then(Value::as_array_mut) else {
        return out;
    };
    for choice in choices.iter_mut() {
        let Some(list) = choice
            .pointer_mut("/message/tool_calls")
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        let calls: Vec<(String, String)> = list
            .iter()
            .map(|c| {
                let f = c.get("function");
                let name = f
                    .and_then(|f| f.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let args = match f.and_then(|f| f.get("arguments")) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                };
                (name, args)
            })
            .collect();
        let Some((pos, closed, record)) = check_calls(&calls, action, config) else {
            continue;
        };
        match closed {
            Some(text) => {
                list.truncate(pos + 1);
                if let Some(f) = list[pos].get_mut("function").filter(|f| f.is_object()) {
                    f["arguments"] = Value::String(text);
                }
            }
            None => list.truncate(pos),
        }
        if list.is_empty() {
            if let Some(m) = choice.get_mut("message").and_then(Value::as_object_mut) {
                m.remove("tool_calls");
            }
        }
        choice["finish_reason"] = json!(end_reason);
        out.cuts.push(record);
    }
    if let Some(first) = out.cuts.first().cloned() {
        set_cut(&mut v, &first);
        out.body = Some(Bytes::from(v.to_string()));
    }
    out
}

/// Guards the `tool_use` blocks of an Anthropic Messages body: the blocks
/// from the looping call on are removed (with `close`, the looping call
/// stays with its input closed), and `stop_reason` becomes `end_reason`.
pub fn guard_anthropic(
    body: &[u8],
    action: ArgsAction,
    config: &ClampConfig,
    end_reason: &str,
) -> ArgsReply {
    let mut out = ArgsReply::default();
    let Ok(mut v) = serde_json::from_slice::<Value>(body) else {
        return out;
    };
    let Some(content) = v.get_mut("content").and_then(Value::as_array_mut) else {
        return out;
    };
    let at: Vec<usize> = content
        .iter()
        .enumerate()
        .filter(|(_, b)| b.get("type").and_then(Value::as_str) == Some("tool_use"))
        .map(|(i, _)| i)
        .collect();
    let calls: Vec<(String, String)> = at
        .iter()
        .map(|&i| {
            let b = &content[i];
            let name = b.get("name").and_then(Value::as_str).unwrap_or("");
            let input = b.get("input").map_or_else(|| "{}".into(), Value::to_string);
            (name.to_string(), input)
        })
        .collect();
    let Some((pos, closed, record)) = check_calls(&calls, action, config) else {
        return out;
    };
    let block = at[pos];
    match closed.and_then(|t| serde_json::from_str::<Value>(&t).ok()) {
        Some(input) => {
            content[block]["input"] = input;
            content.truncate(block + 1);
        }
        None => content.truncate(block),
    }
    v["stop_reason"] = json!(end_reason);
    v["stop_sequence"] = Value::Null;
    set_cut(&mut v, &record);
    out.cuts.push(record);
    out.body = Some(Bytes::from(v.to_string()));
    out
}

#[cfg(test)]
mod tests;
