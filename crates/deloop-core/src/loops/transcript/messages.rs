//! The message formats (OpenAI chat `tool_calls`, Anthropic `tool_use` /
//! `tool_result` blocks): whole documents, read as a list of messages, each
//! turned into the [`Event`]s it holds.

use serde_json::Value;

use super::{TranscriptError, TranscriptFormat};
use crate::loops::replay::Event;

/// Reads a messages transcript: a JSON array, `{"messages": [...]}`, one
/// message object, or one message per line (blank lines skipped; a line
/// that is not JSON is an error naming it).
pub fn parse_messages(text: &str) -> Result<Vec<Value>, TranscriptError> {
    match serde_json::from_str::<Value>(text.trim()) {
        Ok(Value::Array(a)) => Ok(a),
        Ok(Value::Object(mut o)) if o.contains_key("messages") => match o.remove("messages") {
            Some(Value::Array(a)) => Ok(a),
            _ => Err(TranscriptError::document("\"messages\" must be an array")),
        },
        Ok(v @ Value::Object(_)) => Ok(vec![v]),
        Ok(_) => Err(TranscriptError::document("expected a messages array")),
        Err(_) => {
            let mut out = Vec::new();
            for (i, raw) in text.lines().enumerate() {
                if raw.trim().is_empty() {
                    continue;
                }
                out.push(serde_json::from_str(raw).map_err(|e| {
                    TranscriptError::at_line(i + 1, format!("not valid JSON: {e}"))
                })?);
            }
            Ok(out)
        }
    }
}

/// The events of the `n`th message (1-based, for the error) of a
/// transcript in `format` ([`TranscriptFormat::OpenAi`] or
/// [`TranscriptFormat::Anthropic`]; the other formats read as Anthropic).
pub fn message_events(
    format: TranscriptFormat,
    message: &Value,
    n: usize,
) -> Result<Vec<Event>, TranscriptError> {
    match format {
        TranscriptFormat::OpenAi => openai_events(message, n),
        _ => anthropic_events(message, n),
    }
}

fn role(m: &Value, n: usize) -> Result<&str, TranscriptError> {
    m.get("role")
        .and_then(Value::as_str)
        .ok_or_else(|| TranscriptError::at_message(n, "missing \"role\""))
}

/// A message's content as text: a string, or the text parts of a list
/// joined with newlines.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                _ => p.get("text").and_then(Value::as_str),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A text result in the shape tools return (MCP-style content blocks), so
/// that it hashes like one.
fn text_result(text: String) -> Value {
    serde_json::json!({"content": [{"type": "text", "text": text}]})
}

fn openai_events(m: &Value, n: usize) -> Result<Vec<Event>, TranscriptError> {
    let bad = |msg: &str| TranscriptError::at_message(n, msg);
    let mut out = Vec::new();
    match role(m, n)? {
        "assistant" => {
            if let Some(calls) = m.get("tool_calls") {
                let Value::Array(calls) = calls else {
                    return Err(bad("\"tool_calls\" must be an array"));
                };
                for c in calls {
                    let f = c
                        .get("function")
                        .ok_or_else(|| bad("tool call without \"function\""))?;
                    let name = f
                        .get("name")
                        .and_then(Value::as_str)
                        .ok_or_else(|| bad("tool call without a function name"))?;
                    let args = match f.get("arguments") {
                        Some(Value::String(s)) => {
                            serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone()))
                        }
                        Some(v) => v.clone(),
                        None => Value::Null,
                    };
                    out.push(Event::Call {
                        id: c.get("id").and_then(Value::as_str).map(String::from),
                        tool: name.to_string(),
                        args,
                        run: None,
                        agent: None,
                    });
                }
            }
        }
        "tool" => {
            let id = m
                .get("tool_call_id")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("tool message without \"tool_call_id\""))?;
            out.push(Event::Result {
                id: Some(id.to_string()),
                body: Ok(text_result(text_of(
                    m.get("content").unwrap_or(&Value::Null),
                ))),
            });
        }
        "user" => out.push(Event::UserTurn {
            run: None,
            agent: None,
        }),
        _ => {}
    }
    Ok(out)
}

