//! Per-tool normalisation of call outcomes, so that volatile data (ids,
//! timestamps, pids, durations, nonces) never hides a loop.
//!
//! | tool or outcome | compared | ignored |
//! |---|---|---|
//! | `exec` running | status, output tail | session id, pid, text |
//! | `exec` completed/failed | status, exit code, timed-out flag, output (`aggregated`, else text) | duration, pid, session id, cwd |
//! | `exec` approval-pending/-unavailable | status, reason, host, command, warning text | expiry, approval id |
//! | failing `exec` (non-zero exit with real output) | also a *failure identity*: the output with timestamps, clock times, `attempt N`/`retry N`, durations and `pid N` replaced by `#` | — |
//! | `process` poll | action, status, exit code/signal, aggregated output, text | everything else |
//! | `process` log | action, status, total lines/chars, truncated, exit code/signal, text | everything else |
//! | message sends (`message` with a send-like action, `sessions_send`, `conversations_send`, `*_send`) | the `details` object | message/file/poll ids, receipts, run ids, idempotency keys, timestamps, and the `id` of a delivered message object |
//! | `write` with `details.changed == false` | the fact "unchanged" | path, text |
//! | errors | the error text (nonces canonicalised) | — |
//! | any other object result | `details` and the joined text of `content` (OpenClaw) — in deloop's profiles every other top-level key too, so plain JSON results hash by content | — |
//!
//! Users add volatile keys and regex normalisers per tool (see
//! [`crate::loops::config`]); they apply before any of the above.

use std::borrow::Cow;
use std::cell::OnceCell;

use regex::Regex;
use serde_json::{Map, Value};

use super::config::UserNormaliser;
use super::detectors::same_result::{says_nothing, value_says_nothing};
use super::hashing::{
    digest_str, digest_value, write_json_string, write_object, write_value, Canon, Digest,
    HashWriter, Sink,
};

/// `m.get(key)` without hashing the key for the small objects tool results
/// are made of (the workspace's `serde_json` map is an `IndexMap`, whose
/// lookup runs SipHash); keys are unique, so the result is the same.
#[inline]
pub(crate) fn field<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    if m.len() <= 8 {
        m.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
    } else {
        m.get(key)
    }
}

/// What a call's arguments say about how its outcome is hashed; computed
/// once when the call is seen, so outcomes need not carry the arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub(crate) enum CallKind {
    /// Nothing special.
    #[default]
    Plain,
    /// A configured poll tool (e.g. `command_status`).
    PollTool,
    /// `process` with `action: "poll"`.
    ProcessPoll,
    /// `process` with `action: "log"`.
    ProcessLog,
    /// An outbound message send.
    Send,
}

impl CallKind {
    /// Is this a known poll call?
    pub(crate) fn is_poll(self) -> bool {
        matches!(
            self,
            CallKind::PollTool | CallKind::ProcessPoll | CallKind::ProcessLog
        )
    }
}

const SEND_LIKE_MESSAGE_ACTIONS: &[&str] = &[
    "send",
    "broadcast",
    "reply",
    "thread-reply",
    "sendWithEffect",
    "sendAttachment",
    "upload-file",
    "sticker",
    "poll",
];

const VOLATILE_SEND_KEYS: &[&str] = &[
    "messageId",
    "message_id",
    "messageIds",
    "platformMessageId",
    "platformMessageIds",
    "fileId",
    "file_id",
    "fileKey",
    "pollId",
    "poll_id",
    "receipt",
    "runId",
    "idempotencyKey",
    "ts",
    "timestamp",
    "sentAt",
    "deliveredAt",
    "createdAt",
];

