//! The string values of a JSON text, decoded as the text streams: what the
//! values guard of [`super::ToolArgsWatcher`] reads.
//!
//! Tolerant and bounded: it follows only what it needs (objects, arrays,
//! strings, escapes), never fails on text that is not JSON, and keeps a
//! stack of at most [`MAX_DEPTH`] containers (deeper ones are counted).

/// Containers followed at most; deeper nesting is counted, not kept.
pub(crate) const MAX_DEPTH: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between tokens.
    Outside,
    /// Inside a string (`key`: an object key, not decoded).
    Str { key: bool },
    /// After a backslash.
    Escape { key: bool },
    /// Inside `\uXXXX`: digits read and their value.
    Unicode { key: bool, read: u8, code: u32 },
}

/// Decodes the string values (object keys skipped) of a JSON text fed in
/// pieces, with a `\n` before every value but the first, so that the
/// values read as lines of one text.
#[derive(Debug, Clone)]
pub(crate) struct ValueDecoder {
    /// `true` for an object.
    stack: Vec<bool>,
    /// Containers opened past [`MAX_DEPTH`] and not yet closed.
    deeper: usize,
    expect_key: bool,
    state: State,
    /// Raw bytes read.
    raw: usize,
    /// Decoded bytes written.
    decoded: usize,
    any_value: bool,
    /// Where the escape being read starts (raw offset of its backslash).
    escape_start: usize,
    /// A high surrogate waiting for its low half, and where it started.
    high: Option<(u32, usize)>,
}

impl Default for ValueDecoder {
    fn default() -> Self {
        ValueDecoder {
            stack: Vec::new(),
            deeper: 0,
            expect_key: false,
            state: State::Outside,
            raw: 0,
            decoded: 0,
            any_value: false,
            escape_start: 0,
            high: None,
        }
    }
}

impl ValueDecoder {
    /// Raw offset of the escape being read, when the text read so far ends
    /// inside one (a cut must not split it).
    pub(crate) fn open_escape(&self) -> Option<usize> {
        match self.state {
            State::Escape { .. } | State::Unicode { .. } => Some(self.escape_start),
            _ => self.high.map(|(_, at)| at),
        }
    }

    /// Reads `text`, appending the decoded values to `out`; `mark(d, r)` is
    /// called before each decoded unit with its decoded offset `d` and the
    /// raw offset `r` of the text it comes from.
    pub(crate) fn push(
        &mut self,
        text: &str,
        out: &mut Vec<u8>,
        mut mark: impl FnMut(usize, usize),
    ) {
        for &b in text.as_bytes() {
            let at = self.raw;
            self.raw += 1;
            match self.state {
                State::Outside => self.outside(b, at, out, &mut mark),
                State::Str { key } => self.in_str(b, at, key, out, &mut mark),
                State::Escape { key } => {
                    if b == b'u' {
                        self.state = State::Unicode {
                            key,
                            read: 0,
                            code: 0,
                        };
                        continue;
                    }
                    self.state = State::Str { key };
                    if key {
                        continue;
                    }
                    self.flush_high(out, &mut mark);
                    let c = match b {
                        b'n' => b'\n',
                        b't' => b'\t',
                        b'r' => b'\r',
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        other => other,
                    };
                    let start = self.escape_start;
                    self.emit(&[c], start, out, &mut mark);
                }
                State::Unicode { key, read, code } => {
                    let Some(d) = (b as char).to_digit(16) else {
                        // Not an escape after all: read the byte as text.
                        self.state = State::Str { key };
                        self.in_str(b, at, key, out, &mut mark);
                        continue;
                    };
                    let code = code * 16 + d;
                    if read < 3 {
                        self.state = State::Unicode {
                            key,
                            read: read + 1,
                            code,
                        };
                        continue;
                    }
                    self.state = State::Str { key };
                    if key {
                        continue;
                    }
                    self.unicode(code, out, &mut mark);
                }
            }
        }
    }

    fn in_str(
        &mut self,
        b: u8,
        at: usize,
        key: bool,
        out: &mut Vec<u8>,
        mark: &mut impl FnMut(usize, usize),
    ) {
        match b {
            b'"' => {
                self.flush_high(out, mark);
                self.state = State::Outside;
                self.expect_key = false;
            }
            b'\\' => {
                self.escape_start = at;
                self.state = State::Escape { key };
            }
            _ if key => {}
            _ => {
                self.flush_high(out, mark);
                self.emit(&[b], at, out, mark);
            }
        }
    }

