//! Shared helpers of the loop-detection integration tests.
#![allow(dead_code)]

use deloop_core::loops::replay::Event;
use serde_json::Value;

fn opt_str(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(String::from)
}

/// Parses deloop's events format (JSON lines).
pub fn parse_events(text: &str) -> Vec<Event> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("line {}: {e}", n + 1));
        let ev = match v.get("type").and_then(Value::as_str) {
            Some("call") => Event::Call {
                id: opt_str(&v, "id"),
                tool: opt_str(&v, "tool").expect("call without tool"),
                args: v.get("args").cloned().unwrap_or(Value::Null),
                run: opt_str(&v, "run"),
                agent: opt_str(&v, "agent"),
            },
            Some("result") => Event::Result {
                id: opt_str(&v, "id"),
                body: match v.get("error") {
                    Some(Value::String(e)) => Err(e.clone()),
                    Some(e) if !e.is_null() => Err(e.to_string()),
                    _ => Ok(v.get("result").cloned().unwrap_or(Value::Null)),
                },
            },
            Some("compaction") => Event::Compaction {
                run: opt_str(&v, "run"),
                agent: opt_str(&v, "agent"),
            },
            Some("user") | Some("user_turn") => Event::UserTurn {
                run: opt_str(&v, "run"),
                agent: opt_str(&v, "agent"),
            },
            other => panic!("line {}: unknown event type {other:?}", n + 1),
        };
        out.push(ev);
    }
    out
}
