//! Canonical JSON hashing and tool-name normalisation.
//!
//! Every comparison the loop guard makes goes through a [`Digest`]: the first
//! 128 bits of a SHA-256 over a canonical serialisation of a JSON value.
//!
//! Canonical form:
//! * object keys are sorted (byte order), so key order never matters;
//! * numbers are compared by value: an integral number that fits in
//!   ±2^53 is written as an integer whatever its spelling (`100`, `100.0`,
//!   `1e2` are one value); other floats use Rust's shortest round-trip form;
//! * strings are length-prefixed in the hashed stream (JSON-escaped in the
//!   textual form), so field boundaries stay unambiguous;
//! * wrapped external content (`<<<EXTERNAL_UNTRUSTED_CONTENT id="…">>>` with
//!   a 16-hex nonce and the matching end marker) has its nonce replaced by
//!   zeros when the value is an *outcome* (see [`Canon::Outcome`]).
//!
//! Nesting deeper than [`MAX_DEPTH`] is not descended into: the deeper part
//! is replaced by a fixed marker, so hostile input can neither overflow the
//! stack nor take unbounded time.

use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

/// Maximum nesting depth that is hashed structurally.
pub const MAX_DEPTH: usize = 256;

/// A 128-bit digest (a truncated SHA-256) of a canonical serialisation.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Digest(pub u128);

impl Digest {
    /// Lower-case hex, 32 characters.
    pub fn to_hex(self) -> String {
        format!("{:032x}", self.0)
    }

    /// The first `n` hex characters (at most 32).
    pub fn short(self, n: usize) -> String {
        let mut s = self.to_hex();
        s.truncate(n.min(32));
        s
    }

    /// Mixes a tag into a digest (used to keep error hashes apart from
    /// result hashes, or to derive a call hash from tool and arguments).
    pub fn tagged(self, tag: &str) -> Digest {
        let mut h = Sha256::new();
        h.update(tag.as_bytes());
        h.update([0u8]);
        h.update(self.0.to_le_bytes());
        finish(h)
    }
}

/// How strings are treated while hashing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Canon {
    /// Arguments: strings hashed as they are.
    Args,
    /// Outcomes: wrapped-content nonces are canonicalised.
    Outcome,
}

fn finish(h: Sha256) -> Digest {
    let out = h.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&out[..16]);
    Digest(u128::from_be_bytes(b))
}

/// Hashes a JSON value in canonical form.
///
/// ```
/// use deloop_core::loops::hashing::{digest_value, Canon};
/// let a: serde_json::Value = serde_json::from_str(r#"{"b":1,"a":100}"#).unwrap();
/// let b: serde_json::Value = serde_json::from_str(r#"{"a":1e2,"b":1.0}"#).unwrap();
/// assert_eq!(digest_value(&a, Canon::Args), digest_value(&b, Canon::Args));
/// ```
pub fn digest_value(value: &Value, canon: Canon) -> Digest {
    let mut w = HashWriter::new();
    write_value(&mut w, value, canon, 0);
    w.finish()
}

/// Hashes a plain string (as a JSON string value).
pub fn digest_str(s: &str, canon: Canon) -> Digest {
    let mut w = HashWriter::new();
    write_str(&mut w, s, canon);
    w.finish()
}

/// Writes the canonical serialisation of `value` into a `String` (used by
/// tests and by the strict fingerprint; hashing streams instead).
pub fn canonical_string(value: &Value, canon: Canon) -> String {
    let mut w = StringWriter(Vec::new());
    write_value(&mut w, value, canon, 0);
    String::from_utf8(w.0).unwrap_or_default()
}

/// A byte sink: a SHA-256 with a small buffer, or a string.
pub(crate) trait Sink {
    fn put(&mut self, bytes: &[u8]);

    /// Writes a string so that the encoding stays injective. The default is
    /// a JSON string literal; the hashing sink uses a length prefix instead
    /// (no per-byte escaping work).
    fn put_str(&mut self, s: &str) {
        write_json_literal(self, s)
    }
}

/// Buffered SHA-256 sink: small writes are coalesced in a stack buffer so
/// the compression function sees whole blocks (no heap allocation).
pub(crate) struct HashWriter {
    hasher: Sha256,
    buf: [u8; BUF],
    len: usize,
}

const BUF: usize = 512;

impl HashWriter {
    pub(crate) fn new() -> Self {
        HashWriter {
            hasher: Sha256::new(),
            buf: [0; BUF],
            len: 0,
        }
    }

