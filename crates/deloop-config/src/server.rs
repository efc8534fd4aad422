//! The server's settings: the `[server]` table of `deloop.toml` and its
//! environment variables. Every key has a default; see the README's
//! configuration section for the list.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// `[server]`: how `deloop serve` listens, limits and authenticates.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSettings {
    /// Address to listen on (`DELOOP_LISTEN`). Default `127.0.0.1:8080`.
    pub listen: String,
    /// Largest request body in bytes; larger bodies get 413. Default 16 MiB.
    pub max_body_bytes: usize,
    /// Whole-request deadline for non-streamed requests, in seconds (408
    /// past it). Default 120 (an LLM answer with retries fits).
    pub request_timeout_secs: u64,
    /// Streams (SSE asks, NDJSON checks) end after this many seconds
    /// without an event. A long healthy stream is never cut. Default 60.
    pub stream_idle_timeout_secs: u64,
    /// Requests served at once; beyond it, 503 with `Retry-After`. Default 256.
    pub concurrency_limit: usize,
    /// Seconds the 503 answer's `Retry-After` asks clients to wait. Default 1.
    pub retry_after_secs: u64,
    /// Origins allowed by CORS (`DELOOP_CORS_ORIGINS`, comma separated);
    /// empty = CORS off (the default); `["*"]` = any origin.
    pub cors_origins: Vec<String>,
    /// A file with one API key per line (`DELOOP_API_KEYS_FILE`). Keys also
    /// come from `DELOOP_API_KEYS` (comma separated). No key = auth off.
    pub api_keys_file: Option<PathBuf>,
    /// Log format on stderr: `text` or `json` (`DELOOP_LOG_FORMAT`).
    pub log_format: String,
    /// Seconds in-flight requests and streams get to finish after SIGTERM
    /// or Ctrl-C. Default 30.
    pub shutdown_grace_secs: u64,
    /// `Host` header values the MCP endpoint (`/mcp`) accepts, as host names
    /// or `host:port` (`DELOOP_MCP_ALLOWED_HOSTS`, comma separated). The
    /// default, `localhost`, `127.0.0.1` and `::1`, protects a local server
    /// from DNS rebinding; a public deployment lists its own names, or `*`
    /// to accept any `Host` (then rely on API keys).
    pub mcp_allowed_hosts: Vec<String>,
    /// Bytes of recent guard decisions the web console's Live and Sessions
    /// pages keep (the event bus's ring; the oldest go first). Default 4
    /// MiB (64 KiB to 1 GiB).
    pub console_ring_bytes: u64,
    /// Live-agent sessions.
    pub sessions: SessionSettings,
    /// Client connections: deadlines and the cap (`[server.connections]`).
    pub connections: crate::ConnectionSettings,
}

