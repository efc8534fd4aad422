//! Sessions in Valkey or Redis (≥ 7; single node or cluster), shared by any
//! number of `deloop serve` replicas.
//!
//! How one event is judged:
//! 1. The replica locks its cached copy of the session (events of one
//!    session are handled one at a time per replica) and runs the
//!    [`EVENT`](scripts::EVENT) script with the event and the number of the
//!    last event its copy holds. The script appends the event to the
//!    session's log atomically, bumps the event number, refreshes the TTL,
//!    and answers the events the replica lacks (or, when its copy is too
//!    old or of an earlier session of the same name, the saved state and
//!    every event after it).
//! 2. The replica applies those events in order to its copy, with the same
//!    [`Session`] state machine as the in-process store: the verdict of the
//!    last one is the answer. Every replica therefore gives exactly the
//!    verdicts `deloop check` gives on the events in the order the store
//!    accepted them.
//! 3. Every `snapshot_every` events (or `snapshot_bytes` of log), the
//!    replica saves the session's state ([`SNAPSHOT`](scripts::SNAPSHOT))
//!    and the script drops the events it covers, so the log stays short.
//!
//! Bounds: every key has the idle TTL; a log holds at most
//! `max_log_events` events and `max_log_bytes` bytes (a full log is saved
//! and dropped before the event is tried again); a replica caches at most
//! `cached_sessions` sessions and `max_cached_bytes` of them (LRU; a copy
//! is only a cache, rebuilt from the store when needed). Every store
//! operation has a deadline
//! (`timeout`): past it the request fails with [`SessionError::Store`]
//! (503), never with a verdict computed on partial state.
//!
//! Listing ([`SessionStore::list`]) walks the meta keys with `SCAN … MATCH
//! <prefix>:{*}:m COUNT n` on the node, or on every primary of a cluster
//! in turn (see `listing`).

mod connection;
mod listing;
mod scripts;

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use hashlink::LruCache;
use redis::RedisError;
use sha2::Digest as _;

use crate::limits::{check_call, check_result, check_scope, check_session};
use crate::session::{Answer, Event};
use crate::{
    CallInput, GuardSettings, ResultInput, ResultOut, ScopeInput, Session, SessionError,
    SessionEvents, SessionPage, SessionStore, VerdictOut,
};
use connection::{redact, LazyConn};
use scripts::Scripts;

/// The saved-state format this build writes and reads (first byte).
/// postcard is not self-describing: any change to the guard's saved
/// records changes the format. 2: records carry `changes`, outcomes
/// `blank` (the `no_progress` detector).
const SNAPSHOT_FORMAT: u8 = 2;

/// How a [`RedisStore`] connects and bounds what it keeps.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// `redis://[user[:password]@]host:port[/db]` or `rediss://…` (TLS).
    pub url: String,
    /// The password, when not in the URL (`DELOOP_REDIS_PASSWORD`).
    pub password: Option<String>,
    /// Deadline of each store operation; past it the request answers 503.
    pub timeout: Duration,
    /// A session unused this long is forgotten (the keys' TTL).
    pub idle_ttl: Duration,
    /// Prefix of every key (`<prefix>:{<session hash>}:m` and `:l`).
    pub key_prefix: String,
    /// Events after which a replica saves the session's state.
    pub snapshot_every: u64,
    /// Log bytes after which a replica saves the session's state.
    pub snapshot_bytes: u64,
    /// Events a session's log holds at most.
    pub max_log_events: u64,
    /// Bytes a session's log holds at most (an event larger than this is refused).
    pub max_log_bytes: u64,
    /// Sessions each replica keeps a judged copy of (LRU).
    pub cached_sessions: usize,
    /// Estimated bytes of those copies (LRU past it).
    pub max_cached_bytes: usize,
}

impl RedisSettings {
    /// Settings with the defaults for everything but the URL.
    pub fn new(url: impl Into<String>) -> Self {
        RedisSettings {
            url: url.into(),
            password: None,
            timeout: Duration::from_millis(2000),
            idle_ttl: Duration::from_secs(3600),
            key_prefix: "deloop".into(),
            snapshot_every: 32,
            snapshot_bytes: 256 << 10,
            max_log_events: 1024,
            max_log_bytes: 64 << 20,
            cached_sessions: 4096,
            max_cached_bytes: 1 << 30,
        }
    }
}

