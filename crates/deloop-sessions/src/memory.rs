//! Sessions in this process: the default store, needing nothing else.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use hashlink::LruCache;

use crate::{
    CallInput, GuardSettings, ResultInput, ResultOut, ScopeInput, Session, SessionError,
    SessionEvents, SessionStore, VerdictOut,
};

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
                .map(|_| Mutex::new(LruCache::new(per_shard)))
                .collect(),
            hasher: Default::default(),
            guard,
            idle_ttl,
            events,
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
        self.events.sessions(n as i64);
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
                self.events.evicted();
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
        self.events.verdict(&out.level, out.detector.as_deref());
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
            self.events.verdict(&v.level, v.detector.as_deref());
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
