//! The OpenAI-compatible client against a fake chat completions server.

mod common;

use std::time::{Duration, SystemTime};

use common::{
    assert_request_dropped, assert_times_out, fast_retry, slow, stream_guarded, Fake, Reply,
    BROKEN_INNER_QUOTE,
};
use deloop_llm::{
    ApiKey, CancellationToken, FinishReason, GenerateRequest, JsonMode, LlmClient, LlmConfig,
    LlmError, OpenAiClient, Role, Turn,
};
use serde_json::{json, Value};

const KEY: &str = "sk-test-FAKEKEY123";

fn client(fake: &Fake, key: Option<&str>) -> OpenAiClient {
    OpenAiClient::new(
        format!("{}/v1", fake.url),
        key.map(ApiKey::new),
        "llama3.1:8b",
    )
    .unwrap()
    .retry_policy(fast_retry(4))
}

fn completion(content: &str, finish: &str) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "llama3.1:8b",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
}

fn delta(content: &str, finish: Option<&str>) -> String {
    json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]})
    .to_string()
}

fn oai_error(message: &str) -> Value {
    json!({"error": {"message": message, "type": "invalid_request_error", "param": "response_format", "code": null}})
}

fn json_request() -> GenerateRequest {
    let mut req = GenerateRequest::new("What is the supreme audit?");
    req.system = Some("Answer as JSON with key answer.".into());
    req.json =
        JsonMode::Schema(json!({"type": "object", "properties": {"answer": {"type": "string"}}}));
    req.temperature = Some(0.3);
    req.top_p = Some(0.9);
    req.max_output_tokens = Some(256);
    req.timeout = Duration::from_secs(20);
    req
}

