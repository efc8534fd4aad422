//! The lenient parser: one JSON value from a start position, with an
//! explicit stack (no recursion), linear time.
//!
//! The closing-quote rule for a `"` inside a string (see `docs/rescue.md`):
//! a quote closes the string only where the structure really continues
//! after it. The look-ahead that decides this reaches at most to the next
//! quote (or the end of the line) and every byte it reads is read again at
//! most a constant number of times, so the whole parse stays linear.

use memchr::{memchr, memchr2};
use serde_json::{Map, Number, Value};

use super::error::RescueError;
use super::strings::{
    closes_fancy, decode_escape, is_ascii_ws, is_ident, opening_quote, unicode_space, Quote,
};
use super::Repair;

/// The repairs applied so far, each kind once, in first-seen order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Repairs {
    seen: u64,
    pub(crate) list: Vec<Repair>,
}

impl Repairs {
    /// Records a repair kind (once).
    #[inline]
    pub(crate) fn note(&mut self, r: Repair) {
        let bit = 1u64 << (r as u32);
        if self.seen & bit == 0 {
            self.seen |= bit;
            self.list.push(r);
        }
    }

    /// Whether a repair kind was recorded.
    #[inline]
    pub(crate) fn has(&self, r: Repair) -> bool {
        self.seen & (1u64 << (r as u32)) != 0
    }

    /// Records every repair of `other`.
    pub(crate) fn extend(&mut self, other: &Repairs) {
        for r in &other.list {
            self.note(*r);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Obj,
    Arr,
}

/// What a string is for: it changes which quotes may close it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Key,
    ObjVal,
    ArrElem,
    Top,
}

#[derive(Debug)]
struct Frame {
    kind: Kind,
    map: Map<String, Value>,
    items: Vec<Value>,
    key: Option<String>,
    unquoted_keys: bool,
    id: u32,
    want_here: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    Value,
    Key,
    Colon,
    After,
}

/// The decision for a `"` met inside a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The quote closes the string.
    Close,
    /// The quote is text inside the string.
    Inner,
    /// The string really ended before the comma at this position (a
    /// missing closing quote before `, "key":`).
    CloseBefore(usize),
}

/// One parsed top-level value.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub(crate) value: Value,
    /// Position after the value.
    pub(crate) end: usize,
    /// False when the input ended before the value was closed.
    pub(crate) complete: bool,
    /// The value of the wanted key (shallowest, then first in document
    /// order; a duplicate in the same object replaces the earlier one).
    pub(crate) found: Option<Value>,
}

/// The parser over one input.
pub(crate) struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    end: usize,
    max_depth: usize,
    pub(crate) rep: Repairs,
    want: Option<&'a str>,
    last_brace: Option<usize>,
    last_bracket: Option<usize>,
    stack_buf: Vec<Frame>,
    kinds_buf: Vec<Kind>,
    /// Set when a look-ahead reached the end of the input (its answer may
    /// change when more input arrives).
    touched_end: std::cell::Cell<bool>,
    /// Context of the last string value of the wanted key (streaming).
    pub(crate) want_string: Option<StrCtx>,
}

/// What the closing-quote decision needs to know about a string value:
/// shared by the batch parser and the streaming extractor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StrCtx {
    /// Position of the opening quote.
    pub(crate) open: usize,
    /// The quote byte (`"` or `'`).
    pub(crate) q: u8,
    /// Open brackets, outermost first.
    pub(crate) kinds: Vec<Kind>,
    /// The enclosing object has unquoted keys.
    pub(crate) unquoted_keys: bool,
}

struct FindState {
    best: Option<(usize, u32)>,
    found: Option<Value>,
    /// The best match is this key of the root object.
    at_root: Option<String>,
    next_id: u32,
}

impl FindState {
    fn finish(&mut self, at_root: &mut Option<String>) -> Option<Value> {
        *at_root = self.at_root.take();
        self.found.take()
    }
}

impl<'a> Parser<'a> {
    /// A parser over `s`, looking for `want` if given.
    pub(crate) fn new(s: &'a str, max_depth: usize, want: Option<&'a str>) -> Self {
        Parser {
            s,
            b: s.as_bytes(),
            end: s.len(),
            max_depth,
            rep: Repairs::default(),
            want,
            last_brace: memchr::memrchr(b'}', s.as_bytes()),
            last_bracket: memchr::memrchr(b']', s.as_bytes()),
            stack_buf: Vec::new(),
            kinds_buf: Vec::new(),
            touched_end: std::cell::Cell::new(false),
            want_string: None,
        }
    }

    /// A parser used only for the closing-quote decision (constant-time
    /// construction: no whole-input pre-scan).
    pub(crate) fn lookahead(s: &'a str) -> Self {
        Parser {
            s,
            b: s.as_bytes(),
            end: s.len(),
            max_depth: 0,
            rep: Repairs::default(),
            want: None,
            last_brace: None,
            last_bracket: None,
            stack_buf: Vec::new(),
            kinds_buf: Vec::new(),
            touched_end: std::cell::Cell::new(false),
            want_string: None,
        }
    }

    /// The batch parser's decision for the quote at `j` inside the string
    /// described by `ctx`, or `None` when the decision looked at the end of
    /// the input (more input could change it). Used by the streaming
    /// extractor so that batch and streaming apply the same rule.
    pub(crate) fn final_verdict(&self, j: usize, ctx: &StrCtx) -> Option<Verdict> {
        self.touched_end.set(false);
        let v = self.verdict(
            j,
            ctx.q,
            Role::ObjVal,
            &ctx.kinds,
            ctx.unquoted_keys,
            ctx.open,
        );
        if self.touched_end.get() {
            None
        } else {
            Some(v)
        }
    }

    /// Whether `p` is at or past the end of the input; records that a
    /// look-ahead reached the end.
    #[inline]
    fn eof(&self, p: usize) -> bool {
        let r = p >= self.end;
        if r {
            self.touched_end.set(true);
        }
        r
    }

