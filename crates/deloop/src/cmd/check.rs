//! `deloop check`: replay an agent transcript through the tool-call loop
//! guard and report a verdict per call.
//!
//! Transcript formats (parsed here into typed events; the core decides):
//! * `events`: JSON lines, `{"type":"call","id","tool","args","run"?,"agent"?}`,
//!   `{"type":"result","id","result"|"error"}`, `{"type":"compaction","run"?,"agent"?}`,
//!   `{"type":"user","run"?,"agent"?}` (a new user turn). Blank lines are skipped.
//! * `openai`: a chat `messages` array (or `{"messages": [...]}`, or one
//!   message per line): assistant `tool_calls` are calls (the `arguments`
//!   string is parsed as JSON; text that is not JSON is kept as a string),
//!   `role: "tool"` messages are results, `role: "user"` messages are user turns.
//! * `anthropic`: messages with `tool_use` blocks (calls) and `tool_result`
//!   blocks (results; `is_error: true` makes an error); a user message with
//!   any other content is a user turn.
//!
//! Bad input (malformed JSON, missing fields, a result for an id no earlier
//! call is waiting on) is an error naming the line (events) or the message
//! (openai/anthropic), exit code 2.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use deloop_core::loops::replay::{Event, Replay};
use deloop_core::loops::{Guard, LoopConfig, Profile};
use serde_json::Value;

use crate::exit::{BadInput, Exit};
use crate::render::check as render;

/// Transcript format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Detect from the content.
    Auto,
    /// deloop's events format (JSON lines).
    Events,
    /// OpenAI chat messages with `tool_calls`.
    Openai,
    /// Anthropic messages with `tool_use` / `tool_result` blocks.
    Anthropic,
}

/// Detection profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProfileArg {
    /// deloop's own rules (streaks, cycles, content hashing, sticky blocks).
    Default,
    /// OpenClaw's shipped detector, verdict for verdict.
    Openclaw,
    /// The anti-loop protocol: same procedure + same result twice = stop.
    Strict,
}

impl From<ProfileArg> for Profile {
    fn from(p: ProfileArg) -> Profile {
        match p {
            ProfileArg::Default => Profile::Default,
            ProfileArg::Openclaw => Profile::OpenClaw,
            ProfileArg::Strict => Profile::Strict,
        }
    }
}

/// Flags of `deloop check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Transcript file; `-` or absent reads standard input.
    pub file: Option<PathBuf>,
    /// Transcript format.
    #[arg(long, value_enum, default_value = "auto")]
    pub format: Format,
    /// Detection profile (default: the config file's `profile`, else `default`).
    #[arg(long, value_enum)]
    pub profile: Option<ProfileArg>,
    /// OpenClaw `tools.loopDetection` config (JSON5 or JSON), full config or bare block.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Machine output: one JSON line per call, then a summary line.
    #[arg(long)]
    pub json: bool,
    /// Replace invalid UTF-8 with U+FFFD instead of failing.
    #[arg(long)]
    pub lossy: bool,
}

/// Runs `deloop check`.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let (config, adjustments) = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| BadInput(format!("cannot read config {}: {e}", path.display())))?;
            LoopConfig::from_json5(&text)
                .map_err(|e| BadInput(format!("config {}: {e}", path.display())))?
        }
        None => (LoopConfig::default(), Vec::new()),
    };
    for a in &adjustments {
        eprintln!(
            "deloop: note: config {}: {} adjusted to {} ({})",
            a.key, a.from, a.to, a.reason
        );
    }
    let profile: Profile = match args.profile {
        Some(p) => p.into(),
        None => config.base().profile.unwrap_or_default(),
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut replay = Replay::new(Guard::new(profile, config));
    let mut reader = open_input(args.file.as_deref())?;
    // Peek at the first non-blank line: an events line streams; anything
    // else (a JSON document, message lines) takes the whole-document path.
    let (format, first) = match args.format {
        Format::Auto => {
            let first = read_first_line(&mut reader, args.lossy)?;
            match &first {
                Some((_, text)) if is_event_line(text) => (Format::Events, first),
                Some(_) | None => {
                    // Blank lines skipped by the peek keep their numbers.
                    let mut text = match first {
                        Some((n, t)) => "\n".repeat(n - 1) + &t,
                        None => String::new(),
                    };
                    text.push_str(&read_rest(&mut reader, args.lossy)?);
                    let f = detect_format(&text);
                    match f {
                        Format::Openai | Format::Anthropic => {
                            return finish_document(&args, f, &text, replay, profile, &mut out)
                        }
                        _ => {
                            // Events after all (e.g. the first line is bad):
                            // replay the text already read, with its line numbers.
                            let stream = StreamOut::new(&mut out, args.json);
                            let summary = replay_event_lines(
                                text.as_bytes(),
                                0,
                                args.lossy,
                                &mut replay,
                                stream,
                                profile,
                            )?;
                            return finish_stream(&args, replay, summary, &mut out);
                        }
                    }
                }
            }
        }
        f => (f, None),
    };
    match format {
        Format::Events | Format::Auto => {
            let mut stream = StreamOut::new(&mut out, args.json);
            let mut lineno = 0;
            if let Some((n, text)) = first {
                lineno = n;
                if let Some(ev) = parse_event_line(&text, n)? {
                    replay.push(ev).map_err(|e| bad(n, e))?;
                    stream.emit(&replay)?;
                }
            }
            let summary =
                replay_event_lines(reader, lineno, args.lossy, &mut replay, stream, profile)?;
            finish_stream(&args, replay, summary, &mut out)
        }
        f => {
            let text = read_rest(&mut reader, args.lossy)?;
            finish_document(&args, f, &text, replay, profile, &mut out)
        }
    }
}

