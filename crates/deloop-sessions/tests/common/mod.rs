//! What the store suites share: events read from transcripts, replayed
//! through any store, and the stores themselves.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use deloop_core::loops::{LoopConfig, Profile};
use deloop_sessions::session::Event;
use deloop_sessions::{
    GuardSettings, MemoryStore, RedisSettings, RedisStore, ResultOut, SessionError, SessionStore,
    VerdictOut,
};
use serde_json::Value;

pub fn guard(profile: Profile) -> GuardSettings {
    GuardSettings {
        profile,
        config: LoopConfig::default(),
        max_open_calls: 1024,
    }
}

pub fn memory(profile: Profile) -> MemoryStore {
    MemoryStore::new(
        guard(profile),
        1000,
        Duration::from_secs(3600),
        Arc::new(()),
    )
}

/// Settings that save the state often, so that saving, dropping the log
/// and resuming from a saved state all happen in short transcripts.
pub fn redis_settings(url: &str) -> RedisSettings {
    RedisSettings {
        snapshot_every: 3,
        timeout: Duration::from_secs(5),
        ..RedisSettings::new(url)
    }
}

pub fn redis(url: &str, profile: Profile) -> RedisStore {
    RedisStore::new(redis_settings(url), guard(profile), Arc::new(())).expect("a store")
}

/// The events of a transcript in deloop's events format (`type` plus the
/// session API's fields).
pub fn events(jsonl: &str) -> Vec<Event> {
    jsonl
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let mut v: Value = serde_json::from_str(line).expect("a JSON line");
            let obj = v.as_object_mut().expect("an object");
            let kind = obj.remove("type").expect("a type");
            match kind.as_str() {
                Some("call") => Event::Call(serde_json::from_value(v).expect("a call")),
                Some("result") => Event::Result(serde_json::from_value(v).expect("a result")),
                Some("compaction") => {
                    Event::Compaction(serde_json::from_value(v).expect("a compaction"))
                }
                other => panic!("unexpected event type {other:?}"),
            }
        })
        .collect()
}

/// What one event answered.
#[derive(Debug, PartialEq)]
pub enum Out {
    Call(VerdictOut),
    Result(Result<ResultOut, String>),
    Compaction,
}

/// Sends one event to `store`; a store failure panics (these suites run
/// on healthy stores).
pub async fn send(store: &dyn SessionStore, session: &str, e: &Event) -> Out {
    match e.clone() {
        Event::Call(c) => Out::Call(store.call(session, c).await.expect("a verdict")),
        Event::Result(r) => Out::Result(match store.result(session, r).await {
            Ok(r) => Ok(r),
            Err(SessionError::BadEvent(m)) => Err(m),
            Err(e) => panic!("store failed: {e}"),
        }),
        Event::Compaction(s) => {
            store.compaction(session, s).await.expect("recorded");
            Out::Compaction
        }
    }
}

/// Replays `events` with event `i` sent to `stores[pick(i)]`.
pub async fn replay(
    stores: &[&dyn SessionStore],
    session: &str,
    events: &[Event],
    pick: impl Fn(usize) -> usize,
) -> Vec<Out> {
    let mut out = Vec::with_capacity(events.len());
    for (i, e) in events.iter().enumerate() {
        out.push(send(stores[pick(i) % stores.len()], session, e).await);
    }
    out
}

/// (level, detector, count) per call, a result's verdict replacing its
/// call's: what OpenClaw's expectations list.
pub fn per_call(outs: &[Out]) -> Vec<(String, Option<String>, Option<u32>)> {
    let mut v: Vec<(String, Option<String>, Option<u32>)> = Vec::new();
    let mut at = std::collections::HashMap::new();
    for o in outs {
        match o {
            Out::Call(c) => {
                at.insert(c.index, v.len());
                v.push((c.level.clone(), c.detector.clone(), c.count));
            }
            Out::Result(Ok(ResultOut {
                verdict: Some(r), ..
            })) => {
                let i = at[&r.index];
                v[i] = (r.level.clone(), r.detector.clone(), r.count);
            }
            _ => {}
        }
    }
    v
}