/// A replica's judged copy of one session: its state after event `seq` of
/// the session's epoch `epoch`.
struct Cached {
    epoch: String,
    seq: u64,
    session: Option<Session>,
}

type Entry = Arc<tokio::sync::Mutex<Cached>>;

/// A cached copy and its estimated bytes (readable without its lock).
#[derive(Clone)]
struct Slot {
    entry: Entry,
    bytes: Arc<AtomicUsize>,
}

/// What the event and read scripts answer.
struct Reply {
    epoch: String,
    seq: u64,
    snapv: u64,
    from: u64,
    snap: Option<Vec<u8>>,
    bytes: u64,
    reset: bool,
    entries: Vec<Vec<u8>>,
}

type RawReply = (
    String,
    u64,
    u64,
    u64,
    Option<Vec<u8>>,
    u64,
    u8,
    Vec<Vec<u8>>,
);

impl From<RawReply> for Reply {
    fn from(r: RawReply) -> Self {
        Reply {
            epoch: r.0,
            seq: r.1,
            snapv: r.2,
            from: r.3,
            snap: r.4,
            bytes: r.5,
            reset: r.6 == 1,
            entries: r.7,
        }
    }
}

/// Sessions in Valkey/Redis. See the [module docs](self).
pub struct RedisStore {
    settings: RedisSettings,
    guard: GuardSettings,
    conn: LazyConn,
    scripts: Scripts,
    cache: Mutex<LruCache<String, Slot>>,
    /// Estimated bytes of the cached copies.
    cached_bytes: AtomicUsize,
    events: Arc<dyn SessionEvents>,
    described: String,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("store", &self.described)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// A store on `settings.url`. Nothing is connected yet: the first
    /// request (or [`SessionStore::ready`]) connects, so a server starts
    /// while the store is down. Fails only on a URL that cannot work.
    pub fn new(
        settings: RedisSettings,
        guard: GuardSettings,
        events: Arc<dyn SessionEvents>,
    ) -> Result<Self, SessionError> {
        let described = format!("Valkey/Redis at {}", redact(&settings.url));
        if !(settings.url.starts_with("redis://") || settings.url.starts_with("rediss://")) {
            return Err(SessionError::Store(format!(
                "{described}: the URL must start with redis:// or rediss://"
            )));
        }
        if settings.key_prefix.contains(['{', '}']) {
            return Err(SessionError::Store(
                "the key prefix must not contain `{` or `}` (they mark the hash tag)".into(),
            ));
        }
        let conn = LazyConn::new(
            settings.url.clone(),
            settings.password.clone(),
            settings.timeout,
        );
        let cap = settings.cached_sessions.max(1);
        Ok(RedisStore {
            conn,
            scripts: Scripts::new(),
            cache: Mutex::new(LruCache::new(cap)),
            cached_bytes: AtomicUsize::new(0),
            events,
            described,
            guard,
            settings,
        })
    }

    /// The two keys of a session; they share the hash tag `{<hash>}`, so
    /// every script touches one cluster slot.
    fn keys(&self, session: &str) -> [String; 2] {
        let digest = sha2::Sha256::digest(session.as_bytes());
        let mut tag = String::with_capacity(32);
        for b in &digest[..16] {
            tag.push_str(&format!("{b:02x}"));
        }
        let p = &self.settings.key_prefix;
        [format!("{p}:{{{tag}}}:m"), format!("{p}:{{{tag}}}:l")]
    }

    fn entry(&self, session: &str) -> Slot {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = cache.get(session) {
            return e.clone();
        }
        let slot = Slot {
            entry: Arc::new(tokio::sync::Mutex::new(Cached {
                epoch: String::new(),
                seq: 0,
                session: None,
            })),
            bytes: Arc::new(AtomicUsize::new(0)),
        };
        if cache.len() >= cache.capacity() {
            self.evict_lru(&mut cache);
        }
        cache.insert(session.to_string(), slot.clone());
        self.events.sessions(cache.len() as i64);
        slot
    }

    fn evict_lru(&self, cache: &mut LruCache<String, Slot>) {
        if let Some((_, old)) = cache.remove_lru() {
            let b = old.bytes.swap(0, Ordering::Relaxed);
            self.cached_bytes.fetch_sub(b, Ordering::Relaxed);
        }
    }

