//! The proxy's stream path: the SSE reader fed the upstream's bytes at
//! fuzzer-chosen split points, then the OpenAI or Anthropic stream guard
//! (the rewriter) fed its events. Invariants: the reader's events do not
//! depend on the chunking, and their raw bytes are the input (a leading
//! BOM aside, the last event completed with its blank line), each ending
//! on a blank line; the guard never panics, and what it writes is a stream of
//! well-formed events whose size stays within a small multiple of the
//! input's. Options (byte 0): bits 0-1 the API (chat, completions,
//! anthropic, chat with n = 2 and usage), bit 2 exact mode, bit 3 a JSON
//! reply (`response_format: json_object`), bit 4 reasoning unwatched,
//! bit 5 the upstream fails at the end instead of closing.

use std::sync::OnceLock;

use bytes::Bytes;
use deloop_fuzz::Input;
use deloop_proxy::anthropic_stream::AnthropicStream;
use deloop_proxy::guard::StreamSettings;
use deloop_proxy::json_reply::JsonSpec;
use deloop_proxy::openai_stream::{Kind, OpenAiStream};
use deloop_proxy::relay::StreamGuard;
use deloop_proxy::request::JsonFormat;
use deloop_proxy::sse::{SseEvent, SseReader};
use deloop_proxy::Flow;

/// Events larger than this are refused (the proxy's default is larger;
/// a small limit reaches the error path).
const LIMIT: usize = 16 << 10;

fn read(chunks: &[&[u8]], limit: usize) -> Result<Vec<SseEvent>, ()> {
    let mut r = SseReader::new(limit);
    let mut events = Vec::new();
    for c in chunks {
        r.push(c, &mut events).map_err(|_| ())?;
        assert!(
            r.buffered() <= limit,
            "the reader holds more than its limit"
        );
    }
    events.extend(r.finish());
    Ok(events)
}

fn make_settings(flags: u8) -> StreamSettings {
    let mut settings = StreamSettings::new(if flags & 3 == 2 { "end_turn" } else { "stop" });
    settings.exact = flags & 4 != 0;
    if flags & 8 != 0 {
        settings.json = Some(JsonSpec::new(&JsonFormat::Object));
    }
    settings.guard_reasoning = flags & 16 == 0;
    settings
}

fn guard(flags: u8) -> StreamGuard {
    // The settings of each option (bits 0-4), built once per process.
    static SETTINGS: OnceLock<Vec<StreamSettings>> = OnceLock::new();
    let all = SETTINGS.get_or_init(|| (0..32).map(make_settings).collect());
    let settings = all[usize::from(flags & 31)].clone();
    match flags & 3 {
        0 => StreamGuard::OpenAi(Box::new(OpenAiStream::new(Kind::Chat, settings, 1, false))),
        1 => StreamGuard::OpenAi(Box::new(OpenAiStream::new(
            Kind::Completion,
            settings,
            1,
            false,
        ))),
        2 => StreamGuard::Anthropic(Box::new(AnthropicStream::new(settings))),
        _ => StreamGuard::OpenAi(Box::new(OpenAiStream::new(Kind::Chat, settings, 2, true))),
    }
}

/// `b` ends with a blank line: a line terminator right after another
/// one (or at the start).
fn ends_event(b: &[u8]) -> bool {
    let strip = |b: &[u8]| -> Option<usize> {
        if b.ends_with(b"\r\n") {
            Some(b.len() - 2)
        } else if b.ends_with(b"\n") || b.ends_with(b"\r") {
            Some(b.len() - 1)
        } else {
            None
        }
    };
    match strip(b) {
        Some(0) => true,
        Some(n) => strip(&b[..n]).is_some(),
        None => false,
    }
}

fn check(data: &[u8]) {
    let input = Input::read(data);
    let payload = input.payload;
    let whole = read(&[payload], LIMIT);
    let chunked = read(&input.chunks(), LIMIT);
    assert_eq!(
        whole.is_ok(),
        chunked.is_ok(),
        "the limit depends on the chunking"
    );
    let Ok(events) = chunked else { return };
    assert_eq!(
        whole.as_ref().ok(),
        Some(&events),
        "events depend on the chunking"
    );
    // The raw bytes are the input, the last event completed with its
    // blank line when the stream ended without one; every event ends on a
    // blank line.
    let raw: Vec<u8> = events.iter().flat_map(|e| e.raw.iter().copied()).collect();
    let body = payload.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(payload);
    assert!(
        raw.starts_with(body),
        "the events' raw bytes are not the input"
    );
    assert!(
        matches!(&raw[body.len()..], b"" | b"\n" | b"\r" | b"\n\n"),
        "{:?}",
        &raw[body.len()..]
    );
    for e in &events {
        assert!(
            ends_event(&e.raw),
            "an event without its blank line: {:?}",
            e.raw
        );
    }

    let mut g = guard(input.flags);
    let mut out: Vec<Bytes> = Vec::new();
    let mut stopped = false;
    for ev in &events {
        if g.on_event(ev, &mut out) == Flow::Stop {
            stopped = true;
            break;
        }
    }
    if !stopped {
        let error = (input.flags & 32 != 0).then_some("connection reset");
        g.on_end(error, &mut out);
    }
    let _ = g.take_cuts();
    let written: Vec<u8> = out.concat();
    assert!(
        written.len() <= 4 * payload.len() + 16 * 1024,
        "wrote {} bytes for {} bytes in",
        written.len(),
        payload.len()
    );
    // Every piece but the last ends an event, so that what follows it
    // starts a new one; what the client gets reads back as events.
    for (i, piece) in out.iter().enumerate() {
        if i + 1 < out.len() {
            assert!(
                ends_event(piece),
                "piece {i} does not end its event: {piece:?}"
            );
        }
    }
    read(&[written.as_slice()], usize::MAX).expect("no limit");
}

fn main() {
    afl::fuzz!(|data: &[u8]| check(data));
}
