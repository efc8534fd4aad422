//! Judging the tool calls of a streamed reply, before the agent can run
//! them. The layer sits in front of the text guard of
//! [`crate::openai_stream`] / [`crate::anthropic_stream`]: events in,
//! events out.
//!
//! Calls are reassembled as they stream ([`OpenAiCalls`],
//! [`AnthropicCalls`]) and judged when the choice finishes (OpenAI
//! `finish_reason`, Anthropic `message_delta`). To observe, every event
//! passes at once. To block, the events of a choice's tool calls are held
//! from the first call delta until that decision (a call cannot be judged
//! before its arguments are complete, and an agent runs calls only after
//! the reply ends, so holding them delays nothing the agent could use):
//! * not critical: the held events go on, unchanged and in order;
//! * critical: the call deltas are dropped, and the choice ends with a
//!   content delta explaining the block, `finish_reason: "stop"` and a
//!   top-level `deloop.tool_loop` object (Anthropic: a text block, then
//!   `message_delta` with `stop_reason: "end_turn"`), so the stream stays
//!   well-formed for any SDK.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::api::Api;
use crate::sse::{event_bytes, SseEvent};
use crate::tool_loops::{
    block_message, first_critical, verdict_json, worst, AnthropicCalls, History, LoopJudge,
    OpenAiCalls, ReplyCall,
};
use crate::tool_reply::Found;

#[derive(Debug, Default)]
struct ChoiceCalls {
    calls: OpenAiCalls,
    finished: bool,
    decided: bool,
}

/// The tool-call layer of one stream.
#[derive(Debug)]
pub struct ToolStream {
    api: Api,
    judge: LoopJudge,
    history: History,
    block: bool,
    choices: BTreeMap<u64, ChoiceCalls>,
    meta: Map<String, Value>,
    anthropic: AnthropicCalls,
    decided: bool,
    held: Vec<SseEvent>,
    found: Vec<Found>,
}

fn event(name: Option<&str>, v: &Value) -> SseEvent {
    let data = v.to_string();
    SseEvent {
        raw: event_bytes(name, &data),
        event: name.map(String::from),
        data: Some(data),
    }
}

impl ToolStream {
    /// A layer for a stream of `api` whose request carried `history`;
    /// `block`: hold and block critical calls (else only observe).
    pub fn new(api: Api, judge: LoopJudge, history: History, block: bool) -> Self {
        ToolStream {
            api,
            judge,
            history,
            block,
            choices: BTreeMap::new(),
            meta: Map::new(),
            anthropic: AnthropicCalls::default(),
            decided: false,
            held: Vec::new(),
            found: Vec::new(),
        }
    }

    /// The loops found so far, taken (for metrics).
    pub fn take_found(&mut self) -> Vec<Found> {
        std::mem::take(&mut self.found)
    }

