//! String helpers: character classes, whitespace and escape decoding.
//!
//! Decoding rules (JSON, plus what models actually write):
//! * `\"` `\\` `\/` `\b` `\f` `\n` `\r` `\t` and `\uXXXX` decode as in JSON;
//!   a surrogate pair decodes to one character (emoji), a lone surrogate
//!   becomes U+FFFD;
//! * `\'` decodes to `'`; a backslash before a raw newline is dropped;
//! * any other escape (`C:\Users`, `\d`) keeps its backslash;
//! * in a string that holds such an invalid escape, `\b` and `\f` keep
//!   their backslash too: the text is a regular expression or a path
//!   (`\b\d+\b`), not JSON, whose encoders never write invalid escapes;
//! * an escape cut by the end of the input is dropped (streaming prefixes).

use super::repairs::Repairs;
use super::Repair;

/// ASCII whitespace recognised between tokens.
#[inline]
pub(crate) fn is_ascii_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

/// Characters that may start an unquoted key or word.
#[inline]
pub(crate) fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80
}

/// Non-ASCII characters treated as whitespace between tokens. The second
/// field says whether the character is invisible (zero-width or BOM).
pub(crate) fn unicode_space(ch: char) -> Option<bool> {
    match ch {
        '\u{feff}' | '\u{200b}' | '\u{200c}' | '\u{200d}' | '\u{2060}' | '\u{180e}' => Some(true),
        '\u{a0}' | '\u{2000}'..='\u{200a}' | '\u{202f}' | '\u{205f}' | '\u{3000}' => Some(false),
        _ => None,
    }
}

/// Kind of an opening quote at a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quote {
    /// `"`: the common case, with the closing-quote heuristics.
    Double,
    /// `'`: same heuristics with `'`.
    Single,
    /// `“`, `‘` or a backtick: closed by the matching curly/back quote.
    Fancy(char),
}

/// Returns the quote kind and its byte length if `b[pos..]` starts with an
/// opening quote.
#[inline]
pub(crate) fn opening_quote(b: &[u8], pos: usize) -> Option<(Quote, usize)> {
    match b[pos] {
        b'"' => Some((Quote::Double, 1)),
        b'\'' => Some((Quote::Single, 1)),
        b'`' => Some((Quote::Fancy('`'), 1)),
        0xE2 if b.len() >= pos + 3 && b[pos + 1] == 0x80 => match b[pos + 2] {
            0x9C => Some((Quote::Fancy('“'), 3)),
            0x98 => Some((Quote::Fancy('‘'), 3)),
            _ => None,
        },
        _ => None,
    }
}

/// Whether `ch` closes a fancy string opened by `open`.
pub(crate) fn closes_fancy(open: char, ch: char) -> bool {
    match open {
        '“' => ch == '”' || ch == '"',
        '‘' => ch == '’' || ch == '\'',
        '`' => ch == '`' || ch == '´' || ch == '\'',
        _ => false,
    }
}

fn hex4(b: &[u8], at: usize) -> Option<u32> {
    let digits = b.get(at..at + 4)?;
    let mut v = 0u32;
    for &d in digits {
        v = v * 16 + (d as char).to_digit(16)?;
    }
    Some(v)
}

/// Decodes the escape whose backslash is at `j`, appending to `out`.
/// Returns the position after the escape. `end` bounds the input.
pub(crate) fn decode_escape(
    b: &[u8],
    j: usize,
    end: usize,
    out: &mut String,
    rep: &mut Repairs,
) -> usize {
    if j + 1 >= end {
        // A backslash cut by the end of input: drop it.
        return end;
    }
    let e = b[j + 1];
    let simple = match e {
        b'"' => Some('"'),
        b'\\' => Some('\\'),
        b'/' => Some('/'),
        b'\'' => Some('\''),
        b'b' => Some('\u{8}'),
        b'f' => Some('\u{c}'),
        b'n' => Some('\n'),
        b'r' => Some('\r'),
        b't' => Some('\t'),
        b'\n' => {
            rep.note(Repair::EscapedControlChar);
            Some('\n')
        }
        _ => None,
    };
    if let Some(ch) = simple {
        out.push(ch);
        return j + 2;
    }
    if e == b'u' {
        let avail = end - (j + 2);
        if avail < 4 && b[j + 2..end].iter().all(|c| c.is_ascii_hexdigit()) {
            // `\u26` cut by the end of input: drop the partial escape.
            return end;
        }
        if let Some(hi) = hex4(&b[..end], j + 2) {
            let after = j + 6;
            if (0xD800..0xDC00).contains(&hi) {
                // High surrogate: needs `\uDC00`-`\uDFFF` next.
                if after + 1 < end && b[after] == b'\\' && b[after + 1] == b'u' {
                    let rest = end - (after + 2);
                    if rest < 4 && b[after + 2..end].iter().all(|c| c.is_ascii_hexdigit()) {
                        return end; // pair cut by the end of input
                    }
                    if let Some(lo) = hex4(&b[..end], after + 2) {
                        if (0xDC00..0xE000).contains(&lo) {
                            let cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                            out.push(char::from_u32(cp).unwrap_or('\u{fffd}'));
                            return after + 6;
                        }
                    }
                } else if after >= end || (after + 1 == end && b[after] == b'\\') {
                    return end; // the low half may still come
                }
                rep.note(Repair::KeptInvalidEscape);
                out.push('\u{fffd}');
                return after;
            }
            match char::from_u32(hi) {
                Some(ch) => out.push(ch),
                None => {
                    rep.note(Repair::KeptInvalidEscape);
                    out.push('\u{fffd}');
                }
            }
            return after;
        }
    }
    // Invalid escape such as `C:\Users`: keep the backslash; the next
    // character is copied as ordinary text by the caller.
    rep.note(Repair::KeptInvalidEscape);
    out.push('\\');
    j + 1
}

