//! Sessions in this process: the default store, needing nothing else.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use hashlink::LruCache;

use crate::limits::{check_call, check_result, check_scope, check_session};
use crate::{
    CallInput, GuardSettings, ResultInput, ResultOut, ScopeInput, Session, SessionError,
    SessionEvents, SessionPage, SessionStore, SessionSummary, VerdictOut, MAX_CURSOR_BYTES,
    MAX_LIST_LIMIT,
};

/// One lock's share of the sessions, in LRU order, and their estimated bytes.
struct ShardState {
    map: LruCache<Arc<str>, Session>,
    bytes: usize,
}

type Shard = Mutex<ShardState>;

/// A session's size is measured again after this many events (between
/// measurements each event adds at most its capped fields).
const MEASURE_EVERY: u32 = 8;

/// Bytes a session is counted for besides its saved state (map entry, LRU
/// links, allocation headers).
const SESSION_OVERHEAD: usize = 512;

/// The default byte budget of all sessions (`server.sessions.max_bytes`).
pub const DEFAULT_MAX_BYTES: usize = 1 << 30;

/// Sessions in this process: `shards` LRU maps behind their own locks, each
/// holding at most its share of `max_sessions` and of the byte budget
/// (`max_bytes`, sessions measured by their saved size); a session idle for
/// `idle_ttl` is forgotten. At either cap the least recently used sessions
/// are evicted; a session that alone outgrows its shard's share of the
/// budget is forgotten and its event answered with a store error (503).
pub struct MemoryStore {
    shards: Box<[Shard]>,
    shard_budget: usize,
    hasher: std::collections::hash_map::RandomState,
    guard: GuardSettings,
    idle_ttl: Duration,
    events: Arc<dyn SessionEvents>,
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
        events: Arc<dyn SessionEvents>,
    ) -> Self {
        let shards = SHARDS.min(max_sessions.max(1));
        let per_shard = max_sessions.max(1).div_ceil(shards);
        MemoryStore {
            shards: (0..shards)
                .map(|_| {
                    Mutex::new(ShardState {
                        map: LruCache::new(per_shard),
                        bytes: 0,
                    })
                })
                .collect(),
            shard_budget: DEFAULT_MAX_BYTES.div_ceil(shards),
            hasher: Default::default(),
            guard,
            idle_ttl,
            events,
            count: AtomicUsize::new(0),
        }
    }

    /// Sets the byte budget of all sessions (at least 1 MiB).
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.shard_budget = max_bytes.max(1 << 20).div_ceil(self.shards.len());
        self
    }

    /// Estimated bytes of all sessions.
    pub fn bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).bytes)
            .sum()
    }

    fn add_sessions(&self, delta: isize) {
        let n = if delta >= 0 {
            self.count.fetch_add(delta as usize, Ordering::Relaxed) + delta as usize
        } else {
            self.count
                .fetch_sub(delta.unsigned_abs(), Ordering::Relaxed)
                - delta.unsigned_abs()
        };
        self.events.sessions(n as i64);
    }

    fn shard(&self, session: &str) -> &Shard {
        let i = self.hasher.hash_one(session) as usize % self.shards.len();
        &self.shards[i]
    }

    /// Runs `f` on the session, creating it when new, then keeps the shard
    /// within its caps: least recently used sessions are evicted at the
    /// count cap and the byte budget, and a session that alone outgrows the
    /// budget is forgotten (a store error: the client may retry later).
    fn with<R>(&self, session: &str, f: impl FnOnce(&mut Session) -> R) -> Result<R, SessionError> {
        let shard = self.shard(session);
        // A poisoned lock only means another request panicked mid-update;
        // the map itself stays consistent, so keep serving.
        let mut st = shard.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        self.expire_locked(&mut st, now);
        if st.map.get_mut(session).is_none() {
            if st.map.len() >= st.map.capacity() {
                self.evict_lru(&mut st);
            }
            let fresh = Session::new(&self.guard);
            st.bytes += fresh.bytes;
            st.map.insert(Arc::from(session), fresh);
            self.add_sessions(1);
        }
        let (out, grew) = match st.map.get_mut(session) {
            Some(s) => {
                s.last_used = now;
                s.events += 1;
                let out = f(s);
                let before = s.bytes;
                s.remeasure(session.len() + SESSION_OVERHEAD, MEASURE_EVERY);
                (out, s.bytes as isize - before as isize)
            }
            None => {
                return Err(SessionError::Store(
                    "the in-process store lost a session it had just made".into(),
                ))
            }
        };
        st.bytes = st.bytes.saturating_add_signed(grew);
        // The session just used is the most recent: evict from the other end.
        while st.bytes > self.shard_budget && st.map.len() > 1 {
            self.evict_lru(&mut st);
        }
        if st.bytes > self.shard_budget {
            let size = st.bytes;
            st.map.remove(session);
            st.bytes = 0;
            self.events.evicted();
            self.add_sessions(-1);
            return Err(SessionError::Store(format!(
                "session {session:?} grew to about {size} bytes, over its share ({} bytes) of \
                 server.sessions.max_bytes; it was forgotten",
                self.shard_budget
            )));
        }
        Ok(out)
    }

    fn evict_lru(&self, st: &mut ShardState) {
        if let Some((_, s)) = st.map.remove_lru() {
            st.bytes = st.bytes.saturating_sub(s.bytes);
            self.events.evicted();
            self.add_sessions(-1);
        }
    }

    /// Forgets sessions idle past the TTL at the LRU end of one shard.
    fn expire_locked(&self, st: &mut ShardState, now: Instant) -> u64 {
        let mut n = 0;
        while let Some((_, s)) = st.map.iter().next() {
            if now.duration_since(s.last_used) < self.idle_ttl {
                break;
            }
            if let Some((_, s)) = st.map.remove_lru() {
                st.bytes = st.bytes.saturating_sub(s.bytes);
            }
            n += 1;
        }
        if n > 0 {
            self.events.expired(n);
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
            let mut st = shard.lock().unwrap_or_else(|p| p.into_inner());
            n += self.expire_locked(&mut st, now);
        }
        n
    }
}

