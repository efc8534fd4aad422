//! The lenient parser: one JSON value from a start position, with an
//! explicit stack (no recursion), linear time.
//!
//! The parser is a state machine over four states (a value is expected, a
//! key, a colon, or what comes after a value); each state has its own
//! method. The value is built in a [`Tree`]; whether a quote inside a
//! string closes it is decided by the [`QuoteRule`]; what to do with the
//! end of a cut string is in the `tail` module.

use memchr::memchr;
use serde_json::Value;

use super::error::RescueError;
use super::quote_rule::{Kind, QuoteRule, Role, StrCtx};
use super::repairs::Repairs;
use super::strings::{is_ascii_ws, is_ident, opening_quote, unicode_space};
use super::tree::Tree;
use super::Repair;

mod scalars;

/// What the parser expects next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    Value,
    Key,
    Colon,
    After,
}

/// One parsed top-level value.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub(crate) value: Value,
    /// Position after the value.
    pub(crate) end: usize,
    /// False when the input ended before the value was closed.
    pub(crate) complete: bool,
    /// The value of the wanted key (shallowest, then the last complete
    /// object at that depth; a duplicate in the same object replaces the
    /// earlier one).
    pub(crate) found: Option<Value>,
    /// Text mode: the value as compact JSON (`value` is then `null`), or
    /// `None` when the value must be built instead (a duplicate key).
    pub(crate) json: Option<String>,
}

/// The position and state of one parse.
struct Walk {
    st: St,
    pos: usize,
    /// The last token was a comma (a closer now means a trailing comma).
    after_comma: bool,
}

