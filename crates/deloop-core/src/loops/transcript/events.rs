//! The events format: one JSON object per line, parsed into an
//! [`EventBatch`] whose strings live in one reused buffer (no allocation
//! per line once the batch is warm: this path carries a million events a
//! second).

use std::borrow::Cow;

use serde_json::Value;

use super::TranscriptError;
use crate::loops::replay::{Event, Replay, ReplayError};
use crate::loops::{OutcomeBody, Scope, ToolCall};

/// One event of a transcript, borrowed from the [`EventBatch`] that
/// parsed it.
#[derive(Debug, Clone, Copy)]
pub enum TranscriptEvent<'a> {
    /// A tool call.
    Call {
        /// Tool name.
        tool: &'a str,
        /// Arguments (`null` when the line has none).
        args: &'a Value,
        /// Call id (results refer to it).
        id: Option<&'a str>,
        /// Run id.
        run: Option<&'a str>,
        /// Agent id.
        agent: Option<&'a str>,
    },
    /// A call's result or error.
    Result {
        /// The call id it answers (`None`: the oldest unanswered call).
        id: Option<&'a str>,
        /// The JSON result or the error text.
        body: OutcomeBody<'a>,
    },
    /// A compaction of the agent's context.
    Compaction(Scope<'a>),
    /// A new user turn.
    UserTurn(Scope<'a>),
}

impl TranscriptEvent<'_> {
    /// Feeds the event to a replay (a result for an unknown id is the
    /// replay's error).
    pub fn replay(&self, replay: &mut Replay) -> Result<(), ReplayError> {
        match *self {
            TranscriptEvent::Call {
                tool,
                args,
                id,
                run,
                agent,
            } => {
                let mut call = ToolCall::new(tool, args);
                call.call_id = id;
                call.run_id = run;
                call.agent_id = agent;
                replay.push_call(&call);
            }
            TranscriptEvent::Result { id, body } => replay.push_result(id, body)?,
            TranscriptEvent::Compaction(scope) => replay.push_compaction(&scope),
            TranscriptEvent::UserTurn(scope) => replay.push_user_turn(&scope),
        }
        Ok(())
    }

    /// The event as an owned [`Event`].
    pub fn to_event(&self) -> Event {
        let owned = |s: Option<&str>| s.map(str::to_owned);
        match *self {
            TranscriptEvent::Call {
                tool,
                args,
                id,
                run,
                agent,
            } => Event::Call {
                id: owned(id),
                tool: tool.to_owned(),
                args: args.clone(),
                run: owned(run),
                agent: owned(agent),
            },
            TranscriptEvent::Result { id, body } => Event::Result {
                id: owned(id),
                body: match body {
                    OutcomeBody::Result(v) => Ok(v.clone()),
                    OutcomeBody::Error(e) => Err(e.to_owned()),
                },
            },
            TranscriptEvent::Compaction(s) => Event::Compaction {
                run: owned(s.run_id),
                agent: owned(s.agent_id),
            },
            TranscriptEvent::UserTurn(s) => Event::UserTurn {
                run: owned(s.run_id),
                agent: owned(s.agent_id),
            },
        }
    }
}

/// Parses one events-format line (1-based `line`, for the error) into an
/// owned [`Event`]; `Ok(None)` for a blank line. For many lines an
/// [`EventBatch`] avoids the allocations.
pub fn parse_event_line(text: &str, line: usize) -> Result<Option<Event>, TranscriptError> {
    let mut batch = EventBatch::new();
    batch.push_line(text, line);
    let parsed = match batch.iter().next() {
        None => Ok(None),
        Some((_, Ok(event))) => Ok(Some(event.to_event())),
        Some((_, Err(e))) => Err(e.clone()),
    };
    parsed
}

/// Parsed events-format lines: each line's event or error, in order, with
/// its line number. Blank lines are skipped. The strings (tool names, ids,
/// error texts) share one buffer, kept across [`EventBatch::clear`], so a
/// reused batch parses without allocating per line (the `args` and
/// `result` values are still allocated). A batch is `Send`: one thread can
/// parse while another replays the previous batch.
#[derive(Debug, Default)]
pub struct EventBatch {
    items: Vec<(usize, Result<Parsed, TranscriptError>)>,
    arena: String,
}

impl EventBatch {
    /// An empty batch.
    pub fn new() -> Self {
        EventBatch::default()
    }

    /// Forgets every line, keeping the buffers.
    pub fn clear(&mut self) {
        self.items.clear();
        self.arena.clear();
    }

