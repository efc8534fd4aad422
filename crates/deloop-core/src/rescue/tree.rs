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
    id: u32,
    /// The pending key is the best match for the wanted key so far.
    want_here: bool,
}

/// Where the wanted key was found: the shallowest occurrence, then the
/// first in document order (a duplicate in the same object replaces the
/// earlier one).
#[derive(Debug, Default)]
struct FindState {
    /// Depth and object id of the best match so far.
    best: Option<(usize, u32)>,
    found: Option<Value>,
    /// The best match is this key of the root object.
    at_root: Option<String>,
    next_id: u32,
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
            id: self.find.next_id,
            want_here: false,
        });
        self.find.next_id = self.find.next_id.wrapping_add(1);
        self.kinds.push(kind);
    }

    /// Records a key read in the innermost object, and whether it is the
    /// best match for `want` so far.
    pub(crate) fn set_key(&mut self, key: String, want: Option<&str>) {
        let depth = self.stack.len();
        if let Some(f) = self.stack.last_mut() {
            if want == Some(key.as_str()) {
                let better = match self.find.best {
                    None => true,
                    Some((d, id)) => depth < d || (depth == d && id == f.id),
                };
                if better {
                    self.find.best = Some((depth, f.id));
                    f.want_here = true;
                }
            }
            f.key = Some(key);
        }
    }

    /// Builds the value of the innermost bracket and pops it.
    pub(crate) fn close_top(&mut self) -> Value {
        self.kinds.pop();
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
                            self.find.found = Some(Value::Null);
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
    pub(crate) fn close_all(&mut self) -> Value {
        loop {
            let v = self.close_top();
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
                        self.find.found = Some(v.clone());
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
