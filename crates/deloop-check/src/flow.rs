//! [`run`]: transcript bytes in, verdicts out to a [`CheckSink`].

use std::io::{self, BufRead, BufReader, Read};

use deloop_core::loops::replay::Replay;
use deloop_core::loops::transcript::{
    decode_document, decode_line, detect_format, is_event_line, message_events, parse_messages,
    EventBatch, TranscriptError, TranscriptFormat,
};
use deloop_core::loops::{Guard, LoopConfig, Profile};

use crate::{CheckSink, Summary};

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
    /// Replace invalid UTF-8 with U+FFFD instead of refusing the input.
    pub lossy: bool,
}

/// Why [`run`] stopped before the end of the transcript.
#[derive(Debug)]
pub enum CheckError {
    /// The transcript is bad (malformed JSON, a missing field, invalid
    /// UTF-8, a result for an id no call waits on). Every verdict settled
    /// before it was already handed to the sink. Displayed as
    /// `line N: message`, or the message alone when no line is known.
    Input {
        /// The 1-based line of the input, when the error belongs to one.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// Reading the transcript failed, or the sink did.
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

/// Replays a transcript through the tool-call loop guard, hands each
/// call's verdict to `sink` as soon as it is settled, then the totals, and
/// returns them.
///
/// Memory stays flat however long an events transcript is: it is read
/// line by line, and its lines are parsed on a second thread while this
/// one judges (the message formats are whole documents and are read
/// whole). On bad input every verdict settled before it has been handed
/// to `sink`, then [`CheckSink::stopped`] is called, when the error
/// returns.
///
/// [`Summary::ignored_results`] counts late results ignored by the
/// tolerant rule of [`Replay`] (calls still waiting for their result
/// [`DEFAULT_MAX_OPEN`] calls later are settled as they stand); the command
/// line notes them on standard error.
///
/// [`DEFAULT_MAX_OPEN`]: deloop_core::loops::replay::DEFAULT_MAX_OPEN
pub fn run(
    input: impl Read,
    options: &CheckOptions,
    sink: &mut impl CheckSink,
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
            let first = match read_first_line(&mut reader, lossy) {
                Ok(first) => first,
                Err(e) => return stop(e, sink),
            };
            match &first {
                Some((_, text)) if is_event_line(text) => (TranscriptFormat::Events, first),
                Some(_) | None => {
                    // Blank lines skipped by the peek keep their numbers.
                    let mut text = match first {
                        Some((n, t)) => "\n".repeat(n - 1) + &t,
                        None => String::new(),
                    };
                    match read_rest(&mut reader, lossy) {
                        Ok(rest) => text.push_str(&rest),
                        Err(e) => return stop(e, sink),
                    }
                    let format = detect_format(&text);
                    let mut to = Deliver::begin(sink, profile, format)?;
                    let r = match format {
                        TranscriptFormat::OpenAi | TranscriptFormat::Anthropic => {
                            replay_document(format, &text, &mut replay, &mut to)
                        }
                        // Events after all (e.g. the first line is bad):
                        // replay the text already read, with its line numbers.
                        _ => replay_event_lines(text.as_bytes(), 0, lossy, &mut replay, &mut to),
                    };
                    return to.finish(r, &mut replay);
                }
            }
        }
        f => (f, None),
    };
    let mut to = Deliver::begin(sink, profile, format)?;
    let r = match format {
        TranscriptFormat::Events | TranscriptFormat::Auto => (|| {
            let mut lineno = 0;
            if let Some((n, text)) = first {
                lineno = n;
                let mut batch = EventBatch::new();
                batch.push_line(&text, n);
                replay_batch(&batch, &mut replay, &mut to)?;
            }
            replay_event_lines(reader, lineno, lossy, &mut replay, &mut to)
        })(),
        f => read_rest(&mut reader, lossy)
            .and_then(|text| replay_document(f, &text, &mut replay, &mut to)),
    };
    to.finish(r, &mut replay)
}

/// Ends a replay that stopped before its format was known.
fn stop(e: CheckError, sink: &mut impl CheckSink) -> Result<Summary, CheckError> {
    sink.stopped()?;
    Err(e)
}

/// Hands settled verdicts to the sink, counting them on the way.
struct Deliver<'s, S: CheckSink> {
    sink: &'s mut S,
    summary: Summary,
}

impl<'s, S: CheckSink> Deliver<'s, S> {
    fn begin(sink: &'s mut S, profile: Profile, format: TranscriptFormat) -> io::Result<Self> {
        let format = match format {
            TranscriptFormat::Auto => TranscriptFormat::Events,
            f => f,
        };
        sink.begin(profile, format)?;
        Ok(Deliver {
            sink,
            summary: Summary::empty(profile, format),
        })
    }

