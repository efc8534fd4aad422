//! Google AI Studio client (`generateContent`, `streamGenerateContent`) for
//! Gemini and Gemma models, with the Gemma capability fallback.

use std::collections::HashMap;
use std::sync::Mutex;

use deloop_core::repetition::ClampConfig;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::call::{self, Provider};
use crate::config::{ApiKey, RetryPolicy, DEFAULT_GEMINI_BASE_URL};
use crate::guard::{event_json, StreamChunk};
use crate::retry::{self, FeatureFallback};
use crate::types::{fold_prompt, FinishReason, GenerateRequest, Generation, JsonMode, Role, Usage};
use crate::LlmError;

/// Finish reasons and block reasons that mean "the provider refused".
const REFUSAL_REASONS: &[&str] = &[
    "SAFETY",
    "RECITATION",
    "PROHIBITED_CONTENT",
    "BLOCKLIST",
    "SPII",
    "LANGUAGE",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
];

/// What a model accepts, learnt from its 400 errors.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caps {
    system_instruction: bool,
    json_mode: bool,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            system_instruction: true,
            json_mode: true,
        }
    }
}

/// A Google AI Studio client for one model. The key is sent only in the
/// `x-goog-api-key` header.
pub struct GeminiClient {
    http: reqwest::Client,
    key: ApiKey,
    base_url: String,
    model: String,
    retry: RetryPolicy,
    caps: Mutex<HashMap<String, Caps>>,
}

impl std::fmt::Debug for GeminiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeminiClient")
            .field("key", &self.key)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("retry", &self.retry)
            .finish()
    }
}

impl GeminiClient {
    /// A client for `model` (e.g. `gemma-4-26b-a4b-it`; a `models/` prefix
    /// is accepted) on the public AI Studio endpoint.
    pub fn new(key: ApiKey, model: impl Into<String>) -> Result<Self, LlmError> {
        Self::with_base_url(key, model, DEFAULT_GEMINI_BASE_URL)
    }

    /// A client on another API root (a proxy, or a test server), version
    /// included, e.g. `http://127.0.0.1:8080/v1beta`.
    pub fn with_base_url(
        key: ApiKey,
        model: impl Into<String>,
        base_url: impl Into<String>,
    ) -> Result<Self, LlmError> {
        let base_url = base_url.into();
        let model = model.into();
        let model = model.strip_prefix("models/").unwrap_or(&model).to_string();
        if model.is_empty() || model.contains(['/', '?', '#', ':']) {
            return Err(LlmError::Config(format!(
                "{model:?} is not a Gemini model id"
            )));
        }
        Ok(GeminiClient {
            http: retry::http_client(&base_url)?,
            key,
            base_url,
            model,
            retry: RetryPolicy::default(),
            caps: Mutex::new(HashMap::new()),
        })
    }

    /// Replaces the retry policy.
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// The model id.
    pub fn model(&self) -> &str {
        &self.model
    }

    fn caps(&self) -> Caps {
        let map = self.caps.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&self.model).copied().unwrap_or_default()
    }

    fn set_caps(&self, caps: Caps) {
        let mut map = self.caps.lock().unwrap_or_else(|p| p.into_inner());
        map.insert(self.model.clone(), caps);
    }

    call::generation_methods! {
        /// One non-streamed generation (`generateContent`).
        generate;
        /// One streamed generation (`streamGenerateContent?alt=sse`), watched
        /// by the loop guard when `guard` is set. `on_delta` receives answer text
        /// (thoughts excluded) as it arrives, up to any cut. When the guard
        /// fires, the HTTP response is dropped at once (the connection closes,
        /// so the server stops generating) and the answer ends at the cut.
        generate_stream;
    }
}

impl FeatureFallback for GeminiClient {
    type Features = Caps;

    fn policy(&self) -> &RetryPolicy {
        &self.retry
    }

    fn features(&self, _req: &GenerateRequest) -> Caps {
        self.caps()
    }

    /// After a 400, the capabilities to retry with, if the error names one
    /// this request used and the model rejects.
    fn fallback(&self, caps: Caps, req: &GenerateRequest, err: &LlmError) -> Option<Caps> {
        let LlmError::Http {
            status: 400,
            message,
        } = err
        else {
            return None;
        };
        let m = message.to_ascii_lowercase();
        let mut next = caps;
        if caps.system_instruction
            && req.system.is_some()
            && m.contains("developer instruction is not enabled")
        {
            next.system_instruction = false;
        }
        if caps.json_mode && req.json != JsonMode::None && m.contains("json mode is not enabled") {
            next.json_mode = false;
        }
        let changed =
            next.system_instruction != caps.system_instruction || next.json_mode != caps.json_mode;
        if changed {
            tracing::info!(model = %self.model, system_instruction = next.system_instruction,
                json_mode = next.json_mode, "model rejected a feature; retrying without it");
            self.set_caps(next);
            Some(next)
        } else {
            None
        }
    }

