//! The Gemini/Gemma client against a fake AI Studio server on 127.0.0.1.

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use common::{
    assert_request_dropped, assert_times_out, fast_retry, slow, stream_guarded, Fake, LogCapture,
    Reply, BROKEN_INNER_QUOTE, BROKEN_TRAILING_GARBAGE,
};
use deloop_llm::{
    ApiKey, CancellationToken, FinishReason, GeminiClient, GenerateRequest, Generation, JsonMode,
    LlmClient, LlmError, Role, Turn,
};
use serde_json::{json, Value};

const KEY: &str = "test-key-AIzaSyFAKE";
const MODEL: &str = "gemma-4-26b-a4b-it";

fn client(fake: &Fake) -> GeminiClient {
    client_at(&fake.url, 4)
}

/// A client of the server at `url` (`http://127.0.0.1:PORT`) making at most
/// `attempts` attempts.
fn client_at(url: &str, attempts: u32) -> GeminiClient {
    GeminiClient::with_base_url(ApiKey::new(KEY), MODEL, format!("{url}/v1beta"))
        .unwrap()
        .retry_policy(fast_retry(attempts))
}

fn answer(text: &str, finish: &str) -> Value {
    json!({
        "candidates": [{
            "content": {"role": "model", "parts": [{"text": text}]},
            "finishReason": finish, "index": 0
        }],
        "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 7, "totalTokenCount": 19},
        "modelVersion": MODEL
    })
}

fn error(code: u16, status: &str, message: &str) -> Value {
    json!({"error": {"code": code, "message": message, "status": status}})
}

/// A 200 reply with an empty JSON answer.
fn ok() -> Reply {
    Reply::Json(200, answer("{}", "STOP"))
}

/// A 400 `INVALID_ARGUMENT` reply with this message.
fn invalid(message: &str) -> Reply {
    Reply::Json(400, error(400, "INVALID_ARGUMENT", message))
}

/// `c.generate` of [`json_request`], never cancelled.
async fn generate(c: &GeminiClient) -> Result<Generation, LlmError> {
    c.generate(&json_request(), &CancellationToken::new()).await
}

fn json_request() -> GenerateRequest {
    let mut req = GenerateRequest::new("¿Qué es la auditoría suprema?");
    req.system = Some("Responde en JSON con la clave answer.".into());
    req.json = JsonMode::Schema(json!({
        "type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]
    }));
    req.temperature = Some(0.2);
    req.top_p = Some(0.95);
    req.top_k = Some(64);
    req.max_output_tokens = Some(512);
    req.timeout = Duration::from_secs(20);
    req
}

fn assert_key_only_in_header(fake: &Fake) {
    for s in fake.seen() {
        assert_eq!(s.headers.get("x-goog-api-key").unwrap(), KEY);
        assert!(
            s.query.as_deref().is_none_or(|q| !q.contains("key=")),
            "{:?}",
            s.query
        );
        assert!(!s.path.contains(KEY));
        assert!(s.headers.get("authorization").is_none());
    }
}

#[tokio::test]
async fn valid_json_answer_and_request_shape() {
    let fake = Fake::start(vec![Reply::Json(
        200,
        answer(r#"{"answer":"Hola"}"#, "STOP"),
    )])
    .await;
    let g = generate(&client(&fake)).await.unwrap();
    assert_eq!(g.text, r#"{"answer":"Hola"}"#);
    assert_eq!(g.finish, FinishReason::Stop);
    assert!(!g.truncated);
    assert_eq!(g.attempts, 1);
    assert_eq!(g.model, MODEL);
    assert_eq!(g.usage.prompt_tokens, Some(12));
    assert_eq!(g.usage.output_tokens, Some(7));
    let seen = fake.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].path,
        format!("/v1beta/models/{MODEL}:generateContent")
    );
    let b = &seen[0].body;
    assert_eq!(
        b["systemInstruction"]["parts"][0]["text"],
        "Responde en JSON con la clave answer."
    );
    assert_eq!(b["contents"][0]["role"], "user");
    assert_eq!(
        b["contents"][0]["parts"][0]["text"],
        "¿Qué es la auditoría suprema?"
    );
    let gc = &b["generationConfig"];
    assert_eq!(gc["responseMimeType"], "application/json");
    assert_eq!(gc["responseSchema"]["required"][0], "answer");
    assert_eq!(gc["topK"], 64);
    assert_eq!(gc["maxOutputTokens"], 512);
    assert!((gc["temperature"].as_f64().unwrap() - 0.2).abs() < 1e-6);
    assert_key_only_in_header(&fake);
}

