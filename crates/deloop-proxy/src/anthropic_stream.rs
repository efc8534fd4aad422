//! Guarding an Anthropic Messages stream (`/v1/messages` with
//! `"stream": true`), event by event.
//!
//! Every `text` block is watched, and every `thinking` block (its
//! `thinking_delta`s) when reasoning is guarded; other blocks (`tool_use`,
//! …) pass through. An event the guard does not change is forwarded byte
//! for byte. When a block loops, its delta is truncated at the cut and the
//! marker appended; then the proxy closes the block (`content_block_stop`),
//! sends `message_delta` with the configured `stop_reason` (default
//! `end_turn`), the upstream's last usage counts and a `deloop` object
//! (`{detector, start, saved_chars, channel}`), then `message_stop`, and the
//! caller drops the upstream.
//!
//! Usage: `message_delta.usage.output_tokens` is required by the SDKs. After
//! a cut it carries the last counts the upstream reported (those of
//! `message_start`, or of an earlier `message_delta`), which undercount
//! what was generated before the cut; the proxy never estimates counts.

use bytes::Bytes;
use serde_json::{json, Value};

use crate::api::Api;
use crate::guard::{Channel, CutRecord, StreamSettings, Watched};
use crate::openai_stream::excerpt;
use crate::sse::{event_bytes, SseEvent};
use crate::Flow;

#[derive(Debug)]
struct Block {
    /// The block's `index`, as the upstream sent it.
    index: Value,
    /// The delta field watched: `text` or `thinking`.
    field: &'static str,
    /// The delta type carrying it: `text_delta` or `thinking_delta`.
    delta_type: &'static str,
    watched: Watched,
}

/// The guard of one Anthropic stream.
#[derive(Debug)]
pub struct AnthropicStream {
    settings: StreamSettings,
    open: Option<Block>,
    usage: Option<Value>,
    started: bool,
    cuts: Vec<CutRecord>,
    ended: bool,
}

impl AnthropicStream {
    /// A guard with these settings (`end_reason` is the `stop_reason`).
    pub fn new(settings: StreamSettings) -> Self {
        AnthropicStream {
            settings,
            open: None,
            usage: None,
            started: false,
            cuts: Vec::new(),
            ended: false,
        }
    }

    /// The cuts made so far, taken (for metrics).
    pub fn take_cuts(&mut self) -> Vec<CutRecord> {
        std::mem::take(&mut self.cuts)
    }