    /// The same body streamed or not (the endpoint differs).
    fn body(&self, req: &GenerateRequest, caps: Caps, _stream: bool) -> Value {
        let prompt = fold_prompt(req, !caps.system_instruction, !caps.json_mode);
        let mut gen = serde_json::Map::new();
        if let Some(t) = req.temperature {
            gen.insert("temperature".into(), json!(t));
        }
        if let Some(p) = req.top_p {
            gen.insert("topP".into(), json!(p));
        }
        if let Some(k) = req.top_k {
            gen.insert("topK".into(), json!(k));
        }
        if let Some(n) = req.max_output_tokens {
            gen.insert("maxOutputTokens".into(), json!(n));
        }
        if caps.json_mode {
            match &req.json {
                JsonMode::None => {}
                JsonMode::Object => {
                    gen.insert("responseMimeType".into(), json!("application/json"));
                }
                JsonMode::Schema(schema) => {
                    gen.insert("responseMimeType".into(), json!("application/json"));
                    gen.insert("responseSchema".into(), schema.clone());
                }
            }
        }
        let mut contents: Vec<Value> = req
            .history
            .iter()
            .map(|t| {
                let role = match t.role {
                    Role::User => "user",
                    Role::Assistant => "model",
                };
                json!({"role": role, "parts": [{"text": t.content}]})
            })
            .collect();
        contents.push(json!({"role": "user", "parts": [{"text": prompt}]}));
        let mut body = json!({ "contents": contents });
        if caps.system_instruction {
            if let Some(system) = &req.system {
                body["systemInstruction"] = json!({"parts": [{"text": system}]});
            }
        }
        if !gen.is_empty() {
            body["generationConfig"] = Value::Object(gen);
        }
        body
    }

    /// `generateContent`, or `streamGenerateContent?alt=sse`; the key goes
    /// in the `x-goog-api-key` header only.
    fn post(&self, body: &Value, stream: bool) -> reqwest::RequestBuilder {
        let method = if stream {
            "streamGenerateContent?alt=sse"
        } else {
            "generateContent"
        };
        let url = retry::join(&self.base_url, &format!("models/{}:{method}", self.model));
        retry::google_key(self.http.post(url), self.key.expose()).json(body)
    }
}

impl Provider for GeminiClient {
    type Chunk = Chunk;

    fn key(&self) -> Option<&str> {
        Some(self.key.expose())
    }

    fn model_id(&self) -> &str {
        &self.model
    }

    fn parse_reply(&self, reply: &Value) -> Result<Chunk, LlmError> {
        parse_response(reply)
    }

    fn parse_event(&self, data: &str) -> Result<Option<Chunk>, LlmError> {
        parse_response(&event_json(data)?).map(Some)
    }

    fn finish(&self, chunk: Chunk, attempts: u32) -> Result<Generation, LlmError> {
        if let Some(reason) = refusal(&chunk) {
            return Err(LlmError::Refused { reason });
        }
        if !chunk.candidates && chunk.finish.is_none() {
            return Err(LlmError::Decode("the reply has no candidates".into()));
        }
        let finish = match chunk.finish.as_deref() {
            Some("STOP") => FinishReason::Stop,
            Some("MAX_TOKENS") => FinishReason::MaxTokens,
            Some(other) => FinishReason::Other(other.to_string()),
            None => FinishReason::Other("FINISH_REASON_UNSPECIFIED".to_string()),
        };
        let model = self.model.clone();
        Ok(Generation::ended(
            chunk.text,
            finish,
            model,
            attempts,
            chunk.usage,
        ))
    }
}

/// The useful parts of one `GenerateContentResponse` (or stream chunk).
#[derive(Debug, Default)]
pub(crate) struct Chunk {
    text: String,
    candidates: bool,
    finish: Option<String>,
    block_reason: Option<String>,
    usage: Usage,
}

impl StreamChunk for Chunk {
    fn delta(&self) -> &str {
        &self.text
    }

    fn refusal(&self) -> Option<String> {
        refusal(self)
    }

    fn usage(&self) -> Usage {
        self.usage
    }

    fn set_text(&mut self, text: String) {
        self.text = text;
    }

    fn merge(&mut self, other: Chunk) {
        self.candidates |= other.candidates;
        if other.finish.is_some() {
            self.finish = other.finish;
        }
        if other.block_reason.is_some() {
            self.block_reason = other.block_reason;
        }
        if other.usage != Usage::default() {
            self.usage = other.usage;
        }
    }
}

fn refusal(chunk: &Chunk) -> Option<String> {
    if let Some(reason) = &chunk.block_reason {
        return Some(reason.clone());
    }
    chunk
        .finish
        .as_deref()
        .filter(|f| REFUSAL_REASONS.contains(f))
        .map(str::to_string)
}

