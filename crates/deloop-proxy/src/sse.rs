//! A tolerant, bounded reader of server-sent events (the WHATWG
//! `text/event-stream` format) as they arrive in arbitrary pieces.
//!
//! Lines end in `\n`, `\r\n` or `\r` (also split across pieces); an event
//! ends at a blank line. `data:` lines are joined with `\n`, `event:` names
//! the event, comments (`: ping`) and unknown fields are kept in the raw
//! bytes but otherwise ignored. Every event keeps its raw bytes, so an event
//! the proxy does not change is forwarded byte for byte. A stream that ends
//! without a final blank line still yields its last event
//! ([`SseReader::finish`]), its raw bytes completed with that blank line,
//! so that what the proxy writes after it starts an event of its own. A
//! leading BOM is skipped, even when it arrives split across pieces.
//!
//! Memory is bounded: an event (and so a line) longer than the configured
//! limit is an error, never an unbounded buffer.
//!
//! ```
//! use deloop_proxy::sse::SseReader;
//! let mut r = SseReader::new(1 << 20);
//! let mut events = Vec::new();
//! r.push(b"event: ping\r\ndata: {\"a\"", &mut events).unwrap();
//! assert!(events.is_empty());
//! r.push(b":1}\r\n\r\ndata: [DONE]\n\n", &mut events).unwrap();
//! assert_eq!(events[0].event.as_deref(), Some("ping"));
//! assert_eq!(events[0].data.as_deref(), Some("{\"a\":1}"));
//! assert_eq!(&events[0].raw[..], b"event: ping\r\ndata: {\"a\":1}\r\n\r\n");
//! assert_eq!(events[1].data.as_deref(), Some("[DONE]"));
//! ```

use bytes::Bytes;

