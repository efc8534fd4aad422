//! Inputs that the `proxy_sse` fuzz target (fuzz/, docs/fuzzing.md) found
//! failing, replayed with its invariants so that CI keeps them fixed
//! without AFL++. Each file under `tests/fuzz/proxy_sse/` is one fuzzer
//! input: byte 0 the options (bits 0-1 the API, bit 2 exact mode, bit 3 a
//! JSON reply, bit 4 reasoning unwatched, bit 5 a failed end), the low
//! three bits of byte 1 the number of chunk sizes that follow (each byte
//! + 1), then the upstream's bytes.

use std::path::PathBuf;

use bytes::Bytes;
use deloop_proxy::anthropic_stream::AnthropicStream;
use deloop_proxy::guard::StreamSettings;
use deloop_proxy::json_reply::JsonSpec;
use deloop_proxy::openai_stream::{Kind, OpenAiStream};
use deloop_proxy::relay::StreamGuard;
use deloop_proxy::request::JsonFormat;
use deloop_proxy::sse::{SseEvent, SseReader};
use deloop_proxy::Flow;

fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz")
        .join(target);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| {
            let path = e.expect("a directory entry").path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).expect("a readable input"))
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no inputs in {}", dir.display());
    out
}

/// The fuzz header: options, chunk sizes, payload.
fn header(data: &[u8]) -> (u8, Vec<usize>, &[u8]) {
    if data.len() < 2 {
        return (0, Vec::new(), data);
    }
    let n = usize::from(data[1] & 7).min(data.len() - 2);
    let sizes = data[2..2 + n].iter().map(|&b| usize::from(b) + 1).collect();
    (data[0], sizes, &data[2 + n..])
}

fn chunks<'a>(bytes: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    if sizes.is_empty() {
        return vec![bytes];
    }
    let (mut out, mut off, mut i) = (Vec::new(), 0, 0);
    while off < bytes.len() {
        let end = (off + sizes[i % sizes.len()]).min(bytes.len());
        out.push(&bytes[off..end]);
        off = end;
        i += 1;
    }
    out
}

fn read(pieces: &[&[u8]], limit: usize) -> Option<Vec<SseEvent>> {
    let mut r = SseReader::new(limit);
    let mut events = Vec::new();
    for p in pieces {
        r.push(p, &mut events).ok()?;
    }
    events.extend(r.finish());
    Some(events)
}

fn guard(flags: u8) -> StreamGuard {
    let mut settings = StreamSettings::new(if flags & 3 == 2 { "end_turn" } else { "stop" });
    settings.exact = flags & 4 != 0;
    if flags & 8 != 0 {
        settings.json = Some(JsonSpec::new(&JsonFormat::Object));
    }
    settings.guard_reasoning = flags & 16 == 0;
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

/// `b` ends with a blank line.
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

/// What the guard writes after an upstream event starts an event of its
/// own: every piece but the last ends on a blank line.
#[test]
fn stream_guard_output_is_well_formed_on_fuzz_findings() {
    for (name, data) in inputs("proxy_sse") {
        let (flags, sizes, payload) = header(&data);
        let whole = read(&[payload], 16 << 10);
        let Some(events) = read(&chunks(payload, &sizes), 16 << 10) else {
            assert!(whole.is_none(), "{name}: the limit depends on the chunking");
            continue;
        };
        assert_eq!(
            whole.as_ref(),
            Some(&events),
            "{name}: events depend on the chunking"
        );
        let mut g = guard(flags);
        let mut out: Vec<Bytes> = Vec::new();
        let mut stopped = false;
        for ev in &events {
            assert!(
                ends_event(&ev.raw),
                "{name}: an event without its blank line"
            );
            if g.on_event(ev, &mut out) == Flow::Stop {
                stopped = true;
                break;
            }
        }
        if !stopped {
            g.on_end((flags & 32 != 0).then_some("connection reset"), &mut out);
        }
        for (i, piece) in out.iter().enumerate().rev().skip(1) {
            assert!(
                ends_event(piece),
                "{name}: piece {i} does not end its event: {piece:?}"
            );
        }
    }
}
