//! Agent transcripts, parsed into typed events for the [`Replay`]: a pure,
//! streaming parser (lines in, events out; no I/O).
//!
//! Three formats:
//! * [`TranscriptFormat::Events`], deloop's own, JSON lines:
//!   `{"type":"call","id","tool","args","run"?,"agent"?}`,
//!   `{"type":"result","id","result"|"error"}`,
//!   `{"type":"compaction","run"?,"agent"?}` and
//!   `{"type":"user","run"?,"agent"?}` (a new user turn). Blank lines are
//!   skipped. Parsed line by line into an [`EventBatch`], so a transcript of
//!   any length streams in bounded memory.
//! * [`TranscriptFormat::OpenAi`]: a chat `messages` array (or
//!   `{"messages": [...]}`, or one message per line): assistant
//!   `tool_calls` are calls (the `arguments` string is parsed as JSON; text
//!   that is not JSON is kept as a string), `role: "tool"` messages are
//!   results, `role: "user"` messages are user turns.
//! * [`TranscriptFormat::Anthropic`]: messages with `tool_use` blocks
//!   (calls) and `tool_result` blocks (results; `is_error: true` makes an
//!   error); a user message with any other content is a user turn.
//!
//! The two message formats are whole documents: [`parse_messages`] reads
//! the list, [`message_events`] turns each message into [`Event`]s.
//! [`detect_format`] tells the formats apart.
//!
//! Errors ([`TranscriptError`]) name the 1-based line (events format,
//! message lines) or the message (`message N: ...`).
//!
//! ```
//! use deloop_core::loops::replay::Replay;
//! use deloop_core::loops::transcript::{detect_format, EventBatch, TranscriptFormat};
//! use deloop_core::loops::{Guard, Level, LoopConfig, Profile};
//!
//! let mut text = String::new();
//! for i in 0..25 {
//!     text += &format!("{{\"type\":\"call\",\"id\":\"c{i}\",\"tool\":\"read\",\"args\":{{\"path\":\"/a\"}}}}\n");
//!     text += &format!("{{\"type\":\"result\",\"id\":\"c{i}\",\"result\":\"same\"}}\n");
//! }
//! assert_eq!(detect_format(&text), TranscriptFormat::Events);
//!
//! let mut batch = EventBatch::new();
//! for (i, line) in text.lines().enumerate() {
//!     batch.push_line(line, i + 1);
//! }
//! let mut replay = Replay::new(Guard::new(Profile::OpenClaw, LoopConfig::default()));
//! for (line, event) in batch.iter() {
//!     let event = event.expect("well-formed line");
//!     event.replay(&mut replay).map_err(|e| format!("line {line}: {e}")).unwrap();
//! }
//! assert_eq!(replay.verdicts()[20].verdict.level, Level::Critical);
//! ```
//!
//! [`Replay`]: super::replay::Replay
//! [`Event`]: super::replay::Event

mod events;
mod messages;

pub use events::{parse_event_line, EventBatch, TranscriptEvent};
pub use messages::{message_events, parse_messages};

use std::borrow::Cow;

use serde_json::Value;

/// A transcript format: `auto` (detected from the content), `events`,
/// `openai` or `anthropic`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(
    feature = "openapi",
    derive(utoipa::ToSchema),
    schema(rename_all = "lowercase")
)]
pub enum TranscriptFormat {
    /// Detect from the content ([`detect_format`]).
    #[default]
    Auto,
    /// deloop's events format (JSON lines).
    Events,
    /// OpenAI chat messages with `tool_calls`.
    OpenAi,
    /// Anthropic messages with `tool_use` / `tool_result` blocks.
    Anthropic,
}

impl TranscriptFormat {
    /// Every format, `auto` first.
    pub const ALL: [TranscriptFormat; 4] = [
        TranscriptFormat::Auto,
        TranscriptFormat::Events,
        TranscriptFormat::OpenAi,
        TranscriptFormat::Anthropic,
    ];