/// Classifies a call. `poll_tools` are tool names that are always polls;
/// `poll_actions` are the `process` actions that are polls.
pub(crate) fn classify_call(
    tool: &str,
    args: &Value,
    poll_tools: &[String],
    poll_actions: &[String],
) -> CallKind {
    if poll_tools.iter().any(|t| t == tool) {
        return CallKind::PollTool;
    }
    let action = match args {
        Value::Object(m) => field(m, "action").and_then(Value::as_str),
        _ => None,
    };
    if tool == "process" {
        if let Some(a) = action {
            if poll_actions.iter().any(|p| p == a) {
                return match a {
                    "log" => CallKind::ProcessLog,
                    "poll" => CallKind::ProcessPoll,
                    _ => CallKind::PollTool,
                };
            }
        }
        return CallKind::Plain;
    }
    if tool == "sessions_send" || tool == "conversations_send" || tool.ends_with("_send") {
        return CallKind::Send;
    }
    if tool == "message" {
        return match action {
            Some(a) if SEND_LIKE_MESSAGE_ACTIONS.contains(&a) => CallKind::Send,
            _ => CallKind::Plain,
        };
    }
    // Provider send tools (telegram, discord, ...) called with a send action.
    if matches!(action, Some("send") | Some("sendMessage")) {
        return CallKind::Send;
    }
    CallKind::Plain
}

/// How plain object results are hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PlainHash {
    /// OpenClaw: only `details` (an object, else `{}`) and the content text.
    OpenClaw,
    /// deloop: every top-level key, with `content` replaced by its text.
    Content,
}

/// The body of an outcome.
#[derive(Debug, Clone, Copy)]
pub enum OutcomeBody<'a> {
    /// The tool returned this JSON result.
    Result(&'a Value),
    /// The tool failed with this error text.
    Error(&'a str),
}

/// The normalised facts of one outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OutcomeInfo {
    /// `None` only for the loop guard's own veto result.
    pub hash: Option<Digest>,
    /// Errors and unchanged writes: evidence of no progress by themselves.
    pub no_progress: bool,
    /// Is this an error outcome?
    pub error: bool,
    /// The guard's own veto (`details.status == "blocked"`, `deniedReason == "tool-loop"`).
    pub veto: bool,
    /// Identity of a terminal `exec` failure (volatile spans normalised).
    pub failure_identity: Option<Digest>,
    /// The unavailable tool an error names, lower-cased.
    pub unknown_tool: Option<String>,
    /// A success that says nothing (an empty output, `OK`; see
    /// [`super::detectors::same_result`]).
    pub blank: bool,
    /// An error's shape: its text with quoted spans masked (`None` when it
    /// has none), so an error that echoes the call's arguments is the same
    /// error for [`super::detectors::same_result`].
    pub error_shape: Option<Digest>,
}

/// Compiled normalisation rules (compiled lazily, once per guard).
#[derive(Debug, Default)]
pub(crate) struct OutcomeHasher {
    failure_patterns: OnceCell<Vec<Regex>>,
    unknown_tool: OnceCell<[Regex; 2]>,
}

fn re(p: &str) -> Regex {
    // These patterns are constants checked by the unit tests.
    Regex::new(p).unwrap_or_else(|e| panic!("built-in pattern {p} is invalid: {e}"))
}

impl OutcomeHasher {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    fn failure_patterns(&self) -> &[Regex] {
        self.failure_patterns.get_or_init(|| {
            vec![
                re(r"(?i-u)\d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:z|[+-]\d{2}:\d{2})?"),
                re(r"(?-u)\d{1,2}:\d{2}:\d{2}(?:\.\d{1,6})?"),
                re(r"(?i-u)\b(?:attempt|retry)\b[\s#:=]*\d+"),
                re(r"(?i-u)\b\d+(?:\.\d+)?\s?(?:ns|us|ms|seconds?|minutes?|hours?|s)\b"),
                re(r"(?i-u)\b(?:pid|ppid)\b[\s#:=]*\d+"),
            ]
        })
    }

    /// Replaces volatile spans of a failure message by `#`.
    pub(crate) fn failure_shape(&self, text: &str) -> String {
        let mut s = text.to_string();
        for p in self.failure_patterns() {
            if p.is_match(&s) {
                s = p.replace_all(&s, "#").into_owned();
            }
        }
        s
    }