    /// Lines held (events and errors; blank lines are not held).
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// No line held.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Parses one line (`line`: its 1-based number) and holds its event, or
    /// its error; a blank line is skipped.
    pub fn push_line(&mut self, text: &str, line: usize) {
        match self.parse(text, line) {
            Ok(Some(p)) => self.items.push((line, Ok(p))),
            Ok(None) => {}
            Err(e) => self.items.push((line, Err(e))),
        }
    }

    /// Decodes one raw line ([`decode_line`], strict or `lossy`) and
    /// parses it as [`EventBatch::push_line`] does; invalid UTF-8 is held
    /// as that line's error.
    ///
    /// [`decode_line`]: super::decode_line
    pub fn push_bytes(&mut self, bytes: &[u8], line: usize, lossy: bool) {
        match super::decode_line(bytes, line, lossy) {
            Ok(text) => self.push_line(&text, line),
            Err(e) => self.push_error(e),
        }
    }

    /// Holds an error found before parsing (such as invalid UTF-8), in
    /// line order with the events; its line number is `error.line`, or 0.
    pub fn push_error(&mut self, error: TranscriptError) {
        self.items.push((error.line.unwrap_or(0), Err(error)));
    }

    /// Each held line in order: its number and its event or error.
    pub fn iter(
        &self,
    ) -> impl Iterator<Item = (usize, Result<TranscriptEvent<'_>, &TranscriptError>)> + '_ {
        self.items.iter().map(move |(line, item)| {
            (
                *line,
                match item {
                    Ok(p) => Ok(self.event(p)),
                    Err(e) => Err(e),
                },
            )
        })
    }

    fn get(&self, span: Span) -> &str {
        self.arena.get(span.start..span.end).unwrap_or_default()
    }

    fn opt(&self, span: Option<Span>) -> Option<&str> {
        span.map(|s| self.get(s))
    }

    fn scope(&self, run: Option<Span>, agent: Option<Span>) -> Scope<'_> {
        Scope {
            agent_id: self.opt(agent),
            run_id: self.opt(run),
        }
    }

    fn event<'a>(&'a self, p: &'a Parsed) -> TranscriptEvent<'a> {
        match p {
            Parsed::Call {
                tool,
                id,
                run,
                agent,
                args,
            } => TranscriptEvent::Call {
                tool: self.get(*tool),
                args,
                id: self.opt(*id),
                run: self.opt(*run),
                agent: self.opt(*agent),
            },
            Parsed::Result { id, body } => TranscriptEvent::Result {
                id: self.opt(*id),
                body: match body {
                    ParsedBody::Error(e) => OutcomeBody::Error(self.get(*e)),
                    ParsedBody::Result(r) => OutcomeBody::Result(r),
                },
            },
            Parsed::Compaction { run, agent } => {
                TranscriptEvent::Compaction(self.scope(*run, *agent))
            }
            Parsed::User { run, agent } => TranscriptEvent::UserTurn(self.scope(*run, *agent)),
        }
    }

    fn push_str(&mut self, s: &str) -> Span {
        let start = self.arena.len();
        self.arena.push_str(s);
        Span {
            start,
            end: self.arena.len(),
        }
    }

    /// Parses one line; `None` for a blank line.
    fn parse(&mut self, raw: &str, line: usize) -> Result<Option<Parsed>, TranscriptError> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Ok(None);
        }
        let v: RawEvent<'_> = serde_json::from_str(raw).map_err(|e| {
            if e.is_data() {
                TranscriptError::at_line(line, format!("expected an event object: {e}"))
            } else {
                TranscriptError::at_line(line, format!("not valid JSON: {e}"))
            }
        })?;
        let mut opt = |v: Option<Loose<'_>>, key: &str| -> Result<Option<Span>, TranscriptError> {
            Ok(opt_str(v, key, line)?.map(|s| self.push_str(&s)))
        };
        Ok(Some(match v.ty.as_deref() {
            Some("call") => {
                let id = opt(v.id, "id")?;
                let run = opt(v.run, "run")?;
                let agent = opt(v.agent, "agent")?;
                let tool = match v.tool {
                    Some(Loose::Str(t)) => self.push_str(&t),
                    _ => {
                        return Err(TranscriptError::at_line(
                            line,
                            "a call needs a \"tool\" string",
                        ))
                    }
                };
                Parsed::Call {
                    tool,
                    id,
                    run,
                    agent,
                    args: v.args.unwrap_or(Value::Null),
                }
            }
            Some("result") => {
                let id = opt(v.id, "id")?;
                let body = match v.error {
                    Some(Loose::Str(e)) => ParsedBody::Error(self.push_str(&e)),
                    Some(Loose::Null) | None => match v.result {
                        Some(r) => ParsedBody::Result(r),
                        None => {
                            return Err(TranscriptError::at_line(
                                line,
                                "a result needs \"result\" or \"error\"",
                            ))
                        }
                    },
                    Some(Loose::Other(o)) => ParsedBody::Error(self.push_str(&o.to_string())),
                };
                Parsed::Result { id, body }
            }
            Some("compaction") => Parsed::Compaction {
                run: opt(v.run, "run")?,
                agent: opt(v.agent, "agent")?,
            },
            Some("user") | Some("user_turn") => Parsed::User {
                run: opt(v.run, "run")?,
                agent: opt(v.agent, "agent")?,
            },
            Some(other) => {
                return Err(TranscriptError::at_line(
                    line,
                    format!(
                        "unknown event type {other:?} (expected call, result, compaction or user)"
                    ),
                ))
            }
            None => return Err(TranscriptError::at_line(line, "missing \"type\"")),
        }))
    }
}

