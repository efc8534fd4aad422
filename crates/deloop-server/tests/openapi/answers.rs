//! Real answers (JSON, problem+json, JSON lines, SSE events) validate against
//! the documented schemas.

use crate::common::client;
use crate::document::*;
use deloop_server::auth::ApiKeys;
use deloop_server::ServerSettings;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// Sends `body` to `method path` and validates the answer against the
/// document: its status must be listed, its body must match the schema of
/// its content type. Answers the status and body.
pub(crate) async fn exchange(
    doc: &Value,
    req: reqwest::RequestBuilder,
    method: &str,
    path: &str,
) -> (u16, Value) {
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let content_type = res
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let text = res.text().await.unwrap();
    let what = format!("{method} {path} -> {status}");
    if content_type.starts_with("application/x-ndjson") {
        let v = response_validator(doc, method, path, status, "application/x-ndjson");
        let mut lines = Vec::new();
        for line in text.lines() {
            let value: Value = serde_json::from_str(line).unwrap();
            assert_valid(&v, &value, &what);
            lines.push(value);
        }
        return (status, Value::Array(lines));
    }
    let media = content_type.split(';').next().unwrap().trim().to_string();
    if text.is_empty() {
        // 204: the document lists the status with no content.
        let op = operation(doc, method, path);
        assert!(op["responses"][status.to_string()].is_object(), "{what}");
        return (status, Value::Null);
    }
    let value: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{what}: {text}"));
    assert!(
        media == "application/json" || media == "application/problem+json",
        "{what}: {content_type}"
    );
    let v = response_validator(doc, method, path, status, &media);
    assert_valid(&v, &value, &what);
    (status, value)
}