    /// Hands over every verdict the replay has settled, in order.
    fn drain(&mut self, replay: &mut Replay) -> io::Result<()> {
        while let Some(c) = replay.pop_settled() {
            self.summary.add(&c);
            self.sink.call(c)?;
        }
        Ok(())
    }

    /// Ends the replay: on success the remaining verdicts and the totals;
    /// on an error, word to the sink that it stopped.
    fn finish(
        mut self,
        r: Result<(), CheckError>,
        replay: &mut Replay,
    ) -> Result<Summary, CheckError> {
        if let Err(e) = r {
            self.sink.stopped()?;
            return Err(e);
        }
        replay.finish();
        self.drain(replay)?;
        self.summary.forgotten_calls = replay.forgotten_calls();
        self.summary.ignored_results = replay.ignored_results();
        self.sink.summary(&self.summary)?;
        Ok(self.summary)
    }
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
    Ok(decode_document(bytes, lossy)?)
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
        batch.push_bytes(&raw.bytes[start..end], raw.first + i, lossy);
        start = end;
    }
}

/// Replays the events of a batch in order, handing over each settled
/// verdict; stops at the first bad line.
fn replay_batch<S: CheckSink>(
    batch: &EventBatch,
    replay: &mut Replay,
    to: &mut Deliver<'_, S>,
) -> Result<(), CheckError> {
    for (line, event) in batch.iter() {
        event?.replay(replay).map_err(|e| bad(line, e))?;
        to.drain(replay)?;
    }
    Ok(())
}