/// One parsed line; its strings are [`Span`]s of the batch's buffer.
#[derive(Debug)]
enum Parsed {
    Call {
        tool: Span,
        id: Option<Span>,
        run: Option<Span>,
        agent: Option<Span>,
        args: Value,
    },
    Result {
        id: Option<Span>,
        body: ParsedBody,
    },
    Compaction {
        run: Option<Span>,
        agent: Option<Span>,
    },
    User {
        run: Option<Span>,
        agent: Option<Span>,
    },
}

/// A result's body: an error message or a JSON result.
#[derive(Debug)]
enum ParsedBody {
    Error(Span),
    Result(Value),
}

/// Where a string sits in the batch's buffer.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
}

/// One events-format line. Only the envelope is typed (strings borrowed
/// from the line when they have no escapes); `args` and `result` stay JSON
/// values.
#[derive(serde::Deserialize)]
struct RawEvent<'a> {
    #[serde(rename = "type", borrow, default)]
    ty: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    id: Option<Loose<'a>>,
    #[serde(borrow, default)]
    tool: Option<Loose<'a>>,
    #[serde(default)]
    args: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    result: Option<Value>,
    #[serde(borrow, default)]
    error: Option<Loose<'a>>,
    #[serde(borrow, default)]
    run: Option<Loose<'a>>,
    #[serde(borrow, default)]
    agent: Option<Loose<'a>>,
}

/// An envelope field that should be a string: kept borrowed when it is
/// one, as a JSON value otherwise (for the error message).
enum Loose<'a> {
    Str(Cow<'a, str>),
    Null,
    Other(Value),
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for Loose<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = Loose<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Loose<'a>, E> {
                Ok(Loose::Str(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Loose<'a>, E> {
                Ok(Loose::Str(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Loose<'a>, E> {
                Ok(Loose::Str(Cow::Owned(s)))
            }
            fn visit_unit<E>(self) -> Result<Loose<'a>, E> {
                Ok(Loose::Null)
            }
            fn visit_none<E>(self) -> Result<Loose<'a>, E> {
                Ok(Loose::Null)
            }
            fn visit_bool<E>(self, b: bool) -> Result<Loose<'a>, E> {
                Ok(Loose::Other(Value::Bool(b)))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Loose<'a>, E> {
                Ok(Loose::Other(Value::from(n)))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Loose<'a>, E> {
                Ok(Loose::Other(Value::from(n)))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Loose<'a>, E> {
                Ok(Loose::Other(
                    serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number),
                ))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, a: A) -> Result<Loose<'a>, A::Error> {
                use serde::Deserialize;
                Value::deserialize(serde::de::value::SeqAccessDeserializer::new(a))
                    .map(Loose::Other)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, a: A) -> Result<Loose<'a>, A::Error> {
                use serde::Deserialize;
                Value::deserialize(serde::de::value::MapAccessDeserializer::new(a))
                    .map(Loose::Other)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// `"result": null` is a value (null), unlike an absent `result`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    <Value as serde::Deserialize>::deserialize(d).map(Some)
}

