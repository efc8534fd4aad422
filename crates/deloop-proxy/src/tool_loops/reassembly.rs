//! The calls a reply asks for: reassembled from stream deltas (bounded
//! in calls and argument bytes), or read from a whole message.

use serde_json::{json, Value};

use super::judge::ReplyCall;

/// Arguments as sent on the wire: a JSON text, parsed when it is JSON.
pub fn parse_args(text: &str) -> Value {
    if text.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// One call being reassembled from stream deltas.
#[derive(Debug, Clone, Default, PartialEq)]
struct Partial {
    index: Option<u64>,
    id: Option<String>,
    name: String,
    args: String,
}

/// Caps on what a reassembler keeps: calls per choice, and bytes of
/// arguments per call (beyond them the rest is dropped and the call is
/// judged on what was kept).
pub const MAX_STREAM_CALLS: usize = 1024;
/// See [`MAX_STREAM_CALLS`].
pub const MAX_ARGS_BYTES: usize = 4 << 20;

/// Reassembles one choice's streamed OpenAI `tool_calls` deltas.
///
/// ```
/// use deloop_proxy::tool_loops::OpenAiCalls;
/// use serde_json::json;
/// let mut calls = OpenAiCalls::default();
/// calls.push(&json!([{"index": 0, "id": "a", "function": {"name": "read", "arguments": "{\"p\""}}]));
/// calls.push(&json!([{"index": 0, "function": {"name": "read", "arguments": ":1}"}}]));
/// // A new id at the reused index 0 is a new call.
/// calls.push(&json!([{"index": 0, "id": "b", "function": {"name": "ls", "arguments": "{}"}}]));
/// let done = calls.finish();
/// assert_eq!(done.len(), 2);
/// assert_eq!((done[0].name.as_str(), &done[0].args), ("read", &json!({"p": 1})));
/// assert_eq!(done[1].id.as_deref(), Some("b"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct OpenAiCalls {
    calls: Vec<Partial>,
}

impl OpenAiCalls {
    /// Reads one delta's `tool_calls` value (anything that is not an array
    /// of objects is ignored).
    pub fn push(&mut self, tool_calls: &Value) {
        self.push_tracked(tool_calls);
    }

    /// As [`OpenAiCalls::push`], and says where each element went:
    /// `(position of the element in the array, position of its call)`
    /// (elements ignored are not listed).
    pub fn push_tracked(&mut self, tool_calls: &Value) -> Vec<(usize, usize)> {
        let mut went = Vec::new();
        let Some(list) = tool_calls.as_array() else {
            return went;
        };
        for (pos, d) in list.iter().enumerate() {
            if !d.is_object() {
                continue;
            }
            let index = d.get("index").and_then(Value::as_u64).or(Some(pos as u64));
            let id = d
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty());
            // The call this delta continues: the latest one at its index,
            // unless the delta brings an id of its own that differs.
            let at = self.calls.iter().rposition(|c| c.index == index);
            let continues = match (at, id) {
                (Some(i), Some(id)) => self.calls[i].id.as_deref().is_none_or(|c| c == id),
                (Some(_), None) => true,
                (None, _) => false,
            };
            let i = match at {
                Some(i) if continues => i,
                _ => {
                    if self.calls.len() >= MAX_STREAM_CALLS {
                        continue;
                    }
                    self.calls.push(Partial {
                        index,
                        ..Partial::default()
                    });
                    self.calls.len() - 1
                }
            };
            went.push((pos, i));
            let call = &mut self.calls[i];
            if call.id.is_none() {
                call.id = id.map(String::from);
            }
            let f = d.get("function");
            if let Some(name) = f.and_then(|f| f.get("name")).and_then(Value::as_str) {
                merge_name(&mut call.name, name);
            }
            match f.and_then(|f| f.get("arguments")) {
                Some(Value::String(s)) => push_capped(&mut call.args, s),
                // Non-string arguments (some servers send an object).
                Some(v @ (Value::Object(_) | Value::Array(_))) => {
                    call.args = v.to_string();
                    call.args.truncate(MAX_ARGS_BYTES.min(call.args.len()));
                }
                _ => {}
            }
        }
        went
    }

    /// True when no call was seen.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// The name of the call at position `pos`, as it stands.
    pub fn name(&self, pos: usize) -> &str {
        self.calls.get(pos).map_or("", |c| c.name.as_str())
    }

    /// The argument text of the call at position `pos`, as received.
    pub fn args_text(&self, pos: usize) -> &str {
        self.calls.get(pos).map_or("", |c| c.args.as_str())
    }

    /// Calls seen so far.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// The call at position `pos`, as it stands.
    pub fn call(&self, pos: usize) -> Option<ReplyCall> {
        self.calls.get(pos).map(|c| ReplyCall {
            id: c.id.clone(),
            name: c.name.clone(),
            args: parse_args(&c.args),
        })
    }

    /// Forgets the calls from position `pos` on (they were cut out of the
    /// reply).
    pub fn truncate(&mut self, pos: usize) {
        self.calls.truncate(pos);
    }

    /// Replaces the argument text of the call at `pos` (its arguments were
    /// closed after a cut).
    pub fn set_args(&mut self, pos: usize, args: String) {
        if let Some(c) = self.calls.get_mut(pos) {
            c.args = args;
        }
    }

    /// The calls, in the order they started.
    pub fn finish(&self) -> Vec<ReplyCall> {
        self.calls
            .iter()
            .map(|c| ReplyCall {
                id: c.id.clone(),
                name: c.name.clone(),
                args: parse_args(&c.args),
            })
            .collect()
    }
}