/// `[server.sessions]`: where live-agent sessions live and how they are bounded.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SessionSettings {
    /// Sessions kept at most; at the cap the least recently used one is
    /// evicted (and counted in `deloop_sessions_evicted_total`). Default 100,000.
    pub max_sessions: usize,
    /// A session unused for this many seconds is forgotten. Default 3600.
    pub idle_ttl_secs: u64,
    /// Tool-loop profile: `default`, `openclaw` or `strict`
    /// (`DELOOP_LOOP_PROFILE`). Unset: the loop config's `profile`, else
    /// `default` (as `deloop check` decides).
    pub profile: Option<String>,
    /// OpenClaw's `tools.loopDetection` block (JSON5 or JSON, per-agent
    /// overrides included), as `deloop check --config` reads it
    /// (`DELOOP_LOOP_CONFIG`).
    pub loop_config: Option<PathBuf>,
    /// Calls per session that may wait for their result; the oldest beyond
    /// it is settled as it stands (as `deloop check` does). Default 1024.
    pub max_open_calls: usize,
    /// Estimated bytes all in-process sessions may take (each measured by
    /// its saved size); past it the least recently used are evicted, and a
    /// session that alone outgrows its share (1/64) is forgotten with a 503.
    /// With a Valkey/Redis store it bounds each replica's cached copies
    /// instead (evicted least recently used first; the store keeps the
    /// sessions). Default 1 GiB (1 MiB to 1 TiB).
    pub max_bytes: u64,
    /// Where sessions live: `memory` (this process; the default) or a
    /// Valkey/Redis URL, `redis://[user[:password]@]host:port[/db]` or
    /// `rediss://…` for TLS, shared by every replica pointed at it
    /// (`DELOOP_SESSION_STORE`, `deloop serve --session-store`). The
    /// password may instead come from `DELOOP_REDIS_PASSWORD`; it is never
    /// logged.
    pub store: String,
    /// Deadline of each Valkey/Redis operation in milliseconds; past it the
    /// request answers 503 naming the store. Default 2000 (1 to 60000).
    pub store_timeout_ms: u64,
    /// Prefix of the Valkey/Redis keys (`<prefix>:{<session hash>}:m`,
    /// `:l`); no `{` or `}`. Default `deloop`.
    pub key_prefix: String,
    /// Events after which a session's state is saved in Valkey/Redis and
    /// its log trimmed. Default 32 (1 to 1024).
    pub snapshot_every: u64,
    /// Events a session's log in Valkey/Redis holds at most (a full log is
    /// saved and trimmed first). Default 1024 (`snapshot_every` to 100000).
    pub max_log_events: u64,
    /// Bytes a session's log in Valkey/Redis holds at most (its state is
    /// saved once the log passes 256 KiB). Default 64 MiB (1 MiB to 1 GiB), and at
    /// least `server.max_body_bytes`.
    pub max_log_bytes: u64,
    /// Sessions each replica keeps a judged copy of, least recently used
    /// first out (Valkey/Redis store only). Default 4096 (1 to 1000000).
    pub cached_sessions: usize,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            listen: "127.0.0.1:8080".into(),
            max_body_bytes: 16 << 20,
            request_timeout_secs: 120,
            stream_idle_timeout_secs: 60,
            concurrency_limit: 256,
            retry_after_secs: 1,
            cors_origins: Vec::new(),
            api_keys_file: None,
            log_format: "text".into(),
            shutdown_grace_secs: 30,
            mcp_allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            console_ring_bytes: 4 << 20,
            sessions: SessionSettings::default(),
            connections: crate::ConnectionSettings::default(),
        }
    }
}

impl Default for SessionSettings {
    fn default() -> Self {
        SessionSettings {
            max_sessions: 100_000,
            idle_ttl_secs: 3600,
            profile: None,
            loop_config: None,
            max_open_calls: 1024,
            max_bytes: 1 << 30,
            store: "memory".into(),
            store_timeout_ms: 2000,
            key_prefix: "deloop".into(),
            snapshot_every: 32,
            max_log_events: 1024,
            max_log_bytes: 64 << 20,
            cached_sessions: 4096,
        }
    }
}

/// A setting that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("setting {key}: {message}")]
pub struct SettingsError {
    /// The key, as written in `deloop.toml` (`server.listen`, …).
    pub key: &'static str,
    /// What is wrong and what to do.
    pub message: String,
}

impl SessionSettings {
    /// True when sessions live in Valkey/Redis.
    pub fn shared_store(&self) -> bool {
        self.store.starts_with("redis://") || self.store.starts_with("rediss://")
    }

    fn validate(&self, max_body_bytes: u64) -> Result<(), SettingsError> {
        if self.store != "memory" && !self.shared_store() {
            return Err(SettingsError {
                key: "server.sessions.store",
                message: "is not `memory` or a redis:// or rediss:// URL".into(),
            });
        }
        let within = |key: &'static str, v: u64, lo: u64, hi: u64| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(SettingsError {
                    key,
                    message: format!("{v} is out of range: use {lo} to {hi}"),
                })
            }
        };
        within(
            "server.sessions.store_timeout_ms",
            self.store_timeout_ms,
            1,
            60_000,
        )?;
        within(
            "server.sessions.snapshot_every",
            self.snapshot_every,
            1,
            1024,
        )?;
        within(
            "server.sessions.max_log_events",
            self.max_log_events,
            self.snapshot_every,
            100_000,
        )?;
        within(
            "server.sessions.max_log_bytes",
            self.max_log_bytes,
            (1 << 20).max(max_body_bytes),
            1 << 30,
        )?;
        within(
            "server.sessions.cached_sessions",
            self.cached_sessions as u64,
            1,
            1_000_000,
        )?;
        if self.key_prefix.is_empty() || self.key_prefix.contains(['{', '}']) {
            return Err(SettingsError {
                key: "server.sessions.key_prefix",
                message: "must be non-empty, without `{` or `}` (they mark the hash tag)".into(),
            });
        }
        Ok(())
    }
}

