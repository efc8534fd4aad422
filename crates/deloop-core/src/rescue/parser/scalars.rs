//! The parser's scalar readers, methods of [`Parser`]: strings (plain,
//! fancy-quoted, concatenated, or cut by the end of the input), bare words
//! and numbers.

use memchr::memchr2;
use serde_json::Value;

use super::Parser;
use crate::rescue::number::lenient_number;
use crate::rescue::quote_rule::{Kind, Role, Site, StrCtx, Verdict};
use crate::rescue::strings::{
    closes_fancy, decode_escape, is_ascii_ws, opening_quote, Quote, RegexEscapes,
};
use crate::rescue::tail::{strip_structural_tail, structural_tail};
use crate::rescue::tree::Tree;
use crate::rescue::Repair;

impl Parser<'_> {
    /// Parses a string whose opening quote is at `pos`. Returns the text,
    /// the position after it, and whether the input ended inside it.
    pub(super) fn parse_string(
        &mut self,
        mut out: String,
        pos: usize,
        role: Role,
        kinds: &[Kind],
        unquoted_keys: bool,
    ) -> (String, usize) {
        out.clear();
        let Some((quote, qlen)) = opening_quote(self.b, pos) else {
            return (out, pos + 1);
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
        let mut i = pos + 1;
        let mut last_rejected: Option<(usize, usize)> = None;
        // Objects written into the text (`send {"user": "ana"} to…`).
        let nested = matches!(role, Role::ObjVal | Role::ArrElem);
        let mut nest = 0u32;
        let mut nest_from = i;
        let mut escapes = RegexEscapes::default();
        loop {
            let Some(k) = memchr2(q, b'\\', &b[i..self.end]) else {
                self.push_seg(&mut out, i, self.end);
                let (out, end) = self.string_at_eof(out, pos, last_rejected, kinds);
                return (escapes.apply(out), end);
            };
            let j = i + k;
            self.push_seg(&mut out, i, j);
            if b[j] == b'\\' {
                let at = out.len();
                i = decode_escape(b, j, self.end, &mut out, &mut self.rep);
                escapes.saw(b, j, i, self.end, at);
                continue;
            }
            if nested {
                nest = self
                    .rule
                    .nesting(nest_from, j, q, nest, Some(false))
                    .unwrap_or_else(|(n, _)| n);
                nest_from = j;
                if nest > 0 {
                    // A quote of the object written into the text.
                    self.rep.note(Repair::EscapedInnerQuote);
                    out.push(q as char);
                    i = j + 1;
                    continue;
                }
            }
            let site = Site {
                open: pos,
                q,
                role,
                kinds,
                unquoted_keys,
            };
            match self.rule.verdict(j, &site) {
                Verdict::Close => return (escapes.apply(out), j + 1),
                Verdict::CloseBefore(comma) => {
                    // Drop the text from the comma on (`, ` was copied).
                    let cut = j - comma;
                    out.truncate(out.len().saturating_sub(cut));
                    self.rep.note(Repair::ClosedTruncated);
                    return (escapes.apply(out), comma);
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
    pub(super) fn push_seg(&mut self, out: &mut String, from: usize, to: usize) {
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
    pub(super) fn string_at_eof(
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
    pub(super) fn parse_fancy(&mut self, mut pos: usize, open: char) -> (String, usize) {
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
    pub(super) fn parse_bare(&mut self, pos: usize, role: Role) -> (Value, usize) {
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
        let w = self.rule.ident_end(pos);
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
            let (n, _) = self.rule.peek_ws(p + 1);
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
    pub(super) fn number(&mut self, tok: &str) -> Option<Value> {
        let (v, fixed) = lenient_number(tok)?;
        if fixed {
            self.rep.note(Repair::FixedNumber);
        }
        Some(v)
    }

    /// A string value opened at `pos`, with `"a" + "b"` concatenation.
    pub(super) fn string_value(
        &mut self,
        tree: &mut Tree,
        pos: usize,
        role: Role,
    ) -> (Value, usize) {
        let buf = tree.spare_string();
        let unq = tree.unquoted_keys();
        let kinds = tree.kinds();
        if role == Role::ObjVal
            && self.want.is_some()
            && tree.pending_key() == self.want
            && matches!(self.b[pos], b'"' | b'\'')
        {
            self.want_string = Some(StrCtx {
                open: pos,
                q: self.b[pos],
                kinds: kinds.to_vec(),
                unquoted_keys: unq,
            });
        }
        let (mut text, mut p) = self.parse_string(buf, pos, role, kinds, unq);
        loop {
            let (m, _) = self.rule.peek_ws(p);
            if m < self.end && self.b[m] == b'+' {
                let n = self.skip_ws(m + 1, false);
                if n < self.end && opening_quote(self.b, n).is_some() {
                    self.rep.note(Repair::ConcatenatedStrings);
                    let (more, p2) = self.parse_string(String::new(), n, role, kinds, unq);
                    text.push_str(&more);
                    p = p2;
                    continue;
                }
            }
            break;
        }
        (Value::String(text), p)
    }
}