    /// `auto`, `events`, `openai` or `anthropic` (the command line's and
    /// the server's spelling; [`str::parse`] reads it back).
    pub fn as_str(self) -> &'static str {
        match self {
            TranscriptFormat::Auto => "auto",
            TranscriptFormat::Events => "events",
            TranscriptFormat::OpenAi => "openai",
            TranscriptFormat::Anthropic => "anthropic",
        }
    }
}

impl std::fmt::Display for TranscriptFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for TranscriptFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "auto" => TranscriptFormat::Auto,
            "events" => TranscriptFormat::Events,
            "openai" => TranscriptFormat::OpenAi,
            "anthropic" => TranscriptFormat::Anthropic,
            other => {
                return Err(format!(
                "unknown transcript format {other:?} (expected auto, events, openai or anthropic)"
            ))
            }
        })
    }
}

/// Bad transcript input: where (the 1-based line, when one is known) and
/// what. Displayed as `line N: message`, or the message alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptError {
    /// The 1-based line of the input, when the error belongs to one.
    pub line: Option<usize>,
    /// What is wrong (for a message format, it starts with `message N:`).
    pub message: String,
}

impl TranscriptError {
    /// An error on a 1-based line.
    pub fn at_line(line: usize, message: impl std::fmt::Display) -> Self {
        TranscriptError {
            line: Some(line),
            message: message.to_string(),
        }
    }

    /// An error about the whole document (no line).
    pub fn document(message: impl Into<String>) -> Self {
        TranscriptError {
            line: None,
            message: message.into(),
        }
    }

    /// An error about the `n`th message (1-based) of a message format.
    pub fn at_message(n: usize, message: impl std::fmt::Display) -> Self {
        TranscriptError::document(format!("message {n}: {message}"))
    }
}

impl std::fmt::Display for TranscriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(n) => write!(f, "line {n}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for TranscriptError {}

/// Decodes one line of input (1-based `line`, for the error) as UTF-8:
/// strictly (invalid UTF-8 is an error naming the line and column), or
/// `lossy` (invalid bytes become U+FFFD).
pub fn decode_line(
    bytes: &[u8],
    line: usize,
    lossy: bool,
) -> Result<Cow<'_, str>, TranscriptError> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(Cow::Borrowed(s)),
        Err(_) if lossy => Ok(String::from_utf8_lossy(bytes)),
        Err(e) => Err(TranscriptError::at_line(
            line,
            format!(
                "input is not valid UTF-8 (first invalid byte at column {}); {FIX_ENCODING}",
                e.valid_up_to() + 1
            ),
        )),
    }
}

/// Decodes a whole document as UTF-8, strictly (the error names the byte
/// offset) or `lossy`.
pub fn decode_document(bytes: Vec<u8>, lossy: bool) -> Result<String, TranscriptError> {
    match String::from_utf8(bytes) {
        Ok(s) => Ok(s),
        Err(e) if lossy => Ok(String::from_utf8_lossy(e.as_bytes()).into_owned()),
        Err(e) => Err(TranscriptError::document(format!(
            "input is not valid UTF-8 (first invalid byte at offset {}); {FIX_ENCODING}",
            e.utf8_error().valid_up_to()
        ))),
    }
}

/// The advice that ends every invalid UTF-8 error.
const FIX_ENCODING: &str = "fix the encoding or pass --lossy to replace invalid bytes with U+FFFD";

/// An events-format line: a JSON object with a `"type"` string and no
/// `"role"` (the rule [`detect_format`] applies to each line).
pub fn is_event_line(line: &str) -> bool {
    match serde_json::from_str::<Value>(line.trim()) {
        Ok(v) => v.get("type").and_then(Value::as_str).is_some() && v.get("role").is_none(),
        Err(_) => false,
    }
}

