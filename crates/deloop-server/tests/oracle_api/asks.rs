//! Asks in each mode, JSON and SSE: extractive without an LLM, the tutor's
//! history, loop cuts, a client going away, upstream faults.

use crate::common::{self, client};
use crate::fixtures::*;
use crate::llm::{assert_request_dropped, Fake, Reply};
use deloop_config::Config;
use futures_util::StreamExt;
use serde_json::json;
use std::sync::atomic::Ordering;

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
    let metrics = common::metrics_text(&server.url, None).await;
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
    let fake = Fake::start(vec![endless_words(max)]).await;
    let mut config = openai_config(&fake);
    // No loop guard: only the client going away can end this stream early.
    without_loop_guard(&mut config);
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
