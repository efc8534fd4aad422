//! The Anthropic side of [`ToolStream`]: `tool_use` blocks and their
//! `input_json_delta` pieces.

use serde_json::{json, Value};

use super::{add_deloop, event, prefix, ToolStream};
use crate::sse::SseEvent;
use crate::tool_args::CallCut;
use crate::tool_loops::{block_message, verdict_json};

/// The key of the one message's argument guard.
const MESSAGE: u64 = 0;

impl ToolStream {
    pub(super) fn on_anthropic(&mut self, ev: SseEvent, out: &mut Vec<SseEvent>) {
        // Before any tool_use block, and after the decision, events pass
        // without a second parse (usage is read where it can be).
        let plain = ev
            .data
            .as_deref()
            .is_none_or(|d| memchr::memmem::find(d.as_bytes(), b"\"tool_use\"").is_none());
        if self.decided || (self.anthropic.is_empty() && plain) {
            if let Some(d) = ev.data.as_deref() {
                if memchr::memmem::find(d.as_bytes(), b"\"usage\"").is_some() {
                    self.read_usage(d);
                }
            }
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
                if let Some(cut) = self.watch_block(&kind, &v) {
                    self.held.push(ev);
                    self.cut_anthropic(cut, out);
                    return;
                }
                if self.hold && !self.anthropic.is_empty() {
                    self.held.push(ev);
                } else {
                    out.push(ev);
                }
            }
        }
    }

    fn read_usage(&mut self, data: &str) {
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            return;
        };
        let new = v.pointer("/message/usage").or_else(|| v.get("usage"));
        let Some(Value::Object(new)) = new else {
            return;
        };
        match self.usage.as_mut() {
            Some(Value::Object(old)) => {
                for (k, x) in new {
                    if !x.is_null() {
                        old.insert(k.clone(), x.clone());
                    }
                }
            }
            _ => self.usage = Some(Value::Object(new.clone())),
        }
    }

    /// The argument guard on a `tool_use` block's events.
    fn watch_block(&mut self, kind: &str, v: &Value) -> Option<CallCut> {
        self.args.as_ref()?;
        let index = v.get("index").and_then(Value::as_u64)?;
        let name = self.anthropic.name_at(index)?.to_string();
        match kind {
            "content_block_delta" => {
                let piece = v
                    .pointer("/delta/partial_json")
                    .and_then(Value::as_str)
                    .filter(|_| {
                        v.pointer("/delta/type").and_then(Value::as_str) == Some("input_json_delta")
                    })?;
                self.guard_for(MESSAGE)?.piece(index, &name, piece)
            }
            "content_block_stop" => {
                let call = self.anthropic.call_at(index)?;
                self.guard_for(MESSAGE)?
                    .complete(index, &call.name, &call.args)
            }
            _ => None,
        }
    }

    /// Ends the message at a cut: the cut block's held events are dropped
    /// (or its input closed and the block stopped), then `message_delta`
    /// with the end reason, the last usage and `deloop.tool_call_cut`
    /// (judged against the history as usual), then `message_stop`.
    fn cut_anthropic(&mut self, cut: CallCut, out: &mut Vec<SseEvent>) {
        let block = cut.call;
        let original = self.anthropic.args_text_at(block).to_string();
        let keep = cut.closed.as_ref().map(|c| c.keep);
        let mut offset = 0usize;
        for ev in std::mem::take(&mut self.held) {
            let Some(mut v) = ev
                .data
                .as_deref()
                .and_then(|d| serde_json::from_str::<Value>(d).ok())
            else {
                self.held.push(ev);
                continue;
            };
            let index = v.get("index").and_then(Value::as_u64);
            if index.is_none_or(|i| i < block) {
                self.held.push(ev);
                continue;
            }
            let Some(keep) = keep.filter(|_| index == Some(block)) else {
                continue;
            };
            match v.get("type").and_then(Value::as_str) {
                Some("content_block_start") => self.held.push(ev),
                Some("content_block_delta") => {
                    let piece = v
                        .pointer("/delta/partial_json")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let room = keep.saturating_sub(offset);
                    offset += piece.len();
                    if piece.len() <= room {
                        self.held.push(ev);
                    } else if room > 0 {
                        v["delta"]["partial_json"] = Value::String(prefix(&piece, room).into());
                        self.held.push(event(Some("content_block_delta"), &v));
                    }
                }
                _ => {}
            }
        }
        match &cut.closed {
            Some(closed) => {
                self.anthropic.set_args(block, closed.text(&original));
                self.held.push(event(
                    Some("content_block_delta"),
                    &json!({"type": "content_block_delta", "index": block,
                        "delta": {"type": "input_json_delta", "partial_json": closed.closing}}),
                ));
                self.held.push(event(
                    Some("content_block_stop"),
                    &json!({"type": "content_block_stop", "index": block}),
                ));
            }
            None => self.anthropic.remove(block),
        }
        let usage = self
            .usage
            .clone()
            .unwrap_or_else(|| json!({"output_tokens": 0}));
        let mut md = json!({"type": "message_delta",
            "delta": {"stop_reason": self.end_reason(), "stop_sequence": null},
            "usage": usage});
        add_deloop(
            &mut md,
            "tool_call_cut",
            serde_json::to_value(&cut.record).unwrap_or(Value::Null),
        );
        self.cuts.push(cut.record);
        let ev = event(Some("message_delta"), &md);
        self.decide_anthropic(Some((ev, md)), out);
        out.push(event(
            Some("message_stop"),
            &json!({"type": "message_stop"}),
        ));
        self.ended = true;
    }

    /// Judges the `tool_use` blocks; `delta` is the upstream's
    /// `message_delta` (`None`: it sent none, one is made).
    pub(super) fn decide_anthropic(
        &mut self,
        delta: Option<(SseEvent, Value)>,
        out: &mut Vec<SseEvent>,
    ) {
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
        add_deloop(
            &mut md,
            "tool_loop",
            verdict_json(&call.name, &verdict, "blocked"),
        );
        out.push(event(Some("message_delta"), &md));
    }
}
