//! Judging the tool calls of a reply against the request's history, and
//! blocking a critical one: whole replies here, streams in
//! [`crate::tool_stream`]. Pure: bytes in, bytes out.
//!
//! A blocked reply keeps everything but its tool calls: they are replaced
//! by an assistant text that explains the block, the choice's
//! `finish_reason` becomes `stop` (Anthropic: `stop_reason` `end_turn`),
//! and a top-level `deloop.tool_loop` object names the verdict. The agent
//! then ends its turn instead of running the call.

use bytes::Bytes;
use deloop_core::loops::Verdict;
use serde_json::{json, Value};

use crate::tool_loops::{
    anthropic_message_calls, block_message, first_critical, openai_message_calls, verdict_json,
    worst, History, LoopJudge, ReplyCall,
};

/// One loop found in a reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The call's tool.
    pub tool: String,
    /// The verdict (warning or critical).
    pub verdict: Verdict,
    /// `blocked`, or `observed` (the call was let through).
    pub action: &'static str,
}

/// What the judge made of a whole reply.
#[derive(Debug, Default)]
pub struct ToolReply {
    /// The new body, when calls were blocked.
    pub body: Option<Bytes>,
    /// The loops found (for metrics and headers).
    pub found: Vec<Found>,
}

impl ToolReply {
    /// `x-deloop-reply-loop` and `x-deloop-reply-loop-detector`: the worst
    /// verdict found.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let Some(w) = self.found.iter().fold(None::<&Found>, |b, f| match b {
            Some(b) if b.verdict.level >= f.verdict.level => Some(b),
            _ => Some(f),
        }) else {
            return Vec::new();
        };
        let mut h = vec![("x-deloop-reply-loop", w.verdict.level.as_str().to_string())];
        if let Some(d) = w.verdict.detector {
            h.push(("x-deloop-reply-loop-detector", d.as_str().to_string()));
        }
        h
    }

    /// True when calls were blocked.
    pub fn blocked(&self) -> bool {
        self.found.iter().any(|f| f.action == "blocked")
    }
}

