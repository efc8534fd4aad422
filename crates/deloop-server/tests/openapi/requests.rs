//! Request schemas accept what the server accepts, and the layers' error
//! answers are documented problems.

use crate::common::{client, start, state_with};
use crate::document::*;
use deloop_core::loops::Profile;
use deloop_server::auth::ApiKeys;
use deloop_server::ServerSettings;
use serde_json::{json, Value};

#[tokio::test]
async fn request_schemas_accept_what_the_server_accepts_and_refuse_what_it_refuses() {
    let lib = library();
    let server = serve_with_oracle(&lib, ServerSettings::default(), ApiKeys::default()).await;
    let doc = fetch_doc(&server.url, None).await;
    let c = client();
    // (path, a valid body, bodies the server refuses with 400)
    let cases: Vec<(&str, &str, Value, Vec<Value>)> = vec![
        (
            "/api/oracle",
            "/api/oracle",
            json!({"question": "How?", "lang": "auto", "k": 2, "hyde": false, "retrieval": "lexical",
                   "history": [{"role": "user", "content": "a"}], "stream": false}),
            vec![
                json!({}),
                json!({"question": 3}),
                json!({"question": "How?", "lang": "fr"}),
                json!({"question": "How?", "colour": "red"}),
                json!({"question": "How?", "k": 0}),
                json!({"question": "How?", "history": [{"role": "system", "content": "a"}]}),
            ],
        ),
        (
            "/v1/clamp",
            "/v1/clamp",
            json!({"text": "x", "config": {"words": {"min_run": 4}, "healthy": {"enabled": true}}}),
            vec![
                json!({}),
                json!({"text": "x", "extra": 1}),
                json!({"text": "x", "config": {"wordz": {}}}),
                json!({"text": "x", "config": {"words": {"min_run": "many"}}}),
                json!({"text": 1}),
            ],
        ),
        (
            "/v1/rescue",
            "/v1/rescue",
            json!({"text": "{\"a\": 1}", "key": "a"}),
            vec![
                json!({"text": "x"}),
                json!({"key": "a"}),
                json!({"text": "x", "key": "a", "k": 1}),
            ],
        ),
        (
            "/v1/repair",
            "/v1/repair",
            json!({"text": "[1,"}),
            vec![
                json!({}),
                json!({"text": null}),
                json!({"text": "x", "key": "a"}),
            ],
        ),
        (
            "/v1/sessions/{session}/calls",
            "/v1/sessions/r/calls",
            json!({"tool": "read", "args": {"p": 1}, "id": "x1", "agent": "main", "run": "r"}),
            vec![
                json!({"args": {}}),
                json!({"tool": 1}),
                json!({"tool": "read", "colour": 1}),
            ],
        ),
        (
            "/v1/sessions/{session}/results",
            "/v1/sessions/r/results",
            json!({"id": "x1", "result": {"ok": true}, "agent": "main", "run": "r"}),
            vec![
                json!({"id": "x1", "result": 1, "colour": 1}),
                json!({"id": 5, "result": 1}),
            ],
        ),
        (
            "/v1/sessions/{session}/compaction",
            "/v1/sessions/r/compaction",
            json!({"agent": "main", "run": "r"}),
            vec![json!({"agent": 1}), json!({"colour": 1})],
        ),
    ];
    for (path, concrete, good, bads) in cases {
        let v = request_validator(&doc, "POST", path);
        assert_valid(&v, &good, &format!("{path} valid body"));
        let res = c
            .post(format!("{}{concrete}", server.url))
            .json(&good)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        assert!(
            (200..300).contains(&status),
            "{path}: {status} {}",
            res.text().await.unwrap()
        );
        for bad in bads {
            let res = c
                .post(format!("{}{concrete}", server.url))
                .json(&bad)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 400, "{path} {bad}");
            // What the server refuses the schema refuses too, except rules
            // no schema states (k within range is stated; it is checked).
            assert!(
                !v.is_valid(&bad),
                "{path}: the schema accepts {bad}, which the server refuses"
            );
        }
    }
}

#[tokio::test]
async fn error_answers_of_the_layers_are_documented_problems() {
    // Auth on, a small body limit, a concurrency limit of one, and an
    // oracle that has not opened yet.
    let settings = ServerSettings {
        max_body_bytes: 1024,
        ..ServerSettings::default()
    };
    let keys = ApiKeys::parse(Some("k1"), None);
    let state = state_with(settings, Profile::Default, keys).serving_oracle();
    let server = start(state).await;
    let doc = fetch_doc(&server.url, Some("k1")).await;
    let c = client();
    let url = server.url.as_str();
    let big = "x".repeat(4096);
    let cases = [
        (
            "POST",
            "/v1/clamp",
            c.post(format!("{url}/v1/clamp"))
                .json(&json!({"text": "x"})),
            401,
        ),
        (
            "POST",
            "/v1/clamp",
            c.post(format!("{url}/v1/clamp"))
                .bearer_auth("no")
                .json(&json!({"text": "x"})),
            403,
        ),
        (
            "GET",
            "/openapi.json",
            c.get(format!("{url}/openapi.json")),
            401,
        ),
        (
            "GET",
            "/metrics",
            c.get(format!("{url}/metrics")).bearer_auth("no"),
            403,
        ),
        (
            "POST",
            "/v1/clamp",
            c.post(format!("{url}/v1/clamp"))
                .bearer_auth("k1")
                .json(&json!({"text": big})),
            413,
        ),
        (
            "POST",
            "/v1/check",
            c.post(format!("{url}/v1/check"))
                .bearer_auth("k1")
                .body(big.clone()),
            413,
        ),
        // The optional compaction body has the same limit, as problem+json.
        (
            "POST",
            "/v1/sessions/{session}/compaction",
            c.post(format!("{url}/v1/sessions/s/compaction"))
                .bearer_auth("k1")
                .body(big.clone()),
            413,
        ),
        (
            "POST",
            "/v1/sessions/{session}/calls",
            c.post(format!("{url}/v1/sessions/s/calls"))
                .bearer_auth("k1")
                .body("{}"),
            415,
        ),
        (
            "POST",
            "/api/help",
            c.post(format!("{url}/api/help"))
                .bearer_auth("k1")
                .json(&json!({"question": "q"})),
            503,
        ),
        (
            "POST",
            "/mcp",
            c.post(format!("{url}/mcp"))
                .bearer_auth("k1")
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .body("not json-rpc"),
            400,
        ),
    ];
    for (method, path, req, want) in cases {
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        assert_eq!(status, want, "{method} {path}");
        assert_eq!(
            res.headers()["content-type"],
            "application/problem+json",
            "{method} {path}"
        );
        let body: Value = res.json().await.unwrap();
        let v = response_validator(&doc, method, path, status, "application/problem+json");
        assert_valid(&v, &body, &format!("{method} {path} -> {status}"));
        assert_eq!(body["status"], status);
    }
}