    /// True once the stream ended (`message_stop`, a cut, an error).
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// Reads one upstream event; appends what to forward to `out`.
    pub fn on_event(&mut self, ev: &SseEvent, out: &mut Vec<Bytes>) -> Flow {
        if self.ended {
            return Flow::Stop;
        }
        let Some(data) = ev.data.as_deref() else {
            out.push(ev.raw.clone());
            return Flow::Continue;
        };
        let mut v: Value = match serde_json::from_str(data) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                self.fail(
                    out,
                    &format!(
                        "the upstream sent a stream event whose data is not a JSON object: {}",
                        excerpt(data)
                    ),
                );
                return Flow::Stop;
            }
        };
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .or(ev.event.as_deref())
            .unwrap_or("")
            .to_owned();
        match kind.as_str() {
            "message_start" => {
                self.started = true;
                if let Some(u) = v.pointer("/message/usage").filter(|u| u.is_object()) {
                    self.usage = Some(u.clone());
                }
                out.push(ev.raw.clone());
            }
            "message_delta" => {
                if let (Some(Value::Object(new)), Some(Value::Object(old))) =
                    (v.get("usage"), self.usage.as_mut())
                {
                    for (k, x) in new {
                        if !x.is_null() {
                            old.insert(k.clone(), x.clone());
                        }
                    }
                }
                out.push(ev.raw.clone());
            }
            "message_stop" => {
                out.push(ev.raw.clone());
                self.ended = true;
                return Flow::Stop;
            }
            "content_block_start" => {
                let block_type = v
                    .pointer("/content_block/type")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let (field, delta_type, channel) = match block_type {
                    "text" => ("text", "text_delta", Channel::Content),
                    "thinking" if self.settings.guard_reasoning => {
                        ("thinking", "thinking_delta", Channel::Reasoning)
                    }
                    _ => {
                        self.open = None;
                        out.push(ev.raw.clone());
                        return Flow::Continue;
                    }
                };
                let mut block = Block {
                    index: v.get("index").cloned().unwrap_or(Value::Null),
                    field,
                    delta_type,
                    watched: Watched::new(&self.settings, channel),
                };
                // A block may start with text of its own.
                let initial = v
                    .pointer(&format!("/content_block/{field}"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                if initial.is_empty() {
                    out.push(ev.raw.clone());
                    self.open = Some(block);
                    return Flow::Continue;
                }
                let fed = block.watched.feed(&initial, None);
                if fed.text == initial {
                    out.push(ev.raw.clone());
                } else {
                    v["content_block"][field] = Value::String(fed.text);
                    out.push(event_bytes(Some("content_block_start"), &v.to_string()));
                }
                self.open = Some(block);
                if let Some(cut) = fed.cut {
                    self.end_cut(cut, out);
                    return Flow::Stop;
                }
            }
            "content_block_delta" => {
                let Some(block) = self
                    .open
                    .as_mut()
                    .filter(|b| Some(&b.index) == v.get("index"))
                else {
                    out.push(ev.raw.clone());
                    return Flow::Continue;
                };
                let is_watched =
                    v.pointer("/delta/type").and_then(Value::as_str) == Some(block.delta_type);
                let text = v
                    .pointer(&format!("/delta/{}", block.field))
                    .and_then(Value::as_str);
                let (true, Some(text)) = (is_watched, text) else {
                    out.push(ev.raw.clone());
                    return Flow::Continue;
                };
                let text = text.to_owned();
                let fed = block.watched.feed(&text, None);
                if fed.text == text {
                    out.push(ev.raw.clone());
                } else if !fed.text.is_empty() {
                    v["delta"][block.field] = Value::String(fed.text);
                    out.push(event_bytes(Some("content_block_delta"), &v.to_string()));
                }
                if let Some(cut) = fed.cut {
                    self.end_cut(cut, out);
                    return Flow::Stop;
                }
            }
            "content_block_stop" => {
                let matches = self
                    .open
                    .as_ref()
                    .is_some_and(|b| Some(&b.index) == v.get("index"));
                if matches {
                    if let Some(cut) = self.flush_open(out) {
                        self.end_cut(cut, out);
                        return Flow::Stop;
                    }
                    self.open = None;
                }
                out.push(ev.raw.clone());
            }
            _ => out.push(ev.raw.clone()),
        }
        Flow::Continue
    }

    /// The upstream ended (`error`: how it failed; `None`: it closed the
    /// stream). Appends the ending the client still needs.
    pub fn on_end(&mut self, error: Option<&str>, out: &mut Vec<Bytes>) {
        if self.ended {
            return;
        }
        if let Some(cut) = self.flush_open(out) {
            self.end_cut(cut, out);
            return;
        }
        let message = error.unwrap_or("the upstream closed the stream before message_stop");
        self.fail(out, message);
    }

    /// Forwards what exact mode held back of the open block; the guard's
    /// last verdict may cut it.
    fn flush_open(&mut self, out: &mut Vec<Bytes>) -> Option<CutRecord> {
        let block = self.open.as_mut()?;
        let fed = block.watched.finish(None);
        if !fed.text.is_empty() {
            let ev = json!({
                "type": "content_block_delta",
                "index": block.index,
                "delta": {"type": block.delta_type, block.field: fed.text},
            });
            out.push(event_bytes(Some("content_block_delta"), &ev.to_string()));
        }
        fed.cut
    }

    fn end_cut(&mut self, cut: CutRecord, out: &mut Vec<Bytes>) {
        if let Some(block) = self.open.take() {
            let stop = json!({"type": "content_block_stop", "index": block.index});
            out.push(event_bytes(Some("content_block_stop"), &stop.to_string()));
        }
        let usage = self
            .usage
            .clone()
            .unwrap_or_else(|| json!({"output_tokens": null}));
        let delta = json!({
            "type": "message_delta",
            "delta": {"stop_reason": self.settings.end_reason, "stop_sequence": null},
            "usage": usage,
            "deloop": cut,
        });
        out.push(event_bytes(Some("message_delta"), &delta.to_string()));
        out.push(event_bytes(
            Some("message_stop"),
            r#"{"type":"message_stop"}"#,
        ));
        self.cuts.push(cut);
        self.ended = true;
    }

    fn fail(&mut self, out: &mut Vec<Bytes>, message: &str) {
        out.push(Api::Anthropic.error_event("upstream_stream_error", message));
        self.ended = true;
    }
}
