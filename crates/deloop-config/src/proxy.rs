//! The guarding proxy's settings: the `[proxy]` table of `deloop.toml` and
//! its environment variables. Every key has a default; `deloop proxy
//! --upstream URL` supplies the one key without a usable default. See
//! docs/proxy.md for what each key does.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::server::SettingsError;

/// The environment variable holding the key sent to the upstream (never
/// read from the config file, never logged).
pub const UPSTREAM_KEY_VAR: &str = "DELOOP_PROXY_UPSTREAM_KEY";

/// `[proxy]`: where `deloop proxy` listens, which server it guards, and how
/// it ends a looping stream.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ProxySettings {
    /// The upstream server's root URL, e.g. `http://127.0.0.1:8080`
    /// (`DELOOP_PROXY_UPSTREAM`, `--upstream`). Request paths are appended
    /// as received; a trailing `/v1` is accepted and dropped. Empty: not
    /// configured (`deloop proxy` then needs `--upstream`).
    pub upstream: String,
    /// Address to listen on (`DELOOP_PROXY_LISTEN`, `--listen`). Default
    /// `127.0.0.1:8787`.
    pub listen: String,
    /// The header that carries the configured upstream key
    /// (`DELOOP_PROXY_UPSTREAM_KEY_HEADER`; the key itself only comes from
    /// `DELOOP_PROXY_UPSTREAM_KEY`). `authorization` sends `Bearer KEY`;
    /// any other header (`x-api-key`) sends the key as is. The configured
    /// key replaces what the client sent in that header. Default
    /// `authorization`.
    pub upstream_key_header: String,
    /// Exact mode for every request (`DELOOP_PROXY_EXACT`): only the
    /// settled prefix of a stream is forwarded, so no byte of a loop ever
    /// reaches the client; output trails the model by the guard's
    /// look-back. A request turns it on alone with `x-deloop-exact: 1`.
    /// Default false.
    pub exact: bool,
    /// `finish_reason` of an OpenAI choice the proxy cut: `stop`, `length`,
    /// `content_filter` or `repetition` (`DELOOP_PROXY_FINISH_REASON`).
    /// Default `stop` (docs/proxy.md says why).
    pub finish_reason: String,
    /// `stop_reason` of an Anthropic message the proxy cut: `end_turn`,
    /// `max_tokens`, `stop_sequence` or `refusal`
    /// (`DELOOP_PROXY_STOP_REASON`). Default `end_turn`.
    pub stop_reason: String,
    /// Watch reasoning text too (`reasoning_content`/`reasoning` deltas,
    /// Anthropic `thinking` blocks). Default true.
    pub guard_reasoning: bool,
    /// Repair the content of replies to requests that ask for JSON
    /// (`response_format` `json_object` or `json_schema`) and check it
    /// against the request's schema. Default true.
    pub repair_json: bool,
    /// Seconds to wait for a TCP (and TLS) connection to the upstream;
    /// past it the client gets a 504. Default 10.
    pub connect_timeout_secs: u64,
    /// Seconds the upstream may stay silent: waiting for its response head
    /// (a non-streamed reply arrives only when generation is done) and
    /// between two pieces of a body (`DELOOP_PROXY_IDLE_TIMEOUT`). Default
    /// 600, the OpenAI SDK's own default timeout.
    pub idle_timeout_secs: u64,
    /// Largest request body in bytes (413 past it). Default 16 MiB.
    pub max_body_bytes: usize,
    /// Largest non-streamed reply the proxy reads to guard; a larger one
    /// is passed through unguarded. Default 32 MiB.
    pub max_reply_bytes: usize,
    /// Largest server-sent event (and line) of an upstream stream; a larger
    /// one ends the stream with an error. Default 1 MiB.
    pub max_event_bytes: usize,
    /// Requests relayed at once; beyond it, 503 with `Retry-After`
    /// (`DELOOP_PROXY_CONCURRENCY_LIMIT`). Default 1024.
    pub concurrency_limit: usize,
    /// What the proxy does about tool-call loops found in a chat request's
    /// history and in the calls of its reply (`DELOOP_PROXY_TOOL_LOOPS`):
    /// `observe` (metrics and `x-deloop-*` headers only), `warn` (also a
    /// note at the end of the request's messages when the latest round of
    /// calls repeats), `block` (also replace a reply's tool calls by an
    /// explanation when one is critical). `off` turns the check off.
    /// Default `block` (docs/proxy.md says why).
    pub tool_loops: String,
    /// Tool-loop profile the histories and replies are judged with:
    /// `default`, `openclaw` or `strict` (`DELOOP_PROXY_LOOP_PROFILE`).
    /// Unset: the loop config's `profile`, else `default`.
    pub loop_profile: Option<String>,
    /// OpenClaw's `tools.loopDetection` block (JSON5 or JSON, per-agent
    /// overrides included), as `deloop check --config` reads it
    /// (`DELOOP_PROXY_LOOP_CONFIG`). Unset: the defaults.
    pub loop_config: Option<PathBuf>,
    /// A file with one of deloop's own API keys per line, checked against
    /// `x-deloop-key` (`DELOOP_PROXY_API_KEYS_FILE`). Keys also come from
    /// `DELOOP_API_KEYS` (comma separated, shared with `deloop serve`). No
    /// key = auth off.
    pub api_keys_file: Option<PathBuf>,
    /// Log format on stderr of `deloop proxy`: `text` or `json`
    /// (`DELOOP_LOG_FORMAT`, shared with `deloop serve`). Default `text`.
    pub log_format: String,
    /// Seconds in-flight streams get to finish after SIGTERM or Ctrl-C
    /// (`deloop proxy`; inside `deloop serve` the server's own grace
    /// applies). Default 30.
    pub shutdown_grace_secs: u64,
    /// Largest chat request whose tool-call history is replayed (the
    /// parsed JSON takes many times its size); a larger one is refused with
    /// 413 while `tool_loops` is on. Default 8 MiB (64 KiB to 1 GiB).
    pub max_history_bytes: usize,
    /// What the proxy does with looped assistant text sent back in a
    /// request's history (an auto-continued answer, an Anthropic prefill,
    /// echoed reasoning), which would prime the model to loop again
    /// (`DELOOP_PROXY_HISTORY_LOOPS`): `clamp` (forward it with the guard's
    /// marker in place of the repeats), `pass` (forward it as sent, report
    /// it in the headers) or `reject` (answer 400 naming the message).
    /// Default `clamp`. Requests over `max_history_bytes` are not read.
    pub history_loops: String,
    /// What the proxy does with a tool call whose arguments loop while
    /// they stream (or one reply asking for the same call many times), once
    /// it has cut the reply and dropped the upstream
    /// (`DELOOP_PROXY_TOOL_ARGS_LOOPS`): `drop` (the looping call is
    /// removed; the agent does not run it), `close` (its arguments end
    /// where the loop was seen, with the guard's marker, closed into valid
    /// JSON) or `off` (arguments are not watched). Default `drop`.
    pub tool_args_loops: String,
    /// LiteLLM's guardrail API: streamed replies followed at once, each
    /// judged on its new text only; a stream not followed is judged in
    /// full at every post (correct, only slower). 0 judges every post in
    /// full. Default 1,024 (0 to 1,000,000: [`LITELLM_STREAMS_BOUNDS`]).
    pub litellm_streams: usize,
    /// Bytes those streams may hold: their texts, plus 256 KiB per stream
    /// for its watcher; the least recently used go first. Default 64 MiB
    /// (1 MiB to 16 GiB: [`LITELLM_STREAM_BYTES_BOUNDS`]).
    pub litellm_stream_bytes: usize,
    /// Seconds after which a stream that got no post is forgotten.
    /// Default 300 (1 to 86,400: [`LITELLM_STREAM_IDLE_SECS_BOUNDS`]).
    pub litellm_stream_idle_secs: u64,
    /// LiteLLM's guardrail API: the histories of `pre_call` checks kept by
    /// `litellm_call_id` until the `post_call` check of the same call comes
    /// (LiteLLM sends a reply's tool calls without the history they
    /// continue); the oldest go first. 0 keeps none (a reply's calls are
    /// then judged alone). Default 1,024 (0 to 1,000,000:
    /// [`LITELLM_HISTORIES_BOUNDS`]).
    pub litellm_histories: usize,
    /// Bytes of requests those histories may hold. Default 64 MiB (1 MiB
    /// to 16 GiB: [`LITELLM_HISTORY_BYTES_BOUNDS`]).
    pub litellm_history_bytes: usize,
    /// Client connections: deadlines and the cap (`[proxy.connections]`).
    pub connections: crate::ConnectionSettings,
}

