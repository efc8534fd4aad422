//! A small incremental parser for Server-Sent Events (the `text/event-stream`
//! format): bytes in, `data` payloads out.
//!
//! Handles `\n`, `\r\n` and `\r` line ends split anywhere across chunks,
//! multi-line `data:` fields (joined with `\n`), comments (`:` lines), the
//! optional single space after the colon, and ignores `event`, `id` and
//! `retry` (neither provider needs them). An event still pending when the
//! stream ends is delivered by [`SseParser::finish`] (lenient: some servers
//! omit the final blank line). Lines longer than [`MAX_LINE`] are an error,
//! so memory stays bounded.

use crate::LlmError;

/// Largest accepted line, in bytes (8 MiB).
pub const MAX_LINE: usize = 8 << 20;

/// Incremental SSE parser.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    line: Vec<u8>,
    data: Option<String>,
    /// The previous chunk ended in `\r`: a leading `\n` is part of that end.
    after_cr: bool,
}

impl SseParser {
    /// Feeds bytes; returns the data of every event completed by them.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<String>, LlmError> {
        let mut events = Vec::new();
        let mut rest = bytes;
        if self.after_cr && !rest.is_empty() {
            self.after_cr = false;
            if let Some(stripped) = rest.strip_prefix(b"\n") {
                rest = stripped;
            }
        }
        while let Some(pos) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.push(&rest[..pos])?;
            let was_cr = rest[pos] == b'\r';
            rest = &rest[pos + 1..];
            if was_cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    None => self.after_cr = true,
                    _ => {}
                }
            }
            self.end_line(&mut events)?;
        }
        self.push(rest)?;
        Ok(events)
    }

    /// Ends the stream; returns a last event that had no closing blank line.
    pub fn finish(&mut self) -> Result<Option<String>, LlmError> {
        let mut events = Vec::new();
        if !self.line.is_empty() {
            self.end_line(&mut events)?;
        }
        Ok(events.pop().or_else(|| self.take_data()))
    }

    fn take_data(&mut self) -> Option<String> {
        let mut d = self.data.take()?;
        d.pop();
        Some(d)
    }

    fn push(&mut self, bytes: &[u8]) -> Result<(), LlmError> {
        if self.line.len() + bytes.len() > MAX_LINE {
            return Err(LlmError::Decode(format!(
                "server-sent event line longer than {MAX_LINE} bytes"
            )));
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn end_line(&mut self, events: &mut Vec<String>) -> Result<(), LlmError> {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if let Some(d) = self.take_data() {
                events.push(d);
            }
            return Ok(());
        }
        let line = String::from_utf8(line)
            .map_err(|_| LlmError::Decode("server-sent event is not valid UTF-8".into()))?;
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.find(':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (line.as_str(), ""),
        };
        if field == "data" {
            // Each data line adds its value and a newline; the last newline
            // is dropped when the event is dispatched.
            let d = self.data.get_or_insert_with(String::new);
            d.push_str(value);
            d.push('\n');
            if d.len() > MAX_LINE {
                return Err(LlmError::Decode(format!(
                    "server-sent event larger than {MAX_LINE} bytes"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<String> {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        for c in chunks {
            out.extend(p.feed(c).unwrap());
        }
        out.extend(p.finish().unwrap());
        out
    }

    #[test]
    fn basic_events_and_done() {
        let s = b"data: {\"a\":1}\n\ndata: [DONE]\n\n";
        assert_eq!(parse_all(&[s]), vec!["{\"a\":1}", "[DONE]"]);
    }

    #[test]
    fn every_split_point_and_line_ending_gives_the_same_events() {
        for nl in ["\n", "\r\n", "\r"] {
            let text = format!(
                ": keep-alive{nl}event: message{nl}data: héllo{nl}data:world{nl}id: 7{nl}{nl}data: two{nl}{nl}"
            );
            let bytes = text.as_bytes();
            let want = vec!["héllo\nworld".to_string(), "two".to_string()];
            for i in 0..=bytes.len() {
                for j in i..=bytes.len() {
                    let got = parse_all(&[&bytes[..i], &bytes[i..j], &bytes[j..]]);
                    assert_eq!(got, want, "nl={nl:?} split at {i},{j}");
                }
            }
        }
    }

    #[test]
    fn last_event_without_blank_line_is_delivered() {
        assert_eq!(parse_all(&[b"data: x\n\ndata: tail"]), vec!["x", "tail"]);
        assert_eq!(parse_all(&[b"data: tail\n"]), vec!["tail"]);
    }

    #[test]
    fn blank_lines_without_data_make_no_event() {
        assert!(parse_all(&[b"\n\n\r\n: c\n\n"]).is_empty());
        assert!(parse_all(&[b""]).is_empty());
    }

    #[test]
    fn empty_data_lines_follow_the_spec() {
        assert_eq!(parse_all(&[b"data:\ndata: x\n\n"]), vec!["\nx"]);
        assert_eq!(parse_all(&[b"data:\n\n"]), vec![""]);
        assert_eq!(parse_all(&[b"data\n\n"]), vec![""]);
    }

    proptest::proptest! {
        #[test]
        fn any_chunking_gives_the_events_back(
            events in proptest::collection::vec(
                proptest::collection::vec("[^\r\n]{0,12}", 1..4), 0..6),
            nl in 0usize..3,
            cuts in proptest::collection::vec(0usize..400, 0..8),
        ) {
            let nl = ["\n", "\r\n", "\r"][nl];
            let mut text = String::new();
            for ev in &events {
                for line in ev {
                    text.push_str("data: ");
                    text.push_str(line);
                    text.push_str(nl);
                }
                text.push_str(nl);
            }
            let bytes = text.as_bytes();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut prev = 0;
            for c in cuts {
                chunks.push(&bytes[prev..c]);
                prev = c;
            }
            chunks.push(&bytes[prev..]);
            let want: Vec<String> = events.iter().map(|ev| ev.join("\n")).collect();
            proptest::prop_assert_eq!(parse_all(&chunks), want);
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            chunks in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..64), 0..8),
        ) {
            let mut p = SseParser::default();
            for c in &chunks {
                let _ = p.feed(c);
            }
            let _ = p.finish();
        }
    }

    #[test]
    fn invalid_utf8_is_an_error_not_a_panic() {
        let mut p = SseParser::default();
        assert!(p.feed(b"data: \xff\xfe\n\n").is_err());
    }

    #[test]
    fn huge_line_is_bounded() {
        let mut p = SseParser::default();
        let chunk = vec![b'a'; 1 << 20];
        let mut failed = false;
        for _ in 0..16 {
            if p.feed(&chunk).is_err() {
                failed = true;
                break;
            }
        }
        assert!(failed);
    }
}
