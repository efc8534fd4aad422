//! Live-agent sessions: one agent conversation's tool-call history, judged
//! call by call exactly as `deloop check` replays a transcript.
//!
//! A session is OpenClaw's session: one history window per agent, with run
//! ids filtering inside it. The [`SessionStore`] trait is the seam between
//! the handlers and where session state lives; [`MemoryStore`] keeps it in
//! this process (sharded LRU maps, an idle TTL and a cap). A store backed
//! by Redis implements the same trait without touching the handlers.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deloop_core::loops::replay::{CallVerdict, Replay, ReplayError};
use deloop_core::loops::{Guard, LoopConfig, OutcomeBody, Profile, Scope, ToolCall, Verdict};
use futures_util::future::BoxFuture;
use hashlink::LruCache;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::metrics::Metrics;

/// A call to judge before the tool runs.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
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
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
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
    #[serde(default, deserialize_with = "present")]
    pub result: Option<Value>,
    /// The error text (one of `result` and `error`).
    pub error: Option<String>,
}

/// A field that is present, even as `null`, is `Some`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// Where a compaction happened.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScopeInput {
    /// The agent (absent means `main`).
    pub agent: Option<String>,
    /// The run.
    pub run: Option<String>,
}

/// The verdict on one call, as the session API answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct VerdictOut {
    /// 0-based index of the call in its session.
    pub index: usize,
    /// The call id (the one deloop assigned when the call had none).
    pub id: String,
    /// `ok`, `warning` or `critical` (critical: do not run the call).
    #[schema(value_type = deloop_core::loops::Level)]
    pub level: String,
    /// The detector that fired, or null.
    #[schema(value_type = Option<deloop_core::loops::Detector>, required)]
    pub detector: Option<String>,
    /// The detector's count, or null.
    #[schema(required)]
    pub count: Option<u32>,
    /// A message for the model or the operator (empty when ok).
    pub message: String,
    /// `AGENT::<agent>::<operation>::<context>::<result-hash>` when not ok.
    #[schema(required)]
    pub fingerprint: Option<String>,
    /// The run should end now.
    pub terminate_run: bool,
}

impl VerdictOut {
    fn new(index: usize, id: &str, v: &Verdict) -> Self {
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ResultOut {
    /// The index of the call the result attached to (null when it was
    /// ignored: a late result of a call already settled as it stood).
    #[schema(required)]
    pub index: Option<usize>,
    /// The call's verdict when the result replaced it (the post-compaction
    /// guard or the strict protocol ending the run), else null.
    #[schema(required)]
    pub verdict: Option<VerdictOut>,
}

/// Why a session event was refused.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The event does not fit the session (unknown id, missing field).
    #[error("{0}")]
    BadEvent(String),
    /// The store failed (a remote store's connection, …).
    #[error("session store: {0}")]
    Store(String),
}

/// The store of session histories.
///
/// Each method applies one event to the named session (created on first
/// use) and answers as the pure guard decided. Implementations must apply
/// events of one session in order.
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
    /// Sessions held now.
    fn len(&self) -> usize;
    /// True when no session is held.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
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

/// One session's state: the replay and the table that finds a call by
/// tool and arguments for results sent without an id.
#[derive(Debug)]
pub struct Session {
    replay: Replay,
    by_call: HashMap<u64, VecDeque<String>>,
    order: VecDeque<u64>,
    next_id: u64,
    max_open: usize,
    last_used: Instant,
}

fn call_key(tool: &str, args: &Value, agent: Option<&str>, run: Option<&str>) -> u64 {
    let digest = deloop_core::loops::hashing::call_digest(tool, args);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    digest.to_hex().hash(&mut h);
    agent.unwrap_or("main").hash(&mut h);
    run.map(str::trim).unwrap_or("").hash(&mut h);
    h.finish()
}

impl Session {
    /// A new session judged by `guard`.
    pub fn new(guard: &GuardSettings) -> Self {
        Session {
            replay: Replay::streaming(Guard::new(guard.profile, guard.config.clone()))
                .with_max_open(guard.max_open_calls),
            by_call: HashMap::new(),
            order: VecDeque::new(),
            next_id: 0,
            max_open: guard.max_open_calls.max(1),
            last_used: Instant::now(),
        }
    }

