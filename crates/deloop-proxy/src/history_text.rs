//! Looped assistant text sent back as history.
//!
//! When an answer loops until `max_tokens`, clients auto-continue: they
//! send the looped answer back as an assistant message, as an Anthropic
//! prefill (the last message, the assistant's), or as echoed reasoning
//! (`reasoning_content`). Forwarded byte for byte, that wall primes the
//! model to loop again. This module finds such text in a chat or Messages
//! request and, when asked, replaces the repeats with the text guard's
//! marker ([`deloop_core::repetition::clamp`]), leaving everything else of
//! the request as it was.
//!
//! Read: OpenAI `content` (a string, or `text` parts), `reasoning_content`
//! and `reasoning` strings; Anthropic `content` (a string, or `text`
//! blocks) and unsigned `thinking` blocks. A signed `thinking` block is
//! never changed (the signature covers its text) and never judged.

use deloop_core::repetition::{clamp, ClampConfig};
use serde_json::Value;

use crate::api::Api;

/// What to do with looped history text (`proxy.history_loops`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryLoopAction {
    /// Forward the request with the repeats replaced by the marker.
    Clamp,
    /// Forward the request as sent; report what was found.
    Pass,
    /// Refuse the request with a 400 that names the message.
    Reject,
}

impl HistoryLoopAction {
    /// Reads `proxy.history_loops` (validated by the config already).
    pub fn parse(s: &str) -> Option<HistoryLoopAction> {
        match s {
            "clamp" => Some(HistoryLoopAction::Clamp),
            "pass" => Some(HistoryLoopAction::Pass),
            "reject" => Some(HistoryLoopAction::Reject),
            _ => None,
        }
    }
}

/// One looped text of the history.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopedText {
    /// The message's index in `messages`.
    pub message: usize,
    /// Where the text is: `content`, `content[2]`, `reasoning_content`, …
    pub field: String,
    /// The detector that fired first.
    pub detector: String,
    /// Bytes the clamp removes.
    pub removed_bytes: usize,
}

impl LoopedText {
    /// `messages[3].content (word_period detector, 5,120 bytes of repeats)`.
    pub fn describe(&self) -> String {
        format!(
            "messages[{}].{} ({} detector, {} bytes of repeats)",
            self.message, self.field, self.detector, self.removed_bytes
        )
    }
}

/// What [`scan`] found, and the rewritten body when it clamped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistoryScan {
    /// Every looped text, in message order.
    pub found: Vec<LoopedText>,
    /// The request with the repeats replaced (only with `rewrite` and when
    /// something was found).
    pub body: Option<Vec<u8>>,
}

