//! The whole `deloop check` flow: transcript bytes in, verdicts out
//! ([`run`]), shared by the command line and the server.

use std::io::{self, BufRead, BufReader, Read, Write};

use deloop_core::loops::replay::Replay;
use deloop_core::loops::transcript::{
    detect_format, is_event_line, message_events, parse_messages, EventBatch, TranscriptError,
    TranscriptFormat,
};
use deloop_core::loops::{Guard, LoopConfig, Profile};

use super::{Sink, Summary};

/// Options of [`run`]: what `deloop check`'s flags and `POST /v1/check`'s
/// query set.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// The transcript format ([`TranscriptFormat::Auto`] detects it).
    pub format: TranscriptFormat,
    /// The detection profile. The command line's default is the config's
    /// `profile` when it sets one (`config.base().profile`), else
    /// [`Profile::Default`]; the caller resolves it.
    pub profile: Profile,
    /// The OpenClaw `tools.loopDetection` settings (`None`: the defaults).
    pub config: Option<LoopConfig>,
    /// JSON lines (one per call, then the summary) instead of the human
    /// timeline.
    pub json: bool,
    /// Replace invalid UTF-8 with U+FFFD instead of refusing the input.
    pub lossy: bool,
}

/// Why [`run`] stopped before the end of the transcript.
#[derive(Debug)]
pub enum CheckError {
    /// The transcript is bad (malformed JSON, a missing field, invalid
    /// UTF-8, a result for an id no call waits on). Every verdict settled
    /// before it was already written. Displayed as `line N: message`, or
    /// the message alone when no line is known.
    Input {
        /// The 1-based line of the input, when the error belongs to one.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// Reading the transcript or writing the output failed.
    Io(io::Error),
}

impl std::fmt::Display for CheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckError::Input {
                line: Some(n),
                message,
            } => write!(f, "line {n}: {message}"),
            CheckError::Input {
                line: None,
                message,
            } => f.write_str(message),
            CheckError::Io(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for CheckError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CheckError::Io(e) => Some(e),
            CheckError::Input { .. } => None,
        }
    }
}

impl From<io::Error> for CheckError {
    fn from(e: io::Error) -> Self {
        CheckError::Io(e)
    }
}

impl From<TranscriptError> for CheckError {
    fn from(e: TranscriptError) -> Self {
        CheckError::Input {
            line: e.line,
            message: e.message,
        }
    }
}

impl From<&TranscriptError> for CheckError {
    fn from(e: &TranscriptError) -> Self {
        e.clone().into()
    }
}

fn bad(line: usize, message: impl std::fmt::Display) -> CheckError {
    CheckError::Input {
        line: Some(line),
        message: message.to_string(),
    }
}

