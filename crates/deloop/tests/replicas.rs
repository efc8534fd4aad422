//! Three `deloop serve` processes sharing one Valkey (`--session-store`):
//! an agent run sent to them in any order gets the verdicts `deloop check`
//! prints for the same events; a replica killed mid-run loses nothing; a
//! store down at start or dying under load gives 503 naming the store
//! (`/readyz` too), `/healthz` stays 200, and the same processes serve again
//! once the store is back.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use deloop_testdata::valkey::{self, free_port, Valkey};
use serde_json::Value;

mod common;

use common::{start, Server};

/// One request with `Connection: close`; answers (status, lower-cased
/// head, body).
fn http(method: &str, url: &str, body: &[u8]) -> (u16, String, String) {
    common::http_with_head(method, url, Some(body), "application/json")
}

fn replica(store: &str) -> Server {
    start(
        &["--session-store", store],
        &[("DELOOP_LOOP_PROFILE", "openclaw")],
    )
}

/// Sends one transcript event to `server`; answers its status and body.
fn send(server: &Server, session: &str, line: &str) -> (u16, String, Value) {
    let mut ev: Value = serde_json::from_str(line).unwrap();
    let kind = ev.as_object_mut().unwrap().remove("type").unwrap();
    let path = match kind.as_str().unwrap() {
        "call" => "calls",
        "result" => "results",
        "compaction" => "compaction",
        other => panic!("unexpected event {other}"),
    };
    let (status, head, body) = http(
        "POST",
        &format!("{}/v1/sessions/{session}/{path}", server.url),
        &serde_json::to_vec(&ev).unwrap(),
    );
    (
        status,
        head,
        serde_json::from_str(&body).unwrap_or(Value::Null),
    )
}

