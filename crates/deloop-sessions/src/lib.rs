//! Live-agent sessions: one agent conversation's tool-call history, judged
//! call by call exactly as `deloop check` replays a transcript.
//!
//! A session is OpenClaw's session: one history window per agent, with run
//! ids filtering inside it. [`SessionStore`] is the seam between the HTTP
//! and MCP handlers and where session state lives; every store runs the
//! same [`Session`] state machine, so every store gives the same verdicts:
//! * [`MemoryStore`] keeps sessions in this process (sharded LRU maps, an
//!   idle TTL and a cap): the default, needing nothing else;
//! * [`RedisStore`] keeps them in Valkey or Redis (single node or cluster),
//!   shared by any number of replicas. A server-side script appends each
//!   event to the session's log atomically and answers what the judge
//!   needs; the judging stays in Rust (see [`redis`]).
//!
//! ```
//! # futures_util::FutureExt::now_or_never(async {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use deloop_core::loops::{LoopConfig, Profile};
//! use deloop_sessions::{CallInput, GuardSettings, MemoryStore, SessionStore};
//!
//! let guard = GuardSettings { profile: Profile::OpenClaw, config: LoopConfig::default(), max_open_calls: 64 };
//! let store = MemoryStore::new(guard, 1000, Duration::from_secs(3600), Arc::new(()));
//! let call = CallInput { tool: "read".into(), args: serde_json::json!({"path": "/a"}), id: None, agent: None, run: None };
//! let v = store.call("agent-run-1", call).await.unwrap();
//! assert_eq!((v.index, v.level.as_str()), (0, "ok"));
//! # }).unwrap();
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod limits;
pub mod memory;
#[cfg(feature = "redis")]
pub mod redis;
pub mod session;

use deloop_core::loops::{LoopConfig, Profile, Verdict};
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use memory::MemoryStore;
#[cfg(feature = "redis")]
pub use redis::{RedisSettings, RedisStore};
pub use session::Session;

/// A call to judge before the tool runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CallInput {
    /// The tool's name.
    pub tool: String,
    /// Its arguments (any JSON; usually an object).
    #[serde(default)]
    pub args: Value,
    /// The call id its result will name; deloop assigns one when absent.
    pub id: Option<String>,
    /// The agent (absent means `main`).
    pub agent: Option<String>,
    /// The run: history is compared within a run.
    pub run: Option<String>,
}

/// A tool's result (or error), attached to its call.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ResultInput {
    /// The call id; without it, `tool` and `args` name the call (the oldest
    /// call with that tool and those arguments still waiting).
    pub id: Option<String>,
    /// The tool (required without `id`).
    pub tool: Option<String>,
    /// The arguments (required without `id`).
    pub args: Option<Value>,
    /// The agent of the call.
    pub agent: Option<String>,
    /// The run of the call.
    pub run: Option<String>,
    /// The result (one of `result` and `error`; `null` is a result).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub result: Option<Value>,
    /// The error text (one of `result` and `error`).
    pub error: Option<String>,
}

/// A field that is present, even as `null`, is `Some`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// Where a compaction happened.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ScopeInput {
    /// The agent (absent means `main`).
    pub agent: Option<String>,
    /// The run.
    pub run: Option<String>,
}

/// The verdict on one call, as the session API answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VerdictOut {
    /// 0-based index of the call in its session.
    pub index: usize,
    /// The call id (the one deloop assigned when the call had none).
    pub id: String,
    /// `ok`, `warning` or `critical` (critical: do not run the call).
    #[cfg_attr(feature = "openapi", schema(value_type = deloop_core::loops::Level))]
    pub level: String,
    /// The detector that fired, or null.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<deloop_core::loops::Detector>, required))]
    pub detector: Option<String>,
    /// The detector's count, or null.
    #[cfg_attr(feature = "openapi", schema(required))]
    pub count: Option<u32>,
    /// A message for the model or the operator (empty when ok).
    pub message: String,
    /// `AGENT::<agent>::<operation>::<context>::<result-hash>` when not ok.
    #[cfg_attr(feature = "openapi", schema(required))]
    pub fingerprint: Option<String>,
    /// The run should end now.
    pub terminate_run: bool,
}

impl VerdictOut {
    pub(crate) fn new(index: usize, id: &str, v: &Verdict) -> Self {
        VerdictOut {
            index,
            id: id.to_string(),
            level: v.level.as_str().to_string(),
            detector: v.detector.map(|d| d.as_str().to_string()),
            count: v.count,
            message: v.message.clone(),
            fingerprint: v.fingerprint.clone(),
            terminate_run: v.terminate_run,
        }
    }
}