#[tokio::test]
async fn seed_broken_json_replies_come_back_verbatim_for_rescue() {
    let fake = Fake::start(vec![
        Reply::Json(200, answer(BROKEN_INNER_QUOTE, "STOP")),
        Reply::Json(200, answer(BROKEN_TRAILING_GARBAGE, "STOP")),
    ])
    .await;
    let c = client(&fake);
    let cancel = CancellationToken::new();
    let a = c.generate(&json_request(), &cancel).await.unwrap();
    assert_eq!(a.text, BROKEN_INNER_QUOTE);
    let b = c.generate(&json_request(), &cancel).await.unwrap();
    assert_eq!(b.text, BROKEN_TRAILING_GARBAGE);
    assert!(serde_json::from_str::<Value>(&a.text).is_err());
    // End to end with deloop-core's rescue, as the oracle does.
    let rescued = |t: &str| deloop_core::rescue::rescue(t, "answer").map(|r| r.value);
    assert_eq!(
        rescued(&a.text).unwrap(),
        json!("**Auditoría Suprema** \"la revisión final\" y más texto")
    );
    assert_eq!(rescued(&b.text).unwrap(), json!("Respuesta válida"));
}

#[tokio::test]
async fn thought_parts_are_not_part_of_the_answer() {
    let reply = json!({"candidates": [{"content": {"role": "model", "parts": [
        {"text": "Let me reason about the user... scratchpad", "thought": true},
        {"text": "{\"answer\":"},
        {"text": "\"ok\"}"}
    ]}, "finishReason": "STOP"}]});
    let fake = Fake::start(vec![Reply::Json(200, reply)]).await;
    let g = generate(&client(&fake)).await.unwrap();
    assert_eq!(g.text, r#"{"answer":"ok"}"#);
}

#[tokio::test]
async fn max_tokens_returns_the_truncated_text() {
    let fake = Fake::start(vec![Reply::Json(
        200,
        answer(r#"{"answer":"la revisión fi"#, "MAX_TOKENS"),
    )])
    .await;
    let g = generate(&client(&fake)).await.unwrap();
    assert_eq!(g.finish, FinishReason::MaxTokens);
    assert!(g.truncated);
    assert_eq!(g.text, r#"{"answer":"la revisión fi"#);
    let rescued = deloop_core::rescue::rescue(&g.text, "answer").unwrap();
    assert_eq!(rescued.value, json!("la revisión fi"));
    assert_eq!(fake.hits(), 1);
}

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
fn overloaded(retry_after: &str) -> Reply {
    Reply::JsonHeader(
        503,
        error(503, "UNAVAILABLE", "overloaded"),
        "retry-after",
        retry_after.into(),
    )
}

/// Runs [`json_request`] with a 3 s timeout.
async fn generate_within_3s(c: &GeminiClient) -> Result<Generation, LlmError> {
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

#[tokio::test]
async fn gemma_json_mode_fallback_is_remembered() {
    let fake = Fake::start(vec![
        invalid("Json mode is not enabled for models/gemma-4-26b-a4b-it"),
        Reply::Json(200, answer(r#"{"answer":"uno"}"#, "STOP")),
        Reply::Json(200, answer(r#"{"answer":"dos"}"#, "STOP")),
    ])
    .await;
    let c = client(&fake);
    let req = json_request();
    let g = c.generate(&req, &CancellationToken::new()).await.unwrap();
    assert_eq!(g.text, r#"{"answer":"uno"}"#);
    assert_eq!(g.attempts, 2);
    let seen = fake.seen();
    assert_eq!(
        seen[0].body["generationConfig"]["responseMimeType"],
        "application/json"
    );
    let retry = &seen[1].body;
    assert!(retry["generationConfig"].get("responseMimeType").is_none());
    assert!(retry["generationConfig"].get("responseSchema").is_none());
    assert_eq!(
        retry["generationConfig"]["topK"], 64,
        "other settings are kept"
    );
    let prompt = retry["contents"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(
        prompt.starts_with("¿Qué es la auditoría suprema?"),
        "{prompt}"
    );
    assert!(
        prompt.contains("JSON") && prompt.contains("\"required\""),
        "{prompt}"
    );
    assert!(
        retry.get("systemInstruction").is_some(),
        "system instruction still supported"
    );
    // Second call goes straight to the fallback.
    let g2 = c.generate(&req, &CancellationToken::new()).await.unwrap();
    assert_eq!(g2.attempts, 1);
    assert_eq!(fake.hits(), 3);
    assert!(fake.seen()[2].body["generationConfig"]
        .get("responseMimeType")
        .is_none());
}

#[tokio::test]
async fn gemma_developer_instruction_fallback_is_remembered() {
    let fake = Fake::start(vec![
        invalid("Developer instruction is not enabled for models/gemma-4-26b-a4b-it"),
        ok(),
        ok(),
    ])
    .await;
    let c = client(&fake);
    let req = json_request();
    let g = c.generate(&req, &CancellationToken::new()).await.unwrap();
    assert_eq!(g.attempts, 2);
    let retry = &fake.seen()[1].body;
    assert!(retry.get("systemInstruction").is_none());
    let prompt = retry["contents"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(
        prompt.starts_with("Responde en JSON con la clave answer.\n\n¿Qué es"),
        "{prompt}"
    );
    assert_eq!(
        retry["generationConfig"]["responseMimeType"], "application/json",
        "JSON mode kept"
    );
    let g2 = c.generate(&req, &CancellationToken::new()).await.unwrap();
    assert_eq!(g2.attempts, 1);
    assert!(fake.seen()[2].body.get("systemInstruction").is_none());
}

#[tokio::test]
async fn both_gemma_fallbacks_in_a_row() {
    let fake = Fake::start(vec![
        invalid("Developer instruction is not enabled for models/gemma-x"),
        invalid("JSON mode is not enabled for models/gemma-x"),
        ok(),
        // A repeated capability error is not retried a second time.
        invalid("JSON mode is not enabled for models/gemma-x"),
    ])
    .await;
    let c = client(&fake);
    let g = generate(&c).await.unwrap();
    assert_eq!(g.attempts, 3);
    let last = &fake.seen()[2].body;
    assert!(last.get("systemInstruction").is_none());
    assert!(last["generationConfig"].get("responseMimeType").is_none());
    let err = generate(&c).await.unwrap_err();
    assert!(matches!(err, LlmError::Http { status: 400, .. }));
    assert_eq!(fake.hits(), 4);
}

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

fn chunk(text: &str, thought: bool, finish: Option<&str>) -> String {
    let mut c = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}]});
    if thought {
        c["candidates"][0]["content"]["parts"][0]["thought"] = json!(true);
    }
    if let Some(f) = finish {
        c["candidates"][0]["finishReason"] = json!(f);
        c["usageMetadata"] = json!({"promptTokenCount": 4, "candidatesTokenCount": 6});
    }
    c.to_string()
}

#[tokio::test]
async fn stream_assembles_sse_chunks_and_skips_thoughts() {
    let fake = Fake::start(vec![Reply::Sse(vec![
        chunk("thinking hard", true, None),
        chunk("{\"answer\": \"Hola", false, None),
        chunk(", mundo\"}", false, Some("STOP")),
    ])])
    .await;
    let c = LlmClient::Gemini(client(&fake));
    let (g, deltas) = stream_guarded(&c, &json_request()).await;
    assert_eq!(g.text, "{\"answer\": \"Hola, mundo\"}");
    assert_eq!(deltas, vec!["{\"answer\": \"Hola", ", mundo\"}"]);
    assert_eq!(g.finish, FinishReason::Stop);
    assert!(g.loop_cut.is_none());
    assert_eq!(g.saved_chars, 0);
    assert_eq!(g.usage.output_tokens, Some(6));
    let seen = fake.seen();
    assert_eq!(
        seen[0].path,
        format!("/v1beta/models/{MODEL}:streamGenerateContent")
    );
    assert_eq!(seen[0].query.as_deref(), Some("alt=sse"));
    assert_key_only_in_header(&fake);
}

#[tokio::test]
async fn stream_max_tokens_and_safety() {
    let fake = Fake::start(vec![
        Reply::Sse(vec![chunk(
            "{\"answer\": \"trunc",
            false,
            Some("MAX_TOKENS"),
        )]),
        Reply::Sse(vec![
            chunk("Some text", false, None),
            chunk("", false, Some("SAFETY")),
        ]),
        Reply::Sse(vec![
            json!({"promptFeedback": {"blockReason": "SAFETY"}}).to_string()
        ]),
    ])
    .await;
    let c = client(&fake);
    let cancel = CancellationToken::new();
    let g = c
        .generate_stream(&json_request(), &cancel, None, |_| {})
        .await
        .unwrap();
    assert!(g.truncated);
    assert_eq!(g.finish, FinishReason::MaxTokens);
    for _ in 0..2 {
        let err = c
            .generate_stream(&json_request(), &cancel, None, |_| {})
            .await
            .unwrap_err();
        assert!(
            matches!(&err, LlmError::Refused { reason } if reason == "SAFETY"),
            "{err:?}"
        );
    }
    assert_eq!(fake.hits(), 3);
}

#[tokio::test]
async fn stream_falls_back_for_gemma_too() {
    let fake = Fake::start(vec![
        invalid("JSON mode is not enabled for models/gemma-4-26b-a4b-it"),
        Reply::Sse(vec![chunk("{\"answer\":\"ok\"}", false, Some("STOP"))]),
    ])
    .await;
    let g = client(&fake)
        .generate_stream(&json_request(), &CancellationToken::new(), None, |_| {})
        .await
        .unwrap();
    assert_eq!(g.text, "{\"answer\":\"ok\"}");
    assert_eq!(g.attempts, 2);
}

#[tokio::test]
async fn looping_stream_is_cut_and_the_request_dropped() {
    let max = 5000;
    let fake = Fake::start(vec![Reply::LoopSse {
        prefix: vec![chunk(
            "{\"answer\": \"La auditoría suprema es la revisión final del proyecto. ",
            false,
            None,
        )],
        repeat: chunk("y la revisión vuelve a empezar otra vez ", false, None),
        max,
    }])
    .await;
    let mut req = json_request();
    req.timeout = Duration::from_secs(60);
    let (g, deltas) = stream_guarded(&LlmClient::Gemini(client(&fake)), &req).await;
    let streamed = deltas.concat();
    assert_eq!(g.finish, FinishReason::LoopCut);
    assert!(g.truncated);
    let report = g.loop_cut.as_ref().expect("the loop guard fired");
    assert!(g.saved_chars > 0, "{g:?}");
    assert!(g
        .text
        .starts_with("{\"answer\": \"La auditoría suprema es la revisión final del proyecto."));
    assert!(
        g.text.matches("vuelve a empezar").count() < 10,
        "{}",
        g.text
    );
    // The cut lies within what was received; the forwarded deltas stop at
    // the delta on which the guard fired.
    let kept = &g.text[..report.keep_bytes.min(g.text.len())];
    assert!(
        streamed.starts_with(kept) || kept.starts_with(&streamed),
        "streamed {streamed:?} vs kept {kept:?}"
    );
    assert!(
        streamed.matches("vuelve a empezar").count() < 50,
        "{streamed}"
    );
    eprintln!(
        "loop cut: kept {} bytes, saved_chars {}, streamed {} bytes",
        report.keep_bytes,
        g.saved_chars,
        streamed.len()
    );
    assert_request_dropped(&fake, max).await;
}

#[tokio::test]
async fn cancelling_mid_stream_drops_the_request() {
    let max = 5000;
    let fake = Fake::start(vec![Reply::LoopSse {
        prefix: vec![],
        repeat: chunk("tick ", false, None),
        max,
    }])
    .await;
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let mut n = 0;
    let err = client(&fake)
        .generate_stream(&json_request(), &cancel, None, |_| {
            n += 1;
            if n == 3 {
                trigger.cancel();
            }
        })
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Cancelled), "{err:?}");
    assert_request_dropped(&fake, max).await;
}

#[tokio::test]
async fn dropped_connections_are_retried_then_reported() {
    // A server that accepts every connection and closes it at once.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                break;
            };
            counter.fetch_add(1, Ordering::SeqCst);
            drop(sock);
        }
    });
    let c = client_at(&format!("http://127.0.0.1:{port}"), 3);
    let err = generate(&c).await.unwrap_err();
    assert!(matches!(err, LlmError::Transport(_)), "{err:?}");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        3,
        "one connection per attempt"
    );
}