/// Bounds of `proxy.litellm_streams`.
pub const LITELLM_STREAMS_BOUNDS: (u64, u64) = (0, 1_000_000);
/// Bounds of `proxy.litellm_stream_bytes`.
pub const LITELLM_STREAM_BYTES_BOUNDS: (u64, u64) = (1 << 20, 16 << 30);
/// Bounds of `proxy.litellm_stream_idle_secs`.
pub const LITELLM_STREAM_IDLE_SECS_BOUNDS: (u64, u64) = (1, 86_400);
/// Bounds of `proxy.litellm_histories`.
pub const LITELLM_HISTORIES_BOUNDS: (u64, u64) = (0, 1_000_000);
/// Bounds of `proxy.litellm_history_bytes`.
pub const LITELLM_HISTORY_BYTES_BOUNDS: (u64, u64) = (1 << 20, 16 << 30);

/// `Err` naming `key` and its bounds when `v` is outside them.
fn in_range(key: &'static str, v: u64, (lo, hi): (u64, u64)) -> Result<(), SettingsError> {
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(SettingsError {
            key,
            message: format!("{v} is out of range: use {lo} to {hi}"),
        })
    }
}

impl Default for ProxySettings {
    fn default() -> Self {
        ProxySettings {
            upstream: String::new(),
            listen: "127.0.0.1:8787".into(),
            upstream_key_header: "authorization".into(),
            exact: false,
            finish_reason: "stop".into(),
            stop_reason: "end_turn".into(),
            guard_reasoning: true,
            repair_json: true,
            connect_timeout_secs: 10,
            idle_timeout_secs: 600,
            max_body_bytes: 16 << 20,
            max_reply_bytes: 32 << 20,
            max_event_bytes: 1 << 20,
            concurrency_limit: 1024,
            tool_loops: "block".into(),
            loop_profile: None,
            loop_config: None,
            api_keys_file: None,
            log_format: "text".into(),
            shutdown_grace_secs: 30,
            max_history_bytes: 8 << 20,
            history_loops: "clamp".into(),
            tool_args_loops: "drop".into(),
            litellm_streams: 1024,
            litellm_stream_bytes: 64 << 20,
            litellm_stream_idle_secs: 300,
            litellm_histories: 1024,
            litellm_history_bytes: 64 << 20,
            connections: crate::ConnectionSettings::default(),
        }
    }
}