/// Replays a transcript through the tool-call loop guard and writes a
/// verdict per call to `out` (JSON lines or the human timeline, see the
/// [module docs](super)), then the summary, and returns the totals.
///
/// The output streams: each call is written as soon as its verdict is
/// settled, and memory stays flat however long an events transcript is
/// (the message formats are whole documents and are read whole). Events
/// lines are parsed on a second thread while this one judges. On bad input
/// everything settled before it has been written (and `out` flushed) when
/// the error returns; a human timeline is closed off first.
///
/// [`Summary::ignored_results`] counts late results ignored by the
/// tolerant rule of [`Replay`] (calls still waiting for their result
/// [`DEFAULT_MAX_OPEN`] calls later are settled as they stand); the command
/// line notes them on standard error.
///
/// [`DEFAULT_MAX_OPEN`]: deloop_core::loops::replay::DEFAULT_MAX_OPEN
///
/// ```
/// use deloop_render::check::{run, CheckOptions};
///
/// let mut transcript = String::new();
/// for i in 0..25 {
///     transcript += &format!("{{\"type\":\"call\",\"id\":\"c{i}\",\"tool\":\"read\",\"args\":{{}}}}\n");
///     transcript += &format!("{{\"type\":\"result\",\"id\":\"c{i}\",\"result\":\"same\"}}\n");
/// }
/// let options = CheckOptions { json: true, ..CheckOptions::default() };
/// let mut out = Vec::new();
/// let summary = run(transcript.as_bytes(), &options, &mut out).unwrap();
/// assert_eq!(summary.calls, 25);
/// assert!(summary.criticals > 0);
/// let text = String::from_utf8(out).unwrap();
/// assert_eq!(text.lines().count(), 26); // 25 calls and the summary
/// ```
pub fn run(
    input: impl Read,
    options: &CheckOptions,
    out: &mut impl Write,
) -> Result<Summary, CheckError> {
    let profile = options.profile;
    let lossy = options.lossy;
    let config = options.config.clone().unwrap_or_default();
    let mut replay = Replay::streaming(Guard::new(profile, config));
    let mut reader = BufReader::with_capacity(1 << 16, input);
    // Peek at the first non-blank line: an events line streams; anything
    // else (a JSON document, message lines) takes the whole-document path.
    let (format, first) = match options.format {
        TranscriptFormat::Auto => {
            let first = read_first_line(&mut reader, lossy)?;
            match &first {
                Some((_, text)) if is_event_line(text) => (TranscriptFormat::Events, first),
                Some(_) | None => {
                    // Blank lines skipped by the peek keep their numbers.
                    let mut text = match first {
                        Some((n, t)) => "\n".repeat(n - 1) + &t,
                        None => String::new(),
                    };
                    text.push_str(&read_rest(&mut reader, lossy)?);
                    let f = detect_format(&text);
                    let mut sink = Sink::new(out, options.json, profile, format_name(f));
                    let r = match f {
                        TranscriptFormat::OpenAi | TranscriptFormat::Anthropic => {
                            replay_document(f, &text, &mut replay, &mut sink)
                        }
                        // Events after all (e.g. the first line is bad):
                        // replay the text already read, with its line numbers.
                        _ => replay_event_lines(text.as_bytes(), 0, lossy, &mut replay, &mut sink),
                    };
                    return finish(r, &mut replay, sink);
                }
            }
        }
        f => (f, None),
    };
    let mut sink = Sink::new(out, options.json, profile, format_name(format));
    let r = match format {
        TranscriptFormat::Events | TranscriptFormat::Auto => (|| {
            let mut lineno = 0;
            if let Some((n, text)) = first {
                lineno = n;
                let mut batch = EventBatch::new();
                batch.push_line(&text, n);
                replay_batch(&batch, &mut replay, &mut sink)?;
            }
            replay_event_lines(reader, lineno, lossy, &mut replay, &mut sink)
        })(),
        f => read_rest(&mut reader, lossy)
            .and_then(|text| replay_document(f, &text, &mut replay, &mut sink)),
    };
    finish(r, &mut replay, sink)
}

/// Ends the output: on success the remaining verdicts and the summary; on
/// bad input what was settled so far is flushed before the error.
fn finish<W: Write>(
    r: Result<(), CheckError>,
    replay: &mut Replay,
    mut sink: Sink<'_, W>,
) -> Result<Summary, CheckError> {
    if let Err(e) = r {
        sink.flush()?;
        return Err(e);
    }
    replay.finish();
    sink.drain(replay)?;
    let mut summary = sink.finish()?;
    summary.forgotten_calls = replay.forgotten_calls();
    summary.ignored_results = replay.ignored_results();
    Ok(summary)
}

fn format_name(f: TranscriptFormat) -> &'static str {
    match f {
        TranscriptFormat::Auto | TranscriptFormat::Events => "events",
        TranscriptFormat::OpenAi => "openai",
        TranscriptFormat::Anthropic => "anthropic",
    }
}

/// Decodes one line, strictly (the error names the line) or lossily.
fn decode_line(
    bytes: &[u8],
    line: usize,
    lossy: bool,
) -> Result<std::borrow::Cow<'_, str>, CheckError> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(std::borrow::Cow::Borrowed(s)),
        Err(_) if lossy => Ok(String::from_utf8_lossy(bytes)),
        Err(e) => Err(bad(line, not_utf8_in_line(e.valid_up_to()))),
    }
}

fn not_utf8_in_line(valid_up_to: usize) -> String {
    format!(
        "input is not valid UTF-8 (first invalid byte at column {}); \
         fix the encoding or pass --lossy to replace invalid bytes with U+FFFD",
        valid_up_to + 1
    )
}

