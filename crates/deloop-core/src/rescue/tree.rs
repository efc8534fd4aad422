//! The value under construction: the stack of open objects and arrays
//! (explicit, so the parser never recurses), and where the wanted key was
//! found in it.

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
}

impl Tree {
    /// Empties the tree for a new parse, keeping its buffers.
    pub(crate) fn reset(&mut self) {
        self.stack.clear();
        self.kinds.clear();
        self.find = FindState::default();
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
        self.stack.push(Frame {
            kind,
            map: Map::new(),
            items: Vec::new(),
            key: None,
            unquoted_keys: false,
            want_here: false,
            hit: None,
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
