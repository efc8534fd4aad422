//! Guarding a whole (non-streamed) reply: each choice's content and
//! reasoning (each Anthropic `text` and `thinking` block) is clamped by the
//! batch loop guard; a JSON reply is rescued, repaired and checked against
//! the request's schema. A changed reply says so in a top-level `deloop`
//! object and in `x-deloop-*` headers; an unchanged one is forwarded byte
//! for byte.
//!
//! ```
//! use deloop_proxy::guard::StreamSettings;
//! use deloop_proxy::openai_stream::Kind;
//! use deloop_proxy::reply::guard_openai;
//! let text = format!("Intro. {}", "over and over again we go ".repeat(40));
//! let body = serde_json::json!({
//!     "id": "c1", "object": "chat.completion", "created": 1, "model": "m",
//!     "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
//!                  "finish_reason": "length"}],
//! });
//! let out = guard_openai(Kind::Chat, body.to_string().as_bytes(), &StreamSettings::new("stop"));
//! let new: serde_json::Value = serde_json::from_slice(&out.body.unwrap()).unwrap();
//! assert!(new["choices"][0]["message"]["content"].as_str().unwrap().len() < text.len());
//! assert_eq!(new["choices"][0]["finish_reason"], "stop");
//! assert_eq!(new["deloop"]["cuts"][0]["index"], 0);
//! assert!(out.headers.iter().any(|(k, v)| *k == "x-deloop-cuts" && v == "1"));
//! ```

use bytes::Bytes;
use deloop_core::repetition::{clamp, ClampConfig};
use serde_json::{json, Map, Value};

use crate::guard::{Channel, CutRecord, StreamSettings};
use crate::json_reply::JsonReport;
use crate::openai_stream::Kind;

/// What the guard made of a reply.
#[derive(Debug, Default)]
pub struct Guarded {
    /// The new body, when the reply changed (`None`: forward the original).
    pub body: Option<Bytes>,
    /// `x-deloop-*` headers to add.
    pub headers: Vec<(&'static str, String)>,
    /// The cuts made.
    pub cuts: Vec<CutRecord>,
}

/// Clamps `text`; the clamped text and the cut, if the guard fired.
fn clamp_text(text: &str, config: &ClampConfig, channel: Channel) -> Option<(String, CutRecord)> {
    let out = clamp(text, config);
    let report = out.report()?.clone();
    // Characters of the original not kept: the output minus its marker.
    let mut kept = out.text.as_str();
    for marker in [&config.words.marker, &config.substring.marker] {
        if !marker.is_empty() {
            if let Some(k) = kept.strip_suffix(marker.as_str()) {
                kept = k;
                break;
            }
        }
    }
    let saved_chars = text.chars().count().saturating_sub(kept.chars().count());
    Some((
        out.text,
        CutRecord {
            detector: report.detector,
            start: report.start,
            saved_chars,
            channel,
            period: report.period,
            unit: report.unit.clone(),
            context: {
                let mut from = report.start.saturating_sub(300).min(text.len());
                while !text.is_char_boundary(from) {
                    from -= 1;
                }
                let mut to = report.start.saturating_add(300).min(text.len());
                while !text.is_char_boundary(to) {
                    to += 1;
                }
                text[from..to].to_string()
            },
        },
    ))
}

/// The guard's config for a JSON reply's content: no marker (it would
/// break the document; the repair closes it instead).
fn json_config(config: &ClampConfig) -> ClampConfig {
    let mut c = config.clone();
    c.words.marker.clear();
    c.substring.marker.clear();
    c
}

#[derive(Default)]
struct Findings {
    cuts: Vec<(String, usize, CutRecord)>,
    json: Vec<(usize, JsonReport)>,
}

impl Findings {
    fn into_guarded(self, mut v: Value) -> Guarded {
        if self.cuts.is_empty() && self.json.is_empty() {
            return Guarded::default();
        }
        // The body changes when the content did, or to report a failure;
        // a JSON reply found valid keeps its bytes (the headers say so).
        let rewrite = !self.cuts.is_empty()
            || self.json.iter().any(|(_, r)| {
                r.repaired || !r.valid || r.schema_valid == Some(false) || r.schema_error.is_some()
            });
        let mut headers = Vec::new();
        let mut deloop = Map::new();
        if !self.cuts.is_empty() {
            let saved: usize = self.cuts.iter().map(|(_, _, c)| c.saved_chars).sum();
            headers.push(("x-deloop-cuts", self.cuts.len().to_string()));
            headers.push(("x-deloop-saved-chars", saved.to_string()));
            let list: Vec<Value> = self
                .cuts
                .iter()
                .map(|(key, i, c)| {
                    let mut o = serde_json::to_value(c).unwrap_or(Value::Null);
                    o[key.as_str()] = json!(i);
                    o
                })
                .collect();
            deloop.insert("cuts".into(), Value::Array(list));
        }
        if !self.json.is_empty() {
            let worst = |f: &dyn Fn(&JsonReport) -> Option<&'static str>, order: &[&str]| {
                order
                    .iter()
                    .find(|o| self.json.iter().any(|(_, r)| f(r) == Some(**o)))
                    .map(|s| s.to_string())
            };
            if let Some(h) = worst(&|r| Some(r.header()), &["invalid", "repaired", "valid"]) {
                headers.push(("x-deloop-json", h));
            }
            if let Some(h) = worst(&|r| r.schema_header(), &["invalid", "unchecked", "valid"]) {
                headers.push(("x-deloop-json-schema", h));
            }
            let list: Vec<Value> = self
                .json
                .iter()
                .map(|(i, r)| {
                    let mut o = serde_json::to_value(r).unwrap_or(Value::Null);
                    o["index"] = json!(i);
                    o
                })
                .collect();
            deloop.insert("json".into(), Value::Array(list));
        }
        let body = rewrite.then(|| {
            if let Some(o) = v.as_object_mut() {
                o.insert("deloop".into(), Value::Object(deloop));
            }
            Bytes::from(v.to_string())
        });
        let cuts = self.cuts.into_iter().map(|(_, _, c)| c).collect();
        Guarded {
            body,
            headers,
            cuts,
        }
    }
}

