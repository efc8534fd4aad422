//! Serving the oracle: bad bodies, readiness, a guard-only server, many
//! concurrent asks, the idle timeout, MCP.

use crate::common;
use crate::common::{client, start, state_with};
use crate::fixtures::*;
use crate::llm::{assert_request_dropped, Fake, Reply};
use deloop_config::Config;
use deloop_core::loops::Profile;
use deloop_oracle::Oracle;
use deloop_server::auth::ApiKeys;
use deloop_server::ServerSettings;
use serde_json::{json, Value};
use std::time::Duration;

#[tokio::test]
async fn bad_bodies_get_400_naming_the_problem() {
    let lib = library();
    let server = serve(&Config::default(), &lib).await;
    let url = format!("{}/api/oracle", server.url);
    for (body, want) in [
        (json!({}), "question"),
        (json!({"question": 3}), "question"),
        (json!({"question": QUESTION, "lang": "fr"}), "lang"),
        (
            json!({"question": QUESTION, "retrieval": "magic"}),
            "retrieval",
        ),
        (json!({"question": QUESTION, "k": -1}), "k"),
        (json!({"question": QUESTION, "colour": "red"}), "colour"),
        (
            json!({"question": QUESTION, "history": [{"role": "system", "content": "x"}]}),
            "history",
        ),
        (json!({"question": "   "}), "empty"),
        (json!({"question": QUESTION, "k": 0}), "k"),
        (json!({"question": QUESTION, "k": 10_000}), "k"),
    ] {
        let res = client().post(&url).json(&body).send().await.unwrap();
        assert_eq!(res.status(), 400, "{body}");
        assert_eq!(
            res.headers()["content-type"],
            "application/problem+json",
            "{body}"
        );
        let problem: Value = res.json().await.unwrap();
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains(want), "{body}: {detail}");
    }
    // Not JSON at all, and the wrong content type.
    let res = client()
        .post(&url)
        .header("content-type", "application/json")
        .body("{\"question\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let res = client()
        .post(&url)
        .header("content-type", "text/plain")
        .body("How?")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 415);
}

#[tokio::test]
async fn not_ready_until_the_oracle_is_open() {
    let lib = library();
    let state = state_with(
        ServerSettings::default(),
        Profile::Default,
        ApiKeys::default(),
    )
    .serving_oracle();
    let server = start(state.clone()).await;
    let ready = client()
        .get(format!("{}/readyz", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    let res = client()
        .post(format!("{}/api/oracle", server.url))
        .json(&json!({"question": QUESTION}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 503);
    assert!(res.headers().contains_key("retry-after"));
    // The guards do not wait for the index.
    let res = client()
        .post(format!("{}/v1/clamp", server.url))
        .json(&json!({"text": "hola"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);

    assert!(state.set_oracle(Oracle::open(&Config::default(), Some(&lib.db)).unwrap()));
    let ready = client()
        .get(format!("{}/readyz", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    let (status, _) = post_json(
        &format!("{}/api/oracle", server.url),
        json!({"question": QUESTION}),
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_guard_only_server_has_no_api_routes() {
    let server = common::start_default().await;
    let res = client()
        .post(format!("{}/api/oracle", server.url))
        .json(&json!({"question": QUESTION}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
}

#[tokio::test]
async fn two_hundred_concurrent_sse_asks_all_finish() {
    let lib = library();
    let n = 200;
    let fake = Fake::start((0..n).map(|_| healthy_stream()).collect()).await;
    let server = serve(&openai_config(&fake), &lib).await;
    let url = format!("{}/api/oracle", server.url);
    let asks = (0..n).map(|i| {
        let url = url.clone();
        async move {
            let res = client()
                .post(&url)
                .header("accept", "text/event-stream")
                .json(&json!({"question": format!("{QUESTION} ({i})")}))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200, "ask {i}");
            let events = read_events(res).await;
            assert_eq!(
                names(&events),
                ["meta", "sources", "delta*", "done"],
                "ask {i}"
            );
            events.last().unwrap().data["answer"]
                .as_str()
                .unwrap()
                .to_string()
        }
    });
    let answers = futures_util::future::join_all(asks).await;
    assert_eq!(answers.len(), n);
    assert!(answers
        .iter()
        .all(|a| a == "Cancel the stream when the watcher fires."));
    assert_eq!(fake.hits(), n);
}

#[tokio::test]
async fn a_silent_upstream_ends_the_stream_at_the_idle_timeout() {
    let lib = library();
    let fake = Fake::start(vec![Reply::SseThenStall(vec![chunk(
        "{\"answer\": \"Half",
    )])])
    .await;
    let mut config = openai_config(&fake);
    // The LLM timeout is longer than the server's idle timeout.
    config.oracle.timeout_secs = 60;
    let settings = ServerSettings {
        stream_idle_timeout_secs: 1,
        ..ServerSettings::default()
    };
    let server = serve_with(&config, &lib, settings).await;
    let res = ask_sse(
        &format!("{}/api/oracle", server.url),
        json!({"question": QUESTION}),
    )
    .await;
    let events = tokio::time::timeout(Duration::from_secs(30), read_events(res))
        .await
        .expect("the stream did not end at the idle timeout");
    let last = events.last().unwrap();
    assert_eq!(last.event, "error", "{events:?}");
    assert_eq!(last.data["kind"], "timeout");
    assert_request_dropped(&fake, usize::MAX).await;
}

#[tokio::test]
async fn mcp_ask_and_search_answer_from_the_oracle() {
    let lib = library();
    let server = serve(&Config::default(), &lib).await;
    let call = |id: u32, method: &str, params: Value| {
        let url = format!("{}/mcp", server.url);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        async move {
            let res = client()
                .post(url)
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2025-06-18")
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200);
            res.json::<Value>().await.unwrap()
        }
    };
    let list = call(1, "tools/list", json!({})).await;
    let tools: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"ask") && tools.contains(&"search"),
        "{tools:?}"
    );
    let ask = call(
        2,
        "tools/call",
        json!({"name": "ask", "arguments": {"question": "How do I cancel the stream?", "mode": "help"}}),
    )
    .await;
    let report = &ask["result"]["structuredContent"];
    assert_eq!(report["mode"], "help", "{ask}");
    assert!(report["answer"].as_str().unwrap().contains("watcher"));
    let search = call(
        3,
        "tools/call",
        json!({"name": "search", "arguments": {"query": "rescue broken output", "k": 1, "retrieval": "lexical"}}),
    )
    .await;
    let hits = search["result"]["structuredContent"]["hits"]
        .as_array()
        .unwrap();
    assert_eq!(hits.len(), 1, "{search}");
    assert!(hits[0].to_string().contains("rescue"), "{search}");
}