    /// Drops verdicts that can no longer change: a live session reports
    /// each verdict when its event arrives, so nothing waits to be read.
    fn drain(&mut self) {
        while self.replay.pop_settled().is_some() {}
    }

    /// Judges and records a call.
    pub fn call(&mut self, c: &CallInput) -> VerdictOut {
        let id = match &c.id {
            Some(id) => id.clone(),
            None => {
                self.next_id += 1;
                format!("deloop-{}", self.next_id)
            }
        };
        let mut call = ToolCall::new(&c.tool, &c.args).id(&id);
        call.agent_id = c.agent.as_deref();
        call.run_id = c.run.as_deref();
        let index = self.replay.push_call(&call);
        let out = match self.replay.verdict(index) {
            Some(cv) => VerdictOut::new(index, &id, &cv.verdict),
            None => VerdictOut::new(index, &id, &Verdict::ok()),
        };
        let key = call_key(&c.tool, &c.args, c.agent.as_deref(), c.run.as_deref());
        self.by_call.entry(key).or_default().push_back(id);
        self.order.push_back(key);
        // The lookup table holds at most `max_open` ids (the replay forgets
        // older waiting calls anyway).
        while self.order.len() > self.max_open {
            if let Some(old) = self.order.pop_front() {
                if let Some(q) = self.by_call.get_mut(&old) {
                    q.pop_front();
                    if q.is_empty() {
                        self.by_call.remove(&old);
                    }
                }
            }
        }
        self.drain();
        out
    }

    /// Attaches a result to its call.
    pub fn result(&mut self, r: &ResultInput) -> Result<ResultOut, SessionError> {
        let body = match (&r.result, &r.error) {
            (Some(v), None) => OutcomeBody::Result(v),
            (None, Some(e)) => OutcomeBody::Error(e),
            (Some(_), Some(_)) => {
                return Err(SessionError::BadEvent(
                    "send one of `result` and `error`, not both".into(),
                ))
            }
            (None, None) => {
                return Err(SessionError::BadEvent(
                    "missing field `result` (or `error`)".into(),
                ))
            }
        };
        let id = match (&r.id, &r.tool, &r.args) {
            (Some(id), _, _) => id.clone(),
            (None, Some(tool), Some(args)) => {
                let key = call_key(tool, args, r.agent.as_deref(), r.run.as_deref());
                let found = self.by_call.get_mut(&key).and_then(VecDeque::pop_front);
                if self.by_call.get(&key).is_some_and(VecDeque::is_empty) {
                    self.by_call.remove(&key);
                }
                found.ok_or_else(|| {
                    SessionError::BadEvent(format!(
                        "no call of tool {tool:?} with these arguments waits for a result in this \
                         session (send the call first, or name it by `id`)"
                    ))
                })?
            }
            (None, _, _) => {
                return Err(SessionError::BadEvent(
                    "a result without `id` needs `tool` and `args` to find its call".into(),
                ))
            }
        };
        let index = self
            .replay
            .push_result_indexed(Some(&id), body)
            .map_err(|e| match e {
                ReplayError::UnknownId(_) => SessionError::BadEvent(format!(
                    "no call with id {id:?} waits for a result in this session"
                )),
                other => SessionError::BadEvent(other.to_string()),
            })?;
        if r.id.is_some() {
            self.forget_id(&id);
        }
        let verdict = index.and_then(|i| {
            self.replay
                .verdict(i)
                .filter(|cv: &&CallVerdict| cv.from_outcome)
                .map(|cv| VerdictOut::new(i, &id, &cv.verdict))
        });
        self.drain();
        Ok(ResultOut { index, verdict })
    }

    /// Removes `id` from the tool-and-arguments table after a result by id.
    fn forget_id(&mut self, id: &str) {
        let mut emptied = None;
        for (k, q) in self.by_call.iter_mut() {
            if let Some(p) = q.iter().position(|x| x == id) {
                q.remove(p);
                if q.is_empty() {
                    emptied = Some(*k);
                }
                break;
            }
        }
        if let Some(k) = emptied {
            self.by_call.remove(&k);
        }
    }

