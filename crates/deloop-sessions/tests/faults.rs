//! The shared store's faults, each against a real Valkey server: down at
//! start, dying under load and coming back, a replica gone mid-run, and a
//! store too slow to answer (`CLIENT PAUSE`). A failure is always
//! `SessionError::Store` naming the store, never a verdict computed on
//! partial state, never a panic.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use deloop_core::loops::Profile;
use deloop_sessions::{CallInput, RedisStore, SessionError, SessionStore};
use deloop_testdata::valkey::{self, free_port, Valkey};
use serde_json::json;

fn call(path: &str) -> CallInput {
    CallInput {
        tool: "read".into(),
        args: json!({ "path": path }),
        id: None,
        agent: None,
        run: None,
    }
}

fn store(url: &str, timeout: Duration) -> RedisStore {
    let settings = deloop_sessions::RedisSettings {
        timeout,
        ..redis_settings(url)
    };
    RedisStore::new(settings, guard(Profile::OpenClaw), Arc::new(())).unwrap()
}

fn assert_store_error(e: SessionError, port: u16) {
    match e {
        SessionError::Store(m) => assert!(
            m.contains(&format!("Valkey/Redis at redis://127.0.0.1:{port}")),
            "the error should name the store: {m}"
        ),
        other => panic!("expected a store error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_down_at_start_is_reported_then_used_once_it_is_up() {
    let Some(bin) = valkey::available("session store faults") else {
        return;
    };
    let port = free_port();
    let url = format!("redis://127.0.0.1:{port}/0");
    let s = store(&url, Duration::from_secs(2));
    let e = s.ready().await.unwrap_err();
    assert!(e.to_string().contains("unreachable"), "{e}");
    assert_store_error(e, port);
    assert_store_error(s.call("a", call("/x")).await.unwrap_err(), port);
    // The store comes up: the same object serves, with no restart.
    let _server = Valkey::start_on(&bin, port, &[]);
    s.ready().await.unwrap();
    assert_eq!(s.call("a", call("/x")).await.unwrap().index, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_dying_under_load_fails_requests_cleanly_and_serves_when_back() {
    let Some(bin) = valkey::available("session store faults") else {
        return;
    };
    let mut server = Valkey::start(&bin, &[]);
    let port = server.port();
    let s = Arc::new(store(&server.url(), Duration::from_millis(1500)));
    let load = {
        let s = s.clone();
        tokio::spawn(async move {
            let (mut ok, mut failed) = (0, 0);
            for i in 0..4000 {
                match s.call(&format!("s{}", i % 50), call("/x")).await {
                    Ok(v) => {
                        assert!(v.level == "ok" || v.level == "warning" || v.level == "critical");
                        ok += 1;
                    }
                    Err(e) => {
                        assert_store_error(e, port);
                        failed += 1;
                        if failed > 20 {
                            break;
                        }
                    }
                }
            }
            (ok, failed)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.kill();
    let (ok, failed) = load.await.unwrap();
    assert!(ok > 0 && failed > 0, "{ok} answered, {failed} failed");
    // Back (empty: this test server keeps nothing on disk): the same store
    // object serves again, and a session starts from its first call.
    server.restart();
    let mut answered = None;
    for _ in 0..50 {
        match s.call("after", call("/y")).await {
            Ok(v) => {
                answered = Some(v);
                break;
            }
            Err(e) => {
                assert_store_error(e, port);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    assert_eq!(answered.expect("the store serves again").index, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_gone_mid_run_loses_no_event() {
    let Some(bin) = valkey::available("session store faults") else {
        return;
    };
    let server = Valkey::start(&bin, &[]);
    let root = deloop_testdata::corpus("openclaw-loops");
    // 63 events: replies, uploads and polls of one run.
    let text =
        std::fs::read_to_string(root.join("scenarios/oc28_message_reply_upload_poll_63.jsonl"))
            .unwrap();
    let events = events(&text);
    let m = memory(Profile::OpenClaw);
    let want = replay(&[&m], "run", &events, |_| 0).await;
    let half = events.len() / 2;
    let a = store(&server.url(), Duration::from_secs(5));
    let b = store(&server.url(), Duration::from_secs(5));
    let mut got = replay(&[&a, &b], "run", &events[..half], |i| i).await;
    drop(b); // the replica is gone, with its cached copy
    let c = store(&server.url(), Duration::from_secs(5));
    got.extend(replay(&[&a, &c], "run", &events[half..], |i| i).await);
    assert_eq!(got, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_store_times_requests_out_and_they_do_not_hang() {
    let Some(bin) = valkey::available("session store faults") else {
        return;
    };
    let server = Valkey::start(&bin, &[]);
    let s = store(&server.url(), Duration::from_millis(300));
    assert_eq!(s.call("p", call("/x")).await.unwrap().index, 0);
    server.command(&["CLIENT", "PAUSE", "3000", "ALL"]).unwrap();
    let e = s.call("p", call("/x")).await.unwrap_err();
    assert!(
        e.to_string().contains("did not answer within 300 ms"),
        "{e}"
    );
    assert_store_error(e, server.port());
    // Once the pause ends the store serves again. The timed-out call was
    // already sent, so the server may record it when the pause ends: the
    // next call is number 1 or 2 (a 503 after a timeout does not say the
    // event was not recorded; docs/deployment.md says so).
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let next = s
        .call("p", call("/x"))
        .await
        .expect("the store serves after the pause");
    assert!(next.index == 1 || next.index == 2, "index {}", next.index);
}