impl MemoryStore {
    fn call_now(&self, session: &str, call: &CallInput) -> Result<VerdictOut, SessionError> {
        check_session(session)?;
        check_call(call)?;
        let out = self.with(session, |s| s.call(call))?;
        self.events.verdict(&out.level, out.detector.as_deref());
        Ok(out)
    }

    fn result_now(&self, session: &str, result: &ResultInput) -> Result<ResultOut, SessionError> {
        check_session(session)?;
        check_result(result)?;
        let out = self.with(session, |s| s.result(result))??;
        if let Some(v) = &out.verdict {
            self.events.verdict(&v.level, v.detector.as_deref());
        }
        Ok(out)
    }

    fn compaction_now(&self, session: &str, scope: &ScopeInput) -> Result<(), SessionError> {
        check_session(session)?;
        check_scope(scope)?;
        self.with(session, |s| s.compaction(scope))
    }

    /// The page of sessions named after `cursor` (the last name of the
    /// page before, in hex, so that it is safe in a URL), in name order.
    /// Each shard is locked in turn and only the `limit + 1` smallest
    /// names after the cursor are kept, so a page costs one pass over the
    /// sessions but memory for `limit` of them only.
    fn list_now(&self, cursor: Option<&str>, limit: usize) -> Result<SessionPage, SessionError> {
        let cursor = cursor.map(unhex).transpose()?;
        let cursor = cursor.as_deref();
        let limit = limit.clamp(1, MAX_LIST_LIMIT);
        let now = Instant::now();
        let mut kept: std::collections::BTreeMap<Arc<str>, SessionSummary> = Default::default();
        for shard in self.shards.iter() {
            let st = shard.lock().unwrap_or_else(|p| p.into_inner());
            for (name, s) in st.map.iter() {
                if cursor.is_some_and(|c| &**name <= c) {
                    continue;
                }
                let idle = now.saturating_duration_since(s.last_used);
                if idle >= self.idle_ttl {
                    continue;
                }
                if kept.len() > limit {
                    match kept.last_key_value() {
                        Some((last, _)) if name < last => {
                            kept.pop_last();
                        }
                        _ => continue,
                    }
                }
                kept.insert(
                    name.clone(),
                    SessionSummary {
                        session: name.to_string(),
                        events: s.events,
                        idle_ms: u64::try_from(idle.as_millis()).unwrap_or(u64::MAX),
                    },
                );
            }
        }
        let more = kept.len() > limit;
        if more {
            kept.pop_last();
        }
        let next = more
            .then(|| kept.last_key_value().map(|(k, _)| hex(k)))
            .flatten();
        Ok(SessionPage {
            sessions: kept.into_values().collect(),
            next,
        })
    }

