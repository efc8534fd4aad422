//! Fixtures: clients on the fake AI Studio server and its replies.

use crate::common::{fast_retry, Fake, Reply};
use deloop_llm::{
    ApiKey, CancellationToken, GeminiClient, GenerateRequest, Generation, JsonMode, LlmError,
};
use serde_json::{json, Value};
use std::time::Duration;

pub(crate) const KEY: &str = "test-key-AIzaSyFAKE";
pub(crate) const MODEL: &str = "gemma-4-26b-a4b-it";

pub(crate) fn client(fake: &Fake) -> GeminiClient {
    client_at(&fake.url, 4)
}

/// A client of the server at `url` (`http://127.0.0.1:PORT`) making at most
/// `attempts` attempts.
pub(crate) fn client_at(url: &str, attempts: u32) -> GeminiClient {
    GeminiClient::with_base_url(ApiKey::new(KEY), MODEL, format!("{url}/v1beta"))
        .unwrap()
        .retry_policy(fast_retry(attempts))
}

pub(crate) fn answer(text: &str, finish: &str) -> Value {
    json!({
        "candidates": [{
            "content": {"role": "model", "parts": [{"text": text}]},
            "finishReason": finish, "index": 0
        }],
        "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 7, "totalTokenCount": 19},
        "modelVersion": MODEL
    })
}

pub(crate) fn error(code: u16, status: &str, message: &str) -> Value {
    json!({"error": {"code": code, "message": message, "status": status}})
}

/// A 200 reply with an empty JSON answer.
pub(crate) fn ok() -> Reply {
    Reply::Json(200, answer("{}", "STOP"))
}

/// A 400 `INVALID_ARGUMENT` reply with this message.
pub(crate) fn invalid(message: &str) -> Reply {
    Reply::Json(400, error(400, "INVALID_ARGUMENT", message))
}

/// `c.generate` of [`json_request`], never cancelled.
pub(crate) async fn generate(c: &GeminiClient) -> Result<Generation, LlmError> {
    c.generate(&json_request(), &CancellationToken::new()).await
}

pub(crate) fn json_request() -> GenerateRequest {
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

pub(crate) fn assert_key_only_in_header(fake: &Fake) {
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