/// An optional envelope string; a number is accepted as an `id`.
fn opt_str<'a>(
    v: Option<Loose<'a>>,
    key: &str,
    line: usize,
) -> Result<Option<Cow<'a, str>>, TranscriptError> {
    match v {
        None | Some(Loose::Null) => Ok(None),
        Some(Loose::Str(s)) => Ok(Some(s)),
        Some(Loose::Other(Value::Number(n))) if key == "id" => Ok(Some(Cow::Owned(n.to_string()))),
        Some(Loose::Other(other)) => Err(TranscriptError::at_line(
            line,
            format!("\"{key}\" must be a string, got {other}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(text: &str) -> Result<Option<Event>, TranscriptError> {
        parse_event_line(text, 7)
    }

    #[test]
    fn parses_each_event_type() {
        assert_eq!(
            one(r#"{"type":"call","id":"a","tool":"read","args":{"p":1},"run":"r","agent":"x"}"#),
            Ok(Some(Event::Call {
                id: Some("a".into()),
                tool: "read".into(),
                args: json!({"p": 1}),
                run: Some("r".into()),
                agent: Some("x".into()),
            }))
        );
        assert_eq!(
            one(r#"{"type":"call","id":12,"tool":"t\"q"}"#),
            Ok(Some(Event::Call {
                id: Some("12".into()),
                tool: "t\"q".into(),
                args: Value::Null,
                run: None,
                agent: None,
            }))
        );
        assert_eq!(
            one(r#"{"type":"result","id":"a","result":null}"#),
            Ok(Some(Event::result("a", Value::Null)))
        );
        assert_eq!(
            one(r#"{"type":"result","id":"a","error":"boom","result":1}"#),
            Ok(Some(Event::error("a", "boom")))
        );
        assert_eq!(
            one(r#"{"type":"result","id":"a","error":{"code":1}}"#),
            Ok(Some(Event::error("a", "{\"code\":1}")))
        );
        assert_eq!(
            one(r#"{"type":"compaction","run":"r"}"#),
            Ok(Some(Event::Compaction {
                run: Some("r".into()),
                agent: None
            }))
        );
        assert_eq!(
            one(r#"{"type":"user_turn","agent":"b"}"#),
            Ok(Some(Event::UserTurn {
                run: None,
                agent: Some("b".into())
            }))
        );
        assert_eq!(one("   \r"), Ok(None));
    }

    #[test]
    fn errors_name_the_line_and_the_problem() {
        let cases = [
            ("{", "not valid JSON"),
            ("[1, 2]", "expected an event object"),
            (r#"{"id":"a"}"#, "missing \"type\""),
            (r#"{"type":"nap"}"#, "unknown event type \"nap\""),
            (
                r#"{"type":"call","id":"a"}"#,
                "a call needs a \"tool\" string",
            ),
            (
                r#"{"type":"call","tool":"t","run":[1]}"#,
                "\"run\" must be a string",
            ),
            (
                r#"{"type":"result","id":"a"}"#,
                "a result needs \"result\" or \"error\"",
            ),
        ];
        for (text, want) in cases {
            let e = one(text).unwrap_err();
            assert_eq!(e.line, Some(7), "{text}");
            assert!(e.message.contains(want), "{text}: {e}");
            assert!(e.to_string().starts_with("line 7: "), "{e}");
        }
    }

    #[test]
    fn batch_keeps_order_and_reuses_its_buffer() {
        let mut batch = EventBatch::new();
        batch.push_line(r#"{"type":"call","id":"a","tool":"read"}"#, 1);
        batch.push_line("", 2);
        batch.push_error(TranscriptError::at_line(3, "not UTF-8"));
        batch.push_line(r#"{"type":"result","id":"a","error":"e"}"#, 4);
        let lines: Vec<usize> = batch.iter().map(|(l, _)| l).collect();
        assert_eq!(lines, [1, 3, 4]);
        assert_eq!(batch.len(), 3);
        match batch.iter().nth(2) {
            Some((4, Ok(TranscriptEvent::Result { id, body }))) => {
                assert_eq!(id, Some("a"));
                assert!(matches!(body, OutcomeBody::Error("e")));
            }
            other => panic!("{other:?}"),
        }
        batch.clear();
        assert!(batch.is_empty());
        assert_eq!(batch.iter().count(), 0);
    }

    /// Hostile lines: deep nesting is refused by serde_json's recursion
    /// limit (an error, no stack overflow), huge and odd strings pass.
    #[test]
    fn hostile_lines_are_errors_not_panics() {
        let deep = format!(
            "{{\"type\":\"call\",\"tool\":\"t\",\"args\":{}{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(one(&deep).is_err());
        let big = format!(
            "{{\"type\":\"call\",\"tool\":\"{}\",\"args\":null}}",
            "x".repeat(1 << 20)
        );
        assert!(matches!(one(&big), Ok(Some(Event::Call { .. }))));
        assert!(one("\u{0}\u{feff}").is_err());
    }
}