#[tokio::test]
async fn real_answers_validate_against_the_documented_schemas() {
    let lib = library();
    let server = serve_with_oracle(&lib, ServerSettings::default(), ApiKeys::default()).await;
    let doc = fetch_doc(&server.url, None).await;
    let c = client();
    let url = server.url.as_str();
    let post = |path: &str, body: Value| c.post(format!("{url}{path}")).json(&body);

    // The oracle, in the three modes, JSON answers.
    for path in ["/api/oracle", "/api/help", "/api/tutor"] {
        let body = json!({"question": "How is a looping stream cut?", "k": 3, "lang": "en",
                          "history": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]});
        let (status, report) = exchange(&doc, post(path, body), "POST", path).await;
        assert_eq!(status, 200);
        assert_eq!(report["provider"], "extractive");
    }
    // The guards, on inputs that exercise their optional fields.
    let looping = format!(
        "Intro sentence here. {}",
        "the cat sat on the mat ".repeat(20)
    );
    let (_, v) = exchange(
        &doc,
        post("/v1/clamp", json!({"text": looping})),
        "POST",
        "/v1/clamp",
    )
    .await;
    assert_eq!(v["clamped"], true);
    let (_, v) = exchange(
        &doc,
        post("/v1/clamp", json!({"text": "calm"})),
        "POST",
        "/v1/clamp",
    )
    .await;
    assert_eq!(v["clamped"], false);
    let config = json!({"words": {"min_run": 3}, "near": {"enabled": false}});
    exchange(
        &doc,
        post("/v1/clamp", json!({"text": looping, "config": config})),
        "POST",
        "/v1/clamp",
    )
    .await;
    exchange(
        &doc,
        post(
            "/v1/clamp",
            json!({"text": looping, "config": {"seed_compat": true}}),
        ),
        "POST",
        "/v1/clamp",
    )
    .await;
    let broken = "Sure! ```json\n{\"answer\": \"yes\", \"n\": [1, 2,]\n```";
    let (_, v) = exchange(
        &doc,
        post("/v1/rescue", json!({"text": broken, "key": "answer"})),
        "POST",
        "/v1/rescue",
    )
    .await;
    assert_eq!(v["ok"], true);
    let (_, v) = exchange(
        &doc,
        post("/v1/rescue", json!({"text": "no json", "key": "answer"})),
        "POST",
        "/v1/rescue",
    )
    .await;
    assert_eq!(v["ok"], false);
    let (_, v) = exchange(
        &doc,
        post("/v1/repair", json!({"text": broken})),
        "POST",
        "/v1/repair",
    )
    .await;
    assert!(!v["repairs"].as_array().unwrap().is_empty());
    let (status, _) = exchange(
        &doc,
        post("/v1/repair", json!({"text": "no json here"})),
        "POST",
        "/v1/repair",
    )
    .await;
    assert_eq!(status, 422);

    // /v1/check: every JSON line validates (calls, then the summary); a
    // looping transcript has warnings and criticals, a broken one ends
    // with an error line.
    let call = "{\"type\":\"call\",\"tool\":\"read\",\"args\":{\"path\":\"a\"}}\n";
    let transcript: String = (0..25)
        .map(|i| {
            format!(
                "{{\"type\":\"call\",\"id\":\"c{i}\",\"tool\":\"read\",\"args\":{{\"path\":\"a\"}}}}\n\
                 {{\"type\":\"result\",\"id\":\"c{i}\",\"result\":\"same\"}}\n"
            )
        })
        .collect();
    let (_, lines) = exchange(
        &doc,
        c.post(format!("{url}/v1/check")).body(transcript.clone()),
        "POST",
        "/v1/check",
    )
    .await;
    let lines = lines.as_array().unwrap();
    assert_eq!(lines.len(), 26);
    assert!(lines.iter().any(|l| l["level"] == "critical"));
    assert!(lines[25]["summary"]["criticals"].as_u64().unwrap() > 0);
    let (_, lines) = exchange(
        &doc,
        c.post(format!("{url}/v1/check?format=events&profile=strict"))
            .body(format!("{call}{call}not json\n")),
        "POST",
        "/v1/check",
    )
    .await;
    assert!(
        lines.as_array().unwrap().last().unwrap()["error"]["line"].is_u64(),
        "{lines}"
    );

    // Sessions: verdicts from ok to critical, results with and without id,
    // a compaction with and without a body, and the forget.
    let calls = "/v1/sessions/{session}/calls";
    let results = "/v1/sessions/{session}/results";
    let mut levels = BTreeSet::new();
    for i in 0..22 {
        let (_, v) = exchange(
            &doc,
            post(
                "/v1/sessions/s1/calls",
                json!({"tool": "read", "args": {"path": "a"}, "id": format!("c{i}"), "run": "r1"}),
            ),
            "POST",
            calls,
        )
        .await;
        levels.insert(v["level"].as_str().unwrap().to_string());
        exchange(
            &doc,
            post(
                "/v1/sessions/s1/results",
                json!({"id": format!("c{i}"), "result": "same", "run": "r1"}),
            ),
            "POST",
            results,
        )
        .await;
    }
    assert_eq!(levels.len(), 3, "{levels:?}");
    exchange(
        &doc,
        post("/v1/sessions/s1/calls", json!({"tool": "ls", "args": {}})),
        "POST",
        calls,
    )
    .await;
    exchange(
        &doc,
        post(
            "/v1/sessions/s1/results",
            json!({"tool": "ls", "args": {}, "error": "denied"}),
        ),
        "POST",
        results,
    )
    .await;
    let compaction = "/v1/sessions/{session}/compaction";
    let (status, _) = exchange(
        &doc,
        post("/v1/sessions/s1/compaction", json!({"agent": "main"})),
        "POST",
        compaction,
    )
    .await;
    assert_eq!(status, 204);
    let (status, _) = exchange(
        &doc,
        c.post(format!("{url}/v1/sessions/s1/compaction")),
        "POST",
        compaction,
    )
    .await;
    assert_eq!(status, 204);
    // The listing, a page at a time, and a refused cursor.
    let (status, v) = exchange(
        &doc,
        c.get(format!("{url}/v1/sessions?limit=1")),
        "GET",
        "/v1/sessions",
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(v["sessions"][0]["session"], "s1");
    let (status, _) = exchange(
        &doc,
        c.get(format!("{url}/v1/sessions?cursor=not-hex")),
        "GET",
        "/v1/sessions",
    )
    .await;
    assert_eq!(status, 400);
    let forget = "/v1/sessions/{session}";
    let (status, _) = exchange(
        &doc,
        c.delete(format!("{url}/v1/sessions/s1")),
        "DELETE",
        forget,
    )
    .await;
    assert_eq!(status, 204);

    // Errors: each is problem+json, with a status the document lists.
    let (status, _) = exchange(
        &doc,
        c.delete(format!("{url}/v1/sessions/s1")),
        "DELETE",
        forget,
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = exchange(
        &doc,
        post(
            "/v1/sessions/s2/results",
            json!({"id": "nope", "result": 1}),
        ),
        "POST",
        results,
    )
    .await;
    assert_eq!(status, 409);
    let (status, _) = exchange(
        &doc,
        post("/v1/clamp", json!({"txt": "x"})),
        "POST",
        "/v1/clamp",
    )
    .await;
    assert_eq!(status, 400);
    let (status, _) = exchange(
        &doc,
        c.post(format!("{url}/v1/rescue")).body("{}"),
        "POST",
        "/v1/rescue",
    )
    .await;
    assert_eq!(status, 415);
    let (status, _) = exchange(
        &doc,
        c.post(format!("{url}/v1/check?format=xml")).body(""),
        "POST",
        "/v1/check",
    )
    .await;
    assert_eq!(status, 400);
    let (status, _) = exchange(
        &doc,
        post("/api/help", json!({"question": "q", "k": 0})),
        "POST",
        "/api/help",
    )
    .await;
    assert_eq!(status, 400);

    // Operations.
    let (status, _) = exchange(
        &doc,
        c.get(format!("{url}/openapi.json")),
        "GET",
        "/openapi.json",
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn sse_events_validate_against_their_documented_schemas() {
    let lib = library();
    let server = serve_with_oracle(&lib, ServerSettings::default(), ApiKeys::default()).await;
    let doc = fetch_doc(&server.url, None).await;
    let stream = doc
        .pointer("/paths/~1api~1oracle/post/responses/200/content/text~1event-stream/schema/$ref")
        .unwrap()
        .as_str()
        .unwrap()
        .trim_start_matches('#');
    let events = doc
        .pointer(&format!("{stream}/x-events"))
        .unwrap()
        .as_object()
        .unwrap()
        .clone();
    let names: BTreeSet<&str> = events.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        BTreeSet::from(["meta", "sources", "delta", "cut", "done", "error"])
    );
    let res = client()
        .post(format!("{}/api/oracle", server.url))
        .header("accept", "text/event-stream")
        .json(&json!({"question": "How is a looping stream cut?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let text = res.text().await.unwrap();
    let mut seen = Vec::new();
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
        if event.is_empty() {
            continue;
        }
        let schema = events
            .get(&event)
            .unwrap_or_else(|| panic!("event {event} is not documented"));
        let pointer = schema["$ref"].as_str().unwrap().trim_start_matches('#');
        let data: Value = serde_json::from_str(&data).unwrap();
        assert_valid(&validator(&doc, pointer), &data, &format!("event {event}"));
        seen.push(event);
    }
    assert_eq!(seen, ["meta", "sources", "delta", "done"]);
    // An extractive ask has no `cut` and no `error`: their payloads, as the
    // oracle's types serialise them, validate too.
    let others = [
        (
            "cut",
            serde_json::to_value(deloop_oracle::CutEvent {
                detector: "word_period".into(),
                start: 120,
                saved_chars: 4000,
            })
            .unwrap(),
        ),
        (
            "error",
            serde_json::to_value(deloop_oracle::ErrorEvent {
                kind: "timeout".into(),
                message: "no event for 30 s".into(),
            })
            .unwrap(),
        ),
    ];
    for (event, data) in others {
        let pointer = events[event]["$ref"]
            .as_str()
            .unwrap()
            .trim_start_matches('#');
        assert_valid(&validator(&doc, pointer), &data, &format!("event {event}"));
        let mut wrong = data.clone();
        wrong
            .as_object_mut()
            .unwrap()
            .remove(if event == "cut" { "start" } else { "kind" });
        assert!(
            !validator(&doc, pointer).is_valid(&wrong),
            "event {event} without a required field validates"
        );
    }
    // `done` is the JSON answer's schema.
    assert_eq!(
        events["done"],
        doc.pointer("/paths/~1api~1oracle/post/responses/200/content/application~1json/schema")
            .unwrap()
            .clone()
    );
}
