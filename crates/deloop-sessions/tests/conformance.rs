//! One conformance suite for every session store (the object_store shape):
//! the in-process store, Valkey on one node with three replicas sharing
//! it, and a 3-primary Valkey cluster. Every store must give the verdicts
//! `deloop check` gives: OpenClaw's own on its 74 scenarios, and the
//! in-process store's on real agent trajectories, whatever replica
//! receives each event.

mod common;

use common::*;
use deloop_core::loops::Profile;
use deloop_sessions::session::Event;
use deloop_sessions::SessionStore;
use deloop_testdata::valkey::{self, Cluster, Valkey};
use rand::{Rng as _, SeedableRng};

type Verdict = (String, Option<String>, Option<u32>);

/// A scenario: its name, its events, and OpenClaw's verdict per call.
type Scenario = (String, Vec<Event>, Vec<Verdict>);

fn scenarios() -> Vec<Scenario> {
    let root = deloop_testdata::corpus("openclaw-loops");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("manifest.json")).unwrap())
            .unwrap();
    manifest
        .as_object()
        .unwrap()
        .keys()
        .map(|name| {
            let events = events(
                &std::fs::read_to_string(root.join(format!("scenarios/{name}.jsonl"))).unwrap(),
            );
            let expected = std::fs::read_to_string(root.join(format!("expected/{name}.jsonl")))
                .unwrap()
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).unwrap();
                    (
                        v["level"].as_str().unwrap().to_string(),
                        v["detector"].as_str().map(String::from),
                        v["count"].as_u64().map(|c| c as u32),
                    )
                })
                .collect();
            (name.clone(), events, expected)
        })
        .collect()
}

/// Every OpenClaw scenario through `stores`, each event to a replica the
/// seeded generator picks; the verdicts must be OpenClaw's.
async fn openclaw_scenarios(stores: &[&dyn SessionStore], seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let all = scenarios();
    assert_eq!(all.len(), 74);
    let mut calls = 0;
    for (name, events, expected) in &all {
        let picks: Vec<usize> = (0..events.len())
            .map(|_| rng.random_range(0..stores.len()))
            .collect();
        let session = format!("{name}-{seed}");
        let got = per_call(&replay(stores, &session, events, |i| picks[i]).await);
        assert_eq!(&got, expected, "{name} (seed {seed})");
        calls += got.len();
    }
    assert!(calls > 1000, "only {calls} calls replayed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_store_gives_openclaws_verdicts() {
    let m = memory(Profile::OpenClaw);
    openclaw_scenarios(&[&m], 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_on_one_valkey_give_openclaws_verdicts() {
    let Some(bin) = valkey::available("session store conformance (one node)") else {
        return;
    };
    let server = Valkey::start(&bin, &[]);
    let r: Vec<_> = (0..3)
        .map(|_| redis(&server.url(), Profile::OpenClaw))
        .collect();
    let stores: Vec<&dyn SessionStore> = r.iter().map(|s| s as &dyn SessionStore).collect();
    for seed in [1, 2] {
        openclaw_scenarios(&stores, seed).await;
    }
}

/// A replica whose byte budget holds no copy rebuilds each session from
/// the store (saved state and log) on every event, and still answers as
/// OpenClaw does; its cache stays empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_caches_nothing_rebuilds_from_the_store() {
    let Some(bin) = valkey::available("session store conformance (no cache)") else {
        return;
    };
    let server = Valkey::start(&bin, &[]);
    let settings = deloop_sessions::RedisSettings {
        max_cached_bytes: 1,
        ..redis_settings(&server.url())
    };
    let store = deloop_sessions::RedisStore::new(
        settings,
        guard(Profile::OpenClaw),
        std::sync::Arc::new(()),
    )
    .unwrap();
    openclaw_scenarios(&[&store], 4).await;
    assert_eq!(store.len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_on_a_valkey_cluster_give_openclaws_verdicts() {
    let Some(bin) = valkey::available("session store conformance (cluster)") else {
        return;
    };
    let cluster = Cluster::start(&bin);
    let r: Vec<_> = (0..3)
        .map(|_| redis(&cluster.url(), Profile::OpenClaw))
        .collect();
    let stores: Vec<&dyn SessionStore> = r.iter().map(|s| s as &dyn SessionStore).collect();
    openclaw_scenarios(&stores, 3).await;
    // The sessions' keys were spread over the three primaries.
    let keys: Vec<u64> = cluster
        .nodes
        .iter()
        .map(|n| n.command(&["DBSIZE"]).unwrap().parse().unwrap())
        .collect();
    assert!(keys.iter().all(|&k| k > 0), "keys per node: {keys:?}");
}

/// Real agent trajectories, each through three replicas in a seeded
/// interleaving, answer exactly as the in-process store does (every field:
/// index, id, level, detector, count, message, fingerprint).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_trajectories_across_three_replicas_match_the_memory_store() {
    let Some(dir) =
        deloop_testdata::shared_data("data/trajectories/traj", "session store trajectories")
    else {
        return;
    };
    let Some(bin) = valkey::available("session store trajectories") else {
        return;
    };
    let server = Valkey::start(&bin, &[]);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let (mut runs, mut calls, mut flagged) = (0, 0, 0);
    for profile in [Profile::Default, Profile::OpenClaw, Profile::Strict] {
        let r: Vec<_> = (0..3).map(|_| redis(&server.url(), profile)).collect();
        let stores: Vec<&dyn SessionStore> = r.iter().map(|s| s as &dyn SessionStore).collect();
        // Every 6th trajectory per profile keeps the suite to a few
        // thousand store round trips; over the three profiles, half of them.
        for f in files.iter().skip(profile as usize % 2).step_by(6) {
            let events = events(&std::fs::read_to_string(f).unwrap());
            let name = format!("{profile:?}-{}", f.file_name().unwrap().to_string_lossy());
            let m = memory(profile);
            let want = replay(&[&m], &name, &events, |_| 0).await;
            let picks: Vec<usize> = (0..events.len()).map(|_| rng.random_range(0..3)).collect();
            let got = replay(&stores, &name, &events, |i| picks[i]).await;
            assert_eq!(got, want, "{name}");
            runs += 1;
            calls += want.iter().filter(|o| matches!(o, Out::Call(_))).count();
            flagged += per_call(&want).iter().filter(|v| v.0 != "ok").count();
        }
    }
    assert!(runs > 100 && calls > 2000, "{runs} runs, {calls} calls");
    assert!(
        flagged > 0,
        "no trajectory call was flagged: the comparison proves little"
    );
}

/// Thirty identical calls sent at once, ten to each replica: the store
/// orders them, and the verdict of the call it put at index `i` is the
/// verdict `deloop check` gives the `i`-th identical call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_to_three_replicas_are_judged_in_the_stores_order() {
    let Some(bin) = valkey::available("session store concurrency") else {
        return;
    };
    let server = Valkey::start(&bin, &[]);
    let r: Vec<_> = (0..3)
        .map(|_| std::sync::Arc::new(redis(&server.url(), Profile::OpenClaw)))
        .collect();
    let call = r#"{"type":"call","tool":"exec","args":{"command":"make test"}}"#;
    let event = events(call).remove(0);
    let mut tasks = Vec::new();
    for i in 0..30 {
        let store = r[i % 3].clone();
        let e = event.clone();
        tasks.push(tokio::spawn(async move { send(&*store, "busy", &e).await }));
    }
    let mut got = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            Out::Call(v) => got.push(v),
            other => panic!("{other:?}"),
        }
    }
    got.sort_by_key(|v| v.index);
    let m = memory(Profile::OpenClaw);
    let want = replay(&[&m], "busy", &vec![event; 30], |_| 0).await;
    let want: Vec<_> = want
        .into_iter()
        .map(|o| match o {
            Out::Call(v) => v,
            other => panic!("{other:?}"),
        })
        .collect();
    let strip =
        |v: &deloop_sessions::VerdictOut| (v.index, v.level.clone(), v.detector.clone(), v.count);
    assert_eq!(
        got.iter().map(strip).collect::<Vec<_>>(),
        want.iter().map(strip).collect::<Vec<_>>()
    );
    assert!(want.iter().any(|v| v.level != "ok"), "no call was flagged");
}