/// Opens the file, or standard input for `None` / `-`.
fn open_input(path: Option<&std::path::Path>) -> anyhow::Result<Box<dyn BufRead>> {
    Ok(match path {
        Some(p) if p.as_os_str() != "-" => {
            let f = std::fs::File::open(p)
                .map_err(|e| BadInput(format!("cannot read {}: {e}", p.display())))?;
            Box::new(std::io::BufReader::with_capacity(1 << 16, f))
        }
        _ => Box::new(std::io::BufReader::with_capacity(
            1 << 16,
            std::io::stdin().lock(),
        )),
    })
}

/// Decodes one line, strictly (the error names the line) or lossily.
fn decode_line(
    bytes: &[u8],
    line: usize,
    lossy: bool,
) -> anyhow::Result<std::borrow::Cow<'_, str>> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(std::borrow::Cow::Borrowed(s)),
        Err(_) if lossy => Ok(String::from_utf8_lossy(bytes)),
        Err(e) => Err(bad(
            line,
            format!(
                "input is not valid UTF-8 (first invalid byte at column {}); \
                 fix the encoding or pass --lossy to replace invalid bytes with U+FFFD",
                e.valid_up_to() + 1
            ),
        )),
    }
}

/// Reads up to the first non-blank line: `(line number, text)`.
fn read_first_line(r: &mut dyn BufRead, lossy: bool) -> anyhow::Result<Option<(usize, String)>> {
    let mut buf = Vec::new();
    let mut n = 0;
    loop {
        buf.clear();
        if r.read_until(b'\n', &mut buf)? == 0 {
            return Ok(None);
        }
        n += 1;
        let text = decode_line(&buf, n, lossy)?;
        if !text.trim().is_empty() {
            return Ok(Some((n, text.into_owned())));
        }
    }
}

/// Reads the rest of the input as text (whole-document formats).
fn read_rest(r: &mut dyn BufRead, lossy: bool) -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    r.read_to_end(&mut bytes)?;
    crate::input::decode(bytes, lossy)
}

/// An events line (has a `"type"`, no `"role"`), as [`detect_format`] decides.
fn is_event_line(line: &str) -> bool {
    match serde_json::from_str::<Value>(line.trim()) {
        Ok(v) => v.get("type").and_then(Value::as_str).is_some() && v.get("role").is_none(),
        Err(_) => false,
    }
}

/// Streams JSON lines as soon as each call's verdict is settled.
struct StreamOut<'a, W: Write> {
    out: &'a mut W,
    json: bool,
    next: usize,
}

impl<'a, W: Write> StreamOut<'a, W> {
    fn new(out: &'a mut W, json: bool) -> Self {
        StreamOut { out, json, next: 0 }
    }

    /// Writes every settled verdict not yet written, in order.
    fn emit(&mut self, replay: &Replay) -> std::io::Result<()> {
        if !self.json {
            return Ok(());
        }
        let v = replay.verdicts();
        while self.next < v.len() && replay.is_settled(self.next) {
            render::write_json_call(self.out, &v[self.next])?;
            self.next += 1;
        }
        Ok(())
    }

    /// Writes the rest (calls still waiting for a result are final at the end).
    fn finish(&mut self, replay: &Replay) -> std::io::Result<()> {
        if self.json {
            for c in &replay.verdicts()[self.next..] {
                render::write_json_call(self.out, c)?;
            }
        }
        Ok(())
    }
}