    /// Records that a look-ahead search ran to the end of the input.
    #[inline]
    fn ran_to_end<T>(&self, found: Option<T>) -> Option<T> {
        if found.is_none() {
            self.touched_end.set(true);
        }
        found
    }

    /// Input length.
    pub(crate) fn len(&self) -> usize {
        self.end
    }

    /// Skips whitespace, comments and code fences; `#` starts a comment
    /// only when `hash` is set.
    pub(crate) fn skip_ws(&mut self, mut pos: usize, hash: bool) -> usize {
        let b = self.b;
        while pos < self.end {
            let c = b[pos];
            if is_ascii_ws(c) {
                pos += 1;
            } else if c == b'/' && pos + 1 < self.end && b[pos + 1] == b'/' {
                self.rep.note(Repair::RemovedComment);
                pos = memchr(b'\n', &b[pos..self.end]).map_or(self.end, |k| pos + k);
            } else if c == b'/' && pos + 1 < self.end && b[pos + 1] == b'*' {
                self.rep.note(Repair::RemovedComment);
                let mut p = pos + 2;
                pos = loop {
                    match memchr(b'*', &b[p..self.end]) {
                        None => break self.end,
                        Some(k) if p + k + 1 < self.end && b[p + k + 1] == b'/' => break p + k + 2,
                        Some(k) => p += k + 1,
                    }
                };
            } else if c == b'#' && hash {
                self.rep.note(Repair::RemovedComment);
                pos = memchr(b'\n', &b[pos..self.end]).map_or(self.end, |k| pos + k);
            } else if c == b'`' && b[pos..self.end].starts_with(b"```") {
                self.rep.note(Repair::StrippedCodeFence);
                pos += 3;
                while pos < self.end && b[pos] == b'`' {
                    pos += 1;
                }
                while pos < self.end
                    && (b[pos].is_ascii_alphanumeric() || matches!(b[pos], b'_' | b'-' | b'+'))
                {
                    pos += 1;
                }
            } else if c >= 0x80 {
                let ch = self.s[pos..].chars().next().unwrap_or(' ');
                match unicode_space(ch) {
                    Some(invisible) => {
                        if invisible {
                            self.rep.note(if ch == '\u{feff}' && pos == 0 {
                                Repair::StrippedBom
                            } else {
                                Repair::StrippedZeroWidth
                            });
                        }
                        pos += ch.len_utf8();
                    }
                    None => break,
                }
            } else {
                break;
            }
        }
        pos
    }

    /// Plain whitespace skip (no comments) for look-ahead; also reports
    /// whether a newline was crossed.
    #[inline]
    fn peek_ws(&self, mut pos: usize) -> (usize, bool) {
        let mut nl = false;
        while !self.eof(pos) {
            let c = self.b[pos];
            if c == b'\n' {
                nl = true;
                pos += 1;
            } else if is_ascii_ws(c) {
                pos += 1;
            } else if c == b'/' && !self.eof(pos + 1) && self.b[pos + 1] == b'*' {
                pos = self
                    .ran_to_end(memchr::memmem::find(&self.b[pos + 2..self.end], b"*/"))
                    .map_or(self.end, |k| pos + 2 + k + 2);
            } else if (c == b'/' && !self.eof(pos + 1) && self.b[pos + 1] == b'/')
                || (c == b'#'
                    && pos > 0
                    && is_ascii_ws(self.b[pos - 1])
                    && !self.eof(pos + 1)
                    && self.b[pos + 1] == b' ')
            {
                pos = self
                    .ran_to_end(memchr(b'\n', &self.b[pos..self.end]))
                    .map_or(self.end, |k| pos + k);
            } else if c >= 0x80 {
                let ch = self.s[pos..].chars().next().unwrap_or('x');
                if unicode_space(ch).is_some() {
                    pos += ch.len_utf8();
                } else {
                    break;
                }
            } else {
                break;
            }
        }
        (pos, nl)
    }

    /// Position after the string whose opening quote `q` is at `k`, or
    /// `None` when it never closes.
    fn peek_string_end(&self, k: usize, q: u8) -> Option<usize> {
        let mut p = k + 1;
        loop {
            let i = self.ran_to_end(memchr2(q, b'\\', &self.b[p..self.end]))?;
            if self.b[p + i] == b'\\' {
                p += i + 2;
                if self.eof(p) {
                    return None;
                }
            } else {
                return Some(p + i + 1);
            }
        }
    }

    /// Position after an identifier starting at `k`.
    fn ident_end(&self, mut k: usize) -> usize {
        while !self.eof(k) && (is_ident(self.b[k]) || self.b[k] == b'-') {
            k += 1;
        }
        k
    }

    /// Whether a `key:` (quoted or not) starts at `m`.
    fn key_follows(&self, m: usize, allow_unquoted: bool) -> bool {
        let c = self.b[m];
        if c == b'"' || c == b'\'' {
            return match self.peek_string_end(m, c) {
                Some(e) => {
                    let (n, _) = self.peek_ws(e);
                    // At the end of the input the colon may still come.
                    self.eof(n) || (self.b[n] == b':' && self.value_follows(n + 1))
                }
                // A key cut by the end of the input.
                None => self.b[m + 1..self.end]
                    .iter()
                    .all(|&c| is_ident(c) || c == b'-' || c == b' '),
            };
        }
        if is_ident(c) {
            let e = self.ident_end(m);
            if e > m && !self.eof(e + 1) && self.b[e] == b'"' && self.b[e + 1] == b':' {
                return true; // `b":` — a key missing its opening quote
            }
            if allow_unquoted {
                let (n, _) = self.peek_ws(e);
                return e > m && !self.eof(n) && self.b[n] == b':';
            }
        }
        false
    }