/// Sessions made through `writer`, listed through `reader` page by page:
/// every live session is listed (with its event count), a forgotten one is
/// not, each page stays within a few sessions of its `limit`, and a
/// cursor the store did not make is refused.
async fn listing(writer: &dyn SessionStore, reader: &dyn SessionStore) {
    let call = |i: usize| {
        events(&format!(
            r#"{{"type":"call","tool":"read","args":{{"path":"/f{i}"}}}}"#
        ))
        .remove(0)
    };
    let mut want = std::collections::BTreeMap::new();
    for s in 0..23 {
        let name = format!("listed-{s:02}");
        for i in 0..=s % 4 {
            send(writer, &name, &call(i)).await;
        }
        want.insert(name, (s % 4 + 1) as u64);
    }
    send(writer, "gone", &call(0)).await;
    assert!(writer.forget("gone").await.unwrap());
    let limit = 5;
    let (mut got, mut cursor, mut pages) = (std::collections::BTreeMap::new(), None, 0);
    loop {
        let page = reader.list(cursor.as_deref(), limit).await.expect("a page");
        // A shared store may add what its last SCAN step found beyond the
        // limit: Valkey answers whole bucket chains (7 keys a bucket).
        assert!(
            page.sessions.len() <= limit + 32,
            "{} sessions",
            page.sessions.len()
        );
        for s in page.sessions {
            assert!(s.idle_ms < 3_600_000, "{s:?}");
            got.insert(s.session, s.events);
        }
        pages += 1;
        assert!(pages < 1000, "the listing does not end");
        match page.next {
            Some(n) => cursor = Some(n),
            None => break,
        }
    }
    assert_eq!(got, want);
    assert!(pages >= 23 / (2 * limit), "{pages} pages");
    for bad in ["not a cursor", &"9".repeat(400)] {
        assert!(
            matches!(
                reader.list(Some(bad), limit).await,
                Err(deloop_sessions::SessionError::Invalid(_))
            ),
            "{bad:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_store_lists_its_sessions() {
    let m = memory(Profile::OpenClaw);
    listing(&m, &m).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_valkey_node_lists_the_sessions_of_every_replica() {
    let Some(bin) = valkey::available("session listing (one node)") else {
        return;
    };
    let server = Valkey::start(&bin, &[]);
    // A key of another program under the prefix is not a session.
    server.command(&["SET", "deloop:{foreign}:m", "x"]).unwrap();
    let (a, b) = (
        redis(&server.url(), Profile::OpenClaw),
        redis(&server.url(), Profile::OpenClaw),
    );
    listing(&a, &b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valkey_cluster_lists_the_sessions_of_every_primary() {
    let Some(bin) = valkey::available("session listing (cluster)") else {
        return;
    };
    let cluster = Cluster::start(&bin);
    let (a, b) = (
        redis(&cluster.url(), Profile::OpenClaw),
        redis(&cluster.url(), Profile::OpenClaw),
    );
    listing(&a, &b).await;
    let keys: Vec<u64> = cluster
        .nodes
        .iter()
        .map(|n| n.command(&["DBSIZE"]).unwrap().parse().unwrap())
        .collect();
    assert!(keys.iter().all(|&k| k > 0), "keys per node: {keys:?}");
}