    fn outside(
        &mut self,
        b: u8,
        at: usize,
        out: &mut Vec<u8>,
        mark: &mut impl FnMut(usize, usize),
    ) {
        match b {
            b'{' | b'[' => {
                if self.stack.len() < MAX_DEPTH {
                    self.stack.push(b == b'{');
                } else {
                    self.deeper += 1;
                }
                self.expect_key = b == b'{';
            }
            b'}' | b']' => {
                if self.deeper > 0 {
                    self.deeper -= 1;
                } else {
                    self.stack.pop();
                }
                self.expect_key = false;
            }
            b',' => self.expect_key = self.deeper == 0 && self.stack.last() == Some(&true),
            b':' => self.expect_key = false,
            b'"' => {
                let key = self.expect_key;
                self.state = State::Str { key };
                if !key {
                    if self.any_value {
                        self.emit(b"\n", at + 1, out, mark);
                    }
                    self.any_value = true;
                }
            }
            _ => {}
        }
    }

    fn unicode(&mut self, code: u32, out: &mut Vec<u8>, mark: &mut impl FnMut(usize, usize)) {
        let start = self.escape_start;
        match code {
            0xD800..=0xDBFF => {
                self.flush_high(out, mark);
                self.high = Some((code, start));
            }
            0xDC00..=0xDFFF => match self.high.take() {
                Some((h, at)) => {
                    let c = 0x10000 + ((h - 0xD800) << 10) + (code - 0xDC00);
                    self.emit_char(char::from_u32(c).unwrap_or('\u{FFFD}'), at, out, mark);
                }
                None => self.emit_char('\u{FFFD}', start, out, mark),
            },
            _ => {
                self.flush_high(out, mark);
                self.emit_char(char::from_u32(code).unwrap_or('\u{FFFD}'), start, out, mark);
            }
        }
    }

    /// A high surrogate not followed by its low half reads as U+FFFD.
    fn flush_high(&mut self, out: &mut Vec<u8>, mark: &mut impl FnMut(usize, usize)) {
        if let Some((_, at)) = self.high.take() {
            self.emit_char('\u{FFFD}', at, out, mark);
        }
    }

    fn emit_char(
        &mut self,
        c: char,
        at: usize,
        out: &mut Vec<u8>,
        mark: &mut impl FnMut(usize, usize),
    ) {
        let mut buf = [0u8; 4];
        let s = c.encode_utf8(&mut buf);
        self.emit(s.as_bytes(), at, out, mark);
    }

    fn emit(
        &mut self,
        bytes: &[u8],
        at: usize,
        out: &mut Vec<u8>,
        mark: &mut impl FnMut(usize, usize),
    ) {
        mark(self.decoded, at);
        out.extend_from_slice(bytes);
        self.decoded += bytes.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(pieces: &[&str]) -> String {
        let mut d = ValueDecoder::default();
        let mut out = Vec::new();
        for p in pieces {
            d.push(p, &mut out, |_, _| {});
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn values_are_decoded_and_keys_skipped() {
        let text = r#"{"path": "/a b", "lines": ["x\ny", "\u00e9\ud83d\ude00"], "n": 3, "k": {"q": "v\"w"}}"#;
        assert_eq!(decode(&[text]), "/a b\nx\ny\né😀\nv\"w");
        // Any split gives the same text.
        for i in 0..=text.len() {
            if text.is_char_boundary(i) {
                assert_eq!(
                    decode(&[&text[..i], &text[i..]]),
                    decode(&[text]),
                    "split at {i}"
                );
            }
        }
    }

    #[test]
    fn marks_map_decoded_offsets_to_raw_ones() {
        let text = r#"{"a": "xy\nz"}"#;
        let mut d = ValueDecoder::default();
        let mut marks = Vec::new();
        d.push(text, &mut Vec::new(), |dd, r| marks.push((dd, r)));
        // x at 7, y at 8, the escape \n at 9, z at 11.
        assert_eq!(marks, [(0, 7), (1, 8), (2, 9), (3, 11)]);
        let mut d = ValueDecoder::default();
        d.push(r#"{"a": "x\u00"#, &mut Vec::new(), |_, _| {});
        assert_eq!(d.open_escape(), Some(8));
    }

    #[test]
    fn hostile_text_does_not_fail() {
        let deep = "[".repeat(10 * MAX_DEPTH) + &"]".repeat(10 * MAX_DEPTH);
        assert_eq!(decode(&[&deep, "\"x\""]), "x");
        assert_eq!(decode(&[r#""\u12zz" "\ud800x""#]), "zz\n\u{FFFD}x");
        assert_eq!(decode(&["not json at all } ] , :"]), "");
    }
}
