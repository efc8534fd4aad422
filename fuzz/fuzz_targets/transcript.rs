//! The transcript flow of `deloop check` (and `POST /v1/check`): every
//! format it reads (auto-detected, events JSON lines, OpenAI and Anthropic
//! messages), every profile, both outputs. Never a panic: bad input is a
//! `CheckError::Input`; with `--json` every line written is JSON, and a
//! run that ends well ends with the summary line. Options (byte 0): bits
//! 0-1 the format (auto, events, openai, anthropic), bits 2-3 the profile,
//! bit 4 JSON output, bit 5 lossy UTF-8. The payload is read in the
//! fuzzer's chunks, as a socket would deliver it.

use std::io::Read;

use deloop_check::{run, CheckError, CheckOptions};
use deloop_core::loops::transcript::TranscriptFormat;
use deloop_core::loops::Profile;
use deloop_fuzz::Input;
use deloop_render::check::{HumanTimeline, JsonLines};

/// A reader that hands out the input in the given chunks.
struct Chunked<'a> {
    chunks: Vec<&'a [u8]>,
    at: usize,
    off: usize,
}

impl Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while let Some(c) = self.chunks.get(self.at) {
            let rest = &c[self.off..];
            if rest.is_empty() {
                self.at += 1;
                self.off = 0;
                continue;
            }
            let n = rest.len().min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            self.off += n;
            return Ok(n);
        }
        Ok(0)
    }
}

fn check(data: &[u8]) {
    let input = Input::read(data);
    let f = input.flags;
    let format = [
        TranscriptFormat::Auto,
        TranscriptFormat::Events,
        TranscriptFormat::OpenAi,
        TranscriptFormat::Anthropic,
    ][usize::from(f & 3)];
    let profile = Profile::ALL[usize::from((f >> 2) & 3) % Profile::ALL.len()];
    let options = CheckOptions {
        format,
        profile,
        config: None,
        lossy: f & 32 != 0,
    };
    let json = f & 16 != 0;
    let reader = Chunked {
        chunks: input.chunks(),
        at: 0,
        off: 0,
    };
    let mut out = Vec::new();
    let result = if json {
        run(reader, &options, &mut JsonLines::new(&mut out))
    } else {
        run(reader, &options, &mut HumanTimeline::new(&mut out))
    };
    match &result {
        Ok(_) | Err(CheckError::Input { .. }) => {}
        Err(e) => panic!("an in-memory transcript failed with {e}"),
    }
    if json {
        let text = std::str::from_utf8(&out).expect("JSON lines are UTF-8");
        let mut last = None;
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("every line is JSON");
            last = Some(v);
        }
        if result.is_ok() {
            let last = last.expect("a summary line");
            assert!(
                last.get("summary").is_some(),
                "the last line is not the summary"
            );
        }
    }
}

fn main() {
    afl::fuzz!(|data: &[u8]| check(data));
}