    /// Whether a JSON value (or the end of the input) follows a colon at
    /// `m - 1`: `"name": obligatorio` inside a text is not a key/value pair,
    /// `"name": "Ana"` is.
    fn value_follows(&self, m: usize) -> bool {
        let (n, _) = self.peek_ws(m);
        if self.eof(n) {
            return true;
        }
        let c = self.b[n];
        if c.is_ascii_digit() || matches!(c, b'-' | b'{' | b'[' | b'.' | b'}') {
            return true;
        }
        if opening_quote(self.b, n).is_some() {
            return true;
        }
        let e = self.ident_end(n);
        let word = &self.b[n..e];
        if matches!(
            word,
            b"true" | b"false" | b"null" | b"True" | b"False" | b"None" | b"undefined"
        ) {
            return true;
        }
        // The end of the input inside a literal: it may still complete.
        self.eof(e) && !word.is_empty()
    }

    /// Whether an array element starts at `m` and is followed by `,`, `]`
    /// or the end (used to accept a missing comma).
    fn element_follows(&self, m: usize, q: u8) -> bool {
        let c = self.b[m];
        if c == q {
            return match self.peek_string_end(m, q) {
                None => true,
                Some(e) => {
                    let (n, _) = self.peek_ws(e);
                    self.eof(n)
                        || matches!(self.b[n], b',' | b']' | b'}')
                        || self.b[n] == q
                        || (n > e && self.b[n].is_ascii_digit())
                }
            };
        }
        if c.is_ascii_digit() || matches!(c, b'-' | b'{' | b'[') {
            return true;
        }
        if opening_quote(self.b, m).is_some() {
            // A string opened by another kind of quote (`"a", 'b'`).
            return true;
        }
        let e = self.ident_end(m);
        matches!(&self.b[m..e], b"true" | b"false" | b"null")
    }

    /// Decides whether the quote `q` at `j` closes the string.
    fn verdict(
        &self,
        j: usize,
        q: u8,
        role: Role,
        kinds: &[Kind],
        unquoted_keys: bool,
        start: usize,
    ) -> Verdict {
        let (k, nl) = self.peek_ws(j + 1);
        if self.eof(k) {
            return Verdict::Close;
        }
        let c = self.b[k];
        let ws = k > j + 1;
        match role {
            Role::Key => {
                if matches!(c, b':' | b',' | b'}' | b']')
                    || (ws && !c.is_ascii_alphabetic())
                    || (ws && nl)
                {
                    Verdict::Close
                } else {
                    Verdict::Inner
                }
            }
            Role::Top => {
                if nl || matches!(c, b',' | b'{' | b'[' | b'+') {
                    Verdict::Close
                } else {
                    Verdict::Inner
                }
            }
            Role::ObjVal | Role::ArrElem => {
                let in_obj = role == Role::ObjVal;
                if c == b'`' && !self.eof(k + 2) && self.b[k..self.end].starts_with(b"```") {
                    return Verdict::Close;
                }
                match c {
                    b',' => {
                        let (m, nl2) = self.peek_ws(k + 1);
                        if self.eof(m) || matches!(self.b[m], b'}' | b']') {
                            return Verdict::Close;
                        }
                        let ok = if in_obj {
                            self.key_follows(m, unquoted_keys || nl || nl2)
                        } else {
                            self.element_follows(m, q)
                        };
                        if ok {
                            Verdict::Close
                        } else {
                            Verdict::Inner
                        }
                    }
                    b'}' | b']' => self.after_closer(k, c, q, kinds),
                    b')' => {
                        // `ObjectId("1")`: the quote closes before the `)`.
                        let (m, nl2) = self.peek_ws(k + 1);
                        if self.eof(m) || nl2 || matches!(self.b[m], b',' | b'}' | b']') {
                            Verdict::Close
                        } else {
                            Verdict::Inner
                        }
                    }
                    b'+' => {
                        let (m, _) = self.peek_ws(k + 1);
                        if !self.eof(m) && self.b[m] == q {
                            Verdict::Close
                        } else {
                            Verdict::Inner
                        }
                    }
                    _ if c == q => {
                        if in_obj {
                            if self.key_follows(k, false) {
                                Verdict::Close
                            } else {
                                Verdict::Inner
                            }
                        } else if ws && self.element_follows(k, q) {
                            Verdict::Close
                        } else {
                            Verdict::Inner
                        }
                    }
                    _ if nl && in_obj && is_ident(c) && self.key_follows(k, true) => Verdict::Close,
                    b':' if !in_obj => Verdict::Close,
                    _ if ws && !in_obj && self.element_follows(k, q) => Verdict::Close,
                    _ if !ws && is_ident(c) => self.close_before_comma(j, q, in_obj, start),
                    _ => Verdict::Inner,
                }
            }
        }
    }

    /// `"b,"c":"d"`: the quote at `j` opens a key (or an element) and the
    /// string should have ended at the comma just before it.
    fn close_before_comma(&self, j: usize, q: u8, in_obj: bool, start: usize) -> Verdict {
        let mut p = j;
        while p > start + 1 && self.b[p - 1] == b' ' {
            p -= 1;
        }
        if p <= start + 1 || self.b[p - 1] != b',' {
            return Verdict::Inner;
        }
        let comma = p - 1;
        let Some(i) = self.ran_to_end(memchr2(q, b'\n', &self.b[j + 1..self.end])) else {
            return Verdict::Inner;
        };
        let r = j + 1 + i;
        if self.b[r] != q {
            return Verdict::Inner;
        }
        let (n, _) = self.peek_ws(r + 1);
        let ok = if in_obj {
            !self.eof(n) && self.b[n] == b':' && self.value_follows(n + 1)
        } else {
            self.eof(n) || matches!(self.b[n], b',' | b']')
        };
        if ok {
            Verdict::CloseBefore(comma)
        } else {
            Verdict::Inner
        }
    }