    /// Records the new size of a cached copy (when it is still cached) and
    /// evicts the least recently used copies past the byte budget (the one
    /// just used is the most recent, so it goes last). All accounting runs
    /// under the cache's lock.
    fn account(&self, session: &str, slot: &Slot, bytes: usize) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let cached = cache
            .peek(session)
            .is_some_and(|s| Arc::ptr_eq(&s.entry, &slot.entry));
        if !cached {
            return;
        }
        let old = slot.bytes.swap(bytes, Ordering::Relaxed);
        self.cached_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.cached_bytes.fetch_sub(old, Ordering::Relaxed);
        while self.cached_bytes.load(Ordering::Relaxed) > self.settings.max_cached_bytes
            && !cache.is_empty()
        {
            self.evict_lru(&mut cache);
        }
        self.events.sessions(cache.len() as i64);
    }

    fn store_error(&self, what: &str, e: &RedisError) -> SessionError {
        // Redis errors carry no credentials, but say only what kind of
        // failure it was and the server's own words.
        if e.is_timeout() {
            return self.timed_out();
        }
        let detail = if e.is_connection_refusal() || e.is_io_error() || e.is_connection_dropped() {
            "is unreachable".to_string()
        } else {
            format!("failed ({})", e.category())
        };
        SessionError::Store(format!("{} {detail} while {what}", self.described))
    }

    fn timed_out(&self) -> SessionError {
        SessionError::Store(format!(
            "{} did not answer within {} ms (server.sessions.store_timeout_ms)",
            self.described,
            self.settings.timeout.as_millis()
        ))
    }

    /// A fresh epoch for a session the script creates.
    fn new_epoch() -> String {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let r = std::collections::hash_map::RandomState::new().hash_one(t);
        format!("{t:x}-{r:016x}")
    }

    /// Appends `event` and answers it (the whole of steps 1–3 of the module
    /// docs), within the deadline.
    async fn apply(&self, session: &str, event: Event) -> Result<Answer, SessionError> {
        let bytes = serde_json::to_vec(&event)
            .map_err(|e| SessionError::BadEvent(format!("the event cannot be stored: {e}")))?;
        if bytes.len() as u64 > self.settings.max_log_bytes {
            return Err(SessionError::BadEvent(format!(
                "the event is {} bytes; a session's log takes at most {} \
                 (server.sessions.max_log_bytes)",
                bytes.len(),
                self.settings.max_log_bytes
            )));
        }
        let slot = self.entry(session);
        let work = async {
            let mut cached = slot.entry.lock().await;
            let answer = self.apply_locked(session, &mut cached, &bytes).await?;
            let out = match answer {
                Some(a) => a,
                None => {
                    // The log was full (its saved state lagging): save the
                    // state now and try once more.
                    self.compact(session, &mut cached).await?;
                    self.apply_locked(session, &mut cached, &bytes)
                        .await?
                        .ok_or_else(|| {
                            SessionError::Store(format!(
                                "{}: the session's log stays full after saving its state \
                                 (server.sessions.max_log_events / max_log_bytes)",
                                self.described
                            ))
                        })?
                }
            };
            if let Some(s) = cached.session.as_mut() {
                s.remeasure(session.len() + 512, 8);
                self.account(session, &slot, s.bytes);
            }
            Ok(out)
        };
        match tokio::time::timeout(self.settings.timeout, work).await {
            Ok(r) => r,
            Err(_) => {
                // The copy may be mid-update: drop it, the next event rebuilds it.
                self.drop_cached(session);
                Err(self.timed_out())
            }
        }
    }

    fn drop_cached(&self, session: &str) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = cache.remove(session) {
            let b = old.bytes.swap(0, Ordering::Relaxed);
            self.cached_bytes.fetch_sub(b, Ordering::Relaxed);
        }
        self.events.sessions(cache.len() as i64);
    }

    /// One try of the event script and the judging; `None` when the log
    /// is full.
    async fn apply_locked(
        &self,
        session: &str,
        cached: &mut Cached,
        bytes: &[u8],
    ) -> Result<Option<Answer>, SessionError> {
        let conn = self
            .conn
            .get()
            .await
            .map_err(|e| self.store_error("connecting", &e))?;
        let [m, l] = self.keys(session);
        let known_epoch = match &cached.session {
            Some(_) => cached.epoch.as_str(),
            None => "",
        };
        let mut inv = self.scripts.event.prepare_invoke();
        inv.key(&m)
            .key(&l)
            .arg(bytes)
            .arg(known_epoch)
            .arg(cached.seq)
            .arg(self.settings.idle_ttl.as_millis() as u64)
            .arg(self.settings.max_log_events)
            .arg(self.settings.max_log_bytes)
            .arg(Self::new_epoch())
            .arg(session);
        let raw: RawReply = match conn.invoke(&inv).await {
            Ok(r) => r,
            Err(e) if e.code() == Some("DELOOPFULL") => return Ok(None),
            Err(e) => return Err(self.store_error("recording an event", &e)),
        };
        let reply = Reply::from(raw);
        if reply.reset {
            tracing::warn!(store = %self.described, "a session had lost a key in the store (evicted?) and started again");
        }
        let answer = self.catch_up(cached, &reply)?;
        if reply.seq - reply.snapv >= self.settings.snapshot_every
            || reply.bytes >= self.settings.snapshot_bytes
        {
            self.save(session, cached).await;
        }
        answer
            .map(Some)
            .ok_or_else(|| SessionError::Store("the store answered no event".into()))
    }

    /// Brings `cached` to the end of `reply`; answers its last event.
    fn catch_up(&self, cached: &mut Cached, reply: &Reply) -> Result<Option<Answer>, SessionError> {
        let usable =
            cached.session.is_some() && cached.epoch == reply.epoch && cached.seq == reply.from;
        if !usable {
            if reply.from != reply.snapv {
                return Err(SessionError::Store(format!(
                    "{}: the store answered events from {} for a copy at {}",
                    self.described, reply.from, cached.seq
                )));
            }
            cached.session = Some(match &reply.snap {
                Some(b) => self.decode(b)?,
                None => Session::new(&self.guard),
            });
            cached.epoch = reply.epoch.clone();
            cached.seq = reply.snapv;
        }
        let session = cached
            .session
            .as_mut()
            .ok_or_else(|| SessionError::Store("no session state".into()))?;
        let mut last = None;
        for e in &reply.entries {
            let event: Event = serde_json::from_slice(e).map_err(|err| {
                SessionError::Store(format!(
                    "{}: an event in the session's log is unreadable ({err}); \
                     was it written by another program?",
                    self.described
                ))
            })?;
            last = Some(session.apply(&event));
            cached.seq += 1;
        }
        Ok(last)
    }

    fn decode(&self, b: &[u8]) -> Result<Session, SessionError> {
        match b.split_first() {
            Some((&SNAPSHOT_FORMAT, rest)) => postcard::from_bytes::<Session>(rest)
                .map(|s| Session::resume(&self.guard, s))
                .map_err(|e| {
                    SessionError::Store(format!(
                        "{}: a saved session state is unreadable ({e})",
                        self.described
                    ))
                }),
            _ => Err(SessionError::Store(format!(
                "{}: a saved session state has an unknown format (written by another deloop \
                 version?); forget the session or let it expire",
                self.described
            ))),
        }
    }

    /// Saves `cached` as the session's state (best effort: a failure only
    /// leaves the log longer, and the next event tries again).
    async fn save(&self, session: &str, cached: &mut Cached) {
        // Serialised before any await: a session's guard is not `Sync`.
        let Some(blob) = snapshot_blob(cached) else {
            return;
        };
        let (epoch, seq) = (cached.epoch.clone(), cached.seq);
        let Ok(conn) = self.conn.get().await else {
            return;
        };
        let [m, l] = self.keys(session);
        let mut inv = self.scripts.snapshot.prepare_invoke();
        inv.key(&m)
            .key(&l)
            .arg(epoch)
            .arg(seq)
            .arg(blob)
            .arg(self.settings.idle_ttl.as_millis() as u64);
        if let Err(e) = conn.invoke::<i64>(&inv).await {
            tracing::warn!(store = %self.described, kind = e.category(), "saving a session's state failed; the next event tries again");
        }
    }

    /// Reads the whole session, brings `cached` to its end and saves it.
    async fn compact(&self, session: &str, cached: &mut Cached) -> Result<(), SessionError> {
        let conn = self
            .conn
            .get()
            .await
            .map_err(|e| self.store_error("connecting", &e))?;
        let [m, l] = self.keys(session);
        let mut inv = self.scripts.read.prepare_invoke();
        inv.key(&m).key(&l);
        let raw: Option<RawReply> = conn
            .invoke(&inv)
            .await
            .map_err(|e| self.store_error("reading a session", &e))?;
        let Some(raw) = raw else { return Ok(()) };
        let reply = Reply::from(raw);
        cached.session = None;
        self.catch_up(cached, &reply)?;
        self.save(session, cached).await;
        Ok(())
    }

    fn verdict_event(&self, v: &VerdictOut) {
        self.events.verdict(&v.level, v.detector.as_deref());
    }
}