    pub(crate) fn finish(mut self) -> Digest {
        if self.len > 0 {
            self.hasher.update(&self.buf[..self.len]);
        }
        finish(self.hasher)
    }

    #[inline]
    fn flush(&mut self) {
        if self.len > 0 {
            self.hasher.update(&self.buf[..self.len]);
            self.len = 0;
        }
    }
}

impl Sink for HashWriter {
    fn put_str(&mut self, s: &str) {
        // Tag byte plus LEB128 length: injective and short, so small
        // arguments usually fit in one SHA-256 block.
        let mut head = [0u8; 11];
        head[0] = b'"';
        let mut n = s.len() as u64;
        let mut i = 1;
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                head[i] = byte;
                i += 1;
                break;
            }
            head[i] = byte | 0x80;
            i += 1;
        }
        self.put(&head[..i]);
        self.put(s.as_bytes());
    }

    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        if self.len + bytes.len() <= BUF {
            self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
            self.len += bytes.len();
            return;
        }
        self.flush();
        if bytes.len() >= BUF {
            self.hasher.update(bytes);
        } else {
            self.buf[..bytes.len()].copy_from_slice(bytes);
            self.len = bytes.len();
        }
    }
}

struct StringWriter(Vec<u8>);

impl Sink for StringWriter {
    fn put(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }
}

pub(crate) fn write_value<S: Sink>(w: &mut S, value: &Value, canon: Canon, depth: usize) {
    if depth >= MAX_DEPTH {
        w.put(b"\"<deloop:too-deep>\"");
        return;
    }
    match value {
        Value::Null => w.put(b"null"),
        Value::Bool(true) => w.put(b"true"),
        Value::Bool(false) => w.put(b"false"),
        Value::Number(n) => write_number(w, n),
        Value::String(s) => write_str(w, s, canon),
        Value::Array(items) => {
            w.put(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    w.put(b",");
                }
                write_value(w, item, canon, depth + 1);
            }
            w.put(b"]");
        }
        Value::Object(map) => write_object(w, map, canon, depth, |_| false),
    }
}

/// Writes an object with sorted keys, skipping keys for which `skip` is true.
pub(crate) fn write_object<S: Sink>(
    w: &mut S,
    map: &Map<String, Value>,
    canon: Canon,
    depth: usize,
    skip: impl Fn(&str) -> bool,
) {
    w.put(b"{");
    let mut first = true;
    let mut emit = |w: &mut S, k: &str, v: &Value| {
        if skip(k) {
            return;
        }
        if !first {
            w.put(b",");
        }
        first = false;
        write_json_string(w, k);
        w.put(b":");
        write_value(w, v, canon, depth + 1);
    };
    if is_sorted(map) {
        for (k, v) in map {
            emit(w, k, v);
        }
    } else {
        let mut entries: Vec<(&String, &Value)> = map.iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (k, v) in entries {
            emit(w, k, v);
        }
    }
    w.put(b"}");
}

fn is_sorted(map: &Map<String, Value>) -> bool {
    let mut prev: Option<&String> = None;
    for k in map.keys() {
        if let Some(p) = prev {
            if p >= k {
                return false;
            }
        }
        prev = Some(k);
    }
    true
}

fn write_number<S: Sink>(w: &mut S, n: &serde_json::Number) {
    const SAFE: f64 = 9_007_199_254_740_992.0; // 2^53
    let mut digits = itoa::Buffer::new();
    if let Some(u) = n.as_u64() {
        w.put(digits.format(u).as_bytes());
    } else if let Some(i) = n.as_i64() {
        w.put(digits.format(i).as_bytes());
    } else if let Some(f) = n.as_f64() {
        if f.is_finite() && f.fract() == 0.0 && f.abs() <= SAFE {
            // Integral float: same spelling as the integer (and -0 is 0).
            w.put(digits.format(f as i64).as_bytes());
        } else {
            w.put(format!("{f:?}").as_bytes());
        }
    } else {
        w.put(n.to_string().as_bytes());
    }
}

fn write_str<S: Sink>(w: &mut S, s: &str, canon: Canon) {
    if canon == Canon::Outcome && s.contains(NONCE_OPEN) {
        let fixed = canonicalise_nonces(s);
        write_json_string(w, &fixed);
    } else {
        write_json_string(w, s);
    }
}

/// Writes a string value (see [`Sink::put_str`]).
pub(crate) fn write_json_string<S: Sink>(w: &mut S, s: &str) {
    w.put_str(s)
}