    /// A quote followed by a closer at `k`: it closes the string when the
    /// closer matches an open bracket and the structure continues after it.
    fn after_closer(&self, k: usize, c: u8, q: u8, kinds: &[Kind]) -> Verdict {
        let want = if c == b'}' { Kind::Obj } else { Kind::Arr };
        if !kinds.contains(&want) {
            return Verdict::Inner;
        }
        let (m, nl) = self.peek_ws(k + 1);
        if self.eof(m) || nl {
            return Verdict::Close;
        }
        let c3 = self.b[m];
        if matches!(c3, b',' | b'}' | b']') {
            return Verdict::Close;
        }
        let root_close = kinds.len() == 1 && kinds[0] == want;
        if root_close {
            if matches!(c3, b'{' | b'[' | b'`') {
                return Verdict::Close;
            }
            // Text after the root on the same line: if it holds another
            // quote followed by a closer, this quote was an inner one.
            if let Some(i) = self.ran_to_end(memchr2(q, b'\n', &self.b[m..self.end])) {
                let r = m + i;
                if self.b[r] == q {
                    let (n, _) = self.peek_ws(r + 1);
                    if self.eof(n) || matches!(self.b[n], b'}' | b']') {
                        return Verdict::Inner;
                    }
                }
            }
            return Verdict::Close;
        }
        if c3 == q {
            Verdict::Close
        } else {
            Verdict::Inner
        }
    }

    /// Parses a string whose opening quote is at `pos`. Returns the text,
    /// the position after it, and whether the input ended inside it.
    fn parse_string(
        &mut self,
        pos: usize,
        role: Role,
        kinds: &[Kind],
        unquoted_keys: bool,
    ) -> (String, usize) {
        let Some((quote, qlen)) = opening_quote(self.b, pos) else {
            return (String::new(), pos + 1);
        };
        let q = match quote {
            Quote::Double => b'"',
            Quote::Single => {
                self.rep.note(Repair::NormalizedQuotes);
                b'\''
            }
            Quote::Fancy(open) => {
                self.rep.note(Repair::NormalizedQuotes);
                return self.parse_fancy(pos + qlen, open);
            }
        };
        let b = self.b;
        let mut out = String::new();
        let mut i = pos + 1;
        let mut last_rejected: Option<(usize, usize)> = None;
        loop {
            let Some(k) = memchr2(q, b'\\', &b[i..self.end]) else {
                self.push_seg(&mut out, i, self.end);
                return self.string_at_eof(out, pos, last_rejected, kinds);
            };
            let j = i + k;
            self.push_seg(&mut out, i, j);
            if b[j] == b'\\' {
                i = decode_escape(b, j, self.end, &mut out, &mut self.rep);
                continue;
            }
            match self.verdict(j, q, role, kinds, unquoted_keys, pos) {
                Verdict::Close => return (out, j + 1),
                Verdict::CloseBefore(comma) => {
                    // Drop the text from the comma on (`, ` was copied).
                    let cut = j - comma;
                    out.truncate(out.len().saturating_sub(cut));
                    self.rep.note(Repair::ClosedTruncated);
                    return (out, comma);
                }
                Verdict::Inner => {
                    self.rep.note(Repair::EscapedInnerQuote);
                    last_rejected = Some((j, out.len()));
                    out.push(q as char);
                    i = j + 1;
                }
            }
        }
    }

    /// Copies `b[from..to]` (UTF-8 boundaries: both ends are at ASCII bytes
    /// or the end) and notes raw control characters.
    #[inline]
    fn push_seg(&mut self, out: &mut String, from: usize, to: usize) {
        if from >= to {
            return;
        }
        let seg = &self.b[from..to];
        if !self.rep.has(Repair::EscapedControlChar) && seg.iter().any(|&c| c < 0x20) {
            self.rep.note(Repair::EscapedControlChar);
        }
        if !out.is_empty() && out.capacity() - out.len() < seg.len() {
            // Strings with inner quotes or escapes come in several pieces:
            // grow generously once instead of several times.
            out.reserve(seg.len() * 2 + out.len());
        }
        out.push_str(&self.s[from..to]);
    }

    /// The input ended inside a string opened at `open`.
    fn string_at_eof(
        &mut self,
        mut out: String,
        open: usize,
        last_rejected: Option<(usize, usize)>,
        kinds: &[Kind],
    ) -> (String, usize) {
        // A rejected quote followed only by structure-like text ending in an
        // unbalanced closer (`"xxxxx" true}`): that quote was the real end.
        if let Some((r, len)) = last_rejected {
            if !kinds.is_empty() && structural_tail(&self.b[r + 1..self.end]) {
                out.truncate(len);
                return (out, r + 1);
            }
        }
        self.rep.note(Repair::ClosedTruncated);
        // Trailing closers that have no opener inside the string belong to
        // the structure: `{"a":"b}` means `{"a":"b"}`.
        if !kinds.is_empty() {
            let content = &self.b[open + 1..self.end];
            let n = strip_structural_tail(content, kinds);
            if n > 0 {
                out.truncate(out.len().saturating_sub(n));
                let trimmed = out.trim_end().len();
                out.truncate(trimmed);
                return (out, self.end - n);
            }
        }
        (out, self.end)
    }

    /// A string opened by a curly quote or backtick: closed by the first
    /// matching closer (a `’` between letters is an apostrophe).
    fn parse_fancy(&mut self, mut pos: usize, open: char) -> (String, usize) {
        let mut out = String::new();
        let s = self.s;
        while pos < self.end {
            let ch = s[pos..].chars().next().unwrap_or('\u{fffd}');
            let len = ch.len_utf8();
            if ch == '\\' {
                pos = decode_escape(self.b, pos, self.end, &mut out, &mut self.rep);
                continue;
            }
            if closes_fancy(open, ch) {
                let next_alpha = s[pos + len..]
                    .chars()
                    .next()
                    .is_some_and(|n| n.is_alphanumeric());
                if !(ch == '’' || ch == '\'') || !next_alpha {
                    return (out, pos + len);
                }
            }
            out.push(ch);
            pos += len;
        }
        self.rep.note(Repair::ClosedTruncated);
        (out, self.end)
    }

