//! Failures: timeouts, cancellation, refusals, the key kept out of errors and
//! logs, transport errors.

use crate::common::{assert_times_out, slow, Fake, LogCapture, Reply};
use crate::fixtures::*;
use deloop_llm::{CancellationToken, LlmClient, LlmError};
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn a_reply_slower_than_the_timeout_is_a_timeout() {
    let fake = Fake::start(vec![slow(ok())]).await;
    assert_times_out(&LlmClient::Gemini(client(&fake)), &fake, json_request()).await;
}

#[tokio::test]
async fn cancellation_stops_the_call() {
    let fake = Fake::start(vec![slow(ok())]).await;
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        trigger.cancel();
    });
    let err = client(&fake)
        .generate(&json_request(), &cancel)
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Cancelled), "{err:?}");
}

#[tokio::test]
async fn safety_finish_is_an_honest_refusal_without_retry() {
    let blocked = json!({"candidates": [{"finishReason": "SAFETY", "index": 0,
        "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": true}]}]});
    let fake = Fake::start(vec![Reply::Json(200, blocked), ok()]).await;
    let err = generate(&client(&fake)).await.unwrap_err();
    match &err {
        LlmError::Refused { reason } => assert_eq!(reason, "SAFETY"),
        other => panic!("{other:?}"),
    }
    assert_eq!(err.to_string(), "the model refused to answer (SAFETY)");
    assert_eq!(fake.hits(), 1);
}

#[tokio::test]
async fn prompt_block_reason_is_a_refusal_without_retry() {
    let blocked = json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT", "safetyRatings": []},
        "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9}});
    let fake = Fake::start(vec![Reply::Json(200, blocked), ok()]).await;
    let err = generate(&client(&fake)).await.unwrap_err();
    assert!(
        matches!(&err, LlmError::Refused { reason } if reason == "PROHIBITED_CONTENT"),
        "{err:?}"
    );
    assert_eq!(fake.hits(), 1);
}

#[tokio::test]
async fn recitation_is_a_refusal() {
    let fake = Fake::start(vec![Reply::Json(200, answer("partial", "RECITATION"))]).await;
    let err = generate(&client(&fake)).await.unwrap_err();
    assert!(
        matches!(&err, LlmError::Refused { reason } if reason == "RECITATION"),
        "{err:?}"
    );
}

#[tokio::test]
async fn the_key_never_appears_in_errors() {
    let fake = Fake::start(vec![invalid(&format!("API key not valid: {KEY}"))]).await;
    let err = generate(&client(&fake)).await.unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains(KEY), "{shown}");
    assert!(shown.contains("<redacted>"));
    assert!(!format!("{:?}", client(&fake)).contains(KEY));
}

#[tokio::test]
async fn the_key_never_appears_in_logs_or_in_errors_from_a_200_body() {
    let logs = LogCapture::default();
    let _on = tracing::subscriber::set_default(logs.clone());
    let echo = format!("API key {KEY} is over quota");
    let fake = Fake::start(vec![
        // Retried: the retry is logged with the error message.
        Reply::Json(503, error(503, "UNAVAILABLE", &echo)),
        // An error object inside a 200 reply, and one inside a stream.
        Reply::Json(200, error(400, "INVALID_ARGUMENT", &echo)),
        Reply::Sse(vec![error(400, "INVALID_ARGUMENT", &echo).to_string()]),
    ])
    .await;
    let c = client(&fake);
    let err = generate(&c).await.unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(matches!(err, LlmError::Http { status: 400, .. }), "{shown}");
    assert!(
        !shown.contains(KEY) && shown.contains("<redacted>"),
        "{shown}"
    );
    let err = c
        .generate_stream(&json_request(), &CancellationToken::new(), None, |_| {})
        .await
        .unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(
        !shown.contains(KEY) && shown.contains("<redacted>"),
        "{shown}"
    );
    let logged = logs.text();
    assert!(logged.contains("retrying model call"), "{logged}");
    assert!(logged.contains("<redacted>"), "{logged}");
    assert!(!logged.contains(KEY), "{logged}");
    assert_eq!(fake.hits(), 3);
}

#[tokio::test]
async fn connection_refused_is_a_transport_error() {
    // Bind and drop a listener to get a port nothing listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let c = client_at(&format!("http://127.0.0.1:{port}"), 2);
    let err = generate(&c).await.unwrap_err();
    assert!(matches!(err, LlmError::Transport(_)), "{err:?}");
    assert!(!err.to_string().contains(KEY));
}