/// What recording a result answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ResultOut {
    /// The index of the call the result attached to (null when it was
    /// ignored: a late result of a call already settled as it stood).
    #[cfg_attr(feature = "openapi", schema(required))]
    pub index: Option<usize>,
    /// The call's verdict when the result replaced it (the post-compaction
    /// guard or the strict protocol ending the run), else null.
    #[cfg_attr(feature = "openapi", schema(required))]
    pub verdict: Option<VerdictOut>,
}

/// Sessions a listing page holds at most, whatever `limit` asks.
pub const MAX_LIST_LIMIT: usize = 500;
/// Bytes a listing cursor takes at most (a longer one is refused).
pub const MAX_CURSOR_BYTES: usize = 600;

/// One session as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionSummary {
    /// The session's name.
    pub session: String,
    /// Events the session has recorded (calls, results, compactions).
    pub events: u64,
    /// Milliseconds since its last event.
    pub idle_ms: u64,
}

/// One page of the session listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionPage {
    /// The sessions of this page: at most the `limit` asked for (a shared
    /// store may answer a few more: its last `SCAN` step returns whole
    /// hash buckets), and possibly none while `next` is set.
    pub sessions: Vec<SessionSummary>,
    /// The cursor of the next page; null when the listing is complete.
    #[cfg_attr(feature = "openapi", schema(required))]
    pub next: Option<String>,
}

/// Why a session event was refused.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The event does not fit the session (unknown id, missing field).
    #[error("{0}")]
    BadEvent(String),
    /// The event or session name breaks a bound ([`limits`]).
    #[error("{0}")]
    Invalid(String),
    /// The store failed or did not answer in time (a remote store's
    /// connection, …): the client may retry later.
    #[error("session store: {0}")]
    Store(String),
}

/// The store of session histories.
///
/// Each method applies one event to the named session (created on first
/// use) and answers as the pure guard decided. Implementations apply the
/// events of one session in one order, and answer each event as
/// [`Session`] does after exactly the events before it in that order.
pub trait SessionStore: Send + Sync + 'static {
    /// Judges a call before it runs and records it.
    fn call(
        &self,
        session: &str,
        call: CallInput,
    ) -> BoxFuture<'_, Result<VerdictOut, SessionError>>;
    /// Attaches a result or error to its call.
    fn result(
        &self,
        session: &str,
        result: ResultInput,
    ) -> BoxFuture<'_, Result<ResultOut, SessionError>>;
    /// Records a compaction (arms the post-compaction guard).
    fn compaction(
        &self,
        session: &str,
        scope: ScopeInput,
    ) -> BoxFuture<'_, Result<(), SessionError>>;
    /// Forgets a session; true when it existed.
    fn forget(&self, session: &str) -> BoxFuture<'_, Result<bool, SessionError>>;
    /// One page of the live sessions: start with `cursor` `None`, then
    /// pass each page's `next` until it is `None`. A page holds at most
    /// `limit` sessions (clamped to 1..=[`MAX_LIST_LIMIT`]; Valkey/Redis
    /// may add the few keys of its last `SCAN` step's buckets); a page with
    /// fewer, even none, is not the end while `next` is set. Every session
    /// that lives through the whole listing is listed (a shared store may
    /// list it twice); the memory a page takes is bounded by `limit`,
    /// never by the number of sessions. A cursor this store did not make is
    /// [`SessionError::Invalid`].
    fn list(
        &self,
        cursor: Option<&str>,
        limit: usize,
    ) -> BoxFuture<'_, Result<SessionPage, SessionError>>;
    /// Sessions held now (by this process: a shared store counts the
    /// sessions it has cached here).
    fn len(&self) -> usize;
    /// True when no session is held.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `Ok` when the store can serve; the error names what is wrong (the
    /// store is unreachable, …). The in-process store is always ready.
    fn ready(&self) -> BoxFuture<'_, Result<(), SessionError>> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// What the store is, for logs and readiness messages (no secrets).
    fn describe(&self) -> String;
}

/// How sessions judge calls.
#[derive(Debug, Clone)]
pub struct GuardSettings {
    /// The loop profile.
    pub profile: Profile,
    /// OpenClaw's `tools.loopDetection` config, per-agent overrides included.
    pub config: LoopConfig,
    /// Calls per session that may wait for a result.
    pub max_open_calls: usize,
}

/// What a store reports as it works, for metrics. `()` reports nothing.
pub trait SessionEvents: Send + Sync + 'static {
    /// A verdict was answered (`level`, `detector`).
    fn verdict(&self, _level: &str, _detector: Option<&str>) {}
    /// Sessions held now.
    fn sessions(&self, _n: i64) {}
    /// A session was evicted at the cap.
    fn evicted(&self) {}
    /// `n` sessions expired after their idle TTL.
    fn expired(&self, _n: u64) {}
}

impl SessionEvents for () {}