/// Guards an OpenAI chat completion or completion body. A body that is not
/// a JSON object with `choices` is left alone.
pub fn guard_openai(kind: Kind, body: &[u8], settings: &StreamSettings) -> Guarded {
    let Ok(mut v) = serde_json::from_slice::<Value>(body) else {
        return Guarded::default();
    };
    let Some(choices) = v.get_mut("choices").and_then(Value::as_array_mut) else {
        return Guarded::default();
    };
    let json_clamp = settings.json.as_ref().map(|_| json_config(&settings.clamp));
    let mut found = Findings::default();
    for (pos, choice) in choices.iter_mut().enumerate() {
        let index = choice
            .get("index")
            .and_then(Value::as_u64)
            .map_or(pos, |i| i as usize);
        let mut cut_here = false;
        let container = match kind {
            Kind::Chat => choice.get_mut("message"),
            Kind::Completion => Some(&mut *choice),
        };
        let Some(container) = container.and_then(Value::as_object_mut) else {
            continue;
        };
        if settings.guard_reasoning && kind == Kind::Chat {
            for field in ["reasoning_content", "reasoning"] {
                let Some(text) = container.get(field).and_then(Value::as_str) else {
                    continue;
                };
                if let Some((new, cut)) = clamp_text(text, &settings.clamp, Channel::Reasoning) {
                    container.insert(field.into(), Value::String(new));
                    found.cuts.push(("index".into(), index, cut));
                    cut_here = true;
                    break;
                }
            }
        }
        let field = match kind {
            Kind::Chat => "content",
            Kind::Completion => "text",
        };
        if let Some(text) = container.get(field).and_then(Value::as_str) {
            let config = json_clamp.as_ref().unwrap_or(&settings.clamp);
            let mut text = text.to_owned();
            if let Some((new, cut)) = clamp_text(&text, config, Channel::Content) {
                text = new;
                container.insert(field.into(), Value::String(text.clone()));
                found.cuts.push(("index".into(), index, cut));
                cut_here = true;
            }
            if let Some(spec) = &settings.json {
                let (new, report) = spec.repair(&text);
                if let Some(new) = new {
                    container.insert(field.into(), Value::String(new));
                }
                found.json.push((index, report));
            }
        }
        if cut_here {
            choice["finish_reason"] = Value::String(settings.end_reason.clone());
        }
    }
    found.into_guarded(v)
}

/// Guards an Anthropic Messages body: every `text` and `thinking` block.
pub fn guard_anthropic(body: &[u8], settings: &StreamSettings) -> Guarded {
    let Ok(mut v) = serde_json::from_slice::<Value>(body) else {
        return Guarded::default();
    };
    let Some(blocks) = v.get_mut("content").and_then(Value::as_array_mut) else {
        return Guarded::default();
    };
    let mut found = Findings::default();
    for (i, block) in blocks.iter_mut().enumerate() {
        let (field, channel) = match block.get("type").and_then(Value::as_str) {
            Some("text") => ("text", Channel::Content),
            Some("thinking") if settings.guard_reasoning => ("thinking", Channel::Reasoning),
            _ => continue,
        };
        let Some(text) = block.get(field).and_then(Value::as_str) else {
            continue;
        };
        if let Some((new, cut)) = clamp_text(text, &settings.clamp, channel) {
            block[field] = Value::String(new);
            found.cuts.push(("block".into(), i, cut));
        }
    }
    if !found.cuts.is_empty() {
        v["stop_reason"] = Value::String(settings.end_reason.clone());
    }
    found.into_guarded(v)
}