/// The values of `proxy.history_loops`.
pub const HISTORY_LOOP_ACTIONS: &[&str] = &["clamp", "pass", "reject"];

/// The values of `proxy.tool_args_loops`.
pub const TOOL_ARGS_LOOP_ACTIONS: &[&str] = &["drop", "close", "off"];

/// The values of `proxy.tool_loops`.
pub const TOOL_LOOP_ACTIONS: &[&str] = &["off", "observe", "warn", "block"];

/// The `finish_reason` values a cut may report.
pub const FINISH_REASONS: &[&str] = &["stop", "length", "content_filter", "repetition"];
/// The `stop_reason` values a cut may report.
pub const STOP_REASONS: &[&str] = &["end_turn", "max_tokens", "stop_sequence", "refusal"];

fn parse_bool(key: &'static str, v: &str) -> Result<bool, SettingsError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        other => Err(SettingsError {
            key,
            message: format!("{other:?} is not a boolean; use true or false"),
        }),
    }
}

fn parse_num<T: std::str::FromStr>(key: &'static str, v: &str) -> Result<T, SettingsError> {
    v.trim().parse().map_err(|_| SettingsError {
        key,
        message: format!("{v:?} is not a whole number"),
    })
}

impl ProxySettings {
    /// Applies the environment variables named in the field docs (not the
    /// upstream key, which [`ProxySettings::upstream_key`] reads), then
    /// [`ProxySettings::validate`]s.
    pub fn apply_env(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<(), SettingsError> {
        if let Some(v) = get("DELOOP_PROXY_UPSTREAM") {
            self.upstream = v;
        }
        if let Some(v) = get("DELOOP_PROXY_LISTEN") {
            self.listen = v;
        }
        if let Some(v) = get("DELOOP_PROXY_UPSTREAM_KEY_HEADER") {
            self.upstream_key_header = v;
        }
        if let Some(v) = get("DELOOP_PROXY_EXACT") {
            self.exact = parse_bool("DELOOP_PROXY_EXACT", &v)?;
        }
        if let Some(v) = get("DELOOP_PROXY_FINISH_REASON") {
            self.finish_reason = v;
        }
        if let Some(v) = get("DELOOP_PROXY_STOP_REASON") {
            self.stop_reason = v;
        }
        if let Some(v) = get("DELOOP_PROXY_IDLE_TIMEOUT") {
            self.idle_timeout_secs = parse_num("DELOOP_PROXY_IDLE_TIMEOUT", &v)?;
        }
        if let Some(v) = get("DELOOP_PROXY_TOOL_LOOPS") {
            self.tool_loops = v.trim().to_ascii_lowercase();
        }
        if let Some(v) = get("DELOOP_PROXY_HISTORY_LOOPS") {
            self.history_loops = v.trim().to_ascii_lowercase();
        }
        if let Some(v) = get("DELOOP_PROXY_TOOL_ARGS_LOOPS") {
            self.tool_args_loops = v.trim().to_ascii_lowercase();
        }
        if let Some(v) = get("DELOOP_PROXY_CONCURRENCY_LIMIT") {
            self.concurrency_limit = parse_num("DELOOP_PROXY_CONCURRENCY_LIMIT", &v)?;
        }
        if let Some(v) = get("DELOOP_PROXY_LOOP_PROFILE") {
            self.loop_profile = Some(v);
        }
        if let Some(v) = get("DELOOP_PROXY_LOOP_CONFIG") {
            self.loop_config = Some(PathBuf::from(v));
        }
        if let Some(v) = get("DELOOP_PROXY_API_KEYS_FILE") {
            self.api_keys_file = Some(PathBuf::from(v));
        }
        if let Some(v) = get("DELOOP_LOG_FORMAT") {
            self.log_format = v;
        }
        self.validate()
    }

    /// The upstream key from `DELOOP_PROXY_UPSTREAM_KEY` (blank: none).
    pub fn upstream_key(get: impl Fn(&str) -> Option<String>) -> Option<String> {
        get(UPSTREAM_KEY_VAR)
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty())
    }