    fn forget_now(&self, session: &str) -> Result<bool, SessionError> {
        check_session(session)?;
        let removed = {
            let mut st = self
                .shard(session)
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let removed = st.map.remove(session);
            if let Some(s) = &removed {
                st.bytes = st.bytes.saturating_sub(s.bytes);
            }
            removed.is_some()
        };
        if removed {
            self.add_sessions(-1);
        }
        Ok(removed)
    }
}

fn hex(name: &str) -> String {
    name.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The session name a cursor holds; anything but [`hex`]'s output is
/// refused.
fn unhex(cursor: &str) -> Result<String, SessionError> {
    let bad = || {
        SessionError::Invalid(format!(
            "the cursor {:?} is not one this store made; pass a page's `next`",
            cursor.chars().take(64).collect::<String>()
        ))
    };
    if cursor.len() > MAX_CURSOR_BYTES || cursor.len() % 2 == 1 {
        return Err(bad());
    }
    let bytes = (0..cursor.len())
        .step_by(2)
        .map(|i| {
            cursor
                .get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(bad)?;
    String::from_utf8(bytes).map_err(|_| bad())
}

/// The in-process store answers at once: each method is a ready future.
impl SessionStore for MemoryStore {
    fn call(
        &self,
        session: &str,
        call: CallInput,
    ) -> BoxFuture<'_, Result<VerdictOut, SessionError>> {
        Box::pin(std::future::ready(self.call_now(session, &call)))
    }

    fn result(
        &self,
        session: &str,
        result: ResultInput,
    ) -> BoxFuture<'_, Result<ResultOut, SessionError>> {
        Box::pin(std::future::ready(self.result_now(session, &result)))
    }

    fn compaction(
        &self,
        session: &str,
        scope: ScopeInput,
    ) -> BoxFuture<'_, Result<(), SessionError>> {
        Box::pin(std::future::ready(self.compaction_now(session, &scope)))
    }

    fn forget(&self, session: &str) -> BoxFuture<'_, Result<bool, SessionError>> {
        Box::pin(std::future::ready(self.forget_now(session)))
    }

    fn list(
        &self,
        cursor: Option<&str>,
        limit: usize,
    ) -> BoxFuture<'_, Result<SessionPage, SessionError>> {
        Box::pin(std::future::ready(self.list_now(cursor, limit)))
    }

    fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    fn describe(&self) -> String {
        "memory (this process)".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deloop_core::loops::{LoopConfig, Profile};
    use serde_json::{json, Value};

    #[derive(Default)]
    struct Counts {
        evicted: AtomicUsize,
    }

    impl SessionEvents for Counts {
        fn evicted(&self) {
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn store(max: usize, ttl: Duration) -> MemoryStore {
        store_counting(max, ttl, Arc::new(Counts::default()))
    }

    fn store_counting(max: usize, ttl: Duration, counts: Arc<Counts>) -> MemoryStore {
        MemoryStore::new(
            GuardSettings {
                profile: Profile::OpenClaw,
                config: LoopConfig::default(),
                max_open_calls: 64,
            },
            max,
            ttl,
            counts,
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
        let counts = Arc::new(Counts::default());
        let s = store_counting(1, Duration::from_secs(60), counts.clone());
        block_on(s.call("a", call("read", json!({}), None))).unwrap();
        block_on(s.call("b", call("read", json!({}), None))).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(counts.evicted.load(Ordering::Relaxed), 1);
        // "a" was evicted: it starts again from call 0.
        assert_eq!(
            block_on(s.call("a", call("read", json!({}), None)))
                .unwrap()
                .index,
            0
        );
    }

    #[test]
    fn listing_pages_in_name_order_and_holds_at_most_limit() {
        let s = store(1000, Duration::from_secs(60));
        for i in (0..130).rev() {
            block_on(s.call(&format!("s{i:03}"), call("read", json!({}), None))).unwrap();
        }
        block_on(s.call("s000", call("read", json!({"b": 1}), None))).unwrap();
        let (mut names, mut cursor) = (Vec::new(), None);
        loop {
            let page = block_on(s.list(cursor.as_deref(), 40)).unwrap();
            assert!(page.sessions.len() <= 40);
            names.extend(page.sessions.iter().map(|x| (x.session.clone(), x.events)));
            match page.next {
                Some(n) => cursor = Some(n),
                None => break,
            }
        }
        let want: Vec<_> = (0..130)
            .map(|i| (format!("s{i:03}"), if i == 0 { 2 } else { 1 }))
            .collect();
        assert_eq!(names, want);
        // Limits are clamped: 0 asks for one, a huge one for the cap.
        assert_eq!(block_on(s.list(None, 0)).unwrap().sessions.len(), 1);
        assert_eq!(
            block_on(s.list(None, usize::MAX)).unwrap().sessions.len(),
            130
        );
    }

    #[test]
    fn idle_sessions_are_not_listed() {
        let s = store(10, Duration::from_millis(1));
        block_on(s.call("a", call("read", json!({}), None))).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let page = block_on(s.list(None, 10)).unwrap();
        assert_eq!((page.sessions.len(), page.next), (0, None));
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

    #[test]
    fn oversized_fields_are_refused_before_they_reach_a_session() {
        let s = store(10, Duration::from_secs(60));
        let mut c = call("read", json!({}), None);
        c.id = Some("x".repeat(1 << 20));
        let e = block_on(s.call("a", c)).unwrap_err();
        assert!(matches!(e, SessionError::Invalid(_)), "{e:?}");
        assert!(s.is_empty() && s.bytes() == 0);
        let e = block_on(s.call(&"n".repeat(300), call("read", json!({}), None))).unwrap_err();
        assert!(
            e.to_string().contains("session names are 1 to 256 bytes"),
            "{e}"
        );
    }

    #[test]
    fn the_byte_budget_evicts_least_recently_used_sessions() {
        // 1 MiB over 64 shards: 16 KiB per shard.
        let counts = Arc::new(Counts::default());
        let s = store_counting(100_000, Duration::from_secs(60), counts.clone())
            .with_max_bytes(1 << 20);
        for i in 0..2000 {
            for j in 0..5 {
                let id = format!("{i}-{j}-{}", "i".repeat(200));
                block_on(s.call(&format!("s{i}"), call("read", json!({"p": j}), Some(&id))))
                    .unwrap();
            }
            assert!(
                s.bytes() <= 1 << 20,
                "{} bytes after {i} sessions",
                s.bytes()
            );
        }
        assert!(counts.evicted.load(Ordering::Relaxed) > 0);
        assert!(s.len() < 2000, "{} sessions kept", s.len());
    }

    #[test]
    fn a_session_outgrowing_its_share_is_forgotten_with_a_store_error() {
        let s = store(100_000, Duration::from_secs(60)).with_max_bytes(1 << 20);
        let mut failed = None;
        for i in 0..1024 {
            // Calls that never get a result stay open: the session grows.
            let id = format!("{i}-{}", "i".repeat(250));
            match block_on(s.call("big", call("read", json!({"p": i}), Some(&id)))) {
                Ok(_) => {}
                Err(e) => {
                    failed = Some((i, e));
                    break;
                }
            }
        }
        let (i, e) = failed.expect("the session outgrew 16 KiB");
        assert!(matches!(e, SessionError::Store(_)), "{e:?}");
        assert!(e.to_string().contains("server.sessions.max_bytes"), "{e}");
        assert!(i > 10, "failed at call {i}");
        assert!(s.is_empty() && s.bytes() == 0);
    }
}