fn anthropic_events(m: &Value, n: usize) -> Result<Vec<Event>, TranscriptError> {
    let bad = |msg: &str| TranscriptError::at_message(n, msg);
    let role = role(m, n)?;
    let mut out = Vec::new();
    let blocks: &[Value] = match m.get("content") {
        Some(Value::Array(b)) => b,
        _ => &[],
    };
    match role {
        "assistant" => {
            for b in blocks {
                if b.get("type").and_then(Value::as_str) == Some("tool_use") {
                    let name = b
                        .get("name")
                        .and_then(Value::as_str)
                        .ok_or_else(|| bad("tool_use block without \"name\""))?;
                    out.push(Event::Call {
                        id: b.get("id").and_then(Value::as_str).map(String::from),
                        tool: name.to_string(),
                        args: b.get("input").cloned().unwrap_or(Value::Null),
                        run: None,
                        agent: None,
                    });
                }
            }
        }
        "user" => {
            let mut human = matches!(m.get("content"), Some(Value::String(_)));
            for b in blocks {
                if b.get("type").and_then(Value::as_str) == Some("tool_result") {
                    let id = b
                        .get("tool_use_id")
                        .and_then(Value::as_str)
                        .ok_or_else(|| bad("tool_result block without \"tool_use_id\""))?;
                    let text = text_of(b.get("content").unwrap_or(&Value::Null));
                    let body = if b.get("is_error") == Some(&Value::Bool(true)) {
                        Err(text)
                    } else {
                        Ok(text_result(text))
                    };
                    out.push(Event::Result {
                        id: Some(id.to_string()),
                        body,
                    });
                } else {
                    human = true;
                }
            }
            if human {
                out.push(Event::UserTurn {
                    run: None,
                    agent: None,
                });
            }
        }
        _ => {}
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_arrays_objects_and_lines() {
        assert_eq!(parse_messages("[]").unwrap().len(), 0);
        assert_eq!(
            parse_messages(r#"{"messages":[{"role":"user"}]}"#)
                .unwrap()
                .len(),
            1
        );
        assert_eq!(parse_messages(r#"{"role":"user"}"#).unwrap().len(), 1);
        assert_eq!(
            parse_messages("{\"role\":\"user\"}\n\n{\"role\":\"tool\"}\n")
                .unwrap()
                .len(),
            2
        );
        let e = parse_messages("{\"role\":\"user\"}\n{oops\n").unwrap_err();
        assert_eq!(e.line, Some(2));
        assert_eq!(
            parse_messages(r#"{"messages":3}"#).unwrap_err().to_string(),
            "\"messages\" must be an array"
        );
        assert_eq!(
            parse_messages("3").unwrap_err().to_string(),
            "expected a messages array"
        );
    }

    #[test]
    fn openai_calls_results_and_user_turns() {
        let m = json!({"role": "assistant", "tool_calls": [
            {"id": "a", "function": {"name": "read", "arguments": "{\"p\":1}"}},
            {"id": "b", "function": {"name": "run", "arguments": "not json"}}
        ]});
        let ev = message_events(TranscriptFormat::OpenAi, &m, 1).unwrap();
        assert_eq!(ev[0], Event::call("a", "read", json!({"p": 1})));
        assert_eq!(ev[1], Event::call("b", "run", json!("not json")));
        let m = json!({"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "x"}]});
        assert_eq!(
            message_events(TranscriptFormat::OpenAi, &m, 2).unwrap(),
            [Event::result("a", text_result("x".into()))]
        );
        let e = message_events(TranscriptFormat::OpenAi, &json!({"content": 1}), 4).unwrap_err();
        assert_eq!(e.to_string(), "message 4: missing \"role\"");
        let e = message_events(
            TranscriptFormat::OpenAi,
            &json!({"role": "assistant", "tool_calls": {}}),
            5,
        )
        .unwrap_err();
        assert_eq!(e.line, None);
        assert!(e.message.starts_with("message 5: "));
    }

    #[test]
    fn anthropic_blocks() {
        let m = json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "bad", "is_error": true},
            {"type": "text", "text": "and now?"}
        ]});
        let ev = message_events(TranscriptFormat::Anthropic, &m, 1).unwrap();
        assert_eq!(ev[0], Event::error("a", "bad"));
        assert!(matches!(ev[1], Event::UserTurn { .. }));
        let m =
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "x"}]});
        assert_eq!(
            message_events(TranscriptFormat::Anthropic, &m, 1).unwrap(),
            [Event::call("a", "x", Value::Null)]
        );
    }
}