/// A name sent again whole is kept once; a name sent in pieces is joined.
fn merge_name(have: &mut String, piece: &str) {
    if have.is_empty() || piece.starts_with(have.as_str()) {
        if piece.len() <= 1024 {
            *have = piece.to_string();
        }
    } else if have.as_str() != piece && have.len() + piece.len() <= 1024 {
        have.push_str(piece);
    }
}

fn push_capped(buf: &mut String, s: &str) {
    if buf.len() + s.len() <= MAX_ARGS_BYTES {
        buf.push_str(s);
    } else {
        let mut room = MAX_ARGS_BYTES.saturating_sub(buf.len());
        while room > 0 && !s.is_char_boundary(room) {
            room -= 1;
        }
        buf.push_str(&s[..room]);
    }
}

/// Reassembles the `tool_use` blocks of an Anthropic stream
/// (`content_block_start`, `input_json_delta`, by block index).
///
/// ```
/// use deloop_proxy::tool_loops::AnthropicCalls;
/// use serde_json::json;
/// let mut calls = AnthropicCalls::default();
/// calls.on_event(&json!({"type": "content_block_start", "index": 1,
///     "content_block": {"type": "tool_use", "id": "t1", "name": "read", "input": {}}}));
/// calls.on_event(&json!({"type": "content_block_delta", "index": 1,
///     "delta": {"type": "input_json_delta", "partial_json": "{\"p\": "}}));
/// calls.on_event(&json!({"type": "content_block_delta", "index": 1,
///     "delta": {"type": "input_json_delta", "partial_json": "2}"}}));
/// let done = calls.finish();
/// assert_eq!(done[0].args, json!({"p": 2}));
/// ```
#[derive(Debug, Clone, Default)]
pub struct AnthropicCalls {
    calls: Vec<(Partial, Value, bool)>,
}

