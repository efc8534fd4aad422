//! What the proxy reads of a request body: only the fields that decide how
//! the reply is guarded. The body itself is forwarded as received.

use serde::Deserialize;
use serde_json::Value;

/// The fields of a chat, completion or Messages request that matter to
/// the guard.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestInfo {
    /// `"stream": true`.
    pub stream: bool,
    /// Choices asked for (`n`, default 1).
    pub n: usize,
    /// `stream_options.include_usage`.
    pub include_usage: bool,
    /// `response_format` when it asks for JSON.
    pub json: Option<JsonFormat>,
    /// The model asked for (shown in the console's Live feed).
    pub model: Option<String>,
}

/// A `response_format` that asks for JSON.
#[derive(Debug, Clone, PartialEq)]
pub enum JsonFormat {
    /// `{"type": "json_object"}`.
    Object,
    /// `{"type": "json_schema", "json_schema": {"schema": ...}}`; the
    /// schema (`None` when the request gives none).
    Schema(Option<Value>),
}

#[derive(Deserialize)]
struct Raw {
    #[serde(default)]
    stream: Option<Value>,
    #[serde(default)]
    n: Option<Value>,
    #[serde(default)]
    stream_options: Option<Value>,
    #[serde(default)]
    response_format: Option<Value>,
    #[serde(default)]
    model: Option<Value>,
}

/// Reads the guard's fields from a request body; `None` when the body is
/// not a JSON object (the proxy then forwards it and its reply untouched,
/// and the upstream answers the error).
///
/// ```
/// use deloop_proxy::request::{read, JsonFormat};
/// let info = read(br#"{"stream": true, "n": 2, "cache_prompt": true,
///     "response_format": {"type": "json_object"}}"#).unwrap();
/// assert!(info.stream);
/// assert_eq!(info.n, 2);
/// assert_eq!(info.json, Some(JsonFormat::Object));
/// assert!(read(b"not json").is_none());
/// ```
pub fn read(body: &[u8]) -> Option<RequestInfo> {
    // serde would read a struct from an array too.
    if body.trim_ascii_start().first() != Some(&b'{') {
        return None;
    }
    let raw: Raw = serde_json::from_slice(body).ok()?;
    let n = raw
        .n
        .as_ref()
        .and_then(Value::as_u64)
        .map_or(1, |n| n.clamp(1, usize::MAX as u64) as usize);
    let include_usage = raw
        .stream_options
        .as_ref()
        .and_then(|o| o.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let json =
        raw.response_format
            .as_ref()
            .and_then(|f| match f.get("type").and_then(Value::as_str)? {
                "json_object" => Some(JsonFormat::Object),
                "json_schema" => Some(JsonFormat::Schema(
                    f.get("json_schema").and_then(|s| s.get("schema")).cloned(),
                )),
                _ => None,
            });
    Some(RequestInfo {
        stream: raw
            .stream
            .as_ref()
            .and_then(Value::as_bool)
            .unwrap_or(false),
        n,
        include_usage,
        json,
        model: raw
            .model
            .as_ref()
            .and_then(Value::as_str)
            .map(|m| m.chars().take(200).collect()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_defaults() {
        let i = read(br#"{"model": "m", "messages": []}"#).unwrap();
        assert_eq!(
            i,
            RequestInfo {
                stream: false,
                n: 1,
                include_usage: false,
                json: None,
                model: Some("m".into()),
            }
        );
        let i = read(
            br#"{"stream": true, "stream_options": {"include_usage": true},
                "response_format": {"type": "json_schema",
                  "json_schema": {"name": "x", "schema": {"type": "object"}}}}"#,
        )
        .unwrap();
        assert!(i.stream && i.include_usage);
        assert_eq!(
            i.json,
            Some(JsonFormat::Schema(Some(
                serde_json::json!({"type": "object"})
            )))
        );
        let i = read(br#"{"response_format": {"type": "text"}, "n": 0, "stream": "yes"}"#).unwrap();
        assert_eq!(i.json, None);
        assert_eq!(i.n, 1);
        assert!(!i.stream);
        assert!(read(b"[1]").is_none());
        assert!(read(b"").is_none());
        assert!(read(&b"[".repeat(100_000)).is_none());
    }
}