    /// Reads a number, keyword or unquoted text at `pos`.
    fn parse_bare(&mut self, pos: usize, role: Role) -> (Value, usize) {
        let b = self.b;
        let mut e = pos;
        while e < self.end && matches!(b[e], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
            e += 1;
        }
        let end = self.end;
        let tok_end_ok = |e: usize| {
            e >= end
                || is_ascii_ws(b[e])
                || matches!(b[e], b',' | b'}' | b']' | b'/' | b'"' | b'{' | b'[' | b')')
                    && !(b[e] == b'/' && e + 1 < end && b[e + 1].is_ascii_digit())
        };
        if e > pos && tok_end_ok(e) {
            if let Some(v) = self.number(&self.s[pos..e]) {
                return (v, e);
            }
        }
        let w = self.ident_end(pos);
        if w > pos && tok_end_ok(w) {
            let lit = match &self.s[pos..w] {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                "null" => Some(Value::Null),
                "True" | "TRUE" => Some(Value::Bool(true)),
                "False" | "FALSE" => Some(Value::Bool(false)),
                "None" | "NULL" | "Null" | "undefined" | "NaN" => Some(Value::Null),
                _ => None,
            };
            if let Some(v) = lit {
                if !matches!(&self.s[pos..w], "true" | "false" | "null") {
                    self.rep.note(Repair::ConvertedLiteral);
                }
                return (v, w);
            }
        }
        // Unquoted text up to a delimiter of the context.
        let mut p = pos;
        while p < self.end {
            let c = b[p];
            let stop = match role {
                Role::ObjVal => matches!(c, b',' | b'}' | b'\n' | b'\r' | b'"'),
                Role::ArrElem => matches!(c, b',' | b']' | b'\n' | b'\r' | b'"'),
                Role::Key | Role::Top => matches!(c, b'\n' | b'\r'),
            };
            if stop {
                break;
            }
            p += 1;
        }
        let mut text = self.s[pos..p].trim_end();
        if text.is_empty() {
            // Only whitespace that `skip_ws` does not know (U+0085, U+2028…):
            // step over it whole, never into the middle of a character.
            self.rep.note(Repair::DroppedGarbage);
            let step = self.s[pos..].chars().next().map_or(1, char::len_utf8);
            return (Value::Null, p.max(pos + step));
        }
        let mut next = p;
        // `abcdef",`: a closing quote without an opening one.
        if p < self.end && b[p] == b'"' && text.len() == p - pos {
            let (n, _) = self.peek_ws(p + 1);
            if n >= self.end || matches!(b[n], b',' | b'}' | b']') {
                next = p + 1;
            }
        }
        if let Some(t) = text.strip_suffix('"') {
            text = t;
        }
        self.rep.note(Repair::QuotedValue);
        if let Some(v) = self.number(text) {
            return (v, next);
        }
        (Value::String(text.to_owned()), next)
    }

    /// Parses a number token leniently; `None` if it is not a number.
    fn number(&mut self, tok: &str) -> Option<Value> {
        let bytes = tok.as_bytes();
        if let Some(v) = strict_number(tok) {
            return Some(v);
        }
        // Lenient forms: `2.`, `.3`, `-.3`, `2e`, `2e+`, `-`.
        let neg = bytes.first() == Some(&b'-');
        let body = if neg { &tok[1..] } else { tok };
        if body.is_empty() {
            self.rep.note(Repair::FixedNumber);
            return Some(Value::from(-0.0));
        }
        let mut fixed = String::with_capacity(tok.len() + 2);
        if neg {
            fixed.push('-');
        }
        if body.starts_with('.') {
            fixed.push('0');
        }
        fixed.push_str(body);
        if fixed.ends_with('.') {
            fixed.push('0');
        }
        if fixed.ends_with(['e', 'E', '+', '-']) {
            fixed.push('0');
        }
        let v = strict_number(&fixed)?;
        self.rep.note(Repair::FixedNumber);
        Some(v)
    }

    /// Parses one value starting at `start` (a value start). Never
    /// recurses; fails only on the depth limit. When the wanted key is a
    /// key of the root object, its value is moved out of the root.
    pub(crate) fn parse_at(&mut self, start: usize) -> Result<Parsed, RescueError> {
        let mut at_root = None;
        // The stacks are reused from one candidate to the next.
        let mut stack = std::mem::take(&mut self.stack_buf);
        let mut kinds = std::mem::take(&mut self.kinds_buf);
        stack.clear();
        kinds.clear();
        let res = self.parse_inner(start, &mut at_root, &mut stack, &mut kinds);
        stack.clear();
        kinds.clear();
        self.stack_buf = stack;
        self.kinds_buf = kinds;
        let mut parsed = res?;
        if let Some(k) = at_root {
            parsed.found = parsed
                .value
                .as_object_mut()
                .and_then(|m| m.shift_remove(&k));
        }
        Ok(parsed)
    }