/// Reads up to the first non-blank line: `(line number, text)`.
fn read_first_line(
    r: &mut impl BufRead,
    lossy: bool,
) -> Result<Option<(usize, String)>, CheckError> {
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
fn read_rest(r: &mut impl BufRead, lossy: bool) -> Result<String, CheckError> {
    let mut bytes = Vec::new();
    r.read_to_end(&mut bytes)?;
    match String::from_utf8(bytes) {
        Ok(s) => Ok(s),
        Err(e) if lossy => Ok(String::from_utf8_lossy(e.as_bytes()).into_owned()),
        Err(e) => Err(CheckError::Input {
            line: None,
            message: format!(
                "input is not valid UTF-8 (first invalid byte at offset {}); \
                 fix the encoding or pass --lossy to replace invalid bytes with U+FFFD",
                e.utf8_error().valid_up_to()
            ),
        }),
    }
}

/// Lines per batch handed to the parser thread.
const BATCH_LINES: usize = 4096;

/// Raw lines read ahead: one buffer, where each line ends, and the number
/// of the first line.
struct RawLines {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    first: usize,
}

/// Reads up to [`BATCH_LINES`] lines into `raw` (fewer only at the end of
/// the input), reusing its buffers.
fn read_lines(r: &mut impl BufRead, raw: &mut RawLines, first: usize) -> io::Result<()> {
    raw.bytes.clear();
    raw.ends.clear();
    raw.first = first;
    while raw.ends.len() < BATCH_LINES {
        if r.read_until(b'\n', &mut raw.bytes)? == 0 {
            break;
        }
        raw.ends.push(raw.bytes.len());
    }
    Ok(())
}

/// Decodes and parses every line of `raw` into `batch` (on the parser
/// thread).
fn parse_lines(raw: &RawLines, lossy: bool, batch: &mut EventBatch) {
    let mut start = 0;
    for (i, &end) in raw.ends.iter().enumerate() {
        let bytes = &raw.bytes[start..end];
        start = end;
        let line = raw.first + i;
        match std::str::from_utf8(bytes) {
            Ok(text) => batch.push_line(text, line),
            Err(_) if lossy => batch.push_line(&String::from_utf8_lossy(bytes), line),
            Err(e) => batch.push_error(TranscriptError::at_line(
                line,
                not_utf8_in_line(e.valid_up_to()),
            )),
        }
    }
}

/// Replays the events of a batch in order, writing each settled verdict;
/// stops at the first bad line.
fn replay_batch<W: Write>(
    batch: &EventBatch,
    replay: &mut Replay,
    sink: &mut Sink<'_, W>,
) -> Result<(), CheckError> {
    for (line, event) in batch.iter() {
        event?.replay(replay).map_err(|e| bad(line, e))?;
        sink.drain(replay)?;
    }
    Ok(())
}

/// Replays events lines from `r` (line numbers continue after `lineno`),
/// writing each verdict as soon as it is settled.
///
/// Two stages on two threads: this one reads lines and replays them in
/// order; a parser thread decodes and parses the next batch meanwhile
/// (parsing costs about as much as judging). Two batches circulate between
/// the threads, so memory stays bounded, and the parsed events go back to
/// the parser thread to be freed where they were allocated (freeing across
/// threads is slow with the system allocator). A bad line stops the replay
/// there, after everything before it was written.
fn replay_event_lines<W: Write>(
    mut r: impl BufRead,
    lineno: usize,
    lossy: bool,
    replay: &mut Replay,
    sink: &mut Sink<'_, W>,
) -> Result<(), CheckError> {
    let stopped = || CheckError::Io(io::Error::other("the transcript parser thread stopped"));
    std::thread::scope(|scope| {
        let (to_parser, jobs) = std::sync::mpsc::sync_channel::<(RawLines, EventBatch)>(2);
        let (to_replay, parsed) = std::sync::mpsc::sync_channel::<(RawLines, EventBatch)>(2);
        scope.spawn(move || {
            for (raw, mut batch) in jobs {
                // The events of an earlier batch, freed here.
                batch.clear();
                parse_lines(&raw, lossy, &mut batch);
                if to_replay.send((raw, batch)).is_err() {
                    break;
                }
            }
        });
        let mut next_line = lineno + 1;
        let mut in_flight = 0;
        for _ in 0..2 {
            let mut raw = RawLines {
                bytes: Vec::new(),
                ends: Vec::new(),
                first: 0,
            };
            read_lines(&mut r, &mut raw, next_line)?;
            if raw.ends.is_empty() {
                break;
            }
            next_line += raw.ends.len();
            to_parser
                .send((raw, EventBatch::new()))
                .map_err(|_| stopped())?;
            in_flight += 1;
        }
        let mut eof = in_flight < 2;
        while in_flight > 0 {
            let (mut raw, batch) = parsed.recv().map_err(|_| stopped())?;
            in_flight -= 1;
            replay_batch(&batch, replay, sink)?;
            if !eof {
                read_lines(&mut r, &mut raw, next_line)?;
                eof = raw.ends.len() < BATCH_LINES;
                if !raw.ends.is_empty() {
                    next_line += raw.ends.len();
                    to_parser.send((raw, batch)).map_err(|_| stopped())?;
                    in_flight += 1;
                }
            }
        }
        Ok(())
    })
}

/// Replays an openai/anthropic document, message by message.
fn replay_document<W: Write>(
    format: TranscriptFormat,
    text: &str,
    replay: &mut Replay,
    sink: &mut Sink<'_, W>,
) -> Result<(), CheckError> {
    let messages = parse_messages(text)?;
    for (i, m) in messages.iter().enumerate() {
        for ev in message_events(format, m, i + 1)? {
            replay
                .push(ev)
                .map_err(|e| CheckError::from(TranscriptError::at_message(i + 1, e)))?;
        }
        sink.drain(replay)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(i: usize) -> String {
        format!("{{\"type\":\"call\",\"id\":\"c{i}\",\"tool\":\"read\",\"args\":{{\"i\":{i}}}}}\n{{\"type\":\"result\",\"id\":\"c{i}\",\"result\":{i}}}\n")
    }

    fn json() -> CheckOptions {
        CheckOptions {
            json: true,
            ..CheckOptions::default()
        }
    }

    /// A bad line after output began: everything before it is written,
    /// and the error names the line.
    #[test]
    fn bad_line_after_output_names_the_line() {
        for format in [TranscriptFormat::Auto, TranscriptFormat::Events] {
            let mut text: String = (0..3).map(call).collect();
            text.push_str("{\"type\":\"result\",\"id\":\"nope\",\"result\":1}\n");
            text.push_str(&call(9));
            let mut out = Vec::new();
            let options = CheckOptions { format, ..json() };
            let err = run(text.as_bytes(), &options, &mut out).unwrap_err();
            match &err {
                CheckError::Input { line, message } => {
                    assert_eq!(*line, Some(7));
                    assert!(message.contains("\"nope\""), "{message}");
                }
                CheckError::Io(e) => panic!("{e}"),
            }
            assert!(err.to_string().starts_with("line 7: "));
            assert_eq!(String::from_utf8(out).unwrap().lines().count(), 3);
        }
    }

    #[test]
    fn invalid_utf8_is_bad_input_or_lossy() {
        let text = [call(0).as_bytes(), b"\xff\n", call(1).as_bytes()].concat();
        let err = run(&text[..], &json(), &mut Vec::new()).unwrap_err();
        assert!(
            matches!(err, CheckError::Input { line: Some(3), .. }),
            "{err}"
        );
        let lossy = CheckOptions {
            lossy: true,
            ..json()
        };
        // Lossy: the replacement character is not JSON, still bad input.
        let err = run(&text[..], &lossy, &mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains("not valid JSON"), "{err}");
    }

    #[test]
    fn message_formats_and_the_summary() {
        let doc = r#"[{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"ls","arguments":"{}"}}]},
                     {"role":"tool","tool_call_id":"a","content":"x"}]"#;
        let mut out = Vec::new();
        let s = run(doc.as_bytes(), &json(), &mut out).unwrap();
        assert_eq!((s.format, s.calls, s.criticals), ("openai", 1, 0));
        let text = String::from_utf8(out).unwrap();
        assert!(text.ends_with("\"detectors\":{}}}\n"), "{text}");
        let mut out = Vec::new();
        let err = run(
            r#"[{"role":"tool","tool_call_id":"zz","content":"x"}]"#.as_bytes(),
            &json(),
            &mut out,
        )
        .unwrap_err();
        assert!(matches!(err, CheckError::Input { line: None, .. }));
        assert!(err.to_string().starts_with("message 1: "), "{err}");
        // Empty input: an empty events transcript.
        let s = run(&b""[..], &CheckOptions::default(), &mut Vec::new()).unwrap();
        assert_eq!((s.format, s.calls), ("events", 0));
    }
}