/// `deloop check --json` on a transcript: (level, detector, count) per call.
fn check(transcript: &str) -> Vec<(String, Value, Value)> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_deloop"))
        .args(["check", "--json", "--profile", "openclaw"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(transcript.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("level").is_some() && v.get("index").is_some())
        .map(|v| {
            (
                v["level"].as_str().unwrap().to_string(),
                v["detector"].clone(),
                v["count"].clone(),
            )
        })
        .collect()
}

type Verdict = (String, Value, Value);

/// Replays `lines` with event `i` sent to `pick(i)`, into `out`: (level,
/// detector, count) per call at the store's index, a result's verdict
/// replacing its call's.
fn replay_into(
    lines: &[&str],
    session: &str,
    pick: impl Fn(usize) -> usize,
    servers: &[&Server],
    out: &mut Vec<Verdict>,
) {
    for (i, line) in lines.iter().enumerate() {
        let (status, _, v) = send(servers[pick(i) % servers.len()], session, line);
        assert!(status == 200 || status == 204, "event {i}: {status} {v}");
        let verdict = if v.get("level").is_some() {
            v
        } else {
            match v.get("verdict").filter(|v| !v.is_null()) {
                Some(v) => v.clone(),
                None => continue,
            }
        };
        let at = verdict["index"].as_u64().unwrap() as usize;
        if out.len() <= at {
            out.resize(at + 1, Default::default());
        }
        out[at] = (
            verdict["level"].as_str().unwrap().to_string(),
            verdict["detector"].clone(),
            verdict["count"].clone(),
        );
    }
}

fn lines(t: &str) -> Vec<&str> {
    t.lines().filter(|l| !l.trim().is_empty()).collect()
}

fn transcript(name: &str) -> String {
    std::fs::read_to_string(
        deloop_testdata::corpus("openclaw-loops").join(format!("scenarios/{name}.jsonl")),
    )
    .unwrap()
}

#[test]
fn three_replicas_give_deloop_checks_verdicts_and_survive_a_killed_replica() {
    let Some(bin) = valkey::available("deloop serve replicas") else {
        return;
    };
    let store = Valkey::start(&bin, &[]);
    let mut servers: Vec<Server> = (0..3).map(|_| replica(&store.url())).collect();
    for name in [
        "oc01_generic_repeat_read_25",
        "oc47_pingpong_stable_25",
        "oc28_message_reply_upload_poll_63",
        "oc69_compaction_guard_fires_9",
    ] {
        let t = transcript(name);
        let want = check(&t);
        assert!(!want.is_empty(), "{name}: deloop check printed no verdict");
        let mut got = Vec::new();
        let all: Vec<&Server> = servers.iter().collect();
        replay_into(&lines(&t), name, |i| i * 7 + i / 3, &all, &mut got);
        assert_eq!(got, want, "{name}");
    }
    // A replica is killed in the middle of a run: the others go on from
    // the store, with no event lost or counted twice.
    let t = transcript("oc06_global_breaker_read_35");
    let want = check(&t);
    let events = lines(&t);
    let half = events.len() / 2;
    let mut got = Vec::new();
    {
        let all: Vec<&Server> = servers.iter().collect();
        replay_into(&events[..half], "killed", |i| i, &all, &mut got);
    }
    let mut gone = servers.pop().unwrap();
    let _ = gone.child.kill();
    let _ = gone.child.wait();
    let two: Vec<&Server> = servers.iter().collect();
    replay_into(&events[half..], "killed", |i| i, &two, &mut got);
    assert_eq!(got, want);
}

#[test]
fn a_store_down_then_dying_gives_503_naming_it_and_the_same_process_recovers() {
    let Some(bin) = valkey::available("deloop serve store faults") else {
        return;
    };
    let port = free_port();
    let url = format!("redis://127.0.0.1:{port}/0");
    let server = replica(&url);
    let call = r#"{"type":"call","tool":"read","args":{"path":"/a"}}"#;
    // Down at start: the process serves, /healthz is 200, /readyz and the
    // session API are 503 with Retry-After and a JSON error naming the store.
    let (status, _, _) = http("GET", &format!("{}/healthz", server.url), b"");
    assert_eq!(status, 200);
    let (status, head, body) = http("GET", &format!("{}/readyz", server.url), b"");
    assert_eq!(status, 503, "{body}");
    assert!(head.contains("retry-after:"), "{head}");
    assert!(
        body.contains(&format!("redis://127.0.0.1:{port}")),
        "{body}"
    );
    let (status, head, v) = send(&server, "s", call);
    assert_eq!(status, 503, "{v}");
    assert!(head.contains("retry-after:"), "{head}");
    assert!(head.contains("application/problem+json"), "{head}");
    assert!(
        v["detail"].as_str().unwrap().contains("Valkey/Redis at"),
        "{v}"
    );
    // The store comes up: the same process serves.
    let mut store = Valkey::start_on(&bin, port, &[]);
    let mut ready = false;
    for _ in 0..100 {
        if http("GET", &format!("{}/readyz", server.url), b"").0 == 200 {
            ready = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ready, "/readyz never became 200 once the store was up");
    let (status, _, v) = send(&server, "s", call);
    assert_eq!((status, v["index"].as_u64()), (200, Some(0)), "{v}");
    // The store dies: 503 naming it, never 500, never a verdict.
    store.kill();
    for _ in 0..5 {
        let (status, head, v) = send(&server, "s", call);
        assert_eq!(status, 503, "{v}");
        assert!(head.contains("retry-after:"), "{head}");
        assert!(
            v["detail"].as_str().unwrap().contains("Valkey/Redis at"),
            "{v}"
        );
    }
    // Back (empty): served again without a restart.
    store.restart();
    let mut served = None;
    for _ in 0..100 {
        let (status, _, v) = send(&server, "t", call);
        if status == 200 {
            served = Some(v);
            break;
        }
        assert_eq!(status, 503, "{v}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(served.expect("served again")["index"].as_u64(), Some(0));
}