impl AnthropicCalls {
    /// Reads one event; true when it belongs to a `tool_use` block.
    pub fn on_event(&mut self, v: &Value) -> bool {
        let index = v.get("index").and_then(Value::as_u64);
        match v.get("type").and_then(Value::as_str) {
            Some("content_block_start") => {
                let b = v.get("content_block");
                if b.and_then(|b| b.get("type")).and_then(Value::as_str) != Some("tool_use") {
                    return false;
                }
                if self.calls.len() >= MAX_STREAM_CALLS {
                    return true;
                }
                let b = b.unwrap_or(&Value::Null);
                self.calls.push((
                    Partial {
                        index,
                        id: b.get("id").and_then(Value::as_str).map(String::from),
                        name: b
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .chars()
                            .take(1024)
                            .collect(),
                        args: String::new(),
                    },
                    b.get("input").cloned().unwrap_or(Value::Null),
                    false,
                ));
                true
            }
            Some("content_block_delta") | Some("content_block_stop") => {
                let Some(c) = self.calls.iter_mut().rev().find(|c| c.0.index == index) else {
                    return false;
                };
                if let Some(p) = v
                    .pointer("/delta/partial_json")
                    .and_then(Value::as_str)
                    .filter(|_| {
                        v.pointer("/delta/type").and_then(Value::as_str) == Some("input_json_delta")
                    })
                {
                    push_capped(&mut c.0.args, p);
                    c.2 = true;
                }
                true
            }
            _ => false,
        }
    }

    /// True when a `tool_use` block was seen.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// The call of the `tool_use` block at `index`, as it stands.
    pub fn call_at(&self, index: u64) -> Option<ReplyCall> {
        let (p, input, streamed) = self.calls.iter().rev().find(|c| c.0.index == Some(index))?;
        Some(ReplyCall {
            id: p.id.clone(),
            name: p.name.clone(),
            args: if *streamed {
                parse_args(&p.args)
            } else {
                match input {
                    Value::Null => json!({}),
                    v => v.clone(),
                }
            },
        })
    }

    /// The tool of the `tool_use` block at `index`, when it is one.
    pub fn name_at(&self, index: u64) -> Option<&str> {
        let c = self.calls.iter().rev().find(|c| c.0.index == Some(index))?;
        Some(c.0.name.as_str())
    }

    /// The argument text of the block at `index`, as streamed.
    pub fn args_text_at(&self, index: u64) -> &str {
        self.calls
            .iter()
            .rev()
            .find(|c| c.0.index == Some(index))
            .map_or("", |c| c.0.args.as_str())
    }

    /// Forgets the `tool_use` block at `index` (dropped after a cut).
    pub fn remove(&mut self, index: u64) {
        self.calls.retain(|c| c.0.index != Some(index));
    }

    /// Replaces the argument text of the block at `index` (closed after a
    /// cut).
    pub fn set_args(&mut self, index: u64, args: String) {
        if let Some(c) = self
            .calls
            .iter_mut()
            .rev()
            .find(|c| c.0.index == Some(index))
        {
            c.0.args = args;
            c.2 = true;
        }
    }

    /// The block indexes of the `tool_use` blocks.
    pub fn indexes(&self) -> Vec<u64> {
        self.calls.iter().filter_map(|c| c.0.index).collect()
    }

    /// The calls (input from the deltas when there were any, else the
    /// start block's `input`).
    pub fn finish(&self) -> Vec<ReplyCall> {
        self.calls
            .iter()
            .map(|(p, input, streamed)| ReplyCall {
                id: p.id.clone(),
                name: p.name.clone(),
                args: if *streamed {
                    parse_args(&p.args)
                } else {
                    match input {
                        Value::Null => json!({}),
                        v => v.clone(),
                    }
                },
            })
            .collect()
    }
}

/// The calls of a whole OpenAI message (`tool_calls`).
pub fn openai_message_calls(message: &Value) -> Vec<ReplyCall> {
    let Some(list) = message.get("tool_calls").and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|c| {
            let f = c.get("function")?;
            let name = f.get("name").and_then(Value::as_str)?;
            let args = match f.get("arguments") {
                Some(Value::String(s)) => parse_args(s),
                Some(v) => v.clone(),
                None => json!({}),
            };
            Some(ReplyCall {
                id: c.get("id").and_then(Value::as_str).map(String::from),
                name: name.to_string(),
                args,
            })
        })
        .collect()
}