    /// Records a compaction.
    pub fn compaction(&mut self, s: &ScopeInput) {
        self.replay.push_compaction(&Scope {
            agent_id: s.agent.as_deref(),
            run_id: s.run.as_deref(),
        });
    }
}

/// One lock's share of the sessions, in LRU order.
type Shard = Mutex<LruCache<Arc<str>, Session>>;

/// Sessions in this process: `shards` LRU maps behind their own locks, each
/// holding at most its share of `max_sessions`; a session idle for
/// `idle_ttl` is forgotten.
pub struct MemoryStore {
    shards: Box<[Shard]>,
    hasher: std::collections::hash_map::RandomState,
    guard: GuardSettings,
    idle_ttl: Duration,
    metrics: Arc<Metrics>,
    /// Sessions held, kept beside the shards so reading it takes no lock.
    count: AtomicUsize,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("shards", &self.shards.len())
            .field("idle_ttl", &self.idle_ttl)
            .finish_non_exhaustive()
    }
}

const SHARDS: usize = 64;

impl MemoryStore {
    /// A store holding at most `max_sessions` sessions.
    pub fn new(
        guard: GuardSettings,
        max_sessions: usize,
        idle_ttl: Duration,
        metrics: Arc<Metrics>,
    ) -> Self {
        let shards = SHARDS.min(max_sessions.max(1));
        let per_shard = max_sessions.max(1).div_ceil(shards);
        MemoryStore {
            shards: (0..shards)
                .map(|_| Mutex::new(LruCache::new(per_shard)))
                .collect(),
            hasher: Default::default(),
            guard,
            idle_ttl,
            metrics,
            count: AtomicUsize::new(0),
        }
    }

    fn add_sessions(&self, delta: isize) {
        let n = if delta >= 0 {
            self.count.fetch_add(delta as usize, Ordering::Relaxed) + delta as usize
        } else {
            self.count
                .fetch_sub(delta.unsigned_abs(), Ordering::Relaxed)
                - delta.unsigned_abs()
        };
        self.metrics.set_sessions(n as i64);
    }

    fn shard(&self, session: &str) -> &Shard {
        let i = self.hasher.hash_one(session) as usize % self.shards.len();
        &self.shards[i]
    }

    /// Runs `f` on the session, creating it when new (evicting the least
    /// recently used one of its shard at the cap).
    fn with<R>(&self, session: &str, f: impl FnOnce(&mut Session) -> R) -> R {
        let shard = self.shard(session);
        // A poisoned lock only means another request panicked mid-update;
        // the map itself stays consistent, so keep serving.
        let mut map = shard.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        self.expire_locked(&mut map, now);
        if map.get_mut(session).is_none() {
            if map.len() >= map.capacity() && map.remove_lru().is_some() {
                self.metrics.session_evicted();
                self.add_sessions(-1);
            }
            map.insert(Arc::from(session), Session::new(&self.guard));
            self.add_sessions(1);
        }
        let s = map.get_mut(session).expect("inserted above");
        s.last_used = now;
        f(s)
    }

    /// Forgets sessions idle past the TTL at the LRU end of one shard.
    fn expire_locked(&self, map: &mut LruCache<Arc<str>, Session>, now: Instant) -> u64 {
        let mut n = 0;
        while let Some((_, s)) = map.iter().next() {
            if now.duration_since(s.last_used) < self.idle_ttl {
                break;
            }
            map.remove_lru();
            n += 1;
        }
        if n > 0 {
            self.metrics.sessions_expired(n);
            self.add_sessions(-(n as isize));
        }
        n
    }

    /// Forgets every session idle past the TTL (the server runs this
    /// periodically, so idle shards free their memory too).
    pub fn sweep(&self) -> u64 {
        let now = Instant::now();
        let mut n = 0;
        for shard in self.shards.iter() {
            let mut map = shard.lock().unwrap_or_else(|p| p.into_inner());
            n += self.expire_locked(&mut map, now);
        }
        n
    }
}

