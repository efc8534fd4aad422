//! The tool calls of a streamed reply: their arguments watched as they
//! stream, and the calls judged before the agent can run them. The layer
//! sits in front of the text guard of [`crate::openai_stream`] /
//! [`crate::anthropic_stream`]: events in, events out.
//!
//! Calls are reassembled as they stream ([`OpenAiCalls`],
//! [`AnthropicCalls`]). Two checks, each optional:
//! * **arguments** (`proxy.tool_args_loops`, [`crate::tool_args`]): each
//!   call's argument text goes through the text guards as it arrives, and
//!   the calls of one choice are counted as they complete. On a loop the
//!   choice ends at once: the looping call is dropped (or its arguments
//!   closed into valid JSON with the marker), the calls after it too, and
//!   the choice ends with the configured `finish_reason` (`stop_reason`)
//!   and a `deloop.tool_call_cut` object; with every choice ended, the
//!   stream ends (usage chunk and `[DONE]`; Anthropic: `message_delta`,
//!   `message_stop`) and the text guard drops the upstream;
//! * **loops across turns** (`proxy.tool_loops`): the calls are judged
//!   against the request's history when the choice finishes (OpenAI
//!   `finish_reason`, Anthropic `message_delta`). Not critical: the held
//!   events go on unchanged. Critical (with `block`): the call deltas are
//!   dropped, and the choice ends with a content delta explaining the
//!   block, `finish_reason: "stop"` and a `deloop.tool_loop` object
//!   (Anthropic: a text block, then `message_delta` with `stop_reason:
//!   "end_turn"`).
//!
//! Either check holds the events of a choice's tool calls from its first
//! call delta until the choice finishes or is cut (a call cannot be judged
//! before its arguments are complete, and an agent runs calls only after
//! the reply ends, so holding them delays nothing the agent could use);
//! text before the calls streams at once. Only observing (`observe`,
//! arguments `off`) holds nothing.

mod anthropic;
mod openai;

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use deloop_core::repetition::ClampConfig;
use serde_json::{json, Map, Value};

use crate::api::Api;
use crate::sse::{event_bytes, SseEvent};
use crate::tool_args::{ArgsAction, CallsGuard, ToolCallCut};
use crate::tool_loops::{first_critical, worst, AnthropicCalls, History, LoopJudge, ReplyCall};
use crate::tool_reply::Found;

#[derive(Debug, Default)]
struct ChoiceCalls {
    calls: OpenAiCallsState,
    finished: bool,
    decided: bool,
    cut: bool,
}

type OpenAiCallsState = crate::tool_loops::OpenAiCalls;

/// How a stream's calls are judged against the history.
#[derive(Debug, Clone)]
pub struct Judging {
    /// The judge.
    pub judge: LoopJudge,
    /// The request's history.
    pub history: History,
    /// Block critical calls (else only observe).
    pub block: bool,
}

/// How the arguments of a stream's calls are watched.
#[derive(Debug, Clone)]
pub struct ArgsWatch {
    /// Drop or close a looping call.
    pub action: ArgsAction,
    /// The text guards' configuration.
    pub config: ClampConfig,
    /// The `finish_reason` (`stop_reason`) of a cut choice.
    pub end_reason: String,
}

/// The tool-call layer of one stream.
#[derive(Debug)]
pub struct ToolStream {
    api: Api,
    judging: Option<Judging>,
    args: Option<ArgsWatch>,
    hold: bool,
    n: usize,
    include_usage: bool,
    choices: BTreeMap<u64, ChoiceCalls>,
    guards: BTreeMap<u64, CallsGuard>,
    /// Choices (with calls or not) that finished or were cut.
    ended_choices: BTreeSet<u64>,
    meta: Map<String, Value>,
    usage: Option<Value>,
    anthropic: AnthropicCalls,
    decided: bool,
    /// The layer ended the stream (after a cut): later events are dropped.
    ended: bool,
    held: Vec<SseEvent>,
    found: Vec<Found>,
    cuts: Vec<ToolCallCut>,
}

fn event(name: Option<&str>, v: &Value) -> SseEvent {
    let data = v.to_string();
    SseEvent {
        raw: event_bytes(name, &data),
        event: name.map(String::from),
        data: Some(data),
    }
}