    /// Events held back, waiting for a decision.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Reads one upstream event; appends the events to pass on to `out`.
    pub fn on_event(&mut self, ev: SseEvent, out: &mut Vec<SseEvent>) {
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

    fn judge(&mut self, calls: &[ReplyCall]) -> Option<(ReplyCall, deloop_core::loops::Verdict)> {
        let verdicts = self.judge.judge_calls(&self.history, calls);
        let critical = first_critical(calls, &verdicts)
            .filter(|_| self.block)
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

    fn on_openai(&mut self, ev: SseEvent, out: &mut Vec<SseEvent>) {
        let Some(data) = ev.data.as_deref() else {
            out.push(ev);
            return;
        };
        if data.trim() == "[DONE]" {
            self.decide_openai(out);
            out.push(ev);
            return;
        }
        // The common case, a text delta before any call: no second parse.
        if self.choices.is_empty()
            && self.held.is_empty()
            && memchr::memmem::find(data.as_bytes(), b"\"tool_calls\"").is_none()
        {
            out.push(ev);
            return;
        }
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            // The text guard reports it; what is held goes first.
            self.decide_openai(out);
            out.push(ev);
            return;
        };
        if self.meta.is_empty() {
            for key in ["id", "object", "created", "model", "system_fingerprint"] {
                if let Some(x) = v.get(key) {
                    self.meta.insert(key.into(), x.clone());
                }
            }
        }
        let mut touches = false;
        if let Some(entries) = v.get("choices").and_then(Value::as_array) {
            for (pos, e) in entries.iter().enumerate() {
                let index = e.get("index").and_then(Value::as_u64).unwrap_or(pos as u64);
                if let Some(tc) = e.pointer("/delta/tool_calls").filter(|t| t.is_array()) {
                    if self.choices.len() < crate::openai_stream::MAX_CHOICES
                        || self.choices.contains_key(&index)
                    {
                        self.choices.entry(index).or_default().calls.push(tc);
                    }
                }
                if let Some(c) = self.choices.get_mut(&index) {
                    if !c.decided {
                        touches = true;
                        if e.get("finish_reason").is_some_and(|f| !f.is_null()) {
                            c.finished = true;
                        }
                    }
                }
            }
        }
        if !self.block {
            out.push(ev);
            let ready: Vec<u64> = self
                .choices
                .iter()
                .filter(|(_, c)| c.finished && !c.decided)
                .map(|(i, _)| *i)
                .collect();
            for i in ready {
                if let Some(c) = self.choices.get_mut(&i) {
                    c.decided = true;
                    let calls = c.calls.finish();
                    self.judge(&calls);
                }
            }
            return;
        }
        if touches || !self.held.is_empty() {
            self.held.push(ev);
        } else {
            out.push(ev);
        }
        let open = self.choices.values().any(|c| !c.decided && !c.finished);
        if !open {
            self.decide_openai(out);
        }
    }

    /// Judges every choice with calls not yet decided, and releases or
    /// rewrites what is held.
    fn decide_openai(&mut self, out: &mut Vec<SseEvent>) {
        let mut blocked: BTreeMap<u64, (ReplyCall, deloop_core::loops::Verdict)> = BTreeMap::new();
        let pending: Vec<u64> = self
            .choices
            .iter()
            .filter(|(_, c)| !c.decided)
            .map(|(i, _)| *i)
            .collect();
        for i in pending {
            let calls = match self.choices.get_mut(&i) {
                Some(c) => {
                    c.decided = true;
                    c.calls.finish()
                }
                None => continue,
            };
            if let Some(b) = self.judge(&calls) {
                blocked.insert(i, b);
            }
        }
        if blocked.is_empty() {
            out.append(&mut self.held);
            return;
        }
        let mut ended: Vec<u64> = Vec::new();
        for ev in std::mem::take(&mut self.held) {
            let Some(mut v) = ev
                .data
                .as_deref()
                .and_then(|d| serde_json::from_str::<Value>(d).ok())
            else {
                out.push(ev);
                continue;
            };
            let Some(entries) = v.get_mut("choices").and_then(Value::as_array_mut) else {
                out.push(ev);
                continue;
            };
            let mut changed = false;
            let mut report = None;
            let mut kept = Vec::with_capacity(entries.len());
            for (pos, mut e) in std::mem::take(entries).into_iter().enumerate() {
                let index = e.get("index").and_then(Value::as_u64).unwrap_or(pos as u64);
                let Some((call, verdict)) = blocked.get(&index) else {
                    kept.push(e);
                    continue;
                };
                changed = true;
                if let Some(d) = e.get_mut("delta").and_then(Value::as_object_mut) {
                    d.remove("tool_calls");
                    d.remove("function_call");
                }
                if e.get("finish_reason").is_some_and(|f| !f.is_null()) {
                    e["finish_reason"] = json!("stop");
                    if let Some(d) = e.get_mut("delta").and_then(Value::as_object_mut) {
                        d.insert(
                            "content".into(),
                            Value::String(block_message(&call.name, &call.args, verdict)),
                        );
                    } else {
                        e["delta"] = json!({
                            "content": block_message(&call.name, &call.args, verdict)
                        });
                    }
                    report = Some(verdict_json(&call.name, verdict, "blocked"));
                    ended.push(index);
                    kept.push(e);
                } else {
                    let empty = e
                        .get("delta")
                        .and_then(Value::as_object)
                        .is_none_or(|d| d.values().all(Value::is_null));
                    if !empty {
                        kept.push(e);
                    }
                }
            }
            if !changed {
                *entries = kept;
                out.push(ev);
                continue;
            }
            let has_usage = v.get("usage").is_some_and(|u| !u.is_null());
            if kept.is_empty() && !has_usage {
                continue;
            }
            v["choices"] = Value::Array(kept);
            if let Some(r) = report {
                v["deloop"] = json!({"tool_loop": r});
            }
            out.push(event(None, &v));
        }
        // A blocked choice whose finish the upstream never sent.
        for (index, (call, verdict)) in &blocked {
            if ended.contains(index) {
                continue;
            }
            let mut chunk = self.meta.clone();
            chunk.insert(
                "choices".into(),
                json!([{"index": index, "delta": {
                    "content": block_message(&call.name, &call.args, verdict)},
                    "logprobs": null, "finish_reason": "stop"}]),
            );
            chunk.insert(
                "deloop".into(),
                json!({"tool_loop": verdict_json(&call.name, verdict, "blocked")}),
            );
            out.push(event(None, &Value::Object(chunk)));
        }
    }

    fn on_anthropic(&mut self, ev: SseEvent, out: &mut Vec<SseEvent>) {
        // Before any tool_use block, and after the decision, events pass
        // without a second parse.
        let plain = ev
            .data
            .as_deref()
            .is_none_or(|d| memchr::memmem::find(d.as_bytes(), b"\"tool_use\"").is_none());
        if self.decided || (self.anthropic.is_empty() && plain) {
            out.push(ev);
            return;
        }
        let Some(v) = ev
            .data
            .as_deref()
            .and_then(|d| serde_json::from_str::<Value>(d).ok())
        else {
            out.push(ev);
            return;
        };
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .or(ev.event.as_deref())
            .unwrap_or("")
            .to_owned();
        if self.decided {
            out.push(ev);
            return;
        }
        match kind.as_str() {
            "message_delta" if !self.anthropic.is_empty() => {
                self.decide_anthropic(Some((ev, v)), out);
            }
            "message_stop" if !self.anthropic.is_empty() => {
                self.decide_anthropic(None, out);
                out.push(ev);
            }
            "ping" => out.push(ev),
            _ => {
                self.anthropic.on_event(&v);
                if self.block && !self.anthropic.is_empty() {
                    self.held.push(ev);
                } else {
                    out.push(ev);
                }
            }
        }
    }

    /// Judges the `tool_use` blocks; `delta` is the upstream's
    /// `message_delta` (`None`: it sent none, one is made).
    fn decide_anthropic(&mut self, delta: Option<(SseEvent, Value)>, out: &mut Vec<SseEvent>) {
        self.decided = true;
        let calls = self.anthropic.finish();
        let Some((call, verdict)) = self.judge(&calls) else {
            out.append(&mut self.held);
            if let Some((ev, _)) = delta {
                out.push(ev);
            }
            return;
        };
        let tool_blocks = self.anthropic.indexes();
        let first = tool_blocks.iter().copied().min().unwrap_or(0);
        for ev in std::mem::take(&mut self.held) {
            let index = ev
                .data
                .as_deref()
                .and_then(|d| serde_json::from_str::<Value>(d).ok())
                .and_then(|v| v.get("index").and_then(Value::as_u64));
            if index.is_some_and(|i| tool_blocks.contains(&i)) {
                continue;
            }
            out.push(ev);
        }
        let text = block_message(&call.name, &call.args, &verdict);
        out.push(event(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": first,
                "content_block": {"type": "text", "text": ""}}),
        ));
        out.push(event(
            Some("content_block_delta"),
            &json!({"type": "content_block_delta", "index": first,
                "delta": {"type": "text_delta", "text": text}}),
        ));
        out.push(event(
            Some("content_block_stop"),
            &json!({"type": "content_block_stop", "index": first}),
        ));
        let mut md = match delta {
            Some((_, v)) => v,
            None => json!({"type": "message_delta", "delta": {}, "usage": {"output_tokens": 0}}),
        };
        if !md.get("delta").is_some_and(Value::is_object) {
            md["delta"] = json!({});
        }
        md["delta"]["stop_reason"] = json!("end_turn");
        md["delta"]["stop_sequence"] = Value::Null;
        md["deloop"] = json!({"tool_loop": verdict_json(&call.name, &verdict, "blocked")});
        out.push(event(Some("message_delta"), &md));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::SseReader;
    use deloop_core::loops::{LoopConfig, Profile};

