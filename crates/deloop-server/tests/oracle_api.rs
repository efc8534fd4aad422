//! `/api/oracle`, `/api/help` and `/api/tutor` end to end over real TCP: a
//! real SQLite index in a temp dir, the oracle behind the server, and the
//! fake OpenAI-compatible LLM of deloop-llm's tests (the real wire format
//! on 127.0.0.1), which can stream a loop and see the client go away.

mod common;
#[path = "../../deloop-llm/tests/common/mod.rs"]
mod llm;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{client, start, state_with, Library, TestServer};
use deloop_config::Config;
use deloop_core::loops::Profile;
use deloop_oracle::Oracle;
use deloop_server::auth::ApiKeys;
use deloop_server::ServerSettings;
use futures_util::StreamExt;
use llm::{assert_request_dropped, fast_retry, Fake, Reply};
use serde_json::{json, Value};

const LOOPS_MD: &str = "# Loops\n\nWhen a stream loops, the watcher cuts it and the request is \
cancelled.\nCancel the stream as soon as the watcher fires.\n\n## Bucles\n\nCuando el stream \
entra en bucle, el vigilante lo corta y se cancela la petición.\n";
const RESCUE_MD: &str =
    "# Rescue\n\nThe JSON rescue recovers the answer from broken model output.\n";
const QUESTION: &str = "How do I stop a looping stream?";

fn library() -> Library {
    common::library(&[("loops.md", LOOPS_MD), ("rescue.md", RESCUE_MD)])
}

fn openai_config(fake: &Fake) -> Config {
    let mut c = Config::default();
    c.llm.provider = Some(deloop_llm::Provider::Openai);
    c.llm.openai_base_url = Some(format!("{}/v1", fake.url));
    c.llm.model = Some("test-model".into());
    c.llm.retry = fast_retry(1);
    c
}