/// Puts `r` under `key` in the chunk's `deloop` object, keeping what is
/// there.
fn add_deloop(v: &mut Value, key: &str, r: Value) {
    match v.get_mut("deloop").filter(|d| d.is_object()) {
        Some(d) => d[key] = r,
        None => v["deloop"] = json!({ key: r }),
    }
}

impl ToolStream {
    /// A layer for a stream of `api` with `n` choices (`include_usage` as
    /// the request's `stream_options`): `judging` judges the calls against
    /// the history, `args` watches their arguments; `None` turns a check
    /// off.
    pub fn new(
        api: Api,
        judging: Option<Judging>,
        args: Option<ArgsWatch>,
        n: usize,
        include_usage: bool,
    ) -> Self {
        let hold = args.is_some() || judging.as_ref().is_some_and(|j| j.block);
        ToolStream {
            api,
            judging,
            args,
            hold,
            n: n.max(1),
            include_usage,
            choices: BTreeMap::new(),
            guards: BTreeMap::new(),
            ended_choices: BTreeSet::new(),
            meta: Map::new(),
            usage: None,
            anthropic: AnthropicCalls::default(),
            decided: false,
            ended: false,
            held: Vec::new(),
            found: Vec::new(),
            cuts: Vec::new(),
        }
    }

    /// The loops found so far, taken (for metrics).
    pub fn take_found(&mut self) -> Vec<Found> {
        std::mem::take(&mut self.found)
    }

    /// The calls cut so far, taken (for metrics).
    pub fn take_cuts(&mut self) -> Vec<ToolCallCut> {
        std::mem::take(&mut self.cuts)
    }

    /// Events held back, waiting for a decision.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Reads one upstream event; appends the events to pass on to `out`.
    pub fn on_event(&mut self, ev: SseEvent, out: &mut Vec<SseEvent>) {
        if self.ended {
            return;
        }
        match self.api {
            Api::OpenAi => self.on_openai(ev, out),
            Api::Anthropic => self.on_anthropic(ev, out),
        }
    }

    /// The upstream ended (`clean`: it closed the stream; else it failed).
    /// A clean end decides what is still held; a failed one drops it (the
    /// calls are incomplete, and the text guard ends the stream with the
    /// error).
    pub fn on_end(&mut self, clean: bool, out: &mut Vec<SseEvent>) {
        if self.ended {
            return;
        }
        if !clean {
            self.held.clear();
            return;
        }
        match self.api {
            Api::OpenAi => self.decide_openai(out),
            Api::Anthropic => {
                if !self.decided && !self.anthropic.is_empty() {
                    self.decide_anthropic(None, out);
                }
            }
        }
    }

    fn guard_for(&mut self, key: u64) -> Option<&mut CallsGuard> {
        let a = self.args.as_ref()?;
        Some(
            self.guards
                .entry(key)
                .or_insert_with(|| CallsGuard::new(a.action, a.config.clone())),
        )
    }

    fn end_reason(&self) -> String {
        self.args
            .as_ref()
            .map_or_else(|| "stop".to_string(), |a| a.end_reason.clone())
    }

    fn judge(&mut self, calls: &[ReplyCall]) -> Option<(ReplyCall, deloop_core::loops::Verdict)> {
        let j = self.judging.as_ref()?;
        if calls.is_empty() {
            return None;
        }
        let verdicts = j.judge.judge_calls(&j.history, calls);
        let critical = first_critical(calls, &verdicts)
            .filter(|_| j.block)
            .map(|(c, v)| (c.clone(), v.clone()));
        if let Some((c, v)) = worst(calls, &verdicts) {
            self.found.push(Found {
                tool: c.name.clone(),
                verdict: v.clone(),
                action: if critical.is_some() {
                    "blocked"
                } else {
                    "observed"
                },
            });
        }
        critical
    }
}

/// The bytes of events (for tests and the relay).
pub fn concat(events: &[SseEvent]) -> Bytes {
    let mut b = Vec::new();
    for e in events {
        b.extend_from_slice(&e.raw);
    }
    Bytes::from(b)
}

/// `s` cut to at most `n` bytes, on a character boundary.
fn prefix(s: &str, n: usize) -> &str {
    let mut n = n.min(s.len());
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    &s[..n]
}

#[cfg(test)]
mod tests;
