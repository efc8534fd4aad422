//! Retries: rate limits, server hints, server errors, the attempt cap, errors
//! not retried.

use crate::common::{fast_retry, Fake, Reply};
use crate::fixtures::*;
use deloop_llm::{CancellationToken, GeminiClient, Generation, LlmError};
use serde_json::json;
use std::time::{Duration, SystemTime};

#[tokio::test]
async fn rate_limit_with_retry_info_is_retried() {
    let body = json!({"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED",
        "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.02s"}]}});
    let fake = Fake::start(vec![Reply::Json(429, body), ok()]).await;
    let g = generate(&client(&fake)).await.unwrap();
    assert_eq!(g.attempts, 2);
    assert_eq!(fake.hits(), 2);
    assert_key_only_in_header(&fake);
}

#[tokio::test]
async fn retry_delay_longer_than_the_deadline_is_honoured_not_shortened() {
    // The server asks for 30 s; the call has 3 s. A client that ignored
    // RetryInfo would retry after its own few-millisecond backoff; honouring
    // it means giving up with the 429 after one attempt.
    let body = json!({"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED",
        "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "30s"}]}});
    let fake = Fake::start(vec![Reply::Json(429, body), ok()]).await;
    let mut req = json_request();
    req.timeout = Duration::from_secs(3);
    let err = client(&fake)
        .generate(&req, &CancellationToken::new())
        .await
        .unwrap_err();
    match err {
        LlmError::Http {
            status: 429,
            message,
        } => assert!(message.contains("Quota exceeded"), "{message}"),
        other => panic!("expected HTTP 429, got {other:?}"),
    }
    assert_eq!(fake.hits(), 1);
}

/// A 503 reply with this `Retry-After` header.
pub(crate) fn overloaded(retry_after: &str) -> Reply {
    Reply::JsonHeader(
        503,
        error(503, "UNAVAILABLE", "overloaded"),
        "retry-after",
        retry_after.into(),
    )
}

/// Runs [`json_request`] with a 3 s timeout.
pub(crate) async fn generate_within_3s(c: &GeminiClient) -> Result<Generation, LlmError> {
    let mut req = json_request();
    req.timeout = Duration::from_secs(3);
    c.generate(&req, &CancellationToken::new()).await
}

#[tokio::test]
async fn retry_after_header_is_honoured_in_both_forms() {
    let in_an_hour = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3600));
    // (a wait longer than the 3 s deadline, no wait): delta-seconds, then
    // HTTP-dates (an hour from now, and a date already past).
    for (too_long, none) in [
        ("30", "0"),
        (in_an_hour.as_str(), "Wed, 21 Oct 2015 07:28:00 GMT"),
    ] {
        let fake = Fake::start(vec![overloaded(too_long), overloaded(none), ok()]).await;
        let c = client(&fake);
        // The wait does not fit in 3 s: one attempt. Were the value not
        // understood, the client's own few-millisecond backoff would have
        // retried.
        let err = generate_within_3s(&c).await.unwrap_err();
        assert!(matches!(err, LlmError::Http { status: 503, .. }), "{err:?}");
        assert_eq!(fake.hits(), 1, "Retry-After: {too_long}");
        // No wait, then success: two attempts.
        let g = generate_within_3s(&c).await.unwrap();
        assert_eq!(g.attempts, 2, "Retry-After: {none}");
        assert_eq!(fake.hits(), 3);
    }
}

#[tokio::test]
async fn retry_after_http_date_is_capped_by_the_policy() {
    let in_an_hour = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3600));
    let fake = Fake::start(vec![overloaded(&in_an_hour), ok()]).await;
    // With `max_server_delay_ms` at 10 ms the hour is cut to 10 ms: the
    // retry fits in the 3 s deadline.
    let mut policy = fast_retry(4);
    policy.max_server_delay_ms = 10;
    let g = generate_within_3s(&client(&fake).retry_policy(policy))
        .await
        .unwrap();
    assert_eq!(g.attempts, 2);
    assert_eq!(fake.hits(), 2);
}

#[tokio::test]
async fn server_error_then_success() {
    let fake = Fake::start(vec![
        Reply::Json(
            500,
            error(500, "INTERNAL", "An internal error has occurred."),
        ),
        Reply::Text(504, "gateway timeout".into()),
        ok(),
    ])
    .await;
    let g = generate(&client(&fake)).await.unwrap();
    assert_eq!(g.attempts, 3);
    assert_eq!(fake.hits(), 3);
}

#[tokio::test]
async fn retries_stop_at_max_attempts() {
    let e = || Reply::Json(503, error(503, "UNAVAILABLE", "The model is overloaded."));
    let fake = Fake::start(vec![e(), e(), e(), e(), e()]).await;
    let c = client(&fake).retry_policy(fast_retry(3));
    let err = generate(&c).await.unwrap_err();
    match err {
        LlmError::Http { status, message } => {
            assert_eq!(status, 503);
            assert_eq!(message, "UNAVAILABLE: The model is overloaded.");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(fake.hits(), 3);
}

#[tokio::test]
async fn auth_and_not_found_errors_are_not_retried() {
    for (code, status) in [
        (400, "INVALID_ARGUMENT"),
        (401, "UNAUTHENTICATED"),
        (403, "PERMISSION_DENIED"),
        (404, "NOT_FOUND"),
    ] {
        let fake = Fake::start(vec![Reply::Json(code, error(code, status, "nope")), ok()]).await;
        let err = generate(&client(&fake)).await.unwrap_err();
        assert!(
            matches!(err, LlmError::Http { status, .. } if status == code),
            "{err:?}"
        );
        assert_eq!(fake.hits(), 1, "HTTP {code} must not be retried");
    }
}