fn chunk(text: &str) -> String {
    json!({"id": "c1", "object": "chat.completion.chunk",
           "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
    .to_string()
}

fn last_chunk() -> String {
    json!({"id": "c1", "object": "chat.completion.chunk",
           "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    .to_string()
}

/// A healthy streamed reply (citing nothing retrieved).
fn healthy_stream() -> Reply {
    healthy_stream_citing("loops.md")
}

/// A healthy streamed reply citing lines 1-4 of `source`.
fn healthy_stream_citing(source: &str) -> Reply {
    let citations = json!([{"source": source, "start_line": 1, "end_line": 4}]);
    Reply::Sse(vec![
        chunk("{\"answer\": \"Cancel the stream when the watcher fires.\", "),
        chunk(&format!("\"citations\": {citations}}}")),
        last_chunk(),
    ])
}

/// A stream that loops for `max` chunks unless cancelled.
fn looping_stream(max: usize) -> Reply {
    Reply::LoopSse {
        prefix: vec![chunk(
            "{\"answer\": \"The watcher stops a looping stream and cancels the request. ",
        )],
        repeat: chunk("la continuación de un proceso "),
        max,
    }
}

/// A server whose oracle answers from `lib` with `config`.
async fn serve(config: &Config, lib: &Library) -> TestServer {
    serve_with(config, lib, ServerSettings::default()).await
}

async fn serve_with(config: &Config, lib: &Library, settings: ServerSettings) -> TestServer {
    let state = state_with(settings, Profile::Default, ApiKeys::default()).serving_oracle();
    let oracle = Oracle::open(config, Some(&lib.db)).unwrap();
    assert!(state.set_oracle(oracle));
    start(state).await
}

async fn post_json(url: &str, body: Value) -> (u16, Value) {
    let res = client().post(url).json(&body).send().await.unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    let value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    (status, value)
}

/// One parsed server-sent event.
#[derive(Debug)]
struct Sse {
    event: String,
    data: Value,
}

/// Reads every event of an SSE response to its end.
async fn read_events(res: reqwest::Response) -> Vec<Sse> {
    let text = res.text().await.unwrap();
    parse_events(&text)
}

fn parse_events(text: &str) -> Vec<Sse> {
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let mut event = String::new();
        let mut data = String::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                event = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
            }
        }
        if !event.is_empty() {
            let data = serde_json::from_str(&data).unwrap_or_else(|e| {
                panic!("event {event}: data is not one JSON object ({e}): {data}")
            });
            out.push(Sse { event, data });
        }
    }
    out
}

/// Event names with runs of deltas collapsed into `delta*`.
fn names(events: &[Sse]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in events {
        let name = if e.event == "delta" {
            "delta*".to_string()
        } else {
            e.event.clone()
        };
        if !(name == "delta*" && out.last().map(String::as_str) == Some("delta*")) {
            out.push(name);
        }
    }
    out
}

async fn ask_sse(url: &str, body: Value) -> reqwest::Response {
    let res = client()
        .post(url)
        .header("accept", "text/event-stream")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    res
}

#[tokio::test]
async fn each_mode_answers_json_like_deloop_ask_json() {
    let lib = library();
    let mut systems = Vec::new();
    let loops_md = lib.db.parent().unwrap().join("docs/loops.md");
    for mode in ["oracle", "help", "tutor"] {
        let fake = Fake::start(vec![healthy_stream_citing(loops_md.to_str().unwrap())]).await;
        let server = serve(&openai_config(&fake), &lib).await;
        let (status, report) = post_json(
            &format!("{}/api/{mode}", server.url),
            json!({"question": QUESTION, "lang": "en", "k": 2, "retrieval": "lexical"}),
        )
        .await;
        assert_eq!(status, 200, "{report}");
        assert_eq!(report["mode"], mode);
        assert_eq!(report["language"], "en");
        assert_eq!(report["provider"], "openai");
        assert_eq!(
            report["answer"],
            "Cancel the stream when the watcher fires."
        );
        assert_eq!(report["degraded"], false);
        assert_eq!(report["retrieval"]["used"], "lexical");
        assert!(report["passages"].as_array().unwrap().len() <= 2);
        assert!(
            report["citations"][0]["source"]
                .as_str()
                .is_some_and(|s| s.ends_with("loops.md")),
            "{report:#}"
        );
        // The same fields as `deloop ask --json` prints (the report type).
        let parsed: deloop_oracle::AskReport = serde_json::from_value(report.clone()).unwrap();
        assert_eq!(serde_json::to_value(&parsed).unwrap(), report);
        systems.push(fake.seen()[0].body["messages"][0].to_string());
    }
    // Each mode's own prompt reached the model.
    assert_eq!(systems.len(), 3);
    assert!(
        systems[0] != systems[1] && systems[1] != systems[2] && systems[0] != systems[2],
        "{systems:?}"
    );
}

#[tokio::test]
async fn without_an_llm_the_answer_is_extractive() {
    let lib = library();
    let server = serve(&Config::default(), &lib).await;
    let (status, report) = post_json(
        &format!("{}/api/help", server.url),
        json!({"question": "How do I cancel the stream?"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(report["provider"], "extractive");
    assert!(report["answer"].as_str().unwrap().contains("watcher"));
}

#[tokio::test]
async fn the_tutor_passes_history_to_the_model() {
    let lib = library();
    let fake = Fake::start(vec![healthy_stream()]).await;
    let server = serve(&openai_config(&fake), &lib).await;
    let (status, _) = post_json(
        &format!("{}/api/tutor", server.url),
        json!({"question": QUESTION, "history": [
            {"role": "user", "content": "What is a loop?"},
            {"role": "assistant", "content": "A unit repeated back to back."}
        ]}),
    )
    .await;
    assert_eq!(status, 200);
    let messages = fake.seen()[0].body["messages"].clone();
    let roles: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"], "{messages}");
    assert_eq!(messages[1]["content"], "What is a loop?");
    assert_eq!(messages[2]["content"], "A unit repeated back to back.");
}

#[tokio::test]
async fn sse_streams_meta_sources_deltas_cut_done_for_a_looping_llm() {
    let lib = library();
    let max = 2_000;
    let fake = Fake::start(vec![looping_stream(max)]).await;
    let server = serve(&openai_config(&fake), &lib).await;
    let res = ask_sse(
        &format!("{}/api/oracle", server.url),
        json!({"question": QUESTION}),
    )
    .await;
    let events = read_events(res).await;
    assert_eq!(
        names(&events),
        ["meta", "sources", "delta*", "cut", "done"],
        "{events:?}"
    );
    let meta = &events[0].data;
    assert_eq!(meta["mode"], "oracle");
    assert_eq!(meta["provider"], "openai");
    assert_eq!(meta["model"], "test-model");
    let sources = events[1].data["sources"].as_array().unwrap();
    assert!(!sources.is_empty());
    for key in [
        "source",
        "start_line",
        "end_line",
        "heading_trail",
        "text",
        "score",
    ] {
        assert!(sources[0].get(key).is_some(), "sources lack {key}");
    }
    let text: String = events
        .iter()
        .filter(|e| e.event == "delta")
        .map(|e| e.data["text"].as_str().unwrap())
        .collect();
    assert!(
        text.starts_with("The watcher stops a looping stream"),
        "{text}"
    );
    let cut = &events.iter().find(|e| e.event == "cut").unwrap().data;
    assert!(cut["detector"].is_string() && cut["start"].as_u64().unwrap() > 0);
    let done = &events.last().unwrap().data;
    assert_eq!(done["loop_cut"], true);
    assert_eq!(done["saved_chars"], cut["saved_chars"]);
    assert_eq!(done["loop_detector"], cut["detector"]);
    // A loop mid-stream is an upstream fault: honest, degraded, explained.
    assert_eq!(done["degraded"], true);
    assert!(done["llm_error"].as_str().unwrap().contains("looped"));
    // The upstream was cancelled, not read to its end.
    assert!(fake.probe().sent.load(Ordering::SeqCst) < max);
    // The cut is counted.
    let metrics = client()
        .get(format!("{}/metrics", server.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("deloop_loops_cut_total{") && l.contains("source=\"oracle\"")),
        "{metrics}"
    );
}

#[tokio::test]
async fn stream_true_in_the_body_also_asks_for_events() {
    let lib = library();
    let fake = Fake::start(vec![healthy_stream()]).await;
    let server = serve(&openai_config(&fake), &lib).await;
    let res = client()
        .post(format!("{}/api/help", server.url))
        .json(&json!({"question": QUESTION, "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let events = read_events(res).await;
    assert_eq!(names(&events), ["meta", "sources", "delta*", "done"]);
    assert_eq!(events.last().unwrap().data["mode"], "help");
    assert_eq!(events.last().unwrap().data["loop_cut"], false);
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_the_upstream() {
    let lib = library();
    let max = 100_000;
    let fake = Fake::start(vec![Reply::LoopSse {
        prefix: vec![chunk("{\"answer\": \"Words ")],
        repeat: chunk("and more words "),
        max,
    }])
    .await;
    let mut config = openai_config(&fake);
    // No loop guard: only the client going away can end this stream early.
    config.guards.clamp.words.enabled = false;
    config.guards.clamp.substring.enabled = false;
    config.guards.clamp.near.enabled = false;
    let server = serve(&config, &lib).await;
    let res = ask_sse(
        &format!("{}/api/oracle", server.url),
        json!({"question": QUESTION}),
    )
    .await;
    let mut body = res.bytes_stream();
    let mut seen = String::new();
    while let Some(chunk) = body.next().await {
        seen.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        if seen.contains("event: delta") {
            break;
        }
    }
    drop(body);
    assert_request_dropped(&fake, max).await;
}

#[tokio::test]
async fn upstream_faults_answer_200_degraded_with_llm_error() {
    let lib = library();
    let faults = [
        (
            "429 with Retry-After",
            Reply::JsonHeader(
                429,
                json!({"error": {"message": "rate limited"}}),
                "retry-after",
                "1".into(),
            ),
        ),
        (
            "500",
            Reply::Json(500, json!({"error": {"message": "boom"}})),
        ),
        (
            "a dropped connection mid-stream",
            Reply::SseThenDrop(vec![chunk("{\"answer\": \"Half an ans")]),
        ),
        (
            "a stream that stalls past the timeout",
            Reply::SseThenStall(vec![chunk("{\"answer\": \"Half an ans")]),
        ),
        ("a loop mid-stream", looping_stream(5_000)),
    ];
    for (what, reply) in faults {
        for sse in [false, true] {
            let fake = Fake::start(vec![reply.clone()]).await;
            let mut config = openai_config(&fake);
            config.oracle.timeout_secs = 1;
            let server = serve(&config, &lib).await;
            let url = format!("{}/api/oracle", server.url);
            let report = if sse {
                let events = read_events(ask_sse(&url, json!({"question": QUESTION})).await).await;
                let last = events.last().unwrap();
                assert_eq!(last.event, "done", "{what}: {events:?}");
                last.data.clone()
            } else {
                let (status, report) = post_json(&url, json!({"question": QUESTION})).await;
                assert_eq!(status, 200, "{what}: {report}");
                report
            };
            assert_eq!(report["degraded"], true, "{what}: {report}");
            let err = report["llm_error"].as_str().unwrap_or_default();
            assert!(!err.is_empty(), "{what}: {report}");
            assert!(!report["answer"].as_str().unwrap().is_empty(), "{what}");
            eprintln!("{what} (sse {sse}): {err}");
        }
    }
}

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

#[tokio::test]
async fn a_non_streamed_request_past_the_deadline_gets_408() {
    let lib = library();
    let max = 100_000;
    let fake = Fake::start(vec![Reply::LoopSse {
        prefix: vec![chunk("{\"answer\": \"Words ")],
        repeat: chunk("and more words "),
        max,
    }])
    .await;
    let mut config = openai_config(&fake);
    config.oracle.timeout_secs = 60;
    // No loop guard: only the deadline can end this ask.
    config.guards.clamp.words.enabled = false;
    config.guards.clamp.substring.enabled = false;
    config.guards.clamp.near.enabled = false;
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
    let fake = Fake::start(vec![Reply::LoopSse {
        prefix: vec![chunk("{\"answer\": \"Words ")],
        repeat: chunk("and more words "),
        max,
    }])
    .await;
    let mut config = openai_config(&fake);
    config.guards.clamp.words.enabled = false;
    config.guards.clamp.substring.enabled = false;
    config.guards.clamp.near.enabled = false;
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
    let text = client()
        .get(format!("{}/metrics", server.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = metrics_shed(&text).unwrap_or_else(|| panic!("no shed counter: {text}"));
    assert!(line.ends_with(" 3"), "{line}");
}
