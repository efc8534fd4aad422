//! Streaming: the value of a key so far, from a prefix of a reply.

use super::rescue;

/// The text of `key` so far, given a prefix of a streamed JSON reply.
///
/// Returns `None` until the key's value has started, or when the value is
/// not a string. A cut escape (`\`, `\u00`) at the end is left out, so
/// as the prefix grows the returned text only grows (for well-formed
/// replies; a quote that first looked like the end of the string and
/// turns out to be an inner quote extends the text further).
///
/// ```
/// use deloop_core::rescue::partial_string;
/// assert_eq!(partial_string(r#"{"answer": "Hola, mu"#, "answer").as_deref(), Some("Hola, mu"));
/// assert_eq!(partial_string(r#"{"ans"#, "answer"), None);
/// ```
pub fn partial_string(prefix: &str, key: &str) -> Option<String> {
    let got = rescue(prefix, key).ok()?;
    match got.value {
        serde_json::Value::String(s) => Some(s),
        _ => None,
    }
}

/// Stateful streaming extractor: push chunks as they arrive, get back the
/// text of the key's value added since the previous call.
///
/// Each [`push`](PartialExtractor::push) re-reads the whole buffer (linear
/// in its length), so callers streaming very long replies should push
/// batched chunks.
///
/// ```
/// use deloop_core::rescue::PartialExtractor;
/// let mut ex = PartialExtractor::new("answer");
/// assert_eq!(ex.push(r#"{"answer": "Hel"#), "Hel");
/// assert_eq!(ex.push(r#"lo\nwor"#), "lo\nwor");
/// assert_eq!(ex.push(r#"ld"}"#), "ld");
/// assert_eq!(ex.text(), "Hello\nworld");
/// ```
#[derive(Debug, Clone, Default)]
pub struct PartialExtractor {
    key: String,
    buf: String,
    text: String,
}

impl PartialExtractor {
    /// A new extractor for `key`.
    pub fn new(key: &str) -> Self {
        PartialExtractor {
            key: key.to_owned(),
            buf: String::new(),
            text: String::new(),
        }
    }

    /// Appends a chunk and returns the text added to the value since the
    /// last call. If the value stops extending what was already returned
    /// (a rare re-interpretation), nothing is returned until it does again.
    pub fn push(&mut self, chunk: &str) -> &str {
        self.buf.push_str(chunk);
        let before = self.text.len();
        if let Some(now) = partial_string(&self.buf, &self.key) {
            if now.len() > before && now.starts_with(self.text.as_str()) {
                self.text = now;
                return &self.text[before..];
            }
        }
        ""
    }

    /// The text returned so far.
    pub fn text(&self) -> &str {
        &self.text
    }
}
