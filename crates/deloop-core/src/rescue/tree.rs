//! The value under construction: the stack of open objects and arrays
//! (explicit, so the parser never recurses), and where the wanted key was
//! found in it.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::quote_rule::Kind;

/// One open object or array.
#[derive(Debug)]
struct Frame {
    kind: Kind,
    map: Map<String, Value>,
    items: Vec<Value>,
    /// The key read last in an object, waiting for its value.
    key: Option<String>,
    /// The object uses unquoted keys (`{a: 1}`).
    unquoted_keys: bool,
    /// The pending key is the wanted key, at the shallowest depth so far.
    want_here: bool,
    /// The value of the wanted key in this object so far.
    hit: Option<Value>,
    /// Text mode: members written so far, and the keys written.
    count: usize,
    keys: Keys,
}

/// The keys written in one object (text mode), to find a duplicate.
#[derive(Debug, Default)]
struct Keys {
    few: Vec<String>,
    many: Option<HashSet<String>>,
}

impl Keys {
    /// Past this many keys a hash set replaces the linear search.
    const FEW: usize = 16;

    fn contains(&self, k: &str) -> bool {
        match &self.many {
            Some(set) => set.contains(k),
            None => self.few.iter().any(|x| x == k),
        }
    }

    /// Empties the keys, handing them out.
    fn drain(&mut self) -> impl Iterator<Item = String> + '_ {
        self.few
            .drain(..)
            .chain(self.many.take().into_iter().flatten())
    }

    fn insert(&mut self, k: String) {
        if let Some(set) = &mut self.many {
            set.insert(k);
        } else if self.few.len() < Self::FEW {
            self.few.push(k);
        } else {
            let mut set: HashSet<String> = self.few.drain(..).collect();
            set.insert(k);
            self.many = Some(set);
        }
    }
}

/// Text mode: the value written as compact JSON, exactly as `Value`'s
/// `Display` writes the value the tree would have built.
#[derive(Debug, Default)]
struct Text {
    out: String,
    /// A duplicate key was met: text cannot replace the earlier value in
    /// place, so the caller builds the value instead.
    failed: bool,
    /// The value being attached is a container already written.
    written: bool,
}

/// Where the wanted key was found: the shallowest depth wins; among the
/// objects at that depth, the last complete one (drafts come before the
/// final answer), or the last one when none is complete; in one object a
/// duplicate key replaces the earlier one.
#[derive(Debug, Default)]
struct FindState {
    /// The shallowest depth where the key was met.
    depth: Option<usize>,
    /// The value from the chosen object at that depth.
    found: Option<Value>,
    /// `found` comes from an object that was closed by its own `}`.
    complete: bool,
    /// The best match is this key of the root object.
    at_root: Option<String>,
}

/// The open brackets of one parse, outermost first.
#[derive(Debug, Default)]
pub(crate) struct Tree {
    stack: Vec<Frame>,
    /// The kinds of the open brackets (the closing-quote rule reads them).
    kinds: Vec<Kind>,
    find: FindState,
    /// Text mode (see [`Tree::text_mode`]).
    text: Option<Text>,
    /// Text mode: strings already written (values, and the keys of closed
    /// objects), kept for the next strings the parser reads, so a long
    /// document does not allocate and free a string per member.
    spare: Vec<String>,
}

impl Tree {
    /// Empties the tree for a new parse, keeping its buffers and mode.
    pub(crate) fn reset(&mut self) {
        self.stack.clear();
        self.kinds.clear();
        self.find = FindState::default();
        if let Some(t) = &mut self.text {
            *t = Text::default();
        }
    }

    /// Text mode: the value is written as compact JSON text instead of
    /// being built (for `repair` to text; no key is searched).
    pub(crate) fn text_mode(&mut self, on: bool) {
        self.text = on.then(Text::default);
    }

    /// In text mode, the JSON text written, or `None` when a duplicate
    /// key made text impossible.
    pub(crate) fn take_text(&mut self) -> Option<String> {
        let t = self.text.as_mut()?;
        if t.failed {
            return None;
        }
        Some(std::mem::take(&mut t.out))
    }

    /// An empty string to read the next string into: a spare one from text
    /// mode when there is one.
    pub(crate) fn spare_string(&mut self) -> String {
        let mut s = self.spare.pop().unwrap_or_default();
        s.clear();
        s
    }

    /// Keeps `s` for [`Tree::spare_string`], within bounds: at most
    /// [`Tree::SPARE_COUNT`] strings of at most [`Tree::SPARE_BYTES`] bytes.
    fn recycle(&mut self, s: String) {
        if self.spare.len() < Self::SPARE_COUNT && s.capacity() <= Self::SPARE_BYTES {
            self.spare.push(s);
        }
    }

    const SPARE_COUNT: usize = 64;
    const SPARE_BYTES: usize = 4096;