/// Guesses the format of a whole transcript: a JSON document (or message
/// lines) with `tool_use`/`tool_result` blocks is anthropic, with
/// `tool_calls` or role `tool` is openai; everything else is events. Only
/// the first 50 lines are looked at. Never returns
/// [`TranscriptFormat::Auto`].
pub fn detect_format(text: &str) -> TranscriptFormat {
    let trimmed = text.trim_start();
    let probe = |v: &Value| -> Option<TranscriptFormat> {
        let msgs: Vec<&Value> = match v {
            Value::Array(a) => a.iter().collect(),
            Value::Object(o) => match o.get("messages") {
                Some(Value::Array(a)) => a.iter().collect(),
                _ if o.contains_key("role") => vec![v],
                _ => return None,
            },
            _ => return None,
        };
        for m in msgs {
            if m.get("tool_calls").is_some()
                || m.get("role").and_then(Value::as_str) == Some("tool")
            {
                return Some(TranscriptFormat::OpenAi);
            }
            if let Some(Value::Array(blocks)) = m.get("content") {
                if blocks.iter().any(|b| {
                    matches!(
                        b.get("type").and_then(Value::as_str),
                        Some("tool_use" | "tool_result")
                    )
                }) {
                    return Some(TranscriptFormat::Anthropic);
                }
            }
        }
        None
    };
    if trimmed.starts_with('[') {
        if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
            return probe(&v).unwrap_or(TranscriptFormat::Events);
        }
    }
    // JSON lines (events, or one message per line), or one JSON object.
    for line in trimmed.lines().take(50) {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Ok(v) = serde_json::from_str::<Value>(line) {
            if v.get("type").and_then(Value::as_str).is_some() && v.get("role").is_none() {
                return TranscriptFormat::Events;
            }
            if let Some(f) = probe(&v) {
                return f;
            }
        } else if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
            return probe(&v).unwrap_or(TranscriptFormat::Events);
        } else {
            return TranscriptFormat::Events;
        }
    }
    TranscriptFormat::Events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_formats() {
        assert_eq!(
            detect_format("{\"type\":\"call\",\"id\":\"1\",\"tool\":\"x\",\"args\":{}}\n"),
            TranscriptFormat::Events
        );
        assert_eq!(
            detect_format(r#"[{"role":"assistant","tool_calls":[]}]"#),
            TranscriptFormat::OpenAi
        );
        assert_eq!(
            detect_format(
                r#"{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"x","input":{}}]}]}"#
            ),
            TranscriptFormat::Anthropic
        );
        assert_eq!(
            detect_format("{\"role\":\"tool\",\"tool_call_id\":\"a\",\"content\":\"x\"}\n"),
            TranscriptFormat::OpenAi
        );
        assert_eq!(detect_format(""), TranscriptFormat::Events);
        assert_eq!(detect_format("not json"), TranscriptFormat::Events);
    }

    #[test]
    fn format_names_round_trip() {
        for f in [
            TranscriptFormat::Auto,
            TranscriptFormat::Events,
            TranscriptFormat::OpenAi,
            TranscriptFormat::Anthropic,
        ] {
            assert_eq!(f.as_str().parse::<TranscriptFormat>(), Ok(f));
        }
        assert!("json"
            .parse::<TranscriptFormat>()
            .unwrap_err()
            .contains("json"));
    }

    #[test]
    fn error_display_names_the_line() {
        assert_eq!(
            TranscriptError::at_line(3, "bad").to_string(),
            "line 3: bad"
        );
        assert_eq!(
            TranscriptError::at_message(2, "x").to_string(),
            "message 2: x"
        );
        assert_eq!(TranscriptError::document("whole").to_string(), "whole");
    }

    #[test]
    fn decoding_is_strict_or_lossy() {
        assert_eq!(decode_line(b"ok", 1, false).unwrap(), "ok");
        let err = decode_line(b"ab\xff", 4, false).unwrap_err();
        assert_eq!(err.line, Some(4));
        assert!(err.message.contains("column 3"), "{err}");
        assert_eq!(decode_line(b"ab\xff", 4, true).unwrap(), "ab\u{fffd}");
        let err = decode_document(b"[\n\xff]".to_vec(), false).unwrap_err();
        assert_eq!(err.line, None);
        assert!(err.message.contains("offset 2"), "{err}");
        assert_eq!(decode_document(b"\xff".to_vec(), true).unwrap(), "\u{fffd}");
    }
}
