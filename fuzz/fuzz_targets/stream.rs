//! The stream watcher and the guarded stream fed raw bytes (invalid UTF-8
//! included) at fuzzer-chosen split points: the cut does not depend on
//! the chunking, the guarded stream agrees with the watcher, and what it
//! forwards is a prefix of the input (exact mode: exactly the kept text).
//! Options (byte 0): bit 0 exact mode, bit 1 the seed's rules.

use std::sync::OnceLock;

use deloop_core::repetition::{ClampConfig, GuardedStream, StreamCut, StreamWatcher};
use deloop_fuzz::Input;

fn watch(config: &ClampConfig, chunks: &[&[u8]]) -> Option<StreamCut> {
    let mut w = StreamWatcher::new(config.clone());
    for c in chunks {
        if let Some(cut) = w.feed(c) {
            assert!(w.is_done());
            assert!(w.feed(b"more").is_none(), "a second cut");
            return Some(cut);
        }
        assert!(w.settled() <= w.position());
    }
    w.finish()
}

fn check(data: &[u8]) {
    let input = Input::read(data);
    // Built once per process, shared by every input.
    static CONFIGS: OnceLock<[ClampConfig; 2]> = OnceLock::new();
    let [default, seed] =
        CONFIGS.get_or_init(|| [ClampConfig::default(), ClampConfig::seed_compat()]);
    let config = if input.flags & 2 != 0 { seed } else { default };
    let exact = input.flags & 1 != 0;
    let bytes = input.payload;
    let chunks = input.chunks();

    let whole = watch(config, &[bytes]);
    let chunked = watch(config, &chunks);
    assert_eq!(whole, chunked, "the cut depends on the chunking");

    // The guarded stream (lossy: invalid bytes pass through unchanged).
    let mut g = GuardedStream::new(config.clone()).exact(exact).lossy(true);
    let mut out = Vec::new();
    let mut cut = None;
    for c in &chunks {
        let step = g.push_bytes(c).expect("a lossy stream never fails");
        out.extend_from_slice(step.bytes);
        if let Some(c) = step.cut {
            cut = Some(c.clone());
            break;
        }
    }
    if cut.is_none() {
        let step = g.finish().expect("a lossy stream never fails");
        out.extend_from_slice(step.bytes);
        cut = step.cut.cloned();
    }
    assert_eq!(cut.as_ref().map(|c| &c.cut), chunked.as_ref());
    match &cut {
        Some(c) => {
            let keep = c.cut.keep_bytes;
            if exact {
                assert_eq!(
                    out,
                    &bytes[..keep],
                    "exact mode forwarded more than the kept text"
                );
                assert_eq!(c.late_bytes(), 0);
            } else {
                assert_eq!(out, &bytes[..keep.max(c.forwarded_before)]);
            }
        }
        None => assert_eq!(out, bytes, "nothing cut, yet not everything forwarded"),
    }

    // Valid UTF-8 as text deltas (chunks widened to character boundaries).
    if let Ok(text) = std::str::from_utf8(bytes) {
        let mut g = GuardedStream::new(config.clone()).exact(exact);
        let mut out = String::new();
        let mut cut = None;
        let (mut off, mut i) = (0, 0);
        let sizes = if input.sizes.is_empty() {
            vec![text.len().max(1)]
        } else {
            input.sizes.clone()
        };
        while off < text.len() && cut.is_none() {
            let mut end = (off + sizes[i % sizes.len()]).min(text.len());
            i += 1;
            while !text.is_char_boundary(end) {
                end += 1;
            }
            let step = g.push(&text[off..end]);
            out.push_str(std::str::from_utf8(step.bytes).expect("text in, text out"));
            cut = step.cut.cloned();
            off = end;
        }
        if cut.is_none() {
            let step = g.finish().expect("text never fails");
            out.push_str(std::str::from_utf8(step.bytes).expect("text in, text out"));
            cut = step.cut.cloned();
        }
        match cut {
            Some(c) => {
                let mut guarded = out;
                c.apply_to(&mut guarded);
                assert_eq!(
                    guarded,
                    format!("{}{}", &text[..c.cut.keep_bytes], c.cut.replacement_tail)
                );
            }
            None => assert_eq!(out, text),
        }
    }
}

fn main() {
    afl::fuzz!(|data: &[u8]| check(data));
}