impl ServerSettings {
    /// Applies the environment variables named in the field docs.
    pub fn apply_env(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<(), SettingsError> {
        if let Some(v) = get("DELOOP_LISTEN") {
            self.listen = v;
        }
        if let Some(v) = get("DELOOP_CORS_ORIGINS") {
            self.cors_origins = v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
        }
        if let Some(v) = get("DELOOP_MCP_ALLOWED_HOSTS") {
            self.mcp_allowed_hosts = v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
        }
        if let Some(v) = get("DELOOP_API_KEYS_FILE") {
            self.api_keys_file = Some(PathBuf::from(v));
        }
        if let Some(v) = get("DELOOP_LOG_FORMAT") {
            self.log_format = v;
        }
        if let Some(v) = get("DELOOP_LOOP_PROFILE") {
            self.sessions.profile = Some(v);
        }
        if let Some(v) = get("DELOOP_LOOP_CONFIG") {
            self.sessions.loop_config = Some(PathBuf::from(v));
        }
        if let Some(v) = get("DELOOP_SESSION_STORE") {
            self.sessions.store = v;
        }
        self.validate()
    }

    /// Checks values that serde cannot.
    pub fn validate(&self) -> Result<(), SettingsError> {
        self.listen_addr()?;
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
        positive("server.max_body_bytes", self.max_body_bytes as u64)?;
        positive("server.request_timeout_secs", self.request_timeout_secs)?;
        positive(
            "server.stream_idle_timeout_secs",
            self.stream_idle_timeout_secs,
        )?;
        positive("server.concurrency_limit", self.concurrency_limit as u64)?;
        positive(
            "server.sessions.max_sessions",
            self.sessions.max_sessions as u64,
        )?;
        positive("server.sessions.idle_ttl_secs", self.sessions.idle_ttl_secs)?;
        positive(
            "server.sessions.max_open_calls",
            self.sessions.max_open_calls as u64,
        )?;
        if !(64 << 10..=1 << 30).contains(&self.console_ring_bytes) {
            return Err(SettingsError {
                key: "server.console_ring_bytes",
                message: format!(
                    "{} is not between 65536 (64 KiB) and 1073741824 (1 GiB)",
                    self.console_ring_bytes
                ),
            });
        }
        self.sessions.validate(self.max_body_bytes as u64)?;
        self.connections
            .validate(crate::connections::Table::Server)?;
        if self.mcp_allowed_hosts.is_empty() {
            return Err(SettingsError {
                key: "server.mcp_allowed_hosts",
                message: "is empty: list the host names clients use to reach /mcp, or `*` for any"
                    .into(),
            });
        }
        if !matches!(self.log_format.as_str(), "text" | "json") {
            return Err(SettingsError {
                key: "server.log_format",
                message: format!("{:?} is not `text` or `json`", self.log_format),
            });
        }
        Ok(())
    }

    /// The listen address, parsed.
    pub fn listen_addr(&self) -> Result<SocketAddr, SettingsError> {
        self.listen.parse().map_err(|e| SettingsError {
            key: "server.listen",
            message: format!(
                "{:?} is not an address like 127.0.0.1:8080 ({e})",
                self.listen
            ),
        })
    }

    /// [`ServerSettings::request_timeout_secs`] as a duration.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout_secs)
    }

    /// [`ServerSettings::stream_idle_timeout_secs`] as a duration.
    pub fn stream_idle_timeout(&self) -> Duration {
        Duration::from_secs(self.stream_idle_timeout_secs)
    }
}