/// Looks for looped assistant text in `body` (a chat or Messages request);
/// with `rewrite`, also returns the body with each looped text clamped.
/// A body that is not a JSON object with `messages` finds nothing.
pub fn scan(api: Api, body: &[u8], config: &ClampConfig, rewrite: bool) -> HistoryScan {
    let mut out = HistoryScan::default();
    if body.trim_ascii_start().first() != Some(&b'{') {
        return out;
    }
    let Ok(mut v) = serde_json::from_slice::<Value>(body) else {
        return out;
    };
    let Some(Value::Array(messages)) = v.get_mut("messages") else {
        return out;
    };
    for (i, m) in messages.iter_mut().enumerate() {
        if m.get("role").and_then(Value::as_str) != Some("assistant") {
            continue;
        }
        for (field, text) in texts(api, m) {
            let clamped = clamp(text, config);
            let Some(report) = clamped.report() else {
                continue;
            };
            out.found.push(LoopedText {
                message: i,
                field,
                detector: serde_json::to_value(report.detector)
                    .ok()
                    .and_then(|d| d.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                removed_bytes: text.len().saturating_sub(clamped.text.len()),
            });
            if rewrite {
                *text = clamped.text;
            }
        }
    }
    if rewrite && !out.found.is_empty() {
        out.body = serde_json::to_vec(&v).ok();
    }
    out
}

/// The assistant texts of one message that may be judged and rewritten,
/// with where each is.
fn texts(api: Api, m: &mut Value) -> Vec<(String, &mut String)> {
    let mut out = Vec::new();
    let Value::Object(map) = m else {
        return out;
    };
    for (key, value) in map.iter_mut() {
        let reasoning = matches!(key.as_str(), "reasoning_content" | "reasoning");
        let content = key == "content";
        match value {
            Value::String(s) if content || (reasoning && api == Api::OpenAi) => {
                out.push((key.clone(), s));
            }
            Value::Array(parts) if content => {
                for (j, part) in parts.iter_mut().enumerate() {
                    if let Some((name, s)) = part_text(api, part) {
                        out.push((format!("content[{j}].{name}"), s));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The text of one content part: `text` of a text part; for Anthropic also
/// `thinking` of an unsigned thinking block.
fn part_text(api: Api, part: &mut Value) -> Option<(&'static str, &mut String)> {
    let Value::Object(p) = part else {
        return None;
    };
    let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
    let name = match kind {
        "text" | "output_text" => "text",
        "thinking" if api == Api::Anthropic && !p.contains_key("signature") => "thinking",
        _ => return None,
    };
    match p.get_mut(name) {
        Some(Value::String(s)) => Some((name, s)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn looped() -> String {
        format!(
            "The plan is simple. {}",
            "la continuación de un proceso de automatización ".repeat(60)
        )
    }

    fn config() -> ClampConfig {
        ClampConfig::default()
    }

    #[test]
    fn an_openai_continuation_is_clamped_and_the_rest_kept() {
        let body = json!({
            "model": "m", "temperature": 0.25,
            "messages": [
                {"role": "user", "content": looped()},
                {"role": "assistant", "content": looped(), "reasoning_content": looped()},
                {"role": "user", "content": "continue"},
            ]
        });
        let raw = serde_json::to_vec(&body).unwrap();
        let scan = scan(Api::OpenAi, &raw, &config(), true);
        let fields: Vec<_> = scan
            .found
            .iter()
            .map(|f| (f.message, f.field.as_str()))
            .collect();
        assert_eq!(fields, [(1, "content"), (1, "reasoning_content")]);
        let out: Value = serde_json::from_slice(&scan.body.unwrap()).unwrap();
        // The user's own text is never touched.
        assert_eq!(out["messages"][0]["content"], looped());
        let kept = out["messages"][1]["content"].as_str().unwrap();
        assert!(kept.starts_with("The plan is simple."));
        assert!(kept.len() < looped().len() / 5, "{kept}");
        assert_eq!(out["temperature"], 0.25);
        assert_eq!(out["messages"][2]["content"], "continue");
    }

    #[test]
    fn an_anthropic_prefill_is_clamped_but_signed_thinking_is_not() {
        let body = json!({
            "model": "m", "max_tokens": 10,
            "messages": [
                {"role": "user", "content": "write"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": looped(), "signature": "sig"},
                    {"type": "thinking", "thinking": looped()},
                    {"type": "text", "text": looped()},
                ]},
            ]
        });
        let raw = serde_json::to_vec(&body).unwrap();
        let scan = scan(Api::Anthropic, &raw, &config(), true);
        let fields: Vec<_> = scan.found.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["content[1].thinking", "content[2].text"]);
        let out: Value = serde_json::from_slice(&scan.body.unwrap()).unwrap();
        assert_eq!(out["messages"][1]["content"][0]["thinking"], looped());
        assert!(
            out["messages"][1]["content"][2]["text"]
                .as_str()
                .unwrap()
                .len()
                < 500
        );
    }

    #[test]
    fn healthy_or_unreadable_bodies_find_nothing_and_are_not_rewritten() {
        let healthy = json!({"messages": [
            {"role": "assistant", "content": "A short, healthy answer about loops."}
        ]});
        let raw = serde_json::to_vec(&healthy).unwrap();
        assert_eq!(
            scan(Api::OpenAi, &raw, &config(), true),
            HistoryScan::default()
        );
        for raw in [
            &b"not json"[..],
            b"[1, 2]",
            b"{\"messages\": 3}",
            b"{\"messages\": [null, 1, {\"role\": 5}]}",
        ] {
            assert_eq!(
                scan(Api::Anthropic, raw, &config(), true),
                HistoryScan::default()
            );
        }
    }

    #[test]
    fn pass_and_reject_report_without_rewriting() {
        let body = json!({"messages": [{"role": "assistant", "content": looped()}]});
        let raw = serde_json::to_vec(&body).unwrap();
        let scan = scan(Api::OpenAi, &raw, &config(), false);
        assert_eq!(scan.found.len(), 1);
        assert!(scan.body.is_none());
        let d = scan.found[0].describe();
        assert!(d.starts_with("messages[0].content ("), "{d}");
    }
}
