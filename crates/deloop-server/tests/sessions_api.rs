//! The live-agent session API over real TCP: replaying the OpenClaw
//! scenarios event by event gives exactly the verdicts OpenClaw gave (the
//! `openclaw` profile), as `deloop check` does.

mod common;

use deloop_core::loops::Profile;
use deloop_server::auth::ApiKeys;
use deloop_server::ServerSettings;
use serde_json::{json, Value};

fn scenario_names() -> Vec<String> {
    let root = deloop_testdata::corpus("openclaw-loops");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("manifest.json")).unwrap())
            .unwrap();
    manifest.as_object().unwrap().keys().cloned().collect()
}

/// Replays one scenario through the session API; returns (level,
/// detector, count) per call, a result's verdict replacing its call's.
async fn replay(
    client: &reqwest::Client,
    url: &str,
    session: &str,
    events: &str,
) -> Vec<(String, Option<String>, Option<u64>)> {
    let mut out: Vec<(String, Option<String>, Option<u64>)> = Vec::new();
    let mut index_of = std::collections::HashMap::new();
    for line in events.lines().filter(|l| !l.trim().is_empty()) {
        let ev: Value = serde_json::from_str(line).unwrap();
        let mut body = ev.clone();
        let obj = body.as_object_mut().unwrap();
        let kind = obj.remove("type").unwrap();
        let kind = kind.as_str().unwrap();
        let path = match kind {
            "call" => "calls",
            "result" => "results",
            "compaction" => "compaction",
            other => panic!("unexpected event type {other}"),
        };
        let res = client
            .post(format!("{url}/v1/sessions/{session}/{path}"))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = res.status();
        match kind {
            "call" => {
                assert_eq!(status, 200, "{line}");
                let v: Value = res.json().await.unwrap();
                index_of.insert(v["index"].as_u64().unwrap(), out.len());
                out.push((
                    v["level"].as_str().unwrap().to_string(),
                    v["detector"].as_str().map(String::from),
                    v["count"].as_u64(),
                ));
            }
            "result" => {
                assert_eq!(status, 200, "{line}: {}", res.text().await.unwrap());
                let v: Value = res.json().await.unwrap();
                if let Some(verdict) = v.get("verdict").filter(|v| !v.is_null()) {
                    let i = index_of[&verdict["index"].as_u64().unwrap()];
                    out[i] = (
                        verdict["level"].as_str().unwrap().to_string(),
                        verdict["detector"].as_str().map(String::from),
                        verdict["count"].as_u64(),
                    );
                }
            }
            _ => assert_eq!(status, 204, "{line}"),
        }
    }
    out
}

#[tokio::test]
async fn openclaw_scenarios_replayed_through_the_api_match_openclaw() {
    let server = common::start(common::state_with(
        ServerSettings::default(),
        Profile::OpenClaw,
        ApiKeys::default(),
    ))
    .await;
    let client = common::client();
    let root = deloop_testdata::corpus("openclaw-loops");
    let names = scenario_names();
    assert_eq!(names.len(), 74);
    let mut calls = 0;
    for name in &names {
        let events = std::fs::read_to_string(root.join(format!("scenarios/{name}.jsonl"))).unwrap();
        let got = replay(&client, &server.url, name, &events).await;
        let expected: Vec<(String, Option<String>, Option<u64>)> =
            std::fs::read_to_string(root.join(format!("expected/{name}.jsonl")))
                .unwrap()
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| {
                    let v: Value = serde_json::from_str(l).unwrap();
                    (
                        v["level"].as_str().unwrap().to_string(),
                        v["detector"].as_str().map(String::from),
                        v["count"].as_u64(),
                    )
                })
                .collect();
        assert_eq!(got.len(), expected.len(), "{name}: call count");
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(g, e, "{name}: call {i}");
        }
        calls += got.len();
    }
    assert!(calls > 1000, "only {calls} calls replayed");
}

#[tokio::test]
async fn bad_events_are_4xx_with_problem_json() {
    let server = common::start_default().await;
    let c = common::client();
    let url = &server.url;
    // Missing field `tool`: 400 naming the field.
    let r = c
        .post(format!("{url}/v1/sessions/s/calls"))
        .json(&json!({"args": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.headers()["content-type"], "application/problem+json");
    let body: Value = r.json().await.unwrap();
    assert!(body["detail"].as_str().unwrap().contains("tool"), "{body}");
    // Result for an unknown id: 409.
    let r = c
        .post(format!("{url}/v1/sessions/s/results"))
        .json(&json!({"id": "nope", "result": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    // A result without id and without tool/args: 400.
    let r = c
        .post(format!("{url}/v1/sessions/s/results"))
        .json(&json!({"result": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    // Neither result nor error: 400.
    let r = c
        .post(format!("{url}/v1/sessions/s/results"))
        .json(&json!({"id": "a"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    // Unknown session: 404 on delete.
    let r = c
        .delete(format!("{url}/v1/sessions/none"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

#[tokio::test]
async fn a_call_gets_an_id_and_its_result_attaches_by_tool_and_args() {
    let server = common::start_default().await;
    let c = common::client();
    let url = &server.url;
    let v: Value = c
        .post(format!("{url}/v1/sessions/t/calls"))
        .json(&json!({"tool": "read", "args": {"path": "/a"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["level"], "ok");
    assert_eq!(v["id"], "deloop-1");
    let r: Value = c
        .post(format!("{url}/v1/sessions/t/results"))
        .json(&json!({"tool": "read", "args": {"path": "/a"}, "result": "text"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["index"], 0);
    let r = c
        .delete(format!("{url}/v1/sessions/t"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
}
