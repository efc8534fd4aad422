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
//! (openai/anthropic), exit code 2; what was already settled has been
//! written by then.
//!
//! Output streams (JSON lines and the human timeline alike) through a
//! streaming [`Replay`], so memory stays flat however long the transcript.
//! Tolerant rule (the replay's): a call still waiting for its result
//! [`DEFAULT_MAX_OPEN`] calls later is settled as it stands, and its late
//! result is ignored with a note on standard error instead of being
//! reported as an unknown id.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use std::borrow::Cow;

use deloop_core::loops::replay::{Event, Replay, DEFAULT_MAX_OPEN};
use deloop_core::loops::{Guard, LoopConfig, OutcomeBody, Profile, Scope, ToolCall};
use serde_json::Value;

use crate::exit::{BadInput, Exit};
use deloop_render::check as render;

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
    let mut replay = Replay::streaming(Guard::new(profile, config));
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
                    let mut sink = render::Sink::new(&mut out, args.json, profile, format_name(f));
                    match f {
                        Format::Openai | Format::Anthropic => {
                            let r = replay_document(f, &text, &mut replay, &mut sink);
                            return finish(r, &mut replay, sink);
                        }
                        _ => {
                            // Events after all (e.g. the first line is bad):
                            // replay the text already read, with its line numbers.
                            let r = replay_event_lines(
                                text.as_bytes(),
                                0,
                                args.lossy,
                                &mut replay,
                                &mut sink,
                            );
                            return finish(r, &mut replay, sink);
                        }
                    }
                }
            }
        }
        f => (f, None),
    };
    let mut sink = render::Sink::new(&mut out, args.json, profile, format_name(format));
    let r = match format {
        Format::Events | Format::Auto => (|| {
            let mut lineno = 0;
            if let Some((n, text)) = first {
                lineno = n;
                push_event_line(&text, n, &mut replay)?;
                sink.drain(&mut replay)?;
            }
            replay_event_lines(reader, lineno, args.lossy, &mut replay, &mut sink)
        })(),
        f => read_rest(&mut reader, args.lossy)
            .and_then(|text| replay_document(f, &text, &mut replay, &mut sink)),
    };
    finish(r, &mut replay, sink)
}