    fn parse_inner(
        &mut self,
        start: usize,
        at_root: &mut Option<String>,
        stack: &mut Vec<Frame>,
        kinds: &mut Vec<Kind>,
    ) -> Result<Parsed, RescueError> {
        let mut st = St::Value;
        let mut pos = start;
        let mut after_comma = false;
        let mut find = FindState {
            best: None,
            found: None,
            at_root: None,
            next_id: 0,
        };
        loop {
            pos = self.skip_ws(pos, st != St::Value);
            if pos >= self.end {
                if stack.is_empty() {
                    return Ok(Parsed {
                        value: Value::Null,
                        end: pos,
                        complete: false,
                        found: None,
                    });
                }
                self.rep.note(Repair::ClosedTruncated);
                let value = close_all(stack, kinds, &mut find);
                return Ok(Parsed {
                    value,
                    end: pos,
                    complete: false,
                    found: find.finish(at_root),
                });
            }
            let c = self.b[pos];
            let top = kinds.last().copied();
            match st {
                St::Value => {
                    let role = match top {
                        None => Role::Top,
                        Some(Kind::Obj) => Role::ObjVal,
                        Some(Kind::Arr) => Role::ArrElem,
                    };
                    let produced: Option<(Value, usize)> = match c {
                        b'{' | b'[' => {
                            if stack.len() >= self.max_depth {
                                return Err(RescueError::TooDeep {
                                    limit: self.max_depth,
                                });
                            }
                            let kind = if c == b'{' { Kind::Obj } else { Kind::Arr };
                            stack.push(Frame {
                                kind,
                                map: Map::new(),
                                items: Vec::new(),
                                key: None,
                                unquoted_keys: false,
                                id: find.next_id,
                                want_here: false,
                            });
                            find.next_id = find.next_id.wrapping_add(1);
                            kinds.push(kind);
                            st = if kind == Kind::Obj {
                                St::Key
                            } else {
                                St::Value
                            };
                            after_comma = false;
                            pos += 1;
                            None
                        }
                        b']' if top == Some(Kind::Arr) => {
                            if after_comma {
                                self.rep.note(Repair::RemovedTrailingComma);
                            }
                            let v = close_top(stack, kinds, &mut find);
                            Some((v, pos + 1))
                        }
                        b'}' | b']' | b',' if top == Some(Kind::Obj) => {
                            // `{"a":}` / `{"a":,`: missing value.
                            self.rep.note(Repair::InsertedNull);
                            Some((Value::Null, pos))
                        }
                        b'}' | b']' if stack.is_empty() => {
                            self.rep.note(Repair::DroppedGarbage);
                            return Ok(self.done_empty(pos + 1));
                        }
                        b'}' => {
                            if let Some(root) = self.mismatch(stack, kinds, &mut find, &mut pos) {
                                return Ok(self.done(root, pos, find.finish(at_root)));
                            }
                            st = St::After;
                            None
                        }
                        b',' => {
                            self.rep.note(Repair::RemovedTrailingComma);
                            pos += 1;
                            None
                        }
                        b'.' if self.b[pos..self.end].starts_with(b"...") => {
                            self.rep.note(Repair::RemovedEllipsis);
                            pos += 3;
                            if top == Some(Kind::Obj) {
                                Some((Value::Null, pos))
                            } else {
                                let (m, _) = self.peek_ws(pos);
                                if m < self.end && self.b[m] == b',' {
                                    pos = m + 1;
                                }
                                None
                            }
                        }
                        b':' => {
                            self.rep.note(Repair::DroppedGarbage);
                            pos += 1;
                            None
                        }
                        _ if opening_quote(self.b, pos).is_some() => {
                            let unq = stack.last().is_some_and(|f| f.unquoted_keys);
                            if role == Role::ObjVal
                                && self.want.is_some()
                                && stack.last().and_then(|f| f.key.as_deref()) == self.want
                                && matches!(self.b[pos], b'"' | b'\'')
                            {
                                self.want_string = Some(StrCtx {
                                    open: pos,
                                    q: self.b[pos],
                                    kinds: kinds.to_vec(),
                                    unquoted_keys: unq,
                                });
                            }
                            let (mut text, mut p) = self.parse_string(pos, role, kinds, unq);
                            // "a" + "b": concatenation.
                            loop {
                                let (m, _) = self.peek_ws(p);
                                if m < self.end && self.b[m] == b'+' {
                                    let n = self.skip_ws(m + 1, false);
                                    if n < self.end && opening_quote(self.b, n).is_some() {
                                        self.rep.note(Repair::ConcatenatedStrings);
                                        let (more, p2) = self.parse_string(n, role, kinds, unq);
                                        text.push_str(&more);
                                        p = p2;
                                        continue;
                                    }
                                }
                                break;
                            }
                            Some((Value::String(text), p))
                        }
                        _ if is_ident(c) && {
                            let e = self.ident_end(pos);
                            e < self.end && self.b[e] == b'(' && e > pos
                        } =>
                        {
                            // `ObjectId("1")`, `NumberLong(2)`: keep the argument.
                            self.rep.note(Repair::DroppedGarbage);
                            pos = self.ident_end(pos) + 1;
                            None
                        }
                        _ => Some(self.parse_bare(pos, role)),
                    };
                    if let Some((v, p)) = produced {
                        pos = p;
                        after_comma = false;
                        if let Some(root) = attach(stack, v, &mut find) {
                            return Ok(Parsed {
                                value: root,
                                end: pos,
                                complete: true,
                                found: find.finish(at_root),
                            });
                        }
                        st = St::After;
                    }
                }
                St::Key => match c {
                    b'}' => {
                        if after_comma {
                            self.rep.note(Repair::RemovedTrailingComma);
                        }
                        let v = close_top(stack, kinds, &mut find);
                        pos += 1;
                        after_comma = false;
                        if let Some(root) = attach(stack, v, &mut find) {
                            return Ok(self.done(root, pos, find.finish(at_root)));
                        }
                        st = St::After;
                    }
                    b']' => {
                        if let Some(root) = self.mismatch(stack, kinds, &mut find, &mut pos) {
                            return Ok(self.done(root, pos, find.finish(at_root)));
                        }
                        st = St::After;
                    }
                    b',' => {
                        self.rep.note(Repair::RemovedTrailingComma);
                        pos += 1;
                    }
                    b'{' | b'[' => {
                        let parent_arr = kinds.len() >= 2 && kinds[kinds.len() - 2] == Kind::Arr;
                        self.rep.note(Repair::FixedBracket);
                        if parent_arr {
                            let v = close_top(stack, kinds, &mut find);
                            let _ = attach(stack, v, &mut find);
                            st = St::After;
                        } else {
                            // An object that cannot go on: end the value here.
                            let value = close_all(stack, kinds, &mut find);
                            return Ok(Parsed {
                                value,
                                end: pos,
                                complete: false,
                                found: find.finish(at_root),
                            });
                        }
                    }
                    b'.' if self.b[pos..self.end].starts_with(b"...") => {
                        self.rep.note(Repair::RemovedEllipsis);
                        pos += 3;
                    }
                    _ if opening_quote(self.b, pos).is_some() => {
                        let (mut key, p) = self.parse_string(pos, Role::Key, kinds, false);
                        pos = p;
                        let nl = |c: char| c == '\n' || c == '\r';
                        if key.starts_with(nl) || key.ends_with(nl) {
                            key = key.trim_matches(nl).to_owned();
                        }
                        self.set_key(stack, key, &mut find);
                        st = St::Colon;
                    }
                    _ if is_ident(c) || c == b'-' => {
                        let e = self.ident_end(pos);
                        if e + 1 < self.end && self.b[e] == b'"' && self.b[e + 1] == b':' {
                            // `{a":1}`: a key missing its opening quote.
                            self.rep.note(Repair::QuotedKey);
                            let key = self.s[pos..e].to_owned();
                            self.set_key(stack, key, &mut find);
                            pos = e + 1;
                            st = St::Colon;
                            continue;
                        }
                        let (n, _) = self.peek_ws(e);
                        let colon = n < self.end && self.b[n] == b':';
                        let quote_next = n < self.end && opening_quote(self.b, n).is_some();
                        if colon || (quote_next && !self.key_follows(n, false)) {
                            self.rep.note(Repair::QuotedKey);
                            let key = self.s[pos..e].to_owned();
                            if let Some(f) = stack.last_mut() {
                                f.unquoted_keys = true;
                            }
                            self.set_key(stack, key, &mut find);
                            pos = e;
                            st = St::Colon;
                        } else {
                            // A stray word (`COMMENT`, `true` after a value).
                            self.rep.note(Repair::DroppedGarbage);
                            pos = e;
                        }
                    }
                    _ => {
                        self.rep.note(Repair::DroppedGarbage);
                        pos += self.s[pos..].chars().next().map_or(1, char::len_utf8);
                    }
                },
                St::Colon => match c {
                    b':' => {
                        pos += 1;
                        st = St::Value;
                    }
                    b'}' | b',' | b']' => {
                        self.rep.note(Repair::InsertedNull);
                        let _ = attach(stack, Value::Null, &mut find);
                        st = St::After;
                    }
                    _ => {
                        self.rep.note(Repair::InsertedMissingColon);
                        st = St::Value;
                    }
                },
                St::After => match c {
                    b',' => {
                        pos += 1;
                        after_comma = true;
                        st = if top == Some(Kind::Obj) {
                            St::Key
                        } else {
                            St::Value
                        };
                    }
                    b'}' if stack.len() == 1 && top == Some(Kind::Obj) && {
                        let (m, _) = self.peek_ws(pos + 1);
                        m < self.end && self.b[m] == b',' && {
                            let (n, _) = self.peek_ws(m + 1);
                            n < self.end
                                && self.b[n] == b'"'
                                && self.peek_string_end(n, b'"').is_some()
                                && self.key_follows(n, false)
                        }
                    } =>
                    {
                        // `{"a": 1}, "b": 2}`: a brace closed too early.
                        self.rep.note(Repair::FixedBracket);
                        pos += 1;
                    }
                    b')' | b';' => {
                        self.rep.note(Repair::DroppedGarbage);
                        pos += 1;
                    }
                    b'}' | b']' => {
                        let matches = (c == b'}') == (top == Some(Kind::Obj));
                        if matches {
                            let v = close_top(stack, kinds, &mut find);
                            pos += 1;
                            if let Some(root) = attach(stack, v, &mut find) {
                                return Ok(self.done(root, pos, find.finish(at_root)));
                            }
                        } else {
                            if let Some(root) = self.mismatch(stack, kinds, &mut find, &mut pos) {
                                return Ok(self.done(root, pos, find.finish(at_root)));
                            }
                        }
                    }
                    b'"' if {
                        let (n, _) = self.peek_ws(pos + 1);
                        n >= self.end || matches!(self.b[n], b',' | b'}' | b']')
                    } =>
                    {
                        self.rep.note(Repair::DroppedGarbage);
                        pos += 1;
                    }
                    b':' => {
                        self.rep.note(Repair::DroppedGarbage);
                        pos += 1;
                    }
                    _ => {
                        self.rep.note(Repair::InsertedMissingComma);
                        after_comma = false;
                        st = if top == Some(Kind::Obj) {
                            St::Key
                        } else {
                            St::Value
                        };
                    }
                },
            }
        }
    }