/// Replays events lines from `r` (line numbers continue after `lineno`),
/// handing over each verdict as soon as it is settled.
///
/// Two stages on two threads: this one reads lines and replays them in
/// order; a parser thread decodes and parses the next batch meanwhile
/// (parsing costs about as much as judging). Two batches circulate between
/// the threads, so memory stays bounded, and the parsed events go back to
/// the parser thread to be freed where they were allocated (freeing across
/// threads is slow with the system allocator). A bad line stops the replay
/// there, after everything before it was handed over.
fn replay_event_lines<S: CheckSink>(
    mut r: impl BufRead,
    lineno: usize,
    lossy: bool,
    replay: &mut Replay,
    to: &mut Deliver<'_, S>,
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
            replay_batch(&batch, replay, to)?;
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
fn replay_document<S: CheckSink>(
    format: TranscriptFormat,
    text: &str,
    replay: &mut Replay,
    to: &mut Deliver<'_, S>,
) -> Result<(), CheckError> {
    let messages = parse_messages(text)?;
    for (i, m) in messages.iter().enumerate() {
        for ev in message_events(format, m, i + 1)? {
            replay
                .push(ev)
                .map_err(|e| CheckError::from(TranscriptError::at_message(i + 1, e)))?;
        }
        to.drain(replay)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Collect;
    use deloop_core::loops::replay::CallVerdict;

    fn call(i: usize) -> String {
        format!("{{\"type\":\"call\",\"id\":\"c{i}\",\"tool\":\"read\",\"args\":{{\"i\":{i}}}}}\n{{\"type\":\"result\",\"id\":\"c{i}\",\"result\":{i}}}\n")
    }

    /// A sink that records what it was told, in order.
    #[derive(Default)]
    struct Record(Vec<String>);

    impl CheckSink for Record {
        fn begin(&mut self, profile: Profile, format: TranscriptFormat) -> io::Result<()> {
            self.0.push(format!("begin {} {format}", profile.name()));
            Ok(())
        }

        fn call(&mut self, v: CallVerdict) -> io::Result<()> {
            self.0.push(format!("call {}", v.index));
            Ok(())
        }

        fn summary(&mut self, s: &Summary) -> io::Result<()> {
            self.0.push(format!("summary {}", s.calls));
            Ok(())
        }

        fn stopped(&mut self) -> io::Result<()> {
            self.0.push("stopped".into());
            Ok(())
        }
    }

    /// A bad line after verdicts were handed over: everything before it
    /// was delivered, the sink hears that the replay stopped, and the
    /// error names the line.
    #[test]
    fn bad_line_after_output_names_the_line() {
        for format in [TranscriptFormat::Auto, TranscriptFormat::Events] {
            let mut text: String = (0..3).map(call).collect();
            text.push_str("{\"type\":\"result\",\"id\":\"nope\",\"result\":1}\n");
            text.push_str(&call(9));
            let mut sink = Record::default();
            let options = CheckOptions {
                format,
                ..CheckOptions::default()
            };
            let err = run(text.as_bytes(), &options, &mut sink).unwrap_err();
            match &err {
                CheckError::Input { line, message } => {
                    assert_eq!(*line, Some(7));
                    assert!(message.contains("\"nope\""), "{message}");
                }
                CheckError::Io(e) => panic!("{e}"),
            }
            assert!(err.to_string().starts_with("line 7: "));
            assert_eq!(
                sink.0,
                [
                    "begin default events",
                    "call 0",
                    "call 1",
                    "call 2",
                    "stopped"
                ]
            );
        }
    }

    #[test]
    fn invalid_utf8_is_bad_input_or_lossy() {
        let text = [call(0).as_bytes(), b"\xff\n", call(1).as_bytes()].concat();
        let err = run(&text[..], &CheckOptions::default(), &mut Collect::default()).unwrap_err();
        assert!(
            matches!(err, CheckError::Input { line: Some(3), .. }),
            "{err}"
        );
        assert!(err.to_string().contains("pass --lossy"), "{err}");
        let lossy = CheckOptions {
            lossy: true,
            ..CheckOptions::default()
        };
        // Lossy: the replacement character is not JSON, still bad input.
        let err = run(&text[..], &lossy, &mut Collect::default()).unwrap_err();
        assert!(err.to_string().contains("not valid JSON"), "{err}");
        // A whole document (format given): the error names the byte
        // offset, no line.
        let doc = b"[{\"role\":\"tool\",\"tool_call_id\":\"a\",\"content\":\"\xff\"}]";
        let openai = CheckOptions {
            format: TranscriptFormat::OpenAi,
            ..CheckOptions::default()
        };
        let err = run(&doc[..], &openai, &mut Collect::default()).unwrap_err();
        assert!(matches!(err, CheckError::Input { line: None, .. }), "{err}");
        assert!(err.to_string().contains("offset 46"), "{err}");
    }

    /// A bad first line stops the replay before any format is announced.
    #[test]
    fn invalid_first_line_stops_before_begin() {
        let mut sink = Record::default();
        let err = run(&b"\n\xff\n"[..], &CheckOptions::default(), &mut sink).unwrap_err();
        assert!(
            matches!(err, CheckError::Input { line: Some(2), .. }),
            "{err}"
        );
        assert_eq!(sink.0, ["stopped"]);
    }

    #[test]
    fn message_formats_and_the_summary() {
        let doc = r#"[{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"ls","arguments":"{}"}}]},
                     {"role":"tool","tool_call_id":"a","content":"x"}]"#;
        let mut sink = Record::default();
        let s = run(doc.as_bytes(), &CheckOptions::default(), &mut sink).unwrap();
        assert_eq!((s.format, s.calls, s.criticals), ("openai", 1, 0));
        assert_eq!(sink.0, ["begin default openai", "call 0", "summary 1"]);
        let err = run(
            r#"[{"role":"tool","tool_call_id":"zz","content":"x"}]"#.as_bytes(),
            &CheckOptions::default(),
            &mut Collect::default(),
        )
        .unwrap_err();
        assert!(matches!(err, CheckError::Input { line: None, .. }));
        assert!(err.to_string().starts_with("message 1: "), "{err}");
        // Empty input: an empty events transcript.
        let mut sink = Record::default();
        let s = run(&b""[..], &CheckOptions::default(), &mut sink).unwrap();
        assert_eq!((s.format, s.calls), ("events", 0));
        assert_eq!(sink.0, ["begin default events", "summary 0"]);
    }

    /// More lines than one batch: every verdict arrives, in order, and a
    /// bad line in a later batch keeps its number.
    #[test]
    fn many_batches_keep_order_and_line_numbers() {
        let n = BATCH_LINES + 10;
        let text: String = (0..n).map(call).collect();
        let mut sink = Collect::default();
        let s = run(text.as_bytes(), &CheckOptions::default(), &mut sink).unwrap();
        assert_eq!(s.calls, n);
        assert!(sink
            .verdicts()
            .iter()
            .enumerate()
            .all(|(i, c)| c.index == i));
        let text = text + "not json\n";
        let err = run(
            text.as_bytes(),
            &CheckOptions::default(),
            &mut Collect::default(),
        )
        .unwrap_err();
        assert!(
            matches!(err, CheckError::Input { line: Some(l), .. } if l == 2 * n + 1),
            "{err}"
        );
    }
}