/// Replays events lines from `r` (line numbers continue after `lineno`).
fn replay_event_lines<W: Write>(
    mut r: impl BufRead,
    mut lineno: usize,
    lossy: bool,
    replay: &mut Replay,
    mut stream: StreamOut<'_, W>,
    profile: Profile,
) -> anyhow::Result<render::Summary> {
    let mut buf = Vec::with_capacity(1024);
    loop {
        buf.clear();
        if r.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        lineno += 1;
        let text = decode_line(&buf, lineno, lossy)?;
        if let Some(ev) = parse_event_line(&text, lineno)? {
            replay.push(ev).map_err(|e| bad(lineno, e))?;
            stream.emit(replay)?;
        }
    }
    stream.finish(replay)?;
    Ok(render::Summary::new(replay.verdicts(), profile, "events"))
}

fn finish_stream<W: Write>(
    args: &Args,
    replay: Replay,
    summary: render::Summary,
    out: &mut W,
) -> anyhow::Result<Exit> {
    if args.json {
        render::write_json_summary(out, &summary)?;
    } else {
        render::write_human(out, replay.verdicts(), &summary)?;
    }
    out.flush()?;
    Ok(exit_of(&summary))
}

fn finish_document<W: Write>(
    args: &Args,
    format: Format,
    text: &str,
    mut replay: Replay,
    profile: Profile,
    out: &mut W,
) -> anyhow::Result<Exit> {
    match format {
        Format::Openai => replay_messages(text, &mut replay, openai_events)?,
        _ => replay_messages(text, &mut replay, anthropic_events)?,
    }
    let verdicts = replay.into_verdicts();
    let summary = render::Summary::new(&verdicts, profile, format_name(format));
    if args.json {
        render::write_json(out, &verdicts, &summary)?;
    } else {
        render::write_human(out, &verdicts, &summary)?;
    }
    out.flush()?;
    Ok(exit_of(&summary))
}

fn exit_of(summary: &render::Summary) -> Exit {
    if summary.criticals > 0 {
        Exit::LoopFound
    } else {
        Exit::Ok
    }
}

fn format_name(f: Format) -> &'static str {
    match f {
        Format::Auto | Format::Events => "events",
        Format::Openai => "openai",
        Format::Anthropic => "anthropic",
    }
}

/// Guesses the format: a JSON document (or message lines) with
/// `tool_use`/`tool_result` blocks is anthropic, with `tool_calls` or role
/// `tool` is openai; everything else is events.
pub fn detect_format(text: &str) -> Format {
    let trimmed = text.trim_start();
    let probe = |v: &Value| -> Option<Format> {
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
                return Some(Format::Openai);
            }
            if let Some(Value::Array(blocks)) = m.get("content") {
                if blocks.iter().any(|b| {
                    matches!(
                        b.get("type").and_then(Value::as_str),
                        Some("tool_use" | "tool_result")
                    )
                }) {
                    return Some(Format::Anthropic);
                }
            }
        }
        None
    };
    if trimmed.starts_with('[') {
        if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
            return probe(&v).unwrap_or(Format::Events);
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
                return Format::Events;
            }
            if let Some(f) = probe(&v) {
                return f;
            }
        } else if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
            return probe(&v).unwrap_or(Format::Events);
        } else {
            return Format::Events;
        }
    }
    Format::Events
}

fn bad(line: usize, msg: impl std::fmt::Display) -> anyhow::Error {
    BadInput(format!("line {line}: {msg}")).into()
}

/// One events-format line. Only the envelope is typed; `args` and
/// `result` stay JSON values.
#[derive(serde::Deserialize)]
struct RawEvent<'a> {
    #[serde(rename = "type", borrow, default)]
    ty: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    tool: Option<Value>,
    #[serde(default)]
    args: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    result: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    run: Option<Value>,
    #[serde(default)]
    agent: Option<Value>,
}

/// `"result": null` is a value (null), unlike an absent `result`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    <Value as serde::Deserialize>::deserialize(d).map(Some)
}

fn opt_string(v: Option<Value>, key: &str, line: usize) -> anyhow::Result<Option<String>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(Value::Number(n)) if key == "id" => Ok(Some(n.to_string())),
        Some(other) => Err(bad(
            line,
            format!("\"{key}\" must be a string, got {other}"),
        )),
    }
}