    /// Text mode: writes the separator and key before a member of the
    /// innermost container.
    fn text_prefix(&mut self) {
        let (Some(t), Some(f)) = (self.text.as_mut(), self.stack.last_mut()) else {
            return;
        };
        if f.count > 0 {
            t.out.push(',');
        }
        f.count += 1;
        if f.kind == Kind::Obj {
            let k = f.key.take().unwrap_or_default();
            if f.keys.contains(&k) {
                t.failed = true;
            }
            write_json_str(&mut t.out, &k);
            t.out.push(':');
            f.keys.insert(k);
        }
    }

    /// Number of open brackets.
    #[inline]
    pub(crate) fn depth(&self) -> usize {
        self.stack.len()
    }

    /// The kinds of the open brackets, outermost first.
    #[inline]
    pub(crate) fn kinds(&self) -> &[Kind] {
        &self.kinds
    }

    /// The innermost open bracket.
    #[inline]
    pub(crate) fn top(&self) -> Option<Kind> {
        self.kinds.last().copied()
    }

    /// Whether the innermost object uses unquoted keys.
    #[inline]
    pub(crate) fn unquoted_keys(&self) -> bool {
        self.stack.last().is_some_and(|f| f.unquoted_keys)
    }

    /// Records that the innermost object uses unquoted keys.
    pub(crate) fn mark_unquoted_keys(&mut self) {
        if let Some(f) = self.stack.last_mut() {
            f.unquoted_keys = true;
        }
    }

    /// The key waiting for its value in the innermost object.
    #[inline]
    pub(crate) fn pending_key(&self) -> Option<&str> {
        self.stack.last().and_then(|f| f.key.as_deref())
    }

    /// Opens an object or array.
    pub(crate) fn open(&mut self, kind: Kind) {
        if self.text.is_some() {
            self.text_prefix();
            if let Some(t) = &mut self.text {
                t.out.push(if kind == Kind::Obj { '{' } else { '[' });
            }
        }
        self.stack.push(Frame {
            kind,
            map: Map::new(),
            items: Vec::new(),
            key: None,
            unquoted_keys: false,
            want_here: false,
            hit: None,
            count: 0,
            keys: Keys::default(),
        });
        self.kinds.push(kind);
    }

    /// Records a key read in the innermost object, and whether it is the
    /// wanted key at the shallowest depth so far.
    pub(crate) fn set_key(&mut self, key: String, want: Option<&str>) {
        let depth = self.stack.len();
        if let Some(f) = self.stack.last_mut() {
            if want == Some(key.as_str()) {
                match self.find.depth {
                    Some(d) if d < depth => {}
                    Some(d) if d == depth => f.want_here = true,
                    _ => {
                        // Shallower than anything met so far.
                        self.find = FindState {
                            depth: Some(depth),
                            ..FindState::default()
                        };
                        f.want_here = true;
                    }
                }
            }
            f.key = Some(key);
        }
    }

    /// Builds the value of the innermost bracket and pops it; `complete`
    /// is false when the input ended inside it.
    pub(crate) fn close_top(&mut self, complete: bool) -> Value {
        self.kinds.pop();
        let depth = self.stack.len();
        let Some(mut f) = self.stack.pop() else {
            return Value::Null;
        };
        if let Some(t) = &mut self.text {
            if let Some(k) = f.key.take() {
                // A key left without a value: `null`, unless the object
                // already has it.
                if !k.is_empty() && !f.keys.contains(&k) {
                    if f.count > 0 {
                        t.out.push(',');
                    }
                    write_json_str(&mut t.out, &k);
                    t.out.push_str(":null");
                }
            }
            t.out.push(if f.kind == Kind::Obj { '}' } else { ']' });
            t.written = true;
            for k in f.keys.drain() {
                self.recycle(k);
            }
            return Value::Null;
        }
        match f.kind {
            Kind::Arr => Value::Array(f.items),
            Kind::Obj => {
                if let Some(k) = f.key.take() {
                    if f.want_here {
                        if self.stack.is_empty() {
                            self.find.at_root = Some(k.clone());
                        } else if !f.map.contains_key(&k) {
                            // A wanted key left without a value.
                            f.hit = Some(Value::Null);
                        }
                    }
                    if !k.is_empty() {
                        f.map.entry(k).or_insert(Value::Null);
                    }
                }
                if let Some(hit) = f.hit.take() {
                    if self.find.depth == Some(depth) && (complete || !self.find.complete) {
                        self.find.found = Some(hit);
                        self.find.complete = complete;
                    }
                }
                Value::Object(f.map)
            }
        }
    }

    /// Closes every open bracket (truncated input) and returns the root.
    pub(crate) fn close_all(&mut self) -> Value {
        loop {
            let v = self.close_top(false);
            if let Some(root) = self.attach(v) {
                return root;
            }
        }
    }