#[tokio::test]
async fn valid_json_answer_request_shape_and_bearer_key() {
    let fake = Fake::start(vec![Reply::Json(
        200,
        completion(r#"{"answer":"hi"}"#, "stop"),
    )])
    .await;
    let g = client(&fake, Some(KEY))
        .generate(&json_request(), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(g.text, r#"{"answer":"hi"}"#);
    assert_eq!(g.finish, FinishReason::Stop);
    assert_eq!(g.usage.prompt_tokens, Some(10));
    let s = &fake.seen()[0];
    assert_eq!(s.path, "/v1/chat/completions");
    assert_eq!(
        s.headers.get("authorization").unwrap(),
        &format!("Bearer {KEY}")
    );
    assert!(s.query.is_none());
    let b = &s.body;
    assert_eq!(b["model"], "llama3.1:8b");
    assert_eq!(
        b["messages"][0],
        json!({"role": "system", "content": "Answer as JSON with key answer."})
    );
    assert_eq!(
        b["messages"][1],
        json!({"role": "user", "content": "What is the supreme audit?"})
    );
    assert_eq!(b["max_tokens"], 256);
    assert!((b["top_p"].as_f64().unwrap() - 0.9).abs() < 1e-6);
    assert_eq!(b["response_format"]["type"], "json_schema");
    assert_eq!(
        b["response_format"]["json_schema"]["schema"]["type"],
        "object"
    );
    assert!(b.get("stream").is_none());
}

#[tokio::test]
async fn no_key_means_no_authorization_header() {
    let fake = Fake::start(vec![Reply::Json(200, completion("plain", "stop"))]).await;
    let g = client(&fake, None)
        .generate(&GenerateRequest::new("hi"), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(g.text, "plain");
    let s = &fake.seen()[0];
    assert!(s.headers.get("authorization").is_none());
    assert!(s.body.get("response_format").is_none());
}

#[tokio::test]
async fn response_format_falls_back_schema_object_plain_and_is_remembered() {
    let fake = Fake::start(vec![
        Reply::Json(400, oai_error("Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.")),
        Reply::Json(400, oai_error("response_format json_object is not supported")),
        Reply::Json(200, completion(BROKEN_INNER_QUOTE, "stop")),
        Reply::Json(200, completion("{}", "stop")),
    ])
    .await;
    let c = client(&fake, Some(KEY));
    let g = c
        .generate(&json_request(), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(g.attempts, 3);
    assert_eq!(
        g.text, BROKEN_INNER_QUOTE,
        "broken JSON is passed through for rescue"
    );
    let seen = fake.seen();
    assert_eq!(seen[0].body["response_format"]["type"], "json_schema");
    assert_eq!(seen[1].body["response_format"]["type"], "json_object");
    assert!(seen[2].body.get("response_format").is_none());
    let prompt = seen[2].body["messages"][1]["content"].as_str().unwrap();
    assert!(
        prompt.starts_with("What is the supreme audit?") && prompt.contains("JSON Schema"),
        "{prompt}"
    );
    // Remembered per model: the next call goes straight to plain.
    let g2 = c
        .generate(&json_request(), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(g2.attempts, 1);
    assert!(fake.seen()[3].body.get("response_format").is_none());
}

#[tokio::test]
async fn other_400s_do_not_fall_back_or_retry() {
    let fake = Fake::start(vec![
        Reply::Json(400, json!({"error": {"message": "max_tokens is too large", "type": "invalid_request_error"}})),
        Reply::Json(200, completion("{}", "stop")),
    ])
    .await;
    let err = client(&fake, None)
        .generate(&json_request(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LlmError::Http { status: 400, message } if message == "max_tokens is too large"),
        "{err:?}"
    );
    assert_eq!(fake.hits(), 1);
}

#[tokio::test]
async fn unauthorized_is_not_retried_and_key_not_shown() {
    let fake = Fake::start(vec![
        Reply::Json(401, json!({"error": {"message": format!("Incorrect API key provided: {KEY}"), "type": "invalid_request_error", "code": "invalid_api_key"}})),
        Reply::Json(200, completion("{}", "stop")),
    ])
    .await;
    let err = client(&fake, Some(KEY))
        .generate(&json_request(), &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Http { status: 401, .. }));
    assert!(!err.to_string().contains(KEY), "{err}");
    assert_eq!(fake.hits(), 1);
}

#[tokio::test]
async fn rate_limit_with_retry_after_then_success() {
    let fake = Fake::start(vec![
        Reply::JsonHeader(
            429,
            json!({"error": {"message": "Rate limit reached", "type": "requests"}}),
            "retry-after",
            "0.01".into(),
        ),
        Reply::Json(500, json!({"error": "internal"})),
        Reply::Json(200, completion("{}", "stop")),
    ])
    .await;
    let g = client(&fake, None)
        .generate(&json_request(), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(g.attempts, 3);
    assert_eq!(fake.hits(), 3);
}

#[tokio::test]
async fn rate_limit_with_a_retry_after_http_date_waits_for_it() {
    let in_an_hour = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3600));
    let fake = Fake::start(vec![
        Reply::JsonHeader(
            429,
            json!({"error": {"message": "Rate limit reached", "type": "requests"}}),
            "retry-after",
            in_an_hour,
        ),
        Reply::Json(200, completion("{}", "stop")),
    ])
    .await;
    let mut req = json_request();
    req.timeout = Duration::from_secs(3);
    // The wait (an hour, capped at 60 s) passes the 3 s deadline: the 429
    // comes back after one attempt instead of a quick retry.
    let err = client(&fake, None)
        .generate(&req, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Http { status: 429, .. }), "{err:?}");
    assert_eq!(fake.hits(), 1);
}

#[tokio::test]
async fn length_finish_is_truncated_and_content_filter_is_a_refusal() {
    let fake = Fake::start(vec![
        Reply::Json(200, completion("{\"answer\": \"cut", "length")),
        Reply::Json(200, completion("", "content_filter")),
        Reply::Json(200, json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": null, "refusal": "I can't help with that."}, "finish_reason": "stop"}]})),
    ])
    .await;
    let c = client(&fake, None);
    let cancel = CancellationToken::new();
    let g = c.generate(&json_request(), &cancel).await.unwrap();
    assert!(g.truncated);
    assert_eq!(g.finish, FinishReason::MaxTokens);
    let e1 = c.generate(&json_request(), &cancel).await.unwrap_err();
    assert!(
        matches!(&e1, LlmError::Refused { reason } if reason == "content_filter"),
        "{e1:?}"
    );
    let e2 = c.generate(&json_request(), &cancel).await.unwrap_err();
    assert!(
        matches!(&e2, LlmError::Refused { reason } if reason.contains("I can't help")),
        "{e2:?}"
    );
    assert_eq!(fake.hits(), 3);
}

#[tokio::test]
async fn slow_reply_times_out() {
    let fake = Fake::start(vec![slow(Reply::Json(200, completion("{}", "stop")))]).await;
    let client = LlmClient::OpenAi(client(&fake, None));
    assert_times_out(&client, &fake, json_request()).await;
}

#[tokio::test]
async fn stream_ends_at_done_even_if_the_connection_stays_open() {
    let fake = Fake::start(vec![Reply::SseThenStall(vec![
        delta("{\"answer\":", None),
        delta(" \"hola\"}", None),
        json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}).to_string(),
        json!({"id": "c", "object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}}).to_string(),
        "[DONE]".to_string(),
    ])])
    .await;
    let mut req = json_request();
    // The server never closes the stream: only `[DONE]` can end this call
    // before the deadline.
    req.timeout = Duration::from_secs(20);
    let (g, deltas) = stream_guarded(&LlmClient::OpenAi(client(&fake, None)), &req).await;
    assert_eq!(g.text, "{\"answer\": \"hola\"}");
    assert_eq!(deltas, vec!["{\"answer\":", " \"hola\"}"]);
    assert_eq!(g.finish, FinishReason::Stop);
    assert_eq!(g.usage.output_tokens, Some(4));
    assert_eq!(fake.seen()[0].body["stream"], true);
}

#[tokio::test]
async fn looping_stream_is_cut_and_the_request_dropped() {
    let max = 5000;
    let fake = Fake::start(vec![Reply::LoopSse {
        prefix: vec![delta(
            "{\"answer\": \"The supreme audit is the final review of the project. ",
            None,
        )],
        repeat: delta("and then the review starts again ", None),
        max,
    }])
    .await;
    let c = LlmClient::OpenAi(client(&fake, None));
    let (g, _) = stream_guarded(&c, &json_request()).await;
    assert_eq!(g.finish, FinishReason::LoopCut);
    assert!(g.loop_cut.is_some());
    assert!(g.saved_chars > 0);
    assert!(g
        .text
        .starts_with("{\"answer\": \"The supreme audit is the final review of the project."));
    assert_request_dropped(&fake, max).await;
}

#[tokio::test]
async fn llm_client_from_env_map_talks_to_the_configured_server() {
    let fake = Fake::start(vec![Reply::Json(200, completion("pong", "stop"))]).await;
    let env = std::collections::HashMap::from([
        ("OPENAI_BASE_URL".to_string(), format!("{}/v1", fake.url)),
        ("DELOOP_MODEL".to_string(), "qwen2.5".to_string()),
        ("GEMINI_API_KEY".to_string(), "unused".to_string()),
    ]);
    let cfg = LlmConfig::from_env_map(&env).unwrap();
    let client = LlmClient::from_config(&cfg).unwrap().unwrap();
    assert!(matches!(client, LlmClient::OpenAi(_)));
    assert_eq!(client.model(), "qwen2.5");
    let g = client
        .generate(&GenerateRequest::new("ping"), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(g.text, "pong");
    assert_eq!(fake.seen()[0].body["model"], "qwen2.5");
}

#[tokio::test]
async fn history_turns_go_between_the_system_message_and_the_prompt() {
    let fake = Fake::start(vec![Reply::Sse(vec![
        delta(r#"{"answer":"ok"}"#, Some("stop")),
        "[DONE]".into(),
    ])])
    .await;
    let mut req = json_request();
    req.history = vec![
        Turn {
            role: Role::User,
            content: "What is a loop?".into(),
        },
        Turn {
            role: Role::Assistant,
            content: "A repeated unit.".into(),
        },
    ];
    let (g, _) = stream_guarded(&LlmClient::OpenAi(client(&fake, None)), &req).await;
    assert_eq!(g.text, r#"{"answer":"ok"}"#);
    let messages = fake.seen()[0].body["messages"].clone();
    assert_eq!(
        messages,
        json!([
            {"role": "system", "content": "Answer as JSON with key answer."},
            {"role": "user", "content": "What is a loop?"},
            {"role": "assistant", "content": "A repeated unit."},
            {"role": "user", "content": "What is the supreme audit?"},
        ])
    );
}