/// Parses one events-format line (`None` for a blank line).
fn parse_event_line(raw: &str, line: usize) -> anyhow::Result<Option<Event>> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    let v: RawEvent<'_> = serde_json::from_str(raw).map_err(|e| {
        if e.is_data() {
            bad(line, format!("expected an event object: {e}"))
        } else {
            bad(line, format!("not valid JSON: {e}"))
        }
    })?;
    let ev = match v.ty.as_deref() {
        Some("call") => {
            let tool = match v.tool {
                Some(Value::String(t)) => t,
                _ => return Err(bad(line, "a call needs a \"tool\" string")),
            };
            Event::Call {
                id: opt_string(v.id, "id", line)?,
                tool,
                args: v.args.unwrap_or(Value::Null),
                run: opt_string(v.run, "run", line)?,
                agent: opt_string(v.agent, "agent", line)?,
            }
        }
        Some("result") => {
            let id = opt_string(v.id, "id", line)?;
            let body = match v.error {
                Some(Value::String(e)) => Err(e),
                Some(Value::Null) | None => match v.result {
                    Some(r) => Ok(r),
                    None => return Err(bad(line, "a result needs \"result\" or \"error\"")),
                },
                Some(other) => Err(other.to_string()),
            };
            Event::Result { id, body }
        }
        Some("compaction") => Event::Compaction {
            run: opt_string(v.run, "run", line)?,
            agent: opt_string(v.agent, "agent", line)?,
        },
        Some("user") | Some("user_turn") => Event::UserTurn {
            run: opt_string(v.run, "run", line)?,
            agent: opt_string(v.agent, "agent", line)?,
        },
        Some(other) => {
            return Err(bad(
                line,
                format!("unknown event type {other:?} (expected call, result, compaction or user)"),
            ))
        }
        None => return Err(bad(line, "missing \"type\"")),
    };
    Ok(Some(ev))
}

/// Reads a messages transcript (a JSON array, `{"messages": [...]}`, or
/// one message per line) and replays the events each message yields.
fn replay_messages(
    text: &str,
    replay: &mut Replay,
    to_events: fn(&Value, usize) -> anyhow::Result<Vec<Event>>,
) -> anyhow::Result<()> {
    let messages: Vec<Value> = match serde_json::from_str::<Value>(text.trim()) {
        Ok(Value::Array(a)) => a,
        Ok(Value::Object(mut o)) if o.contains_key("messages") => match o.remove("messages") {
            Some(Value::Array(a)) => a,
            _ => return Err(BadInput("\"messages\" must be an array".into()).into()),
        },
        Ok(v @ Value::Object(_)) => vec![v],
        Ok(_) => return Err(BadInput("expected a messages array".into()).into()),
        Err(_) => {
            let mut out = Vec::new();
            for (i, raw) in text.lines().enumerate() {
                if raw.trim().is_empty() {
                    continue;
                }
                out.push(
                    serde_json::from_str(raw)
                        .map_err(|e| bad(i + 1, format!("not valid JSON: {e}")))?,
                );
            }
            out
        }
    };
    for (i, m) in messages.iter().enumerate() {
        for ev in to_events(m, i + 1)? {
            replay
                .push(ev)
                .map_err(|e| BadInput(format!("message {}: {e}", i + 1)))?;
        }
    }
    Ok(())
}

fn msg_bad(n: usize, msg: impl std::fmt::Display) -> anyhow::Error {
    BadInput(format!("message {n}: {msg}")).into()
}

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

fn text_result(text: String) -> Value {
    serde_json::json!({"content": [{"type": "text", "text": text}]})
}

fn openai_events(m: &Value, n: usize) -> anyhow::Result<Vec<Event>> {
    let role = m
        .get("role")
        .and_then(Value::as_str)
        .ok_or_else(|| msg_bad(n, "missing \"role\""))?;
    let mut out = Vec::new();
    match role {
        "assistant" => {
            if let Some(calls) = m.get("tool_calls") {
                let Value::Array(calls) = calls else {
                    return Err(msg_bad(n, "\"tool_calls\" must be an array"));
                };
                for c in calls {
                    let f = c
                        .get("function")
                        .ok_or_else(|| msg_bad(n, "tool call without \"function\""))?;
                    let name = f
                        .get("name")
                        .and_then(Value::as_str)
                        .ok_or_else(|| msg_bad(n, "tool call without a function name"))?;
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
                .ok_or_else(|| msg_bad(n, "tool message without \"tool_call_id\""))?;
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

fn anthropic_events(m: &Value, n: usize) -> anyhow::Result<Vec<Event>> {
    let role = m
        .get("role")
        .and_then(Value::as_str)
        .ok_or_else(|| msg_bad(n, "missing \"role\""))?;
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
                        .ok_or_else(|| msg_bad(n, "tool_use block without \"name\""))?;
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
                        .ok_or_else(|| msg_bad(n, "tool_result block without \"tool_use_id\""))?;
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

    #[test]
    fn detects_formats() {
        assert_eq!(
            detect_format("{\"type\":\"call\",\"id\":\"1\",\"tool\":\"x\",\"args\":{}}\n"),
            Format::Events
        );
        assert_eq!(
            detect_format(r#"[{"role":"assistant","tool_calls":[]}]"#),
            Format::Openai
        );
        assert_eq!(
            detect_format(
                r#"{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"x","input":{}}]}]}"#
            ),
            Format::Anthropic
        );
        assert_eq!(detect_format(""), Format::Events);
    }
}
