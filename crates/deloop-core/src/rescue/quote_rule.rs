//! The closing-quote rule: whether a `"` met inside a string closes it.
//!
//! A quote closes the string only where the structure really continues
//! after it (see `docs/rescue.md`, "When a quote closes a string"). The
//! look-ahead that decides this reaches at most to the next quote (or the
//! end of the line) and every byte it reads is read again at most a
//! constant number of times, so the whole parse stays linear.
//!
//! The batch parser and the streaming extractor both ask [`QuoteRule`], so
//! they cannot drift apart.

use std::cell::Cell;

use memchr::{memchr, memchr2};

use super::strings::{is_ascii_ws, is_ident, opening_quote, unicode_space};

/// The kind of an open bracket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Obj,
    Arr,
}

/// What a string is for: it changes which quotes may close it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Key,
    ObjVal,
    ArrElem,
    Top,
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

/// The string a quote was met in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Site<'k> {
    /// Position of the opening quote.
    pub(crate) open: usize,
    /// The quote byte (`"` or `'`).
    pub(crate) q: u8,
    /// What the string is for.
    pub(crate) role: Role,
    /// Open brackets, outermost first.
    pub(crate) kinds: &'k [Kind],
    /// The enclosing object has unquoted keys.
    pub(crate) unquoted_keys: bool,
}

/// The closing-quote rule over one input, with the look-ahead helpers it
/// is built from (also used by the parser to peek at what follows).
pub(crate) struct QuoteRule<'a> {
    s: &'a str,
    b: &'a [u8],
    end: usize,
    /// Set when a look-ahead reached the end of the input (its answer may
    /// change when more input arrives).
    touched_end: Cell<bool>,
}

impl<'a> QuoteRule<'a> {
    /// The rule over `s` (constant-time construction).
    pub(crate) fn new(s: &'a str) -> Self {
        QuoteRule {
            s,
            b: s.as_bytes(),
            end: s.len(),
            touched_end: Cell::new(false),
        }
    }

    /// The batch parser's decision for the quote at `j` inside the string
    /// described by `ctx`, or `None` when the decision looked at the end of
    /// the input (more input could change it). Used by the streaming
    /// extractor so that batch and streaming apply the same rule.
    pub(crate) fn final_verdict(&self, j: usize, ctx: &StrCtx) -> Option<Verdict> {
        self.touched_end.set(false);
        let site = Site {
            open: ctx.open,
            q: ctx.q,
            role: Role::ObjVal,
            kinds: &ctx.kinds,
            unquoted_keys: ctx.unquoted_keys,
        };
        let v = self.verdict(j, &site);
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

    /// Plain whitespace skip (no comments) for look-ahead; also reports
    /// whether a newline was crossed.
    #[inline]
    pub(crate) fn peek_ws(&self, mut pos: usize) -> (usize, bool) {
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
    pub(crate) fn peek_string_end(&self, k: usize, q: u8) -> Option<usize> {
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
    pub(crate) fn ident_end(&self, mut k: usize) -> usize {
        while !self.eof(k) && (is_ident(self.b[k]) || self.b[k] == b'-') {
            k += 1;
        }
        k
    }

    /// Whether a `key:` (quoted or not) starts at `m`.
    pub(crate) fn key_follows(&self, m: usize, allow_unquoted: bool) -> bool {
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

    /// Whether the `{` at `x`, inside a string quoted by `q`, opens an
    /// object written into the text (`send {"user": "ana"} to…`): `{`,
    /// optional whitespace, a quoted key of 1 to 64 letters, digits, `_`,
    /// `-`, `.`, `$` or spaces, optional whitespace, then `:`. `None` when
    /// the look-ahead reached the end of the input before deciding.
    pub(crate) fn embedded_object_at(&self, x: usize, q: u8) -> Option<bool> {
        let b = self.b;
        let mut p = x + 1;
        while p < self.end && is_ascii_ws(b[p]) {
            p += 1;
        }
        if p >= self.end {
            return None;
        }
        if b[p] != q {
            return Some(false);
        }
        let key = p + 1;
        p = key;
        loop {
            if p >= self.end {
                return None;
            }
            let c = b[p];
            if c == q {
                break;
            }
            if p - key >= 64 || !(is_ident(c) || matches!(c, b'-' | b'.' | b' ')) {
                return Some(false);
            }
            p += 1;
        }
        if p == key {
            return Some(false);
        }
        p += 1;
        while p < self.end && is_ascii_ws(b[p]) {
            p += 1;
        }
        if p >= self.end {
            return None;
        }
        Some(b[p] == b':')
    }

    /// The depth of objects written into the text of a string quoted by
    /// `q`, after the braces of `b[from..to]`, starting at `nest`: a `{`
    /// that opens such an object (or any `{` inside one) adds a level, a
    /// `}` closes one. Quotes met at a depth above zero belong to the
    /// written object and never close the string. Returns the depth, or
    /// `Err((depth, x))` at a `{` at `x` whose reading needs input past
    /// the end, when `undecided_opens` is `None`; otherwise that `{`
    /// counts as `undecided_opens` says (the batch parser: it opens
    /// nothing).
    pub(crate) fn nesting(
        &self,
        from: usize,
        to: usize,
        q: u8,
        mut nest: u32,
        undecided_opens: Option<bool>,
    ) -> Result<u32, (u32, usize)> {
        let mut p = from;
        while let Some(k) = memchr2(b'{', b'}', &self.b[p..to]) {
            let x = p + k;
            if self.b[x] == b'{' {
                let opens = if nest > 0 {
                    true
                } else {
                    match self.embedded_object_at(x, q).or(undecided_opens) {
                        Some(o) => o,
                        None => return Err((nest, x)),
                    }
                };
                if opens {
                    nest += 1;
                }
            } else {
                nest = nest.saturating_sub(1);
            }
            p = x + 1;
        }
        Ok(nest)
    }

    /// Decides whether the quote at `j` closes the string `site`.
    pub(crate) fn verdict(&self, j: usize, site: &Site) -> Verdict {
        let (k, nl) = self.peek_ws(j + 1);
        if self.eof(k) {
            return Verdict::Close;
        }
        let c = self.b[k];
        let ws = k > j + 1;
        match site.role {
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
            Role::ObjVal | Role::ArrElem => self.value_verdict(j, k, nl, site),
        }
    }

    /// The rule for a quote at `j` inside an object value or an array
    /// element; `k` is the first byte after the quote and the whitespace
    /// that follows it, `nl` whether that whitespace held a newline.
    fn value_verdict(&self, j: usize, k: usize, nl: bool, site: &Site) -> Verdict {
        let Site {
            open: start,
            q,
            kinds,
            unquoted_keys,
            ..
        } = *site;
        let in_obj = site.role == Role::ObjVal;
        let c = self.b[k];
        let ws = k > j + 1;
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
}