/// The outcome of one step of the state machine: `Some` when the value
/// is finished.
type Step = Result<Option<Parsed>, RescueError>;

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
    /// The closing-quote rule and look-ahead over the same input.
    rule: QuoteRule<'a>,
    /// The tree, kept from one candidate to the next for its buffers.
    tree_buf: Tree,
    /// Context of the last string value of the wanted key (streaming).
    pub(crate) want_string: Option<StrCtx>,
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
            rule: QuoteRule::new(s),
            tree_buf: Tree::default(),
            want_string: None,
        }
    }

    /// Text mode: values are written as compact JSON text instead of being
    /// built ([`Parsed::json`]); for `repair` to text, with no wanted key.
    pub(crate) fn text_mode(&mut self, on: bool) {
        self.tree_buf.text_mode(on && self.want.is_none());
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

    /// Parses one value starting at `start` (a value start). Never
    /// recurses; fails only on the depth limit. When the wanted key is a
    /// key of the root object, its value is moved out of the root.
    pub(crate) fn parse_at(&mut self, start: usize) -> Result<Parsed, RescueError> {
        // The tree's buffers are reused from one candidate to the next.
        let mut tree = std::mem::take(&mut self.tree_buf);
        tree.reset();
        let res = self.parse_inner(start, &mut tree);
        let (found, at_root) = tree.take_found();
        let json = tree.take_text();
        tree.reset();
        self.tree_buf = tree;
        let mut parsed = res?;
        parsed.found = found;
        parsed.json = json;
        if let Some(k) = at_root {
            parsed.found = parsed
                .value
                .as_object_mut()
                .and_then(|m| m.shift_remove(&k));
        }
        Ok(parsed)
    }

    /// The state machine: one step per token until the value is finished
    /// or the input ends.
    fn parse_inner(&mut self, start: usize, tree: &mut Tree) -> Result<Parsed, RescueError> {
        let mut w = Walk {
            st: St::Value,
            pos: start,
            after_comma: false,
        };
        loop {
            w.pos = self.skip_ws(w.pos, w.st != St::Value);
            if w.pos >= self.end {
                return Ok(self.at_end(tree, w.pos));
            }
            let c = self.b[w.pos];
            let step = match w.st {
                St::Value => self.on_value(tree, &mut w, c)?,
                St::Key => self.on_key(tree, &mut w, c),
                St::Colon => self.on_colon(tree, &mut w, c),
                St::After => self.on_after(tree, &mut w, c),
            };
            if let Some(parsed) = step {
                return Ok(parsed);
            }
        }
    }

    /// The input ended: close whatever is open.
    fn at_end(&mut self, tree: &mut Tree, pos: usize) -> Parsed {
        if tree.depth() == 0 {
            return Parsed {
                value: Value::Null,
                end: pos,
                complete: false,
                found: None,
                json: None,
            };
        }
        self.rep.note(Repair::ClosedTruncated);
        Parsed {
            value: tree.close_all(),
            end: pos,
            complete: false,
            found: None,
            json: None,
        }
    }

    /// A value is expected at `w.pos`, which holds `c`.
    fn on_value(&mut self, tree: &mut Tree, w: &mut Walk, c: u8) -> Step {
        let top = tree.top();
        let role = match top {
            None => Role::Top,
            Some(Kind::Obj) => Role::ObjVal,
            Some(Kind::Arr) => Role::ArrElem,
        };
        let pos = w.pos;
        let produced: Option<(Value, usize)> = match c {
            b'{' | b'[' => {
                if tree.depth() >= self.max_depth {
                    return Err(RescueError::TooDeep {
                        limit: self.max_depth,
                    });
                }
                let kind = if c == b'{' { Kind::Obj } else { Kind::Arr };
                tree.open(kind);
                w.st = if kind == Kind::Obj {
                    St::Key
                } else {
                    St::Value
                };
                w.after_comma = false;
                w.pos += 1;
                None
            }
            b']' if top == Some(Kind::Arr) => {
                if w.after_comma {
                    self.rep.note(Repair::RemovedTrailingComma);
                }
                Some((tree.close_top(true), pos + 1))
            }
            b'}' | b']' | b',' if top == Some(Kind::Obj) => {
                // `{"a":}` / `{"a":,`: missing value.
                self.rep.note(Repair::InsertedNull);
                Some((Value::Null, pos))
            }
            b'}' | b']' if tree.depth() == 0 => {
                self.rep.note(Repair::DroppedGarbage);
                return Ok(Some(Parsed {
                    value: Value::Null,
                    end: pos + 1,
                    complete: false,
                    found: None,
                    json: None,
                }));
            }
            b'}' => {
                if let Some(root) = self.mismatch(tree, &mut w.pos) {
                    return Ok(Some(self.done(root, w.pos)));
                }
                w.st = St::After;
                None
            }
            b',' => {
                self.rep.note(Repair::RemovedTrailingComma);
                w.pos += 1;
                None
            }
            b'.' if self.b[pos..self.end].starts_with(b"...") => {
                self.rep.note(Repair::RemovedEllipsis);
                w.pos += 3;
                if top == Some(Kind::Obj) {
                    Some((Value::Null, w.pos))
                } else {
                    let (m, _) = self.rule.peek_ws(w.pos);
                    if m < self.end && self.b[m] == b',' {
                        w.pos = m + 1;
                    }
                    None
                }
            }
            b':' => {
                self.rep.note(Repair::DroppedGarbage);
                w.pos += 1;
                None
            }
            _ if opening_quote(self.b, pos).is_some() => Some(self.string_value(tree, pos, role)),
            _ if is_ident(c) && {
                let e = self.rule.ident_end(pos);
                e < self.end && self.b[e] == b'(' && e > pos
            } =>
            {
                // `ObjectId("1")`, `NumberLong(2)`: keep the argument.
                self.rep.note(Repair::DroppedGarbage);
                w.pos = self.rule.ident_end(pos) + 1;
                None
            }
            _ => Some(self.parse_bare(pos, role)),
        };
        if let Some((v, p)) = produced {
            w.pos = p;
            w.after_comma = false;
            if let Some(root) = tree.attach(v) {
                return Ok(Some(Parsed {
                    value: root,
                    end: w.pos,
                    complete: true,
                    found: None,
                    json: None,
                }));
            }
            w.st = St::After;
        }
        Ok(None)
    }

    /// A key (or the end of the object) is expected at `w.pos`.
    fn on_key(&mut self, tree: &mut Tree, w: &mut Walk, c: u8) -> Option<Parsed> {
        let pos = w.pos;
        match c {
            b'}' => {
                if w.after_comma {
                    self.rep.note(Repair::RemovedTrailingComma);
                }
                let v = tree.close_top(true);
                w.pos += 1;
                w.after_comma = false;
                if let Some(root) = tree.attach(v) {
                    return Some(self.done(root, w.pos));
                }
                w.st = St::After;
            }
            b']' => {
                if let Some(root) = self.mismatch(tree, &mut w.pos) {
                    return Some(self.done(root, w.pos));
                }
                w.st = St::After;
            }
            b',' => {
                self.rep.note(Repair::RemovedTrailingComma);
                w.pos += 1;
            }
            b'{' | b'[' => {
                let kinds = tree.kinds();
                let parent_arr = kinds.len() >= 2 && kinds[kinds.len() - 2] == Kind::Arr;
                self.rep.note(Repair::FixedBracket);
                if parent_arr {
                    let v = tree.close_top(true);
                    let _ = tree.attach(v);
                    w.st = St::After;
                } else {
                    // An object that cannot go on: end the value here.
                    return Some(Parsed {
                        value: tree.close_all(),
                        end: pos,
                        complete: false,
                        found: None,
                        json: None,
                    });
                }
            }
            b'.' if self.b[pos..self.end].starts_with(b"...") => {
                self.rep.note(Repair::RemovedEllipsis);
                w.pos += 3;
            }
            _ if opening_quote(self.b, pos).is_some() => {
                let buf = tree.spare_string();
                let (mut key, p) = self.parse_string(buf, pos, Role::Key, tree.kinds(), false);
                w.pos = p;
                let nl = |c: char| c == '\n' || c == '\r';
                if key.starts_with(nl) || key.ends_with(nl) {
                    key = key.trim_matches(nl).to_owned();
                }
                tree.set_key(key, self.want);
                w.st = St::Colon;
            }
            _ if is_ident(c) || c == b'-' => {
                let e = self.rule.ident_end(pos);
                if e + 1 < self.end && self.b[e] == b'"' && self.b[e + 1] == b':' {
                    // `{a":1}`: a key missing its opening quote.
                    self.rep.note(Repair::QuotedKey);
                    tree.set_key(self.s[pos..e].to_owned(), self.want);
                    w.pos = e + 1;
                    w.st = St::Colon;
                    return None;
                }
                let (n, _) = self.rule.peek_ws(e);
                let colon = n < self.end && self.b[n] == b':';
                let quote_next = n < self.end && opening_quote(self.b, n).is_some();
                if colon || (quote_next && !self.rule.key_follows(n, false)) {
                    self.rep.note(Repair::QuotedKey);
                    tree.mark_unquoted_keys();
                    tree.set_key(self.s[pos..e].to_owned(), self.want);
                    w.pos = e;
                    w.st = St::Colon;
                } else {
                    // A stray word (`COMMENT`, `true` after a value).
                    self.rep.note(Repair::DroppedGarbage);
                    w.pos = e;
                }
            }
            _ => {
                self.rep.note(Repair::DroppedGarbage);
                w.pos += self.s[pos..].chars().next().map_or(1, char::len_utf8);
            }
        }
        None
    }

    /// A colon is expected after a key at `w.pos`.
    fn on_colon(&mut self, tree: &mut Tree, w: &mut Walk, c: u8) -> Option<Parsed> {
        match c {
            b':' => {
                w.pos += 1;
                w.st = St::Value;
            }
            b'}' | b',' | b']' => {
                self.rep.note(Repair::InsertedNull);
                let _ = tree.attach(Value::Null);
                w.st = St::After;
            }
            _ => {
                self.rep.note(Repair::InsertedMissingColon);
                w.st = St::Value;
            }
        }
        None
    }

    /// A comma or a closer is expected after a value at `w.pos`.
    fn on_after(&mut self, tree: &mut Tree, w: &mut Walk, c: u8) -> Option<Parsed> {
        let pos = w.pos;
        let top = tree.top();
        match c {
            b',' => {
                w.pos += 1;
                w.after_comma = true;
                w.st = if top == Some(Kind::Obj) {
                    St::Key
                } else {
                    St::Value
                };
            }
            b'}' if tree.depth() == 1 && top == Some(Kind::Obj) && self.reopens_root(pos) => {
                // `{"a": 1}, "b": 2}`: a brace closed too early.
                self.rep.note(Repair::FixedBracket);
                w.pos += 1;
            }
            b')' | b';' => {
                self.rep.note(Repair::DroppedGarbage);
                w.pos += 1;
            }
            b'}' | b']' => {
                let matches = (c == b'}') == (top == Some(Kind::Obj));
                if matches {
                    let v = tree.close_top(true);
                    w.pos += 1;
                    if let Some(root) = tree.attach(v) {
                        return Some(self.done(root, w.pos));
                    }
                } else if let Some(root) = self.mismatch(tree, &mut w.pos) {
                    return Some(self.done(root, w.pos));
                }
            }
            b'"' if {
                let (n, _) = self.rule.peek_ws(pos + 1);
                n >= self.end || matches!(self.b[n], b',' | b'}' | b']')
            } =>
            {
                self.rep.note(Repair::DroppedGarbage);
                w.pos += 1;
            }
            b':' => {
                self.rep.note(Repair::DroppedGarbage);
                w.pos += 1;
            }
            _ => {
                self.rep.note(Repair::InsertedMissingComma);
                w.after_comma = false;
                w.st = if top == Some(Kind::Obj) {
                    St::Key
                } else {
                    St::Value
                };
            }
        }
        None
    }

    /// Whether the root's `}` at `pos` is followed by `, "key":`, so the
    /// root was closed too early.
    fn reopens_root(&self, pos: usize) -> bool {
        let (m, _) = self.rule.peek_ws(pos + 1);
        m < self.end && self.b[m] == b',' && {
            let (n, _) = self.rule.peek_ws(m + 1);
            n < self.end
                && self.b[n] == b'"'
                && self.rule.peek_string_end(n, b'"').is_some()
                && self.rule.key_follows(n, false)
        }
    }

    /// A complete value ending at `end`.
    fn done(&self, value: Value, end: usize) -> Parsed {
        Parsed {
            value,
            end,
            complete: true,
            found: None,
            json: None,
        }
    }

    /// A closer at `pos` that does not match the innermost bracket: close
    /// the innermost one if an outer bracket matches, else drop the closer.
    /// Returns the root when the closer ended it.
    fn mismatch(&mut self, tree: &mut Tree, pos: &mut usize) -> Option<Value> {
        let c = self.b[*pos];
        let want = if c == b'}' { Kind::Obj } else { Kind::Arr };
        self.rep.note(Repair::FixedBracket);
        let kinds = tree.kinds();
        if kinds.len() > 1 && kinds.contains(&want) {
            let v = tree.close_top(true);
            tree.attach(v)
        } else if kinds.len() == 1 && !self.later_closer(*pos, kinds[0]) {
            // `{"a":2]`: the only open bracket, closed by the wrong closer.
            *pos += 1;
            let v = tree.close_top(true);
            tree.attach(v)
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