impl SessionStore for MemoryStore {
    fn call(
        &self,
        session: &str,
        call: CallInput,
    ) -> BoxFuture<'_, Result<VerdictOut, SessionError>> {
        let out = self.with(session, |s| s.call(&call));
        self.metrics.verdict(&out.level, out.detector.as_deref());
        Box::pin(std::future::ready(Ok(out)))
    }

    fn result(
        &self,
        session: &str,
        result: ResultInput,
    ) -> BoxFuture<'_, Result<ResultOut, SessionError>> {
        let out = self.with(session, |s| s.result(&result));
        if let Ok(ResultOut {
            verdict: Some(v), ..
        }) = &out
        {
            self.metrics.verdict(&v.level, v.detector.as_deref());
        }
        Box::pin(std::future::ready(out))
    }

    fn compaction(
        &self,
        session: &str,
        scope: ScopeInput,
    ) -> BoxFuture<'_, Result<(), SessionError>> {
        self.with(session, |s| s.compaction(&scope));
        Box::pin(std::future::ready(Ok(())))
    }

    fn forget(&self, session: &str) -> BoxFuture<'_, Result<bool, SessionError>> {
        let existed = {
            let mut map = self
                .shard(session)
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            map.remove(session).is_some()
        };
        if existed {
            self.add_sessions(-1);
        }
        Box::pin(std::future::ready(Ok(existed)))
    }

    fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn store(max: usize, ttl: Duration) -> MemoryStore {
        MemoryStore::new(
            GuardSettings {
                profile: Profile::OpenClaw,
                config: LoopConfig::default(),
                max_open_calls: 64,
            },
            max,
            ttl,
            Arc::new(Metrics::new()),
        )
    }

    fn call(tool: &str, args: Value, id: Option<&str>) -> CallInput {
        CallInput {
            tool: tool.into(),
            args,
            id: id.map(String::from),
            agent: None,
            run: None,
        }
    }

    fn block_on<T>(f: BoxFuture<'_, T>) -> T {
        futures_util::FutureExt::now_or_never(f).expect("memory store answers at once")
    }

    #[test]
    fn repeated_identical_calls_warn_then_go_critical() {
        let s = store(10, Duration::from_secs(60));
        let mut levels = Vec::new();
        for i in 0..21 {
            let id = format!("c{i}");
            let v = block_on(s.call("a", call("read", json!({"path": "/x"}), Some(&id)))).unwrap();
            levels.push(v.level.clone());
            let r = ResultInput {
                id: Some(id),
                tool: None,
                args: None,
                agent: None,
                run: None,
                result: Some(json!({"content": [{"type": "text", "text": "same"}]})),
                error: None,
            };
            block_on(s.result("a", r)).unwrap();
        }
        assert_eq!(levels[9], "ok");
        assert_eq!(levels[10], "warning");
        assert_eq!(levels[20], "critical");
    }

    #[test]
    fn result_without_id_finds_its_call_by_tool_and_args() {
        let s = store(10, Duration::from_secs(60));
        let v = block_on(s.call("a", call("read", json!({"path": "/x"}), None))).unwrap();
        assert_eq!(v.id, "deloop-1");
        let r = ResultInput {
            id: None,
            tool: Some("read".into()),
            args: Some(json!({"path": "/x"})),
            agent: None,
            run: None,
            result: Some(json!("ok")),
            error: None,
        };
        assert_eq!(block_on(s.result("a", r.clone())).unwrap().index, Some(0));
        // Nothing waits any more.
        let err = block_on(s.result("a", r)).unwrap_err();
        assert!(err.to_string().contains("waits for a result"), "{err}");
    }

    #[test]
    fn unknown_id_is_a_bad_event() {
        let s = store(10, Duration::from_secs(60));
        let r = ResultInput {
            id: Some("nope".into()),
            tool: None,
            args: None,
            agent: None,
            run: None,
            result: None,
            error: Some("boom".into()),
        };
        assert!(matches!(
            block_on(s.result("a", r)),
            Err(SessionError::BadEvent(_))
        ));
    }

    #[test]
    fn the_cap_evicts_the_least_recently_used_session() {
        let s = store(1, Duration::from_secs(60));
        block_on(s.call("a", call("read", json!({}), None))).unwrap();
        block_on(s.call("b", call("read", json!({}), None))).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s.metrics.evictions(), 1);
        // "a" was evicted: it starts again from call 0.
        assert_eq!(
            block_on(s.call("a", call("read", json!({}), None)))
                .unwrap()
                .index,
            0
        );
    }

    #[test]
    fn idle_sessions_expire() {
        let s = store(10, Duration::from_millis(1));
        block_on(s.call("a", call("read", json!({}), None))).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(s.sweep(), 1);
        assert!(s.is_empty());
    }

    #[test]
    fn forget_removes_the_session() {
        let s = store(10, Duration::from_secs(60));
        block_on(s.call("a", call("read", json!({}), None))).unwrap();
        assert!(block_on(s.forget("a")).unwrap());
        assert!(!block_on(s.forget("a")).unwrap());
    }
}