    /// Checks values that serde cannot. An empty `upstream` passes (it may
    /// come from a flag later); [`ProxySettings::upstream_url`] refuses it.
    pub fn validate(&self) -> Result<(), SettingsError> {
        self.listen_addr()?;
        if !self.upstream.trim().is_empty() {
            self.upstream_url()?;
        }
        let positive = |key, v: u64| {
            if v == 0 {
                Err(SettingsError {
                    key,
                    message: "must be at least 1".into(),
                })
            } else {
                Ok(())
            }
        };
        positive("proxy.connect_timeout_secs", self.connect_timeout_secs)?;
        positive("proxy.idle_timeout_secs", self.idle_timeout_secs)?;
        positive("proxy.max_body_bytes", self.max_body_bytes as u64)?;
        positive("proxy.max_reply_bytes", self.max_reply_bytes as u64)?;
        positive("proxy.concurrency_limit", self.concurrency_limit as u64)?;
        if !(64 << 10..=1 << 30).contains(&self.max_history_bytes) {
            return Err(SettingsError {
                key: "proxy.max_history_bytes",
                message: format!(
                    "{} is out of range: use {} to {}",
                    self.max_history_bytes,
                    64 << 10,
                    1u64 << 30
                ),
            });
        }
        in_range(
            "proxy.litellm_streams",
            self.litellm_streams as u64,
            LITELLM_STREAMS_BOUNDS,
        )?;
        in_range(
            "proxy.litellm_stream_bytes",
            self.litellm_stream_bytes as u64,
            LITELLM_STREAM_BYTES_BOUNDS,
        )?;
        in_range(
            "proxy.litellm_stream_idle_secs",
            self.litellm_stream_idle_secs,
            LITELLM_STREAM_IDLE_SECS_BOUNDS,
        )?;
        in_range(
            "proxy.litellm_histories",
            self.litellm_histories as u64,
            LITELLM_HISTORIES_BOUNDS,
        )?;
        in_range(
            "proxy.litellm_history_bytes",
            self.litellm_history_bytes as u64,
            LITELLM_HISTORY_BYTES_BOUNDS,
        )?;
        self.connections
            .validate(crate::connections::Table::Proxy)?;
        if self.max_event_bytes < 1024 {
            return Err(SettingsError {
                key: "proxy.max_event_bytes",
                message: format!(
                    "{} is too small for a server-sent event; use at least 1024",
                    self.max_event_bytes
                ),
            });
        }
        if !FINISH_REASONS.contains(&self.finish_reason.as_str()) {
            return Err(SettingsError {
                key: "proxy.finish_reason",
                message: format!(
                    "{:?} is not one of {}",
                    self.finish_reason,
                    FINISH_REASONS.join(", ")
                ),
            });
        }
        if !STOP_REASONS.contains(&self.stop_reason.as_str()) {
            return Err(SettingsError {
                key: "proxy.stop_reason",
                message: format!(
                    "{:?} is not one of {}",
                    self.stop_reason,
                    STOP_REASONS.join(", ")
                ),
            });
        }
        if !HISTORY_LOOP_ACTIONS.contains(&self.history_loops.as_str()) {
            return Err(SettingsError {
                key: "proxy.history_loops",
                message: format!(
                    "{:?} is not one of {}",
                    self.history_loops,
                    HISTORY_LOOP_ACTIONS.join(", ")
                ),
            });
        }
        if !TOOL_ARGS_LOOP_ACTIONS.contains(&self.tool_args_loops.as_str()) {
            return Err(SettingsError {
                key: "proxy.tool_args_loops",
                message: format!(
                    "{:?} is not one of {}",
                    self.tool_args_loops,
                    TOOL_ARGS_LOOP_ACTIONS.join(", ")
                ),
            });
        }
        if !TOOL_LOOP_ACTIONS.contains(&self.tool_loops.as_str()) {
            return Err(SettingsError {
                key: "proxy.tool_loops",
                message: format!(
                    "{:?} is not one of {}",
                    self.tool_loops,
                    TOOL_LOOP_ACTIONS.join(", ")
                ),
            });
        }
        if let Some(p) = &self.loop_profile {
            crate::loop_guard::parse_profile("proxy.loop_profile", p)?;
        }
        if !matches!(self.log_format.as_str(), "text" | "json") {
            return Err(SettingsError {
                key: "proxy.log_format",
                message: format!("{:?} is not `text` or `json`", self.log_format),
            });
        }
        let header = self.upstream_key_header.trim();
        if header.is_empty()
            || !header
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
        {
            return Err(SettingsError {
                key: "proxy.upstream_key_header",
                message: format!(
                    "{:?} is not a header name such as authorization or x-api-key",
                    self.upstream_key_header
                ),
            });
        }
        Ok(())
    }