/// Ends the output: on success the remaining verdicts and the summary; on
/// bad input what was settled so far is flushed before the error.
fn finish<W: Write>(
    r: anyhow::Result<()>,
    replay: &mut Replay,
    mut sink: render::Sink<'_, W>,
) -> anyhow::Result<Exit> {
    if let Err(e) = r {
        sink.flush()?;
        return Err(e);
    }
    replay.finish();
    sink.drain(replay)?;
    if replay.ignored_results() > 0 {
        eprintln!(
            "deloop: note: {} calls were still waiting for their result {} calls later; \
             their verdicts were settled as they stood and {} late results were ignored",
            replay.forgotten_calls(),
            DEFAULT_MAX_OPEN,
            replay.ignored_results()
        );
    }
    let summary = sink.finish()?;
    Ok(if summary.criticals > 0 {
        Exit::LoopFound
    } else {
        Exit::Ok
    })
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

/// Lines per batch handed to the parser thread.
const BATCH_LINES: usize = 4096;

/// Raw lines read ahead: one buffer, where each line ends, and the number
/// of the first line.
struct Batch {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    first: usize,
}

/// Reads up to [`BATCH_LINES`] lines into `batch` (fewer only at the end
/// of the input), reusing its buffers.
fn read_batch(r: &mut impl BufRead, batch: &mut Batch, first: usize) -> anyhow::Result<()> {
    batch.bytes.clear();
    batch.ends.clear();
    batch.first = first;
    while batch.ends.len() < BATCH_LINES {
        if r.read_until(b'\n', &mut batch.bytes)? == 0 {
            break;
        }
        batch.ends.push(batch.bytes.len());
    }
    Ok(())
}

/// Decodes and parses every line of a batch (on the parser thread).
fn parse_batch(b: &Batch, lossy: bool, out: &mut Events) {
    let mut start = 0;
    for (i, &end) in b.ends.iter().enumerate() {
        let bytes = &b.bytes[start..end];
        start = end;
        let line = b.first + i;
        let event = decode_line(bytes, line, lossy)
            .and_then(|text| parse_event_line(&text, line, &mut out.arena));
        out.events.push(event);
    }
}

/// Parsed lines of one batch, and their strings.
#[derive(Default)]
struct Events {
    events: Vec<anyhow::Result<Parsed>>,
    arena: Arena,
}

/// Replays events lines from `r` (line numbers continue after `lineno`),
/// writing each verdict as soon as it is settled.
///
/// Two stages on two threads: this one reads lines and replays them in
/// order; a parser thread decodes and parses the next batch meanwhile
/// (parsing costs about as much as judging). Two batches circulate between
/// the threads, so memory stays bounded, and the parsed events go back to
/// the parser thread to be freed where they were allocated (freeing across
/// threads is slow with the system allocator). An error item stops the
/// replay at its line, after everything before it was written.
fn replay_event_lines<W: Write>(
    mut r: impl BufRead,
    lineno: usize,
    lossy: bool,
    replay: &mut Replay,
    sink: &mut render::Sink<'_, W>,
) -> anyhow::Result<()> {
    let stopped = || anyhow::anyhow!("the transcript parser thread stopped");
    std::thread::scope(|scope| {
        let (to_parser, jobs) = std::sync::mpsc::sync_channel::<(Batch, Events)>(2);
        let (to_replay, parsed) = std::sync::mpsc::sync_channel::<(Batch, Events)>(2);
        scope.spawn(move || {
            for (batch, mut events) in jobs {
                // The events of an earlier batch, freed here.
                events.events.clear();
                events.arena.0.clear();
                parse_batch(&batch, lossy, &mut events);
                if to_replay.send((batch, events)).is_err() {
                    break;
                }
            }
        });
        let mut next_line = lineno + 1;
        let mut in_flight = 0;
        for _ in 0..2 {
            let mut batch = Batch {
                bytes: Vec::new(),
                ends: Vec::new(),
                first: 0,
            };
            read_batch(&mut r, &mut batch, next_line)?;
            if batch.ends.is_empty() {
                break;
            }
            next_line += batch.ends.len();
            to_parser
                .send((batch, Events::default()))
                .map_err(|_| stopped())?;
            in_flight += 1;
        }
        let mut eof = in_flight < 2;
        while in_flight > 0 {
            let (mut batch, mut events) = parsed.recv().map_err(|_| stopped())?;
            in_flight -= 1;
            let first = batch.first;
            let Events {
                events: list,
                arena,
            } = &mut events;
            for (i, event) in list.iter_mut().enumerate() {
                match event {
                    Ok(e) => apply_event(e, first + i, replay, arena)?,
                    Err(_) => {
                        let taken = std::mem::replace(event, Ok(Parsed::Blank));
                        return Err(taken.err().unwrap_or_else(stopped));
                    }
                }
                sink.drain(replay)?;
            }
            if !eof {
                read_batch(&mut r, &mut batch, next_line)?;
                eof = batch.ends.len() < BATCH_LINES;
                if !batch.ends.is_empty() {
                    next_line += batch.ends.len();
                    to_parser.send((batch, events)).map_err(|_| stopped())?;
                    in_flight += 1;
                }
            }
        }
        Ok(())
    })
}

/// Replays an openai/anthropic document.
fn replay_document<W: Write>(
    format: Format,
    text: &str,
    replay: &mut Replay,
    sink: &mut render::Sink<'_, W>,
) -> anyhow::Result<()> {
    match format {
        Format::Openai => replay_messages(text, replay, sink, openai_events),
        _ => replay_messages(text, replay, sink, anthropic_events),
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

fn opt_str<'a>(
    v: Option<Loose<'a>>,
    key: &str,
    line: usize,
) -> anyhow::Result<Option<Cow<'a, str>>> {
    match v {
        None | Some(Loose::Null) => Ok(None),
        Some(Loose::Str(s)) => Ok(Some(s)),
        Some(Loose::Other(Value::Number(n))) if key == "id" => Ok(Some(Cow::Owned(n.to_string()))),
        Some(Loose::Other(other)) => Err(bad(
            line,
            format!("\"{key}\" must be a string, got {other}"),
        )),
    }
}

/// One events-format line, parsed and owned (it crosses from the parser
/// thread to the replay). Its strings live in the batch's [`Arena`].
enum Parsed {
    Blank,
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
enum ParsedBody {
    Error(Span),
    Result(Value),
}

/// Where a string sits in an [`Arena`].
#[derive(Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
}

/// The envelope strings (tool, ids, run, agent, error) of a batch of
/// lines, in one buffer reused from batch to batch: no allocation per
/// line.
#[derive(Default)]
struct Arena(String);

impl Arena {
    fn push(&mut self, s: &str) -> Span {
        let start = self.0.len();
        self.0.push_str(s);
        Span {
            start,
            end: self.0.len(),
        }
    }

    fn get(&self, span: Span) -> &str {
        self.0.get(span.start..span.end).unwrap_or_default()
    }

    fn opt(&self, span: Option<Span>) -> Option<&str> {
        span.map(|s| self.get(s))
    }
}

/// Parses one events-format line and feeds it to the replay (a blank line
/// is skipped).
fn push_event_line(raw: &str, line: usize, replay: &mut Replay) -> anyhow::Result<()> {
    let mut arena = Arena::default();
    let event = parse_event_line(raw, line, &mut arena)?;
    apply_event(&event, line, replay, &arena)
}

/// Parses one events-format line; the error names the line.
fn parse_event_line(raw: &str, line: usize, arena: &mut Arena) -> anyhow::Result<Parsed> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(Parsed::Blank);
    }
    let v: RawEvent<'_> = serde_json::from_str(raw).map_err(|e| {
        if e.is_data() {
            bad(line, format!("expected an event object: {e}"))
        } else {
            bad(line, format!("not valid JSON: {e}"))
        }
    })?;
    let mut opt = |v: Option<Loose<'_>>, key: &str| -> anyhow::Result<Option<Span>> {
        Ok(opt_str(v, key, line)?.map(|s| arena.push(&s)))
    };
    Ok(match v.ty.as_deref() {
        Some("call") => {
            let id = opt(v.id, "id")?;
            let run = opt(v.run, "run")?;
            let agent = opt(v.agent, "agent")?;
            let tool = match v.tool {
                Some(Loose::Str(t)) => arena.push(&t),
                _ => return Err(bad(line, "a call needs a \"tool\" string")),
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
                Some(Loose::Str(e)) => ParsedBody::Error(arena.push(&e)),
                Some(Loose::Null) | None => match v.result {
                    Some(r) => ParsedBody::Result(r),
                    None => return Err(bad(line, "a result needs \"result\" or \"error\"")),
                },
                Some(Loose::Other(o)) => ParsedBody::Error(arena.push(&o.to_string())),
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
            return Err(bad(
                line,
                format!("unknown event type {other:?} (expected call, result, compaction or user)"),
            ))
        }
        None => return Err(bad(line, "missing \"type\"")),
    })
}

