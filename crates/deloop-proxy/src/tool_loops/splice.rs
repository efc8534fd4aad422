//! Appending a message to a request body without touching its other
//! bytes, so that a cached prompt prefix stays valid.

use serde_json::Value;

/// Appends `message` at the end of the top-level `messages` array of a
/// JSON request body, leaving every other byte as it was (so a cached
/// prompt prefix stays valid). `None` when the body is not an object with
/// a `messages` array.
///
/// ```
/// use deloop_proxy::tool_loops::append_message;
/// let body = br#"{"model":"m", "messages": [ {"role":"user","content":"hi"} ] ,"n":1}"#;
/// let out = append_message(body, &serde_json::json!({"role": "user", "content": "note"})).unwrap();
/// assert_eq!(
///     std::str::from_utf8(&out).unwrap(),
///     r#"{"model":"m", "messages": [ {"role":"user","content":"hi"} ,{"role":"user","content":"note"}] ,"n":1}"#
/// );
/// ```
pub fn append_message(body: &[u8], message: &Value) -> Option<Vec<u8>> {
    let top: std::collections::HashMap<&str, &serde_json::value::RawValue> =
        serde_json::from_slice(body).ok()?;
    let raw = top.get("messages")?.get();
    let trimmed = raw.trim_end();
    if !trimmed.starts_with('[') || !trimmed.ends_with(']') {
        return None;
    }
    let start = (raw.as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
    let close = start + trimmed.len() - 1;
    if body.get(close) != Some(&b']') {
        return None;
    }
    let empty = trimmed[1..trimmed.len() - 1].trim().is_empty();
    let mut out = Vec::with_capacity(body.len() + 256);
    out.extend_from_slice(&body[..close]);
    if !empty {
        out.push(b',');
    }
    out.extend_from_slice(message.to_string().as_bytes());
    out.extend_from_slice(&body[close..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn append_message_edge_cases() {
        let m = json!({"role": "user", "content": "n"});
        assert_eq!(
            append_message(br#"{"messages":[]}"#, &m).unwrap(),
            format!(r#"{{"messages":[{m}]}}"#).into_bytes()
        );
        assert!(append_message(br#"{"messages":{}}"#, &m).is_none());
        assert!(append_message(br#"[1]"#, &m).is_none());
        assert!(append_message(b"not json", &m).is_none());
        assert!(append_message(br#"{"model":"m"}"#, &m).is_none());
        // Escaped strings and nested brackets inside the array.
        let body = br#"{"messages":[{"role":"user","content":"a ] \" ["}],"x":"]"}"#;
        let out = append_message(body, &m).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["messages"].as_array().unwrap().len(), 2);
        assert_eq!(v["x"], "]");
    }

    proptest! {
        /// Appending keeps the original bytes as a prefix up to the array's
        /// end and yields a valid body with one more message.
        #[test]
        fn append_keeps_the_prefix(n in 0usize..5, pad in "[ \n]{0,3}", text in ".{0,20}") {
            let msgs: Vec<Value> = (0..n).map(|i| json!({"role": "user", "content": format!("{text}{i}")})).collect();
            let body = format!("{{\"model\":\"m\",\"messages\":{pad}{}{pad},\"z\":1}}", serde_json::to_string(&msgs).unwrap());
            let out = append_message(body.as_bytes(), &json!({"role": "user", "content": "note"})).unwrap();
            let close = body.find(&format!("{pad},\"z\"")).unwrap() - 1;
            prop_assert_eq!(&out[..close], &body.as_bytes()[..close]);
            let v: Value = serde_json::from_slice(&out).unwrap();
            prop_assert_eq!(v["messages"].as_array().unwrap().len(), n + 1);
            prop_assert_eq!(&v["z"], &json!(1));
        }
    }
}