/// Writes `s` as a JSON string literal.
fn write_json_literal<S: Sink + ?Sized>(w: &mut S, s: &str) {
    w.put(b"\"");
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => {
                if start < i {
                    w.put(&bytes[start..i]);
                }
                w.put(format!("\\u{b:04x}").as_bytes());
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        if start < i {
            w.put(&bytes[start..i]);
        }
        w.put(esc);
        start = i + 1;
    }
    if start < bytes.len() {
        w.put(&bytes[start..]);
    }
    w.put(b"\"");
}

const NONCE_OPEN: &str = "<<<EXTERNAL_UNTRUSTED_CONTENT id=\"";
const NONCE_CLOSE: &str = "<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\"";
const ZERO_NONCE: &str = "0000000000000000";

fn is_nonce(s: &str) -> bool {
    s.len() == 16
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Replaces the 16-hex nonce of every well-formed wrapped-content envelope
/// (`<<<EXTERNAL_UNTRUSTED_CONTENT id="N">>>` … `<<<END_EXTERNAL_UNTRUSTED_CONTENT id="N">>>`
/// with the same `N`, and no other envelope marker in between) by zeros.
/// Malformed or mismatched markers are left untouched. Linear time.
pub fn canonicalise_nonces(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find(NONCE_OPEN) {
        let after_open = pos + NONCE_OPEN.len();
        let candidate = rest.get(after_open..after_open + 16);
        let tail_ok = rest
            .get(after_open + 16..after_open + 20)
            .is_some_and(|t| t == "\">>>");
        match candidate {
            Some(nonce) if is_nonce(nonce) && tail_ok => {
                let body_start = after_open + 20;
                let body = &rest[body_start..];
                // The next envelope marker of any kind must be our end marker.
                let next_open = body.find("<<<EXTERNAL_UNTRUSTED_CONTENT");
                let next_close = body.find(NONCE_CLOSE);
                let close_ok = match (next_close, next_open) {
                    (Some(c), Some(o)) => c < o,
                    (Some(_), None) => true,
                    _ => false,
                };
                if close_ok {
                    let c = next_close.unwrap_or(0);
                    let end_nonce_at = body_start + c + NONCE_CLOSE.len();
                    let same = rest.get(end_nonce_at..end_nonce_at + 16) == Some(nonce)
                        && rest.get(end_nonce_at + 16..end_nonce_at + 20) == Some("\">>>");
                    if same {
                        out.push_str(&rest[..after_open]);
                        out.push_str(ZERO_NONCE);
                        out.push_str(&rest[after_open + 16..end_nonce_at]);
                        out.push_str(ZERO_NONCE);
                        out.push_str(&rest[end_nonce_at + 16..end_nonce_at + 20]);
                        rest = &rest[end_nonce_at + 20..];
                        continue;
                    }
                }
                out.push_str(&rest[..after_open]);
                rest = &rest[after_open..];
            }
            _ => {
                out.push_str(&rest[..after_open]);
                rest = &rest[after_open..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Normalises a tool name: trimmed, lower-cased, with the aliases
/// `bash` → `exec`, `apply-patch` → `apply_patch`, `cron` → `automations`.
///
/// ```
/// use deloop_core::loops::hashing::normalize_tool_name;
/// assert_eq!(normalize_tool_name(" Bash "), "exec");
/// assert_eq!(normalize_tool_name("Read"), "read");
/// ```
pub fn normalize_tool_name(name: &str) -> String {
    let trimmed = name.trim();
    let lower = if trimmed.bytes().any(|b| b.is_ascii_uppercase()) || !trimmed.is_ascii() {
        trimmed.to_lowercase()
    } else {
        trimmed.to_string()
    };
    match lower.as_str() {
        "bash" => "exec".to_string(),
        "apply-patch" => "apply_patch".to_string(),
        "cron" => "automations".to_string(),
        _ => lower,
    }
}

/// Digest of a tool call: the normalised tool name plus canonical arguments.
/// For `exec`, a presentational `title` argument is ignored.
pub fn call_digest(tool: &str, args: &Value) -> Digest {
    let mut w = HashWriter::new();
    write_json_string(&mut w, tool);
    w.put(b":");
    match args {
        Value::Object(map) if tool == "exec" => {
            write_object(&mut w, map, Canon::Args, 0, |k| k == "title")
        }
        _ => write_value(&mut w, args, Canon::Args, 0),
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn d(s: &str) -> Digest {
        digest_value(&serde_json::from_str(s).unwrap(), Canon::Args)
    }

    #[test]
    fn key_order_does_not_matter() {
        assert_eq!(
            d(r#"{"a":1,"b":{"x":1,"y":2}}"#),
            d(r#"{"b":{"y":2,"x":1},"a":1}"#)
        );
    }

    #[test]
    fn numbers_by_value() {
        assert_eq!(d("100"), d("100.0"));
        assert_eq!(d("100"), d("1e2"));
        assert_eq!(d("-0.0"), d("0"));
        assert_ne!(d("100"), d("100.5"));
        assert_ne!(d("100"), d("\"100\""));
    }

    #[test]
    fn string_boundaries_are_kept() {
        assert_ne!(d(r#"["a,b"]"#), d(r#"["a","b"]"#));
        assert_ne!(d(r#"{"a":"b\"c"}"#), d(r#"{"a":"b","c":1}"#));
    }

    #[test]
    fn nonces_canonicalised_only_for_outcomes() {
        let a = "<<<EXTERNAL_UNTRUSTED_CONTENT id=\"9e3779b97f4a7c15\">>>\nbody\n<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\"9e3779b97f4a7c15\">>>";
        let b = "<<<EXTERNAL_UNTRUSTED_CONTENT id=\"3c6ef372fe94f82a\">>>\nbody\n<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\"3c6ef372fe94f82a\">>>";
        assert_eq!(digest_str(a, Canon::Outcome), digest_str(b, Canon::Outcome));
        assert_ne!(digest_str(a, Canon::Args), digest_str(b, Canon::Args));
        // Different bodies still differ.
        let c = b.replace("body", "other");
        assert_ne!(
            digest_str(a, Canon::Outcome),
            digest_str(&c, Canon::Outcome)
        );
        // Mismatched ids are left alone.
        let m = "<<<EXTERNAL_UNTRUSTED_CONTENT id=\"9e3779b97f4a7c15\">>>x<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\"3c6ef372fe94f82a\">>>";
        assert_eq!(canonicalise_nonces(m), m);
    }

    #[test]
    fn tool_aliases() {
        assert_eq!(normalize_tool_name("BASH"), "exec");
        assert_eq!(normalize_tool_name("apply-patch"), "apply_patch");
        assert_eq!(normalize_tool_name("cron"), "automations");
        assert_eq!(normalize_tool_name("Exec"), "exec");
    }

    #[test]
    fn exec_title_ignored() {
        let a = call_digest("exec", &json!({"command":"ls","title":"a"}));
        let b = call_digest("exec", &json!({"command":"ls","title":"b"}));
        assert_eq!(a, b);
        let c = call_digest("read", &json!({"command":"ls","title":"a"}));
        let e = call_digest("read", &json!({"command":"ls","title":"b"}));
        assert_ne!(c, e);
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let mut v = json!(1);
        for _ in 0..10_000 {
            v = Value::Array(vec![v]);
        }
        let _ = digest_value(&v, Canon::Args);
        // serde_json's own Drop is recursive; leak to keep the test about us.
        std::mem::forget(v);
    }

    proptest::proptest! {
        #[test]
        fn integral_floats_equal_ints(i in -1_000_000i64..1_000_000) {
            let a = digest_value(&json!(i), Canon::Args);
            let b = digest_value(&json!(i as f64), Canon::Args);
            proptest::prop_assert_eq!(a, b);
        }

        #[test]
        fn key_permutations_hash_alike(keys in proptest::collection::btree_set("[a-z]{1,6}", 1..8)) {
            let keys: Vec<String> = keys.into_iter().collect();
            let fwd: String = keys.iter().enumerate().map(|(i,k)| format!("\"{k}\":{i}")).collect::<Vec<_>>().join(",");
            let rev: String = keys.iter().enumerate().rev().map(|(i,k)| format!("\"{k}\":{i}.0")).collect::<Vec<_>>().join(",");
            proptest::prop_assert_eq!(d(&format!("{{{fwd}}}")), d(&format!("{{{rev}}}")));
        }

        #[test]
        fn nonce_canon_never_panics(s in ".{0,200}") {
            let _ = canonicalise_nonces(&s);
            let with = format!("<<<EXTERNAL_UNTRUSTED_CONTENT id=\"{s}");
            let _ = canonicalise_nonces(&with);
        }
    }
}