#[tokio::test]
async fn an_error_event_mid_stream_is_reported() {
    let fake = Fake::start(vec![Reply::Sse(vec![
        chunk("{\"answer\": \"part", false, None),
        error(503, "UNAVAILABLE", "The model is overloaded.").to_string(),
    ])])
    .await;
    let mut got = String::new();
    let err = client(&fake)
        .generate_stream(&json_request(), &CancellationToken::new(), None, |d| {
            got.push_str(d)
        })
        .await
        .unwrap_err();
    match err {
        LlmError::Http { status, message } => {
            assert_eq!(status, 503);
            assert!(message.contains("overloaded"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(got, "{\"answer\": \"part");
    assert_eq!(
        fake.hits(),
        1,
        "a stream that already produced output is not retried"
    );
}

#[tokio::test]
async fn a_non_json_stream_event_is_a_decode_error() {
    let fake = Fake::start(vec![Reply::Sse(vec!["<html>proxy error</html>".into()])]).await;
    let err = client(&fake)
        .generate_stream(&json_request(), &CancellationToken::new(), None, |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LlmError::Decode(m) if m.contains("proxy error")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_non_json_success_body_is_a_decode_error_without_retry() {
    let fake = Fake::start(vec![
        Reply::Text(200, "<html>captive portal</html>".into()),
        ok(),
    ])
    .await;
    let err = generate(&client(&fake)).await.unwrap_err();
    assert!(
        matches!(&err, LlmError::Decode(m) if m.contains("captive portal")),
        "{err:?}"
    );
    assert_eq!(fake.hits(), 1);
}

#[tokio::test]
async fn history_turns_come_before_the_prompt_with_gemini_roles() {
    let fake = Fake::start(vec![Reply::Json(200, answer(r#"{"answer":"sí"}"#, "STOP"))]).await;
    let mut req = json_request();
    req.history = vec![
        Turn {
            role: Role::User,
            content: "¿Qué es un bucle?".into(),
        },
        Turn {
            role: Role::Assistant,
            content: "Una unidad repetida.".into(),
        },
    ];
    client(&fake)
        .generate(&req, &CancellationToken::new())
        .await
        .unwrap();
    let contents = fake.seen()[0].body["contents"].clone();
    assert_eq!(
        contents,
        json!([
            {"role": "user", "parts": [{"text": "¿Qué es un bucle?"}]},
            {"role": "model", "parts": [{"text": "Una unidad repetida."}]},
            {"role": "user", "parts": [{"text": "¿Qué es la auditoría suprema?"}]},
        ])
    );
}