    /// Attaches a finished value to the innermost container; returns it
    /// back when there is none (it is the root).
    pub(crate) fn attach(&mut self, v: Value) -> Option<Value> {
        if let Some(t) = &mut self.text {
            let written = std::mem::take(&mut t.written);
            if self.stack.is_empty() {
                if !written {
                    write_value(&mut t.out, &v);
                }
                return Some(Value::Null);
            }
            if !written {
                self.text_prefix();
                if let Some(t) = &mut self.text {
                    write_value(&mut t.out, &v);
                }
            }
            if let Value::String(s) = v {
                self.recycle(s);
            }
            return None;
        }
        let root = self.stack.len() == 1;
        let Some(f) = self.stack.last_mut() else {
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
                        self.find.at_root = Some(k.clone());
                    } else {
                        f.hit = Some(v.clone());
                    }
                }
                f.map.insert(k, v);
            }
        }
        None
    }

    /// The value of the wanted key once the parse is over, and, when the
    /// key belongs to the root object, that key (its value is still in
    /// the root).
    pub(crate) fn take_found(&mut self) -> (Option<Value>, Option<String>) {
        (self.find.found.take(), self.find.at_root.take())
    }
}

/// Appends `v` as compact JSON, exactly as serde_json writes it.
fn write_value(out: &mut String, v: &Value) {
    use std::fmt::Write as _;
    match v {
        Value::String(s) => write_json_str(out, s),
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        // `Number`'s `Display` is the serializer's text (itoa, and the same
        // shortest float form); writing to a `String` cannot fail.
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        // Containers are written as they are read; a built one still gets
        // serde_json's text.
        Value::Array(_) | Value::Object(_) => {
            let _ = write!(out, "{v}");
        }
    }
}

/// Appends `s` as a JSON string, escaped exactly as serde_json escapes it:
/// `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, other control characters as
/// `\u00XX` with lowercase hex digits, everything else (DEL and non-ASCII
/// included) as is. Eight bytes are checked at a time, so a run that needs
/// no escape is copied in one piece.
pub(crate) fn write_json_str(out: &mut String, s: &str) {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    /// Whether any byte of `x` is zero (exact: a borrow only runs past a
    /// zero byte).
    fn has_zero(x: u64) -> bool {
        x.wrapping_sub(ONES) & !x & HIGHS != 0
    }
    /// Whether any byte of `w` is below 0x20, a `"` or a `\`.
    fn any_escape(w: u64) -> bool {
        // A byte below 0x20 borrows into its own high bit (exact for
        // presence, as with `has_zero`).
        let control = w.wrapping_sub(ONES * 0x20) & !w & HIGHS != 0;
        control || has_zero(w ^ (ONES * u64::from(b'"'))) || has_zero(w ^ (ONES * u64::from(b'\\')))
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let b = s.as_bytes();
    out.reserve(b.len() + 2);
    out.push('"');
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        if let Some(block) = b.get(i..i + 8).and_then(|c| <[u8; 8]>::try_from(c).ok()) {
            if !any_escape(u64::from_ne_bytes(block)) {
                i += 8;
                continue;
            }
        }
        let c = b[i];
        let short = match c {
            b'"' => '"',
            b'\\' => '\\',
            0x08 => 'b',
            0x0C => 'f',
            b'\n' => 'n',
            b'\r' => 'r',
            b'\t' => 't',
            0..=0x1F => 'u',
            _ => {
                i += 1;
                continue;
            }
        };
        // `i` is at an ASCII byte and `start` is 0 or just after one: both
        // are character boundaries.
        out.push_str(s.get(start..i).unwrap_or_default());
        out.push('\\');
        out.push(short);
        if short == 'u' {
            out.push_str("00");
            out.push(char::from(HEX[usize::from(c >> 4)]));
            out.push(char::from(HEX[usize::from(c & 0xF)]));
        }
        i += 1;
        start = i;
    }
    out.push_str(s.get(start..).unwrap_or_default());
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn escaped(s: &str) -> String {
        let mut out = String::from("x");
        write_json_str(&mut out, s);
        out.split_off(1)
    }

    #[test]
    fn escapes_as_serde_json_does() {
        for s in [
            "",
            "plain ascii text longer than eight bytes",
            "\"",
            "\\",
            "a\"b\\c\nd\re\tf\u{8}g\u{c}h\u{1}i\u{1f}j\u{7f}k",
            "ñandú \"cita\" 😂 \u{0}",
            "12345678\"12345678\\12345678\n",
            "\u{1b}[0m",
        ] {
            assert_eq!(escaped(s), serde_json::to_string(s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn writes_scalars_as_serde_json_does() {
        for v in [
            Value::Null,
            Value::Bool(true),
            Value::Bool(false),
            Value::from(-12),
            Value::from(u64::MAX),
            Value::from(1.5e300),
            Value::from(0.1),
            Value::from(-0.0),
            serde_json::json!({"a": [1, "x\n"]}),
        ] {
            let mut out = String::new();
            write_value(&mut out, &v);
            assert_eq!(out, v.to_string());
        }
    }

    proptest! {
        /// Every byte class at every offset of the 8-byte blocks.
        #[test]
        fn escape_matches_serde_json(s in "[\\x00-\\x7f\"\\\\ñ😂]{0,40}") {
            prop_assert_eq!(escaped(&s), serde_json::to_string(&s).unwrap());
        }

        #[test]
        fn escape_matches_serde_json_any(s in any::<String>()) {
            prop_assert_eq!(escaped(&s), serde_json::to_string(&s).unwrap());
        }
    }
}