fn parse_response(v: &Value) -> Result<Chunk, LlmError> {
    let v = match v {
        // Some proxies wrap a response in a one-element array.
        Value::Array(items) if items.len() == 1 => &items[0],
        other => other,
    };
    if let Some(err) = call::reply_error(v, |_| true) {
        return Err(err);
    }
    if !v.is_object() {
        return Err(LlmError::Decode(format!(
            "expected a GenerateContentResponse object, got: {}",
            retry::excerpt(v.to_string().as_bytes())
        )));
    }
    let mut chunk = Chunk::default();
    let first = v
        .get("candidates")
        .and_then(Value::as_array)
        .and_then(|c| c.first());
    if let Some(cand) = first {
        chunk.candidates = true;
        chunk.finish = cand
            .get("finishReason")
            .and_then(Value::as_str)
            .map(str::to_string);
        let parts = cand
            .get("content")
            .and_then(|c| c.get("parts"))
            .and_then(Value::as_array);
        for part in parts.into_iter().flatten() {
            if part.get("thought").and_then(Value::as_bool) == Some(true) {
                continue;
            }
            if let Some(t) = part.get("text").and_then(Value::as_str) {
                chunk.text.push_str(t);
            }
        }
    }
    chunk.block_reason = v
        .get("promptFeedback")
        .and_then(|p| p.get("blockReason"))
        .and_then(Value::as_str)
        .filter(|r| *r != "BLOCK_REASON_UNSPECIFIED" || first.is_none())
        .map(str::to_string);
    if let Some(u) = v.get("usageMetadata") {
        let n = |k: &str| call::token_count(u, k);
        chunk.usage = Usage {
            prompt_tokens: n("promptTokenCount"),
            output_tokens: n("candidatesTokenCount"),
            thought_tokens: n("thoughtsTokenCount"),
        };
    }
    Ok(chunk)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thought_parts_are_skipped() {
        let v = json!({"candidates":[{"content":{"role":"model","parts":[
            {"text":"let me think","thought":true},{"text":"{\"a\":"},{"text":"1}"}]},
            "finishReason":"STOP"}],
            "usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":3,"thoughtsTokenCount":9}});
        let c = parse_response(&v).unwrap();
        assert_eq!(c.text, "{\"a\":1}");
        assert_eq!(c.finish.as_deref(), Some("STOP"));
        assert_eq!(c.usage.thought_tokens, Some(9));
        assert!(refusal(&c).is_none());
    }

    #[test]
    fn block_reason_without_candidates_is_a_refusal() {
        let v = json!({"promptFeedback":{"blockReason":"PROHIBITED_CONTENT","safetyRatings":[]}});
        let c = parse_response(&v).unwrap();
        assert_eq!(refusal(&c).as_deref(), Some("PROHIBITED_CONTENT"));
    }

    #[test]
    fn safety_finish_is_a_refusal_other_is_not() {
        for r in REFUSAL_REASONS {
            let v = json!({"candidates":[{"finishReason": r}]});
            assert_eq!(refusal(&parse_response(&v).unwrap()).as_deref(), Some(*r));
        }
        let v = json!({"candidates":[{"finishReason":"OTHER"}]});
        assert!(refusal(&parse_response(&v).unwrap()).is_none());
    }

    #[test]
    fn hostile_shapes_do_not_panic() {
        for v in [
            json!(null),
            json!([]),
            json!("x"),
            json!({"candidates": 3}),
            json!({"candidates": [{"content": {"parts": "no"}}]}),
            json!({"candidates": [{"content": {"parts": [{"text": 5}]}}]}),
            json!({"usageMetadata": {"promptTokenCount": -1}}),
            json!({"error": {"code": 99999999, "message": "m"}}),
        ] {
            let _ = parse_response(&v);
        }
    }

    #[test]
    fn body_shapes_follow_capabilities() {
        let c = GeminiClient::with_base_url(
            ApiKey::new("k"),
            "models/gemma-x",
            "http://127.0.0.1:1/v1beta",
        )
        .unwrap();
        assert_eq!(c.model(), "gemma-x");
        let mut req = GenerateRequest::new("Q?");
        req.system = Some("Be brief.".into());
        req.json = JsonMode::Schema(json!({"type":"object"}));
        req.temperature = Some(1.0);
        req.top_k = Some(64);
        let full = c.body(&req, Caps::default(), false);
        assert_eq!(full["systemInstruction"]["parts"][0]["text"], "Be brief.");
        assert_eq!(
            full["generationConfig"]["responseMimeType"],
            "application/json"
        );
        assert_eq!(full["generationConfig"]["responseSchema"]["type"], "object");
        assert_eq!(full["generationConfig"]["topK"], 64);
        assert_eq!(full["contents"][0]["parts"][0]["text"], "Q?");
        let bare = c.body(
            &req,
            Caps {
                system_instruction: false,
                json_mode: false,
            },
            false,
        );
        assert!(bare.get("systemInstruction").is_none());
        assert!(bare["generationConfig"].get("responseMimeType").is_none());
        assert!(bare["generationConfig"].get("responseSchema").is_none());
        let prompt = bare["contents"][0]["parts"][0]["text"].as_str().unwrap();
        assert!(prompt.starts_with("Be brief.\n\nQ?"), "{prompt}");
        assert!(prompt.contains("JSON Schema"), "{prompt}");
    }

    #[test]
    fn bad_model_ids_are_rejected() {
        for m in ["", "a/b", "x:generateContent", "m?key=1"] {
            assert!(GeminiClient::new(ApiKey::new("k"), m).is_err(), "{m}");
        }
    }
}