/// The calls of a whole Anthropic message (`tool_use` blocks).
pub fn anthropic_message_calls(content: &[Value]) -> Vec<ReplyCall> {
    content
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
        .filter_map(|b| {
            Some(ReplyCall {
                id: b.get("id").and_then(Value::as_str).map(String::from),
                name: b.get("name").and_then(Value::as_str)?.to_string(),
                args: b.get("input").cloned().unwrap_or_else(|| json!({})),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn deeply_nested_argument_text_is_kept_as_a_string() {
        // serde_json refuses nesting over 128 levels when reading text.
        let nested = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(parse_args(&nested), Value::String(nested.clone()));
    }

    #[test]
    fn openai_reassembly_rules() {
        let mut c = OpenAiCalls::default();
        // The name resent in every chunk, arguments in pieces.
        for piece in ["{\"a\"", ":", "1}"] {
            c.push(&json!([{"index": 0, "id": "x", "type": "function",
                "function": {"name": "read", "arguments": piece}}]));
        }
        // Parallel calls at distinct indexes, interleaved.
        c.push(&json!([{"index": 1, "id": "y", "function": {"name": "ls", "arguments": ""}}]));
        c.push(&json!([{"index": 2, "id": "z", "function": {"name": "cat", "arguments": "{"}}]));
        c.push(&json!([{"index": 1, "function": {"arguments": "{}"}}]));
        c.push(&json!([{"index": 2, "function": {"arguments": "}"}}]));
        // A name sent in pieces.
        c.push(&json!([{"index": 3, "id": "w", "function": {"name": "get_"}}]));
        c.push(&json!([{"index": 3, "function": {"name": "weather", "arguments": "{}"}}]));
        // Garbage is ignored; an entry without a usable index counts by
        // its position (here 2, continuing `cat` with nothing).
        c.push(&json!("nope"));
        c.push(&json!([1, null, {"index": "x"}]));
        let done = c.finish();
        let names: Vec<&str> = done.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["read", "ls", "cat", "get_weather"]);
        assert_eq!(done[0].args, json!({"a": 1}));
        assert_eq!(done[1].args, json!({}));
        assert_eq!(done[2].args, json!({}));
    }

    proptest! {
        /// However a call's argument text is cut into deltas, with the name
        /// resent or not, reassembly gives the same calls; a new id at a
        /// reused index always starts a new call.
        #[test]
        fn reassembly_is_independent_of_chunking(
            args in proptest::collection::vec("[a-z0-9 {}:\",\\[\\]]{0,40}", 1..5),
            cuts in proptest::collection::vec(0usize..50, 0..6),
            resend in any::<bool>(),
            reuse_index in any::<bool>(),
        ) {
            let mut c = OpenAiCalls::default();
            for (k, a) in args.iter().enumerate() {
                let index = if reuse_index { 0 } else { k };
                let mut points: Vec<usize> = cuts.iter().map(|p| p % (a.len() + 1)).collect();
                points.push(0);
                points.push(a.len());
                points.sort_unstable();
                points.dedup();
                for (j, w) in points.windows(2).enumerate() {
                    let mut f = json!({"arguments": &a[w[0]..w[1]]});
                    if j == 0 || resend {
                        f["name"] = json!(format!("t{k}"));
                    }
                    let mut d = json!({"index": index, "function": f});
                    if j == 0 {
                        d["id"] = json!(format!("id{k}"));
                    }
                    c.push(&json!([d]));
                }
                if points.len() == 1 {
                    c.push(&json!([{"index": index, "id": format!("id{k}"),
                        "function": {"name": format!("t{k}"), "arguments": ""}}]));
                }
            }
            let done = c.finish();
            prop_assert_eq!(done.len(), args.len());
            for (k, (call, a)) in done.iter().zip(&args).enumerate() {
                prop_assert_eq!(&call.name, &format!("t{k}"));
                prop_assert_eq!(call.id.clone(), Some(format!("id{k}")));
                prop_assert_eq!(&call.args, &parse_args(a));
            }
        }
    }
}