/// The `\b` and `\f` escapes decoded in one string, undone when the
/// string also holds an invalid escape (`\b\d{3}\b` is a regular
/// expression, not a backspace: JSON encoders never write `\d`).
#[derive(Debug, Default)]
pub(crate) struct RegexEscapes {
    /// Positions in the decoded text of the `\b`/`\f` decoded so far.
    at: Vec<usize>,
    /// An escape kept its backslash.
    invalid: bool,
}

impl RegexEscapes {
    /// Records the escape whose backslash is at `j`, decoded by
    /// [`decode_escape`] (which returned `next`) at position `at` of the
    /// decoded text; `end` bounds the input.
    #[inline]
    pub(crate) fn saw(&mut self, b: &[u8], j: usize, next: usize, end: usize, at: usize) {
        if next == j + 1 && j + 1 < end {
            self.invalid = true;
        } else if next == j + 2 && matches!(b[j + 1], b'b' | b'f') {
            self.at.push(at);
        }
    }

    /// The decoded text, with `\b` and `\f` written back as text when an
    /// escape kept its backslash.
    pub(crate) fn apply(self, out: String) -> String {
        if !self.invalid || self.at.is_empty() {
            return out;
        }
        let b = out.as_bytes();
        let mut fixed = String::with_capacity(out.len() + self.at.len());
        let mut from = 0;
        for p in self.at {
            let letter = match b.get(p) {
                Some(0x08) => "\\b",
                Some(0x0c) => "\\f",
                _ => continue,
            };
            fixed.push_str(&out[from..p]);
            fixed.push_str(letter);
            from = p + 1;
        }
        fixed.push_str(&out[from..]);
        fixed
    }
}

/// Decodes one level of JSON escaping over a whole text (for replies that
/// were JSON-encoded twice: `{\"answer\": \"...\"}`).
pub(crate) fn unescape_all(s: &str, rep: &mut Repairs) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while let Some(k) = memchr::memchr(b'\\', &b[i..]) {
        out.push_str(&s[i..i + k]);
        i = decode_escape(b, i + k, b.len(), &mut out, rep);
    }
    out.push_str(&s[i..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> String {
        let b = s.as_bytes();
        let mut out = String::new();
        let mut rep = Repairs::default();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'\\' {
                i = decode_escape(b, i, b.len(), &mut out, &mut rep);
            } else {
                let ch = s[i..].chars().next().unwrap();
                out.push(ch);
                i += ch.len_utf8();
            }
        }
        out
    }

    #[test]
    fn json_escapes() {
        assert_eq!(dec(r#"a\"b\\c\/d\n\t\r\b\f"#), "a\"b\\c/d\n\t\r\u{8}\u{c}");
        assert_eq!(dec(r"\u00e9\u260E"), "é☎");
        assert_eq!(dec(r"\ud83d\ude00"), "😀");
    }

    #[test]
    fn literal_backslash_then_n_is_not_a_newline() {
        assert_eq!(dec(r"C:\\new"), r"C:\new");
    }

    #[test]
    fn invalid_escapes_keep_backslash() {
        assert_eq!(dec(r"C:\Users\Ana"), r"C:\Users\Ana");
        assert_eq!(dec(r"\uZZZZ"), r"\uZZZZ");
        assert_eq!(dec(r"\ud83dx"), "\u{fffd}x");
        assert_eq!(dec(r"\ude00"), "\u{fffd}");
    }

    #[test]
    fn cut_escapes_are_dropped() {
        assert_eq!(dec(r"ab\"), "ab");
        assert_eq!(dec(r"ab\u26"), "ab");
        assert_eq!(dec(r"ab\ud83d"), "ab");
        assert_eq!(dec(r"ab\ud83d\ude"), "ab");
    }
}