    /// The listen address, parsed.
    pub fn listen_addr(&self) -> Result<SocketAddr, SettingsError> {
        self.listen.parse().map_err(|e| SettingsError {
            key: "proxy.listen",
            message: format!(
                "{:?} is not an address like 127.0.0.1:8787 ({e})",
                self.listen
            ),
        })
    }

    /// The upstream root: `http` or `https`, a host, no query or fragment,
    /// without a trailing `/` or `/v1` (request paths such as
    /// `/v1/chat/completions` are appended to it as received).
    ///
    /// ```
    /// use deloop_config::proxy::ProxySettings;
    /// let mut s = ProxySettings::default();
    /// s.upstream = "http://127.0.0.1:8080/v1/".into();
    /// assert_eq!(s.upstream_url().unwrap(), "http://127.0.0.1:8080");
    /// s.upstream = "https://example.com/openai".into();
    /// assert_eq!(s.upstream_url().unwrap(), "https://example.com/openai");
    /// s.upstream = "127.0.0.1:8080".into();
    /// assert!(s.upstream_url().is_err());
    /// ```
    pub fn upstream_url(&self) -> Result<String, SettingsError> {
        let bad = |why: &str| SettingsError {
            key: "proxy.upstream",
            message: format!(
                "{:?} {why}; give the server's root URL, e.g. http://127.0.0.1:8080",
                self.upstream
            ),
        };
        let url = self.upstream.trim();
        if url.is_empty() {
            return Err(bad("is empty"));
        }
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .ok_or_else(|| bad("does not start with http:// or https://"))?;
        if url.contains(['?', '#']) || url.chars().any(char::is_whitespace) {
            return Err(bad("has a query, a fragment or white space"));
        }
        let host = rest.split('/').next().unwrap_or("");
        if host.is_empty() || host.starts_with(':') || host.contains('@') {
            return Err(bad("has no host (or has user credentials)"));
        }
        let mut root = url.trim_end_matches('/');
        if let Some(r) = root.strip_suffix("/v1") {
            root = r;
        }
        Ok(root.trim_end_matches('/').to_string())
    }

