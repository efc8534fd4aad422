//! The server's limits around the oracle: the request deadline and the
//! concurrency limit.

use crate::common::{self, client};
use crate::fixtures::*;
use crate::llm::{assert_request_dropped, Fake, Reply};
use deloop_server::ServerSettings;
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::time::Duration;

#[tokio::test]
async fn a_non_streamed_request_past_the_deadline_gets_408() {
    let lib = library();
    let max = 100_000;
    let fake = Fake::start(vec![endless_words(max)]).await;
    let mut config = openai_config(&fake);
    config.oracle.timeout_secs = 60;
    // No loop guard: only the deadline can end this ask.
    without_loop_guard(&mut config);
    let settings = ServerSettings {
        request_timeout_secs: 1,
        ..ServerSettings::default()
    };
    let server = serve_with(&config, &lib, settings).await;
    let res = client()
        .post(format!("{}/api/oracle", server.url))
        .json(&json!({"question": QUESTION}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 408);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    let problem: Value = res.json().await.unwrap();
    assert!(problem["detail"]
        .as_str()
        .unwrap()
        .contains("request_timeout_secs"));
    // The abandoned ask let go of its upstream request.
    assert_request_dropped(&fake, max).await;
}

#[tokio::test]
async fn a_long_healthy_stream_outlives_the_request_deadline() {
    let lib = library();
    // 3,000 distinct chunks 1 ms apart: about 3 s, past the 1 s deadline.
    let words: Vec<String> = (0..3_000).map(|i| chunk(&format!("paso{i} "))).collect();
    let mut events = vec![chunk("{\"answer\": \"")];
    events.extend(words);
    events.push(chunk("\"}"));
    events.push(last_chunk());
    let fake = Fake::start(vec![Reply::LoopSse {
        prefix: events,
        repeat: last_chunk(),
        max: 0,
    }])
    .await;
    let settings = ServerSettings {
        request_timeout_secs: 1,
        ..ServerSettings::default()
    };
    let server = serve_with(&openai_config(&fake), &lib, settings).await;
    let started = std::time::Instant::now();
    let res = ask_sse(
        &format!("{}/api/oracle", server.url),
        json!({"question": QUESTION}),
    )
    .await;
    let events = read_events(res).await;
    let took = started.elapsed();
    let done = &events.last().unwrap().data;
    assert_eq!(events.last().unwrap().event, "done", "{events:?}");
    assert_eq!(done["loop_cut"], false, "{done}");
    assert!(done["answer"].as_str().unwrap().contains("paso2999"));
    eprintln!("a {took:?} stream under a 1 s request deadline");
}

#[tokio::test]
async fn at_the_concurrency_limit_requests_are_shed_with_503() {
    let lib = library();
    let max = 100_000;
    let fake = Fake::start(vec![endless_words(max)]).await;
    let mut config = openai_config(&fake);
    without_loop_guard(&mut config);
    let settings = ServerSettings {
        concurrency_limit: 1,
        retry_after_secs: 7,
        ..ServerSettings::default()
    };
    let server = serve_with(&config, &lib, settings).await;
    // One long stream holds the only permit while it runs.
    let res = ask_sse(
        &format!("{}/api/oracle", server.url),
        json!({"question": QUESTION}),
    )
    .await;
    let mut body = res.bytes_stream();
    body.next().await.unwrap().unwrap();
    for _ in 0..3 {
        let shed = client()
            .post(format!("{}/v1/clamp", server.url))
            .json(&json!({"text": "hola"}))
            .send()
            .await
            .unwrap();
        assert_eq!(shed.status(), 503);
        assert_eq!(shed.headers()["retry-after"], "7");
        let problem: Value = shed.json().await.unwrap();
        assert!(problem["detail"]
            .as_str()
            .unwrap()
            .contains("concurrency_limit"));
    }
    // Probes are never shed.
    let health = client()
        .get(format!("{}/healthz", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let metrics_shed = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("deloop_requests_shed_total"))
            .map(str::to_string)
    };
    // The stream ends: its permit is free again.
    drop(body);
    assert_request_dropped(&fake, max).await;
    let mut ok = false;
    for _ in 0..100 {
        let res = client()
            .post(format!("{}/v1/clamp", server.url))
            .json(&json!({"text": "hola"}))
            .send()
            .await
            .unwrap();
        if res.status() == 200 {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ok, "the permit was never released");
    let text = common::metrics_text(&server.url, None).await;
    let line = metrics_shed(&text).unwrap_or_else(|| panic!("no shed counter: {text}"));
    assert!(line.ends_with(" 3"), "{line}");
}