fn judge(
    judge: &LoopJudge,
    history: &History,
    calls: &[ReplyCall],
    block: bool,
    found: &mut Vec<Found>,
) -> Option<(String, Value, Verdict)> {
    let verdicts = judge.judge_calls(history, calls);
    let critical = first_critical(calls, &verdicts)
        .filter(|_| block)
        .map(|(c, v)| (c.name.clone(), c.args.clone(), v.clone()));
    if let Some((c, v)) = worst(calls, &verdicts) {
        found.push(Found {
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

/// Judges the tool calls of an OpenAI chat completion body; with `block`,
/// replaces a choice's calls when one is critical.
pub fn guard_openai(
    body: &[u8],
    loop_judge: &LoopJudge,
    history: &History,
    block: bool,
) -> ToolReply {
    let mut out = ToolReply::default();
    let Ok(mut v) = serde_json::from_slice::<Value>(body) else {
        return out;
    };
    let Some(choices) = v.get_mut("choices").and_then(Value::as_array_mut) else {
        return out;
    };
    let mut report = None;
    for choice in choices.iter_mut() {
        let Some(message) = choice.get_mut("message").filter(|m| m.is_object()) else {
            continue;
        };
        let calls = openai_message_calls(message);
        if calls.is_empty() {
            continue;
        }
        let Some((tool, args, verdict)) = judge(loop_judge, history, &calls, block, &mut out.found)
        else {
            continue;
        };
        let text = block_message(&tool, &args, &verdict);
        let content = match message.get("content").and_then(Value::as_str) {
            Some(c) if !c.trim().is_empty() => format!("{c}\n\n{text}"),
            _ => text,
        };
        if let Some(m) = message.as_object_mut() {
            m.remove("tool_calls");
            m.remove("function_call");
            m.insert("content".into(), Value::String(content));
        }
        choice["finish_reason"] = json!("stop");
        report.get_or_insert(verdict_json(&tool, &verdict, "blocked"));
    }
    if let Some(r) = report {
        let d = v
            .as_object_mut()
            .map(|o| o.entry("deloop").or_insert_with(|| json!({})));
        if let Some(d) = d.filter(|d| d.is_object()) {
            d["tool_loop"] = r;
        }
        out.body = Some(Bytes::from(v.to_string()));
    }
    out
}

/// Judges the `tool_use` blocks of an Anthropic Messages body; with
/// `block`, replaces them by one text block when one is critical.
pub fn guard_anthropic(
    body: &[u8],
    loop_judge: &LoopJudge,
    history: &History,
    block: bool,
) -> ToolReply {
    let mut out = ToolReply::default();
    let Ok(mut v) = serde_json::from_slice::<Value>(body) else {
        return out;
    };
    let Some(content) = v.get_mut("content").and_then(Value::as_array_mut) else {
        return out;
    };
    let calls = anthropic_message_calls(content);
    if calls.is_empty() {
        return out;
    }
    let Some((tool, args, verdict)) = judge(loop_judge, history, &calls, block, &mut out.found)
    else {
        return out;
    };
    let text = block_message(&tool, &args, &verdict);
    content.retain(|b| b.get("type").and_then(Value::as_str) != Some("tool_use"));
    content.push(json!({"type": "text", "text": text}));
    v["stop_reason"] = json!("end_turn");
    v["stop_sequence"] = Value::Null;
    v["deloop"] = json!({"tool_loop": verdict_json(&tool, &verdict, "blocked")});
    out.body = Some(Bytes::from(v.to_string()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Api;
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

    fn reply() -> Vec<u8> {
        json!({"id": "r", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null, "tool_calls": [
                    {"id": "x", "type": "function",
                     "function": {"name": "read", "arguments": "{\"path\":\"/a\"}"}}]}}]})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn critical_calls_are_replaced_when_blocking() {
        let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
        let h = history(25);
        let out = guard_openai(&reply(), &judge, &h, true);
        assert!(out.blocked());
        let v: Value = serde_json::from_slice(&out.body.unwrap()).unwrap();
        let c = &v["choices"][0];
        assert_eq!(c["finish_reason"], "stop");
        assert!(c["message"].get("tool_calls").is_none());
        assert!(c["message"]["content"].as_str().unwrap().contains("`read`"));
        assert_eq!(v["deloop"]["tool_loop"]["level"], "critical");
        // Observing changes nothing.
        let out = guard_openai(&reply(), &judge, &h, false);
        assert!(out.body.is_none());
        assert_eq!(out.found[0].action, "observed");
        assert_eq!(out.headers()[0].1, "critical");
        // A fresh history: nothing found.
        let out = guard_openai(&reply(), &judge, &history(1), true);
        assert!(out.body.is_none() && out.found.is_empty());
    }

    #[test]
    fn anthropic_blocks_become_one_text_block() {
        let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
        let body = json!({"id": "m", "type": "message", "role": "assistant", "model": "c",
            "content": [{"type": "text", "text": "again"},
                        {"type": "tool_use", "id": "t", "name": "read", "input": {"path": "/a"}}],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 1, "output_tokens": 1}})
        .to_string();
        let out = guard_anthropic(body.as_bytes(), &judge, &history(25), true);
        let v: Value = serde_json::from_slice(&out.body.unwrap()).unwrap();
        assert_eq!(v["stop_reason"], "end_turn");
        assert_eq!(v["content"].as_array().unwrap().len(), 2);
        assert_eq!(v["content"][1]["type"], "text");
        assert_eq!(v["usage"]["input_tokens"], 1);
    }

    #[test]
    fn hostile_bodies_pass() {
        let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
        for body in [
            &b"not json"[..],
            b"[]",
            br#"{"choices": 3}"#,
            br#"{"choices": [1, {"message": 2}, {"message": {"tool_calls": "x"}}]}"#,
            br#"{"content": [{"type": "tool_use"}]}"#,
        ] {
            assert!(guard_openai(body, &judge, &history(25), true)
                .body
                .is_none());
            assert!(guard_anthropic(body, &judge, &history(25), true)
                .body
                .is_none());
        }
    }
}
