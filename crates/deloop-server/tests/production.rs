//! Production behaviour over real TCP: auth, body limits, content types,
//! request ids, CORS, load shedding, metrics.

mod common;

use deloop_core::loops::Profile;
use deloop_server::auth::ApiKeys;
use deloop_server::ServerSettings;
use serde_json::{json, Value};

#[tokio::test]
async fn auth_is_401_without_a_key_403_with_a_wrong_one_and_probes_stay_open() {
    let keys = ApiKeys::parse(Some("k1,k2"), None);
    let server = common::start(common::state_with(
        ServerSettings::default(),
        Profile::Default,
        keys,
    ))
    .await;
    let c = common::client();
    let url = &server.url;
    let call = json!({"tool": "read", "args": {}});
    let r = c
        .post(format!("{url}/v1/sessions/a/calls"))
        .json(&call)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    let r = c
        .post(format!("{url}/v1/sessions/a/calls"))
        .bearer_auth("wrong")
        .json(&call)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let body = r.text().await.unwrap();
    assert!(!body.contains("wrong") && !body.contains("k1"), "{body}");
    let r = c
        .post(format!("{url}/v1/sessions/a/calls"))
        .bearer_auth("k2")
        .json(&call)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    for open in ["/healthz", "/readyz"] {
        assert_eq!(
            c.get(format!("{url}{open}")).send().await.unwrap().status(),
            200,
            "{open}"
        );
    }
    for closed in ["/metrics"] {
        assert_eq!(
            c.get(format!("{url}{closed}"))
                .send()
                .await
                .unwrap()
                .status(),
            401,
            "{closed}"
        );
    }
}

#[tokio::test]
async fn bodies_over_the_limit_are_413_and_wrong_content_types_415() {
    let settings = ServerSettings {
        max_body_bytes: 1024,
        ..ServerSettings::default()
    };
    let server = common::start(common::state_with(
        settings,
        Profile::Default,
        ApiKeys::default(),
    ))
    .await;
    let c = common::client();
    let url = &server.url;
    let big = json!({"tool": "read", "args": {"x": "a".repeat(4096)}});
    let r = c
        .post(format!("{url}/v1/sessions/a/calls"))
        .json(&big)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    assert_eq!(r.headers()["content-type"], "application/problem+json");
    let r = c
        .post(format!("{url}/v1/sessions/a/calls"))
        .header("content-type", "text/plain")
        .body(r#"{"tool":"read"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
    let r = c
        .post(format!("{url}/v1/sessions/a/calls"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["detail"].as_str().unwrap().contains("malformed JSON"),
        "{body}"
    );
}

#[tokio::test]
async fn every_response_has_a_request_id_and_cors_is_off_by_default() {
    let server = common::start_default().await;
    let c = common::client();
    let r = c
        .get(format!("{}/healthz", server.url))
        .header("origin", "https://example.com")
        .send()
        .await
        .unwrap();
    assert!(!r.headers()["x-request-id"].is_empty());
    assert!(r.headers().get("access-control-allow-origin").is_none());
    // A client's own request id is kept.
    let r = c
        .get(format!("{}/healthz", server.url))
        .header("x-request-id", "abc-123")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-request-id"], "abc-123");
}

#[tokio::test]
async fn cors_allows_configured_origins() {
    let settings = ServerSettings {
        cors_origins: vec!["https://app.example".into()],
        ..ServerSettings::default()
    };
    let server = common::start(common::state_with(
        settings,
        Profile::Default,
        ApiKeys::default(),
    ))
    .await;
    let r = common::client()
        .get(format!("{}/healthz", server.url))
        .header("origin", "https://app.example")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://app.example"
    );
}

#[tokio::test]
async fn metrics_count_requests_by_route_and_verdicts() {
    let server = common::start_default().await;
    let c = common::client();
    for i in 0..3 {
        c.post(format!("{}/v1/sessions/m{i}/calls", server.url))
            .json(&json!({"tool": "read", "args": {}}))
            .send()
            .await
            .unwrap();
    }
    let text = common::metrics_text(&server.url, None).await;
    assert!(
        text.contains(r#"deloop_http_requests_total{route="/v1/sessions/{session}/calls",method="POST",status="200"} 3"#),
        "{text}"
    );
    assert!(
        text.contains(r#"deloop_tool_call_verdicts_total{level="ok",detector="none"} 3"#),
        "{text}"
    );
    assert!(text.contains("deloop_sessions 3"), "{text}");
    assert!(
        text.contains("deloop_http_request_duration_seconds_bucket"),
        "{text}"
    );
}