    /// [`ProxySettings::connect_timeout_secs`] as a duration.
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_secs(self.connect_timeout_secs)
    }

    /// [`ProxySettings::idle_timeout_secs`] as a duration.
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_secs(self.idle_timeout_secs)
    }

    /// [`ProxySettings::shutdown_grace_secs`] as a duration.
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_secs(self.shutdown_grace_secs)
    }

    /// The tool-loop profile and config of [`ProxySettings::loop_profile`]
    /// and [`ProxySettings::loop_config`], read and checked.
    pub fn loop_guard(&self) -> Result<crate::loop_guard::LoopGuardSettings, SettingsError> {
        crate::loop_guard::LoopGuardSettings::load(
            ("proxy.loop_profile", self.loop_profile.as_deref()),
            ("proxy.loop_config", self.loop_config.as_deref()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn litellm_stream_caps_out_of_range_name_key_and_bounds() {
        let mut s = ProxySettings {
            litellm_streams: 1_000_001,
            ..ProxySettings::default()
        };
        let e = s.validate().unwrap_err();
        assert_eq!(e.key, "proxy.litellm_streams");
        assert!(e.message.contains("use 0 to 1000000"), "{}", e.message);
        s.litellm_streams = 0;
        s.validate().unwrap();
        s.litellm_stream_bytes = 1000;
        let e = s.validate().unwrap_err();
        assert_eq!(e.key, "proxy.litellm_stream_bytes");
        assert!(e.message.contains("1000 is out of range"), "{}", e.message);
        s.litellm_stream_bytes = 1 << 20;
        s.litellm_stream_idle_secs = 0;
        assert_eq!(
            s.validate().unwrap_err().key,
            "proxy.litellm_stream_idle_secs"
        );
    }

    #[test]
    fn litellm_history_caps_out_of_range_name_key_and_bounds() {
        let mut s = ProxySettings {
            litellm_histories: 1_000_001,
            ..ProxySettings::default()
        };
        let e = s.validate().unwrap_err();
        assert_eq!(e.key, "proxy.litellm_histories");
        assert!(e.message.contains("use 0 to 1000000"), "{}", e.message);
        s.litellm_histories = 0;
        s.validate().unwrap();
        s.litellm_history_bytes = (16 << 30) + 1;
        let e = s.validate().unwrap_err();
        assert_eq!(e.key, "proxy.litellm_history_bytes");
        assert!(e.message.contains("is out of range"), "{}", e.message);
    }

    #[test]
    fn defaults_are_valid() {
        let s = ProxySettings::default();
        s.validate().unwrap();
        assert_eq!(s.finish_reason, "stop");
        assert_eq!(s.stop_reason, "end_turn");
        assert_eq!(s.tool_loops, "block");
        assert_eq!(s.tool_args_loops, "drop");
        assert!(s.upstream_url().is_err(), "no upstream by default");
        let mut s = ProxySettings::default();
        s.apply_env(env(&[("DELOOP_PROXY_TOOL_ARGS_LOOPS", " Close ")]))
            .unwrap();
        assert_eq!(s.tool_args_loops, "close");
        s.validate().unwrap();
    }

    #[test]
    fn env_overrides_and_errors_name_the_key() {
        let mut s = ProxySettings::default();
        s.apply_env(env(&[
            ("DELOOP_PROXY_UPSTREAM", "http://h:1/v1"),
            ("DELOOP_PROXY_EXACT", "yes"),
            ("DELOOP_PROXY_FINISH_REASON", "length"),
            ("DELOOP_PROXY_IDLE_TIMEOUT", "5"),
        ]))
        .unwrap();
        assert!(s.exact);
        assert_eq!(s.finish_reason, "length");
        assert_eq!(s.idle_timeout(), Duration::from_secs(5));
        assert_eq!(s.upstream_url().unwrap(), "http://h:1");
        let mut s = ProxySettings::default();
        s.apply_env(env(&[
            ("DELOOP_PROXY_LOOP_PROFILE", "strict"),
            ("DELOOP_PROXY_LOOP_CONFIG", "/etc/loops.json5"),
            ("DELOOP_PROXY_API_KEYS_FILE", "/etc/keys"),
            ("DELOOP_LOG_FORMAT", "json"),
        ]))
        .unwrap();
        assert_eq!(s.loop_profile.as_deref(), Some("strict"));
        assert_eq!(s.loop_config, Some(PathBuf::from("/etc/loops.json5")));
        assert_eq!(s.api_keys_file, Some(PathBuf::from("/etc/keys")));
        assert_eq!(s.log_format, "json");
        for (var, value, key) in [
            ("DELOOP_PROXY_EXACT", "maybe", "DELOOP_PROXY_EXACT"),
            ("DELOOP_PROXY_FINISH_REASON", "loop", "proxy.finish_reason"),
            ("DELOOP_PROXY_STOP_REASON", "stop", "proxy.stop_reason"),
            ("DELOOP_PROXY_TOOL_LOOPS", "kill", "proxy.tool_loops"),
            ("DELOOP_PROXY_HISTORY_LOOPS", "drop", "proxy.history_loops"),
            (
                "DELOOP_PROXY_TOOL_ARGS_LOOPS",
                "cut",
                "proxy.tool_args_loops",
            ),
            ("DELOOP_PROXY_UPSTREAM", "ftp://x", "proxy.upstream"),
            ("DELOOP_PROXY_LISTEN", "nowhere", "proxy.listen"),
            ("DELOOP_PROXY_LOOP_PROFILE", "lenient", "proxy.loop_profile"),
            ("DELOOP_LOG_FORMAT", "xml", "proxy.log_format"),
            (
                "DELOOP_PROXY_IDLE_TIMEOUT",
                "10s",
                "DELOOP_PROXY_IDLE_TIMEOUT",
            ),
            (
                "DELOOP_PROXY_UPSTREAM_KEY_HEADER",
                "bad header",
                "proxy.upstream_key_header",
            ),
        ] {
            let err = ProxySettings::default()
                .apply_env(env(&[(var, value)]))
                .unwrap_err();
            assert_eq!(err.key, key, "{var}={value}: {err}");
        }
    }

    #[test]
    fn upstream_urls() {
        let url = |u: &str| {
            let s = ProxySettings {
                upstream: u.into(),
                ..ProxySettings::default()
            };
            s.upstream_url()
        };
        assert_eq!(
            url("http://127.0.0.1:8080").unwrap(),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            url("http://127.0.0.1:8080/").unwrap(),
            "http://127.0.0.1:8080"
        );
        assert_eq!(url("https://api.x.com/v1").unwrap(), "https://api.x.com");
        assert_eq!(
            url("https://api.x.com/p/v1/").unwrap(),
            "https://api.x.com/p"
        );
        assert_eq!(url("http://h/v10").unwrap(), "http://h/v10");
        for bad in [
            "",
            "localhost:8080",
            "http://",
            "http://:80",
            "http://u:p@h",
            "http://h/?a=1",
            "http://h x",
        ] {
            assert!(url(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn upstream_key_only_from_env() {
        assert_eq!(
            ProxySettings::upstream_key(env(&[(UPSTREAM_KEY_VAR, " k ")])),
            Some("k".into())
        );
        assert_eq!(
            ProxySettings::upstream_key(env(&[(UPSTREAM_KEY_VAR, "  ")])),
            None
        );
    }
}