    fn done(&self, value: Value, end: usize, found: Option<Value>) -> Parsed {
        Parsed {
            value,
            end,
            complete: true,
            found,
        }
    }

    fn done_empty(&self, end: usize) -> Parsed {
        Parsed {
            value: Value::Null,
            end,
            complete: false,
            found: None,
        }
    }

    /// Records a key read in the top object, and whether it is the best
    /// match for the wanted key so far.
    fn set_key(&mut self, stack: &mut [Frame], key: String, find: &mut FindState) {
        let depth = stack.len();
        if let Some(f) = stack.last_mut() {
            if self.want == Some(key.as_str()) {
                let better = match find.best {
                    None => true,
                    Some((d, id)) => depth < d || (depth == d && id == f.id),
                };
                if better {
                    find.best = Some((depth, f.id));
                    f.want_here = true;
                }
            }
            f.key = Some(key);
        }
    }

    /// A closer at `pos` that does not match the innermost bracket: close
    /// the innermost one if an outer bracket matches, else drop the closer.
    /// Returns the root when the closer ended it.
    fn mismatch(
        &mut self,
        stack: &mut Vec<Frame>,
        kinds: &mut Vec<Kind>,
        find: &mut FindState,
        pos: &mut usize,
    ) -> Option<Value> {
        let c = self.b[*pos];
        let want = if c == b'}' { Kind::Obj } else { Kind::Arr };
        self.rep.note(Repair::FixedBracket);
        if kinds.len() > 1 && kinds.contains(&want) {
            let v = close_top(stack, kinds, find);
            attach(stack, v, find)
        } else if kinds.len() == 1 && !self.later_closer(*pos, kinds[0]) {
            // `{"a":2]`: the only open bracket, closed by the wrong closer.
            *pos += 1;
            let v = close_top(stack, kinds, find);
            attach(stack, v, find)
        } else {
            *pos += 1;
            None
        }
    }