    fn history(n: usize) -> History {
        let mut m = vec![json!({"role": "user", "content": "go"})];
        for i in 0..n {
            m.push(json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": format!("c{i}"), "type": "function",
                 "function": {"name": "read", "arguments": "{\"path\":\"/a\"}"}}]}));
            m.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": "same"}));
        }
        History::read(Api::OpenAi, &m)
    }

    fn chunk(choice: Value) -> String {
        format!(
            "data: {}\n\n",
            json!({"id": "s", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [choice]})
        )
    }

    fn run(layer: &mut ToolStream, text: &str) -> String {
        let mut reader = SseReader::new(1 << 20);
        let mut evs = Vec::new();
        reader.push(text.as_bytes(), &mut evs).unwrap();
        let mut out = Vec::new();
        for e in evs {
            layer.on_event(e, &mut out);
        }
        layer.on_end(true, &mut out);
        String::from_utf8(concat(&out).to_vec()).unwrap()
    }

    fn openai_calls_stream(index_for_second: u64) -> String {
        let mut s = chunk(
            json!({"index": 0, "delta": {"role": "assistant", "content": null,
            "tool_calls": [{"index": 0, "id": "a", "type": "function",
              "function": {"name": "read", "arguments": ""}}]}, "finish_reason": null}),
        );
        for piece in ["{\"path\"", ":\"/a\"}"] {
            s += &chunk(json!({"index": 0, "delta": {"tool_calls": [{"index": 0,
                "function": {"name": "read", "arguments": piece}}]}, "finish_reason": null}));
        }
        s += &chunk(
            json!({"index": 0, "delta": {"tool_calls": [{"index": index_for_second,
            "id": "b", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
            "finish_reason": null}),
        );
        s += &chunk(json!({"index": 0, "delta": {}, "finish_reason": "tool_calls"}));
        s += "data: [DONE]\n\n";
        s
    }

    #[test]
    fn observe_passes_every_byte() {
        let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
        let mut layer = ToolStream::new(Api::OpenAi, judge, history(25), false);
        let input = openai_calls_stream(0);
        assert_eq!(run(&mut layer, &input), input);
        let found = layer.take_found();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].tool, "read");
        assert!(found[0].verdict.is_critical());
    }

    #[test]
    fn block_replaces_calls_with_index_reuse() {
        let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
        for second in [0, 1] {
            let mut layer = ToolStream::new(Api::OpenAi, judge.clone(), history(25), true);
            let out = run(&mut layer, &openai_calls_stream(second));
            assert!(!out.contains("tool_calls\":["), "{out}");
            assert!(out.contains("\"finish_reason\":\"stop\""), "{out}");
            assert!(out.contains("\"tool_loop\""), "{out}");
            assert!(out.ends_with("data: [DONE]\n\n"));
            assert_eq!(layer.take_found()[0].action, "blocked");
        }
        // A healthy history: the held events go on unchanged.
        let mut layer = ToolStream::new(Api::OpenAi, judge, history(1), true);
        let input = openai_calls_stream(0);
        assert_eq!(run(&mut layer, &input), input);
        assert!(layer.take_found().is_empty());
    }

    #[test]
    fn text_before_the_calls_streams_at_once_and_stays() {
        let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
        let mut layer = ToolStream::new(Api::OpenAi, judge, history(25), true);
        let text = chunk(json!({"index": 0, "delta": {"role": "assistant",
            "content": "Let me look again."}, "finish_reason": null}));
        let mut reader = SseReader::new(1 << 20);
        let mut evs = Vec::new();
        reader.push(text.as_bytes(), &mut evs).unwrap();
        let mut out = Vec::new();
        for e in evs {
            layer.on_event(e, &mut out);
        }
        assert_eq!(String::from_utf8(concat(&out).to_vec()).unwrap(), text);
        let rest = run(&mut layer, &openai_calls_stream(0));
        assert!(rest.contains("did not run the tool call `read`"), "{rest}");
        // The synthesized parts carry the stream's id.
        assert!(rest.contains("\"id\":\"s\""));
    }

    #[test]
    fn anthropic_block() {
        let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
        let ev = |name: &str, v: Value| format!("event: {name}\ndata: {v}\n\n");
        let mut s = ev(
            "message_start",
            json!({"type": "message_start", "message": {"id": "m",
            "type": "message", "role": "assistant", "content": [], "model": "c",
            "usage": {"input_tokens": 1, "output_tokens": 0}}}),
        );
        s += &ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": "t", "name": "read", "input": {}}}),
        );
        for p in ["{\"path\": ", "\"/a\"}"] {
            s += &ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": p}}),
            );
        }
        s += &ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        );
        s += &ev(
            "message_delta",
            json!({"type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": null},
            "usage": {"output_tokens": 9}}),
        );
        s += &ev("message_stop", json!({"type": "message_stop"}));
        let mut layer = ToolStream::new(Api::Anthropic, judge.clone(), history(25), true);
        let out = run(&mut layer, &s);
        assert!(!out.contains("tool_use\""), "{out}");
        assert!(out.contains("\"stop_reason\":\"end_turn\""), "{out}");
        assert!(out.contains("text_delta"));
        assert!(out.contains("\"output_tokens\":9"));
        assert!(out.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
        let mut layer = ToolStream::new(Api::Anthropic, judge, history(25), false);
        assert_eq!(run(&mut layer, &s), s);
        assert!(layer.take_found()[0].verdict.is_critical());
    }

    #[test]
    fn failed_upstream_drops_held_calls() {
        let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
        let mut layer = ToolStream::new(Api::OpenAi, judge, history(25), true);
        let text = chunk(
            json!({"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "a",
            "function": {"name": "read", "arguments": "{"}}]}, "finish_reason": null}),
        );
        let mut reader = SseReader::new(1 << 20);
        let mut evs = Vec::new();
        reader.push(text.as_bytes(), &mut evs).unwrap();
        let mut out = Vec::new();
        for e in evs {
            layer.on_event(e, &mut out);
        }
        assert!(out.is_empty());
        assert_eq!(layer.held(), 1);
        layer.on_end(false, &mut out);
        assert!(out.is_empty() && layer.held() == 0);
    }
}