/// One event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The event's bytes as received, its blank line included.
    pub raw: Bytes,
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`; `None` when the event has no
    /// data line (a comment or keep-alive).
    pub data: Option<String>,
}

/// Why a stream could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// An event grew past the limit before it ended.
    #[error(
        "the upstream sent a server-sent event longer than {limit} bytes (proxy.max_event_bytes)"
    )]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
}

/// The incremental reader.
#[derive(Debug, Clone)]
pub struct SseReader {
    limit: usize,
    /// Raw bytes of the event being read.
    raw: Vec<u8>,
    /// Where the current (unfinished) line starts in `raw`.
    line_start: usize,
    /// A line that ended in `\r` at the end of a piece (`start`, `end` in
    /// `raw`): a `\n` at the start of the next piece belongs to it.
    cr_line: Option<(usize, usize)>,
    /// Nothing but a prefix of a BOM has been read yet (a leading BOM is
    /// skipped).
    at_start: bool,
    /// Bytes of a leading BOM seen so far (while `at_start`).
    bom_seen: usize,
    event: Option<String>,
    data: Option<String>,
}

impl SseReader {
    /// A reader refusing events longer than `limit` bytes.
    pub fn new(limit: usize) -> Self {
        SseReader {
            limit,
            raw: Vec::new(),
            line_start: 0,
            cr_line: None,
            at_start: true,
            bom_seen: 0,
            event: None,
            data: None,
        }
    }

    /// Bytes held for the event being read.
    pub fn buffered(&self) -> usize {
        self.raw.len()
    }

    /// Reads a piece; complete events are appended to `out`.
    pub fn push(&mut self, mut piece: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if piece.is_empty() {
            return Ok(());
        }
        if self.at_start {
            // A BOM at the very start is skipped, also when split across
            // pieces; the bytes of a partial BOM that turns out not to be
            // one are read as they came.
            while self.bom_seen < BOM.len() && piece.first() == Some(&BOM[self.bom_seen]) {
                self.bom_seen += 1;
                piece = &piece[1..];
            }
            if self.bom_seen < BOM.len() && piece.is_empty() {
                return Ok(());
            }
            self.at_start = false;
            if self.bom_seen < BOM.len() {
                let seen = &BOM[..self.bom_seen];
                self.read(seen, out)?;
            }
        }
        self.read(piece, out)
    }

    /// Reads a piece after the start of the stream.
    fn read(&mut self, mut piece: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if let Some((start, end)) = self.cr_line.take() {
            // The previous piece ended in `\r`: a leading `\n` is part of
            // that line's end.
            if let Some(rest) = piece.strip_prefix(b"\n") {
                self.raw.push(b'\n');
                piece = rest;
            }
            self.end_line(start, end, out);
        }
        while !piece.is_empty() {
            let Some(i) = memchr::memchr2(b'\n', b'\r', piece) else {
                self.raw.extend_from_slice(piece);
                return self.check();
            };
            let start = self.line_start;
            let end = self.raw.len() + i;
            if piece[i] == b'\r' && i + 1 == piece.len() {
                // Wait for the next piece: it may start with `\n`.
                self.raw.extend_from_slice(piece);
                self.cr_line = Some((start, end));
                return self.check();
            }
            let term = if piece[i] == b'\r' && piece[i + 1] == b'\n' {
                2
            } else {
                1
            };
            self.raw.extend_from_slice(&piece[..i + term]);
            self.check()?;
            piece = &piece[i + term..];
            self.end_line(start, end, out);
        }
        Ok(())
    }

    /// Ends the stream: an event without its final blank line is returned
    /// (tolerant of servers that close right after the last `data:` line),
    /// its raw bytes completed with the blank line, so that what is written
    /// after it starts a new event instead of running into its last line.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let mut out = Vec::new();
        if self.at_start {
            // The stream was a prefix of a BOM: those bytes are its text.
            self.at_start = false;
            let seen = &BOM[..self.bom_seen];
            if !seen.is_empty() && self.read(seen, &mut out).is_err() {
                return None;
            }
        }
        if let Some((start, end)) = self.cr_line.take() {
            self.end_line(start, end, &mut out);
        }
        if let Some(ev) = out.pop() {
            // The stream ended on a blank line; nothing can follow it.
            return Some(ev);
        }
        if self.raw.is_empty() {
            return None;
        }
        if self.line_start < self.raw.len() {
            let (start, end) = (self.line_start, self.raw.len());
            self.field(start, end);
        }
        // Complete the event with its blank line (the line's end first,
        // when it has none), so that what follows starts a new event.
        match self.raw.last() {
            Some(b'\n') => self.raw.push(b'\n'),
            Some(b'\r') => self.raw.push(b'\r'),
            _ => self.raw.extend_from_slice(b"\n\n"),
        }
        Some(self.dispatch())
    }

    fn check(&self) -> Result<(), SseError> {
        if self.raw.len() > self.limit {
            Err(SseError::TooLarge { limit: self.limit })
        } else {
            Ok(())
        }
    }

    /// A line `raw[start..end]` ended (its terminator is in `raw`).
    fn end_line(&mut self, start: usize, end: usize, out: &mut Vec<SseEvent>) {
        self.line_start = self.raw.len();
        if end == start {
            out.push(self.dispatch());
        } else {
            self.field(start, end);
        }
    }

    fn field(&mut self, start: usize, end: usize) {
        let line = &self.raw[start..end];
        if line[0] == b':' {
            return;
        }
        let (name, value) = match memchr::memchr(b':', line) {
            Some(c) => {
                let v = &line[c + 1..];
                (&line[..c], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match name {
            b"data" => {
                let v = String::from_utf8_lossy(value);
                match &mut self.data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(&v);
                    }
                    None => self.data = Some(v.into_owned()),
                }
            }
            b"event" => self.event = Some(String::from_utf8_lossy(value).into_owned()),
            _ => {}
        }
    }

    fn dispatch(&mut self) -> SseEvent {
        self.line_start = 0;
        SseEvent {
            raw: Bytes::from(std::mem::take(&mut self.raw)),
            event: self.event.take(),
            data: self.data.take(),
        }
    }
}

/// The UTF-8 byte-order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// An event as bytes: `event: NAME` (when given) and one `data:` line.
/// `data` must not contain a line break (serialized JSON never does).
pub fn event_bytes(event: Option<&str>, data: &str) -> Bytes {
    let mut s = String::with_capacity(data.len() + 32);
    if let Some(e) = event {
        s.push_str("event: ");
        s.push_str(e);
        s.push('\n');
    }
    s.push_str("data: ");
    s.push_str(data);
    s.push_str("\n\n");
    Bytes::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read_all(pieces: &[&[u8]], limit: usize) -> Result<Vec<SseEvent>, SseError> {
        let mut r = SseReader::new(limit);
        let mut out = Vec::new();
        for p in pieces {
            r.push(p, &mut out)?;
        }
        out.extend(r.finish());
        Ok(out)
    }

    #[test]
    fn line_endings_and_fields() {
        let text = b"data: a\rdata:b\r\n\r\n: comment\nevent: x\nid: 1\nretry: 5\ndata\n\n";
        let ev = read_all(&[text], 1 << 10).unwrap();
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[0].data.as_deref(), Some("a\nb"));
        assert_eq!(ev[1].event.as_deref(), Some("x"));
        assert_eq!(ev[1].data.as_deref(), Some(""));
        let raw: Vec<u8> = ev.iter().flat_map(|e| e.raw.to_vec()).collect();
        assert_eq!(raw, text);
    }

    #[test]
    fn cr_lf_split_across_pieces() {
        let ev = read_all(&[b"data: a\r", b"\n\r", b"\ndata: b\n\n"], 1 << 10).unwrap();
        assert_eq!(ev.len(), 2);
        assert_eq!(&ev[0].raw[..], b"data: a\r\n\r\n");
        assert_eq!(ev[0].data.as_deref(), Some("a"));
        assert_eq!(ev[1].data.as_deref(), Some("b"));
    }

    #[test]
    fn comments_are_events_without_data() {
        let ev = read_all(&[b": keep-alive\n\n"], 1 << 10).unwrap();
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].data, None);
        assert_eq!(&ev[0].raw[..], b": keep-alive\n\n");
    }

    #[test]
    fn unterminated_last_event_and_bom() {
        let ev = read_all(&[b"\xEF\xBB\xBFdata: x\n\ndata: [DONE]"], 1 << 10).unwrap();
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[1].data.as_deref(), Some("[DONE]"));
        assert!(read_all(&[b""], 10).unwrap().is_empty());
    }

    /// Fuzz findings (docs/fuzzing.md): the last event of a stream that
    /// ended without its blank line was forwarded as it came, and the
    /// guard's ending (`data: [DONE]`, an error event) then ran into its
    /// last line; a BOM split across pieces was read as text.
    #[test]
    fn unterminated_last_event_is_completed_and_split_bom_skipped() {
        let cases: [(&[u8], &[u8]); 5] = [
            (b"data: x", b"data: x\n\n"),
            (b"data: x\n", b"data: x\n\n"),
            (b"data: x\r", b"data: x\r\r"),
            (b"data: x\r\n", b"data: x\r\n\n"),
            (b": ping", b": ping\n\n"),
        ];
        for (stream, raw) in cases {
            let ev = read_all(&[stream], 1 << 10).unwrap();
            assert_eq!(ev.len(), 1);
            assert_eq!(&ev[0].raw[..], raw, "{stream:?}");
            let again = read_all(&[&ev[0].raw[..], b"data: [DONE]\n\n"], 1 << 10).unwrap();
            assert_eq!(again.len(), 2, "{stream:?}");
            assert_eq!(again[1].data.as_deref(), Some("[DONE]"));
        }
        let whole = read_all(&[b"\xEF\xBB\xBFdata: a\n\n"], 1 << 10).unwrap();
        let splits: [&[&[u8]]; 3] = [
            &[b"\xEF", b"\xBB", b"\xBFdata: a\n\n"],
            &[b"\xEF\xBB", b"\xBFdata: a\n\n"],
            &[b"\xEF\xBB\xBF", b"data: a\n\n"],
        ];
        for pieces in splits {
            assert_eq!(read_all(pieces, 1 << 10).unwrap(), whole);
        }
        assert_eq!(whole[0].data.as_deref(), Some("a"));
        // A partial BOM that is not one is text, split or not.
        let text = read_all(&[b"\xEFdata: a\n\n"], 1 << 10).unwrap();
        assert_eq!(read_all(&[b"\xEF", b"data: a\n\n"], 1 << 10).unwrap(), text);
        assert_eq!(&text[0].raw[..], b"\xEFdata: a\n\n");
        assert_eq!(
            &read_all(&[b"\xEF\xBB"], 1 << 10).unwrap()[0].raw[..],
            b"\xEF\xBB\n\n"
        );
    }

    #[test]
    fn limit_holds_for_long_lines_and_events() {
        let long = vec![b'a'; 5000];
        assert_eq!(
            read_all(&[b"data: ", &long], 1024).unwrap_err(),
            SseError::TooLarge { limit: 1024 }
        );
        let many: Vec<u8> = b"data: 0123456789\n".repeat(100);
        assert!(read_all(&[&many], 1024).is_err());
        // Many small events pass whatever the total.
        let small: Vec<u8> = b"data: 0123456789\n\n".repeat(1000);
        assert_eq!(read_all(&[&small], 1024).unwrap().len(), 1000);
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        let ev = read_all(&[b"data: a\xffb\n\n"], 1 << 10).unwrap();
        assert_eq!(ev[0].data.as_deref(), Some("a\u{FFFD}b"));
    }

    proptest! {
        /// Any split of a stream gives the same events, and the raw bytes
        /// of the events are the stream itself.
        #[test]
        fn splits_do_not_matter(
            events in proptest::collection::vec("[a-z{}\":, ]{0,20}", 0..8),
            crlf in any::<bool>(),
            cuts in proptest::collection::vec(0usize..400, 0..10),
        ) {
            let nl = if crlf { "\r\n" } else { "\n" };
            let text: String = events.iter().map(|e| format!("data: {e}{nl}{nl}")).collect();
            let bytes = text.as_bytes();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
            cuts.sort_unstable();
            let mut pieces = Vec::new();
            let mut at = 0;
            for c in cuts {
                pieces.push(&bytes[at..c]);
                at = c;
            }
            pieces.push(&bytes[at..]);
            let got = read_all(&pieces, 1 << 16).unwrap();
            let whole = read_all(&[bytes], 1 << 16).unwrap();
            prop_assert_eq!(&got, &whole);
            let data: Vec<String> = got.iter().filter_map(|e| e.data.clone()).collect();
            prop_assert_eq!(data, events);
            let raw: Vec<u8> = got.iter().flat_map(|e| e.raw.to_vec()).collect();
            prop_assert_eq!(raw, bytes.to_vec());
        }

        /// Arbitrary bytes never panic and never exceed the bound.
        #[test]
        fn hostile_bytes(data in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let mut r = SseReader::new(1024);
            let mut out = Vec::new();
            for piece in data.chunks(37) {
                if r.push(piece, &mut out).is_err() {
                    return Ok(());
                }
                prop_assert!(r.buffered() <= 1024);
            }
            r.finish();
        }
    }
}