/// The saved form of a cached session: a format byte, then postcard.
fn snapshot_blob(cached: &Cached) -> Option<Vec<u8>> {
    let s = cached.session.as_ref()?;
    match postcard::to_extend(s, vec![SNAPSHOT_FORMAT]) {
        Ok(b) => Some(b),
        Err(e) => {
            tracing::warn!(error = %e, "cannot serialise a session's state");
            None
        }
    }
}

fn unexpected(answer: Answer) -> SessionError {
    SessionError::Store(format!(
        "the session answered {answer:?} to another kind of event"
    ))
}

impl SessionStore for RedisStore {
    fn call(
        &self,
        session: &str,
        call: CallInput,
    ) -> BoxFuture<'_, Result<VerdictOut, SessionError>> {
        let session = session.to_string();
        Box::pin(async move {
            check_session(&session)?;
            check_call(&call)?;
            match self.apply(&session, Event::Call(call)).await? {
                Answer::Call(v) => {
                    self.verdict_event(&v);
                    Ok(v)
                }
                other => Err(unexpected(other)),
            }
        })
    }

    fn result(
        &self,
        session: &str,
        result: ResultInput,
    ) -> BoxFuture<'_, Result<ResultOut, SessionError>> {
        let session = session.to_string();
        Box::pin(async move {
            check_session(&session)?;
            check_result(&result)?;
            match self.apply(&session, Event::Result(result)).await? {
                Answer::Result(r) => {
                    if let Ok(ResultOut {
                        verdict: Some(v), ..
                    }) = &r
                    {
                        self.verdict_event(v);
                    }
                    r
                }
                other => Err(unexpected(other)),
            }
        })
    }

    fn compaction(
        &self,
        session: &str,
        scope: ScopeInput,
    ) -> BoxFuture<'_, Result<(), SessionError>> {
        let session = session.to_string();
        Box::pin(async move {
            check_session(&session)?;
            check_scope(&scope)?;
            match self.apply(&session, Event::Compaction(scope)).await? {
                Answer::Compaction => Ok(()),
                other => Err(unexpected(other)),
            }
        })
    }

    fn forget(&self, session: &str) -> BoxFuture<'_, Result<bool, SessionError>> {
        let session = session.to_string();
        Box::pin(async move {
            check_session(&session)?;
            self.drop_cached(&session);
            let work = async {
                let conn = self
                    .conn
                    .get()
                    .await
                    .map_err(|e| self.store_error("connecting", &e))?;
                let [m, l] = self.keys(&session);
                let n: u64 = conn
                    .query(redis::cmd("DEL").arg(&m).arg(&l))
                    .await
                    .map_err(|e| self.store_error("forgetting a session", &e))?;
                Ok(n > 0)
            };
            tokio::time::timeout(self.settings.timeout, work)
                .await
                .unwrap_or_else(|_| Err(self.timed_out()))
        })
    }

    fn list(
        &self,
        cursor: Option<&str>,
        limit: usize,
    ) -> BoxFuture<'_, Result<SessionPage, SessionError>> {
        let cursor = cursor.map(str::to_string);
        Box::pin(async move {
            tokio::time::timeout(
                self.settings.timeout,
                self.list_page(cursor.as_deref(), limit),
            )
            .await
            .unwrap_or_else(|_| Err(self.timed_out()))
        })
    }

    fn len(&self) -> usize {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    fn ready(&self) -> BoxFuture<'_, Result<(), SessionError>> {
        Box::pin(async move {
            let work = async {
                let conn = self
                    .conn
                    .get()
                    .await
                    .map_err(|e| self.store_error("connecting", &e))?;
                conn.query::<String>(&redis::cmd("PING"))
                    .await
                    .map_err(|e| self.store_error("answering PING", &e))?;
                Ok(())
            };
            tokio::time::timeout(self.settings.timeout, work)
                .await
                .unwrap_or_else(|_| Err(self.timed_out()))
        })
    }

    fn describe(&self) -> String {
        self.described.clone()
    }
}