/// Feeds one parsed line to the replay.
fn apply_event(
    event: &Parsed,
    line: usize,
    replay: &mut Replay,
    arena: &Arena,
) -> anyhow::Result<()> {
    match event {
        Parsed::Blank => {}
        Parsed::Call {
            tool,
            id,
            run,
            agent,
            args,
        } => {
            let mut call = ToolCall::new(arena.get(*tool), args);
            call.call_id = arena.opt(*id);
            call.run_id = arena.opt(*run);
            call.agent_id = arena.opt(*agent);
            replay.push_call(&call);
        }
        Parsed::Result { id, body } => {
            let body = match body {
                ParsedBody::Error(e) => OutcomeBody::Error(arena.get(*e)),
                ParsedBody::Result(r) => OutcomeBody::Result(r),
            };
            replay
                .push_result(arena.opt(*id), body)
                .map_err(|e| bad(line, e))?;
        }
        Parsed::Compaction { run, agent } => replay.push_compaction(&Scope {
            agent_id: arena.opt(*agent),
            run_id: arena.opt(*run),
        }),
        Parsed::User { run, agent } => replay.push_user_turn(&Scope {
            agent_id: arena.opt(*agent),
            run_id: arena.opt(*run),
        }),
    }
    Ok(())
}

/// Reads a messages transcript (a JSON array, `{"messages": [...]}`, or
/// one message per line) and replays the events each message yields.
fn replay_messages<W: Write>(
    text: &str,
    replay: &mut Replay,
    sink: &mut render::Sink<'_, W>,
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
        sink.drain(replay)?;
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