    /// Whether a closer for `kind` appears after `pos`.
    fn later_closer(&self, pos: usize, kind: Kind) -> bool {
        let last = if kind == Kind::Obj {
            self.last_brace
        } else {
            self.last_bracket
        };
        last.is_some_and(|l| l > pos)
    }
}

/// Builds the value of the top frame and pops it.
fn close_top(stack: &mut Vec<Frame>, kinds: &mut Vec<Kind>, find: &mut FindState) -> Value {
    kinds.pop();
    let Some(mut f) = stack.pop() else {
        return Value::Null;
    };
    match f.kind {
        Kind::Arr => Value::Array(f.items),
        Kind::Obj => {
            if let Some(k) = f.key.take() {
                if f.want_here {
                    if stack.is_empty() {
                        find.at_root = Some(k.clone());
                    } else if !f.map.contains_key(&k) {
                        find.found = Some(Value::Null);
                    }
                }
                if !k.is_empty() {
                    f.map.entry(k).or_insert(Value::Null);
                }
            }
            Value::Object(f.map)
        }
    }
}

/// Closes every open bracket (truncated input) and returns the root.
fn close_all(stack: &mut Vec<Frame>, kinds: &mut Vec<Kind>, find: &mut FindState) -> Value {
    loop {
        let v = close_top(stack, kinds, find);
        if let Some(root) = attach(stack, v, find) {
            return root;
        }
    }
}

/// Attaches a finished value to the innermost container; returns it back
/// when there is none (it is the root).
fn attach(stack: &mut [Frame], v: Value, find: &mut FindState) -> Option<Value> {
    let root = stack.len() == 1;
    let Some(f) = stack.last_mut() else {
        return Some(v);
    };
    match f.kind {
        Kind::Arr => f.items.push(v),
        Kind::Obj => {
            let k = f.key.take().unwrap_or_default();
            if f.want_here {
                f.want_here = false;
                if root {
                    // Taken out of the root at the end: no copy.
                    find.at_root = Some(k.clone());
                } else {
                    find.found = Some(v.clone());
                }
            }
            f.map.insert(k, v);
        }
    }
    None
}

/// Parses a strict JSON number.
fn strict_number(tok: &str) -> Option<Value> {
    let b = tok.as_bytes();
    let mut i = 0;
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
        }
        _ => return None,
    }
    let mut int = true;
    if b.get(i) == Some(&b'.') {
        int = false;
        i += 1;
        let s = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == s {
            return None;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        int = false;
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let s = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == s {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    if int {
        if let Ok(v) = tok.parse::<i64>() {
            return Some(Value::from(v));
        }
        if let Ok(v) = tok.parse::<u64>() {
            return Some(Value::from(v));
        }
    }
    let f: f64 = tok.parse().ok()?;
    Number::from_f64(f).map(Value::Number)
}

/// Whether the text after a rejected quote, at the end of the input, is
/// structure rather than text: closers (and whitespace or fences), possibly
/// after one stray literal (` true}`), a comma or a colon.
fn structural_tail(tail: &[u8]) -> bool {
    let mut end = tail.len();
    let mut closers = 0;
    while end > 0 {
        let c = tail[end - 1];
        if is_ascii_ws(c) || c == b'`' {
            end -= 1;
        } else if matches!(c, b'}' | b']') {
            closers += 1;
            end -= 1;
        } else {
            break;
        }
    }
    if closers == 0 {
        return false;
    }
    let rest = tail[..end].trim_ascii();
    rest.is_empty()
        || matches!(rest[0], b',' | b':')
        || rest.iter().all(|&c| is_ident(c))
        || matches!(rest, b"true" | b"false" | b"null")
        || strict_number(std::str::from_utf8(rest).unwrap_or("x")).is_some()
}

/// Number of bytes at the end of an unterminated string's content that are
/// structure (closers of open brackets, whitespace, fences) rather than text.
fn strip_structural_tail(content: &[u8], kinds: &[Kind]) -> usize {
    let mut open_obj = 0i64;
    let mut open_arr = 0i64;
    for &c in content {
        match c {
            b'{' => open_obj += 1,
            b'}' => open_obj -= 1,
            b'[' => open_arr += 1,
            b']' => open_arr -= 1,
            _ => {}
        }
    }
    // Closers available to strip: those with no opener inside the string.
    let mut extra_obj = (-open_obj).max(0);
    let mut extra_arr = (-open_arr).max(0);
    // The run of closers at the end (read backwards), at most one per
    // open bracket.
    let mut run: Vec<(usize, Kind)> = Vec::new();
    let mut end = content.len();
    while end > 0 && run.len() < kinds.len() {
        let c = content[end - 1];
        if is_ascii_ws(c) || c == b'`' {
            end -= 1;
            continue;
        }
        let kind = match c {
            b'}' if extra_obj > 0 => {
                extra_obj -= 1;
                Kind::Obj
            }
            b']' if extra_arr > 0 => {
                extra_arr -= 1;
                Kind::Arr
            }
            _ => break,
        };
        if end >= 2 && content[end - 2] == b'\\' {
            break;
        }
        run.push((end - 1, kind));
        end -= 1;
    }
    // Forward order must close the innermost brackets first: the longest
    // such suffix of the run is structure.
    run.reverse();
    let mut cut = content.len();
    for s in 0..run.len() {
        let part = &run[s..];
        if part
            .iter()
            .zip(kinds.iter().rev())
            .all(|((_, k), w)| k == w)
        {
            cut = part[0].0;
            break;
        }
    }
    if cut == content.len() {
        // Only fences/whitespace at the end: strip a trailing fence.
        let t = content.len()
            - content
                .iter()
                .rev()
                .take_while(|&&c| is_ascii_ws(c) || c == b'`')
                .count();
        if content[t..].windows(3).any(|w| w == b"```") {
            return content.len() - t;
        }
        return 0;
    }
    content.len() - cut
}