    /// Extracts the unavailable tool named by an error message.
    pub(crate) fn unknown_tool_name(&self, error: &str) -> Option<String> {
        let raw = error.trim();
        if raw.is_empty() {
            return None;
        }
        let lower_has = |needle: &str| {
            raw.as_bytes()
                .windows(needle.len())
                .any(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
        };
        // Cheap pre-filter: both patterns need the word "tool".
        if !lower_has("tool") {
            return None;
        }
        let patterns = self.unknown_tool.get_or_init(|| {
            [
                re(r#"(?i)unknown tool[:\s]+["']?([a-z0-9_.-]+)["']?"#),
                re(r#"(?i)tool\s+["']?([a-z0-9_.-]+)["']?\s+(?:not found|is not available)"#),
            ]
        });
        for p in patterns {
            if let Some(c) = p.captures(raw) {
                let name = c.get(1)?.as_str().trim();
                if !name.is_empty() {
                    return Some(name.to_lowercase());
                }
            }
        }
        None
    }

    /// Normalises and hashes one outcome.
    pub(crate) fn hash(
        &self,
        tool: &str,
        kind: CallKind,
        body: OutcomeBody<'_>,
        mode: PlainHash,
        user: &[&UserNormaliser],
    ) -> OutcomeInfo {
        let mut info = OutcomeInfo {
            hash: None,
            no_progress: false,
            error: false,
            veto: false,
            failure_identity: None,
            unknown_tool: None,
            blank: false,
            error_shape: None,
        };
        let result = match body {
            OutcomeBody::Error(e) => {
                let text = apply_user_text(e, user);
                info.error = true;
                info.no_progress = true;
                info.unknown_tool = self.unknown_tool_name(&text);
                info.hash = Some(digest_str(&text, Canon::Outcome).tagged("error"));
                info.error_shape = error_shape(&text);
                return info;
            }
            OutcomeBody::Result(v) => v,
        };
        let owned;
        let result = if user.is_empty() {
            result
        } else {
            owned = apply_user(result, user);
            &owned
        };
        let Value::Object(obj) = result else {
            info.blank = value_says_nothing(result);
            info.hash = Some(digest_value(result, Canon::Outcome));
            return info;
        };
        let empty = Map::new();
        let details = match field(obj, "details") {
            Some(Value::Object(d)) => d,
            _ => &empty,
        };
        if field(details, "status").and_then(Value::as_str) == Some("blocked")
            && field(details, "deniedReason").and_then(Value::as_str) == Some("tool-loop")
        {
            info.veto = true;
            return info;
        }
        let text = extract_text(obj);
        info.blank = if text.is_empty() {
            obj.keys().all(|k| k == "content" || k == "details") && details.is_empty()
        } else {
            says_nothing(&text)
        };
        if tool == "exec" {
            if let Some(h) = hash_exec(details, &text) {
                info.hash = Some(h);
                let status = field(details, "status").and_then(Value::as_str);
                let exit = field(details, "exitCode").and_then(Value::as_f64);
                let output: &str = match field(details, "aggregated").and_then(Value::as_str) {
                    Some(a) if !a.is_empty() => a,
                    _ => &text,
                };
                info.blank = says_nothing(output);
                if let (Some("completed" | "failed"), Some(code)) = (status, exit) {
                    let timed_out = field(details, "timedOut") == Some(&Value::Bool(true));
                    let footer = format!("(Command exited with code {})", fmt_code(code));
                    if code.is_finite()
                        && code != 0.0
                        && !timed_out
                        && !output.is_empty()
                        && output != footer
                    {
                        let shape = self.failure_shape(output);
                        let mut w = HashWriter::new();
                        w.put(b"failure:");
                        write_json_string(&mut w, status.unwrap_or(""));
                        w.put(fmt_code(code).as_bytes());
                        write_json_string(&mut w, &shape);
                        info.failure_identity = Some(w.finish());
                    }
                }
                return info;
            }
        }
        if tool == "write" && field(details, "changed") == Some(&Value::Bool(false)) {
            info.no_progress = true;
            info.hash = Some(digest_str("unchanged", Canon::Outcome).tagged("write"));
            return info;
        }
        match kind {
            CallKind::ProcessPoll => {
                let mut w = HashWriter::new();
                w.put(b"poll");
                for key in ["status", "exitCode", "exitSignal", "aggregated"] {
                    write_json_string(&mut w, key);
                    write_value(
                        &mut w,
                        field(details, key).unwrap_or(&Value::Null),
                        Canon::Outcome,
                        1,
                    );
                }
                write_json_string(&mut w, &text);
                info.hash = Some(w.finish());
                return info;
            }
            CallKind::ProcessLog => {
                let mut w = HashWriter::new();
                w.put(b"log");
                for key in [
                    "status",
                    "totalLines",
                    "totalChars",
                    "truncated",
                    "exitCode",
                    "exitSignal",
                ] {
                    write_json_string(&mut w, key);
                    write_value(
                        &mut w,
                        field(details, key).unwrap_or(&Value::Null),
                        Canon::Outcome,
                        1,
                    );
                }
                write_json_string(&mut w, &text);
                info.hash = Some(w.finish());
                return info;
            }
            CallKind::Send => {
                let stripped = strip_send_ids(&Value::Object(details.clone()), 0);
                info.hash = Some(digest_value(&stripped, Canon::Outcome).tagged("send"));
                return info;
            }
            _ => {}
        }
        let mut w = HashWriter::new();
        match mode {
            PlainHash::OpenClaw => {
                w.put(b"{\"details\":");
                write_object(&mut w, details, Canon::Outcome, 1, |_| false);
            }
            PlainHash::Content => {
                w.put(b"{\"rest\":");
                write_object(&mut w, obj, Canon::Outcome, 1, |k| k == "content");
            }
        }
        w.put(b",\"text\":");
        write_json_string(&mut w, &canon_text(&text));
        w.put(b"}");
        info.hash = Some(w.finish());
        info
    }
}

/// The digest of an error text with every quoted span (`` `…` ``,
/// `'…'`, `"…"`, on one line, at most 2,000 bytes) masked; `None` when the
/// text has no quoted span. ``old_str `x` did not appear`` and
/// ``old_str `y` did not appear`` share a shape.
pub(crate) fn error_shape(text: &str) -> Option<Digest> {
    const MAX_SPAN: usize = 2000;
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let (mut i, mut masked) = (0, false);
    while i < b.len() {
        let q = b[i];
        if matches!(q, b'`' | b'\'' | b'"') {
            let end = b[i + 1..]
                .iter()
                .take(MAX_SPAN)
                .position(|&c| c == q || c == b'\n')
                .map(|p| i + 1 + p);
            // An apostrophe inside a word (`don't`) opens no quote.
            let word_inside = q == b'\'' && i > 0 && b[i - 1].is_ascii_alphanumeric();
            if let Some(e) = end.filter(|&e| b[e] == q && !word_inside) {
                out.extend_from_slice(&[q, b'#', q]);
                i = e + 1;
                masked = true;
                continue;
            }
        }
        out.push(q);
        i += 1;
    }
    masked.then(|| digest_str(&String::from_utf8_lossy(&out), Canon::Outcome).tagged("error-shape"))
}

fn canon_text(text: &str) -> Cow<'_, str> {
    if memchr::memmem::find(text.as_bytes(), b"<<<EXTERNAL_UNTRUSTED_CONTENT").is_some() {
        Cow::Owned(super::hashing::canonicalise_nonces(text))
    } else {
        Cow::Borrowed(text)
    }
}

fn fmt_code(code: f64) -> String {
    if code.fract() == 0.0 && code.abs() < 1e15 {
        format!("{}", code as i64)
    } else {
        format!("{code}")
    }
}

/// The `content` text blocks joined by newlines and trimmed (borrowed when
/// there is a single text block).
pub(crate) fn extract_text(obj: &Map<String, Value>) -> Cow<'_, str> {
    let Some(Value::Array(items)) = field(obj, "content") else {
        return Cow::Borrowed("");
    };
    let is_text = |item: &Value| matches!(item, Value::Object(m) if matches!((field(m, "type"), field(m, "text")), (Some(Value::String(_)), Some(Value::String(_)))));
    let mut texts = items.iter().filter(|i| is_text(i));
    match (texts.next(), texts.next()) {
        (None, _) => return Cow::Borrowed(""),
        (Some(Value::Object(m)), None) => {
            if let Some(Value::String(t)) = field(m, "text") {
                return Cow::Borrowed(t.trim());
            }
        }
        _ => {}
    }
    let mut out = String::new();
    let mut first = true;
    for item in items {
        if let Value::Object(m) = item {
            if let (Some(Value::String(_)), Some(Value::String(t))) =
                (field(m, "type"), field(m, "text"))
            {
                if !first {
                    out.push('\n');
                }
                first = false;
                out.push_str(t);
            }
        }
    }
    let trimmed = out.trim();
    if trimmed.len() == out.len() {
        Cow::Owned(out)
    } else {
        Cow::Owned(trimmed.to_string())
    }
}

fn hash_exec(details: &Map<String, Value>, text: &str) -> Option<Digest> {
    let status = field(details, "status")?.as_str()?;
    let s = |k: &str| field(details, k).and_then(Value::as_str);
    let mut w = HashWriter::new();
    w.put(b"exec:");
    write_json_string(&mut w, status);
    match status {
        "running" => {
            write_json_string(&mut w, s("tail").unwrap_or(""));
        }
        "completed" | "failed" => {
            match field(details, "exitCode") {
                Some(n @ Value::Number(_)) => write_value(&mut w, n, Canon::Outcome, 1),
                _ => w.put(b"null"),
            }
            w.put(if field(details, "timedOut") == Some(&Value::Bool(true)) {
                b"T"
            } else {
                b"F"
            });
            let output = match s("aggregated") {
                Some(a) if !a.is_empty() => a,
                _ => text,
            };
            write_json_string(&mut w, &canon_text(output));
        }
        "approval-pending" | "approval-unavailable" => {
            for k in ["reason", "host"] {
                match s(k) {
                    Some(v) => write_json_string(&mut w, v),
                    None => w.put(b"null"),
                }
            }
            write_json_string(&mut w, s("command").unwrap_or(""));
            write_json_string(&mut w, s("warningText").unwrap_or(""));
        }
        _ => return None,
    }
    Some(w.finish())
}

fn is_message_object(m: &Map<String, Value>) -> bool {
    matches!(field(m, "id"), Some(Value::String(_)))
        && matches!(field(m, "text"), Some(Value::String(_)))
        && (matches!(field(m, "direction"), Some(Value::String(_)))
            || matches!(field(m, "senderId"), Some(Value::String(_)))
            || matches!(field(m, "accountId"), Some(Value::String(_)))
            || matches!(field(m, "conversation"), Some(Value::Object(_))))
}

fn strip_send_ids(v: &Value, depth: usize) -> Value {
    if depth > 64 {
        return v.clone();
    }
    match v {
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| strip_send_ids(item, depth + 1))
                .collect(),
        ),
        Value::Object(m) => {
            let drop_id = is_message_object(m);
            let mut out = Map::new();
            for (k, nested) in m {
                if VOLATILE_SEND_KEYS.contains(&k.as_str()) || (drop_id && k == "id") {
                    continue;
                }
                out.insert(k.clone(), strip_send_ids(nested, depth + 1));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn apply_user_text(s: &str, user: &[&UserNormaliser]) -> String {
    let mut out = s.to_string();
    for u in user {
        for (re, rep) in &u.patterns {
            if re.is_match(&out) {
                out = re.replace_all(&out, rep.as_str()).into_owned();
            }
        }
    }
    out
}

fn apply_user(v: &Value, user: &[&UserNormaliser]) -> Value {
    fn walk(v: &Value, user: &[&UserNormaliser], depth: usize) -> Value {
        if depth > 64 {
            return v.clone();
        }
        match v {
            Value::String(s) => Value::String(apply_user_text(s, user)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|i| walk(i, user, depth + 1)).collect())
            }
            Value::Object(m) => {
                let mut out = Map::new();
                for (k, nested) in m {
                    if user
                        .iter()
                        .any(|u| u.volatile_keys.iter().any(|vk| vk == k))
                    {
                        continue;
                    }
                    out.insert(k.clone(), walk(nested, user, depth + 1));
                }
                Value::Object(out)
            }
            other => other.clone(),
        }
    }
    walk(v, user, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn h(tool: &str, kind: CallKind, v: Value, mode: PlainHash) -> OutcomeInfo {
        OutcomeHasher::new().hash(tool, kind, OutcomeBody::Result(&v), mode, &[])
    }

    #[test]
    fn exec_ignores_volatile_fields() {
        let a = h(
            "exec",
            CallKind::Plain,
            json!({"content":[{"type":"text","text":"x 1"}],"details":{"status":"completed","exitCode":0,"aggregated":"ok","durationMs":5,"pid":1,"sessionId":"a","cwd":"/a"}}),
            PlainHash::OpenClaw,
        );
        let b = h(
            "exec",
            CallKind::Plain,
            json!({"content":[{"type":"text","text":"x 2"}],"details":{"status":"completed","exitCode":0,"aggregated":"ok","durationMs":9,"pid":2,"sessionId":"b","cwd":"/b"}}),
            PlainHash::OpenClaw,
        );
        assert_eq!(a.hash, b.hash);
        assert!(a.failure_identity.is_none());
    }

    #[test]
    fn exec_failure_identity_ignores_times() {
        let mk = |t: &str| {
            h(
                "exec",
                CallKind::Plain,
                json!({"details":{"status":"failed","exitCode":1,"aggregated":t}}),
                PlainHash::OpenClaw,
            )
        };
        let a = mk("[12:00:00] Error: boom after 35ms (attempt 2, pid 77)");
        let b = mk("[12:00:09] Error: boom after 120ms (attempt 3, pid 78)");
        assert_ne!(a.hash, b.hash);
        assert!(a.failure_identity.is_some());
        assert_eq!(a.failure_identity, b.failure_identity);
        let c = mk("(Command exited with code 1)");
        assert!(c.failure_identity.is_none());
    }

    #[test]
    fn send_strips_ids() {
        let k = CallKind::Send;
        let a = h(
            "message",
            k,
            json!({"details":{"ok":true,"messageId":"m1","ts":1,"message":{"id":"x","text":"t","direction":"out","conversation":{"id":"c1"}}}}),
            PlainHash::OpenClaw,
        );
        let b = h(
            "message",
            k,
            json!({"details":{"ok":true,"messageId":"m2","ts":2,"message":{"id":"y","text":"t","direction":"out","conversation":{"id":"c1"}}}}),
            PlainHash::OpenClaw,
        );
        assert_eq!(a.hash, b.hash);
        let c = h(
            "message",
            k,
            json!({"details":{"ok":true,"messageId":"m2","ts":2,"message":{"id":"y","text":"t","direction":"out","conversation":{"id":"c2"}}}}),
            PlainHash::OpenClaw,
        );
        assert_ne!(a.hash, c.hash);
    }

    #[test]
    fn plain_results_by_content_outside_openclaw() {
        let a = json!({"status":200,"body":{"state":"running"}});
        let b = json!({"status":200,"body":{"state":"done"}});
        let oc = |v| h("http_get", CallKind::Plain, v, PlainHash::OpenClaw).hash;
        let dl = |v| h("http_get", CallKind::Plain, v, PlainHash::Content).hash;
        assert_eq!(oc(a.clone()), oc(b.clone()));
        assert_ne!(dl(a), dl(b));
    }

    #[test]
    fn write_unchanged_is_no_progress() {
        let a = h(
            "write",
            CallKind::Plain,
            json!({"details":{"changed":false,"path":"/a"}}),
            PlainHash::Content,
        );
        let b = h(
            "write",
            CallKind::Plain,
            json!({"details":{"changed":false,"path":"/b"}}),
            PlainHash::Content,
        );
        assert!(a.no_progress);
        assert_eq!(a.hash, b.hash);
    }

    #[test]
    fn unknown_tool_names() {
        let o = OutcomeHasher::new();
        assert_eq!(
            o.unknown_tool_name("Unknown tool: Web_Search").as_deref(),
            Some("web_search")
        );
        assert_eq!(
            o.unknown_tool_name("tool 'web_search' is not available")
                .as_deref(),
            Some("web_search")
        );
        assert_eq!(
            o.unknown_tool_name("UNKNOWN TOOL web_search").as_deref(),
            Some("web_search")
        );
        assert_eq!(
            o.unknown_tool_name("Tool exec not found").as_deref(),
            Some("exec")
        );
        assert_eq!(o.unknown_tool_name("file not found"), None);
    }

    #[test]
    fn veto_has_no_hash() {
        let v = h(
            "read",
            CallKind::Plain,
            json!({"details":{"status":"blocked","deniedReason":"tool-loop"}}),
            PlainHash::Content,
        );
        assert!(v.veto && v.hash.is_none());
    }
}
