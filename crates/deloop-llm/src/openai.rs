//! OpenAI-compatible chat completions client (OpenAI, Ollama, llama.cpp
//! server, vLLM), with the `response_format` fallback chain.

use std::collections::HashMap;
use std::sync::Mutex;

use deloop_core::repetition::ClampConfig;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::call::{self, Provider};
use crate::config::{ApiKey, RetryPolicy};
use crate::guard::{event_json, StreamChunk};
use crate::retry::{self, FeatureFallback};
use crate::types::{fold_prompt, FinishReason, GenerateRequest, Generation, JsonMode, Usage};
use crate::LlmError;

/// How JSON output is requested, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Format {
    /// `response_format: {type: json_schema, ...}`.
    Schema,
    /// `response_format: {type: json_object}`.
    Object,
    /// No `response_format`: the JSON request goes in the prompt.
    Plain,
}

impl Format {
    fn weaker(self) -> Option<Format> {
        match self {
            Format::Schema => Some(Format::Object),
            Format::Object => Some(Format::Plain),
            Format::Plain => None,
        }
    }
}

/// A client for one model on an OpenAI-compatible server. The key, when
/// there is one, is sent only as `Authorization: Bearer`.
pub struct OpenAiClient {
    http: reqwest::Client,
    key: Option<ApiKey>,
    base_url: String,
    model: String,
    retry: RetryPolicy,
    formats: Mutex<HashMap<String, Format>>,
}

impl std::fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("key", &self.key)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("retry", &self.retry)
            .finish()
    }
}

impl OpenAiClient {
    /// A client for `model` at `base_url`, the API root including `/v1`
    /// (e.g. `http://localhost:11434/v1`); requests go to
    /// `{base_url}/chat/completions`.
    pub fn new(
        base_url: impl Into<String>,
        key: Option<ApiKey>,
        model: impl Into<String>,
    ) -> Result<Self, LlmError> {
        let base_url = base_url.into();
        let model = model.into();
        if model.trim().is_empty() {
            return Err(LlmError::Config(
                "an OpenAI-compatible server needs a model name (set DELOOP_MODEL)".into(),
            ));
        }
        Ok(OpenAiClient {
            http: retry::http_client(&base_url)?,
            key,
            base_url,
            model,
            retry: RetryPolicy::default(),
            formats: Mutex::new(HashMap::new()),
        })
    }

    /// Replaces the retry policy.
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// The model name.
    pub fn model(&self) -> &str {
        &self.model
    }

    call::generation_methods! {
        /// One non-streamed chat completion.
        generate;
        /// One streamed chat completion (`stream: true`, SSE ending at
        /// `[DONE]`), watched by the loop guard when `guard` is set; see
        /// [`crate::GeminiClient::generate_stream`] for the cut semantics.
        generate_stream;
    }
}

impl FeatureFallback for OpenAiClient {
    type Features = Format;

    fn policy(&self) -> &RetryPolicy {
        &self.retry
    }

    /// The strongest format to try for this request, given what the model
    /// is known to accept.
    fn features(&self, req: &GenerateRequest) -> Format {
        let wanted = match req.json {
            JsonMode::None => return Format::Plain,
            JsonMode::Object => Format::Object,
            JsonMode::Schema(_) => Format::Schema,
        };
        let map = self.formats.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&self.model)
            .copied()
            .map_or(wanted, |known| wanted.max(known))
    }

    /// After an error, the weaker format to retry with, if the server
    /// rejected `response_format`.
    fn fallback(&self, format: Format, _req: &GenerateRequest, err: &LlmError) -> Option<Format> {
        let LlmError::Http { status, message } = err else {
            return None;
        };
        if !matches!(status, 400 | 422) {
            return None;
        }
        let m = message.to_ascii_lowercase();
        let about_format = [
            "response_format",
            "json_schema",
            "json_object",
            "response format",
        ]
        .iter()
        .any(|k| m.contains(k));
        let next = format.weaker().filter(|_| about_format)?;
        tracing::info!(model = %self.model, ?next, "server rejected response_format; falling back");
        let mut map = self.formats.lock().unwrap_or_else(|p| p.into_inner());
        let entry = map.entry(self.model.clone()).or_insert(next);
        *entry = (*entry).max(next);
        Some(next)
    }

    fn body(&self, req: &GenerateRequest, format: Format, stream: bool) -> Value {
        let json_in_prompt = format == Format::Plain && req.json != JsonMode::None;
        let mut messages = Vec::new();
        if let Some(system) = &req.system {
            messages.push(json!({"role": "system", "content": system}));
        }
        for turn in &req.history {
            messages.push(json!({"role": turn.role.as_str(), "content": turn.content}));
        }
        messages.push(json!({"role": "user", "content": fold_prompt(req, false, json_in_prompt)}));
        let mut body = json!({"model": self.model, "messages": messages});
        if let Some(t) = req.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(p) = req.top_p {
            body["top_p"] = json!(p);
        }
        if let Some(n) = req.max_output_tokens {
            body["max_tokens"] = json!(n);
        }
        match (format, &req.json) {
            (Format::Schema, JsonMode::Schema(schema)) => {
                body["response_format"] = json!({
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "schema": schema},
                });
            }
            (Format::Schema | Format::Object, JsonMode::Schema(_) | JsonMode::Object) => {
                body["response_format"] = json!({"type": "json_object"});
            }
            _ => {}
        }
        if stream {
            body["stream"] = json!(true);
        }
        body
    }

    /// `{base}/chat/completions` (streamed or not: the body says); the key,
    /// if any, goes in the `Authorization: Bearer` header only.
    fn post(&self, body: &Value, _stream: bool) -> reqwest::RequestBuilder {
        let mut rb = self
            .http
            .post(retry::join(&self.base_url, "chat/completions"))
            .json(body);
        if let Some(key) = &self.key {
            rb = rb.bearer_auth(key.expose());
        }
        rb
    }
}

impl Provider for OpenAiClient {
    type Chunk = Completion;

    fn key(&self) -> Option<&str> {
        self.key.as_ref().map(ApiKey::expose)
    }

    fn model_id(&self) -> &str {
        &self.model
    }

    fn parse_reply(&self, reply: &Value) -> Result<Completion, LlmError> {
        parse_completion(reply, false)
    }

    /// A chunk, or `None` at the `[DONE]` end marker.
    fn parse_event(&self, data: &str) -> Result<Option<Completion>, LlmError> {
        if data.trim() == "[DONE]" {
            return Ok(None);
        }
        parse_completion(&event_json(data)?, true).map(Some)
    }

    fn finish(&self, c: Completion, attempts: u32) -> Result<Generation, LlmError> {
        if let Some(reason) = c.refusal {
            return Err(LlmError::Refused { reason });
        }
        let finish = match c.finish.as_deref() {
            Some("stop") | Some("eos") | Some("end_turn") => FinishReason::Stop,
            Some("length") | Some("max_tokens") => FinishReason::MaxTokens,
            Some(other) => FinishReason::Other(other.to_string()),
            None => FinishReason::Other("unspecified".to_string()),
        };
        let model = self.model.clone();
        Ok(Generation::ended(c.text, finish, model, attempts, c.usage))
    }
}

/// The useful parts of a completion or stream chunk.
#[derive(Debug, Default)]
pub(crate) struct Completion {
    text: String,
    finish: Option<String>,
    refusal: Option<String>,
    usage: Usage,
}

impl StreamChunk for Completion {
    fn delta(&self) -> &str {
        &self.text
    }

    fn refusal(&self) -> Option<String> {
        self.refusal.clone()
    }

    fn usage(&self) -> Usage {
        self.usage
    }

    fn set_text(&mut self, text: String) {
        self.text = text;
    }

    fn merge(&mut self, other: Completion) {
        if other.finish.is_some() {
            self.finish = other.finish;
        }
        if other.usage != Usage::default() {
            self.usage = other.usage;
        }
    }
}

fn parse_completion(v: &Value, chunk: bool) -> Result<Completion, LlmError> {
    if let Some(err) = call::reply_error(v, |c| (400..600).contains(c)) {
        return Err(err);
    }
    let choices = v.get("choices").and_then(Value::as_array);
    let Some(choices) = choices else {
        return Err(LlmError::Decode(format!(
            "expected a chat completion with `choices`, got: {}",
            retry::excerpt(v.to_string().as_bytes())
        )));
    };
    let mut c = Completion::default();
    if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
        let n = |k: &str| call::token_count(u, k);
        c.usage = Usage {
            prompt_tokens: n("prompt_tokens"),
            output_tokens: n("completion_tokens"),
            thought_tokens: u
                .get("completion_tokens_details")
                .and_then(|d| call::token_count(d, "reasoning_tokens")),
        };
    }
    let Some(choice) = choices.first() else {
        // A usage-only stream chunk has no choices.
        if chunk {
            return Ok(c);
        }
        return Err(LlmError::Decode("the completion has no choices".into()));
    };
    let msg = choice.get(if chunk { "delta" } else { "message" });
    if let Some(m) = msg {
        if let Some(t) = m.get("content").and_then(Value::as_str) {
            c.text.push_str(t);
        }
        if let Some(r) = m.get("refusal").and_then(Value::as_str) {
            if !r.is_empty() {
                c.refusal = Some(format!("refusal: {r}"));
            }
        }
    }
    c.finish = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .map(str::to_string);
    if c.finish.as_deref() == Some("content_filter") {
        c.refusal = Some("content_filter".to_string());
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> OpenAiClient {
        OpenAiClient::new("http://127.0.0.1:1/v1", None, "m").unwrap()
    }

    #[test]
    fn body_response_format_per_level() {
        let c = client();
        let mut req = GenerateRequest::new("Q");
        req.system = Some("S".into());
        req.json = JsonMode::Schema(json!({"type":"object"}));
        req.max_output_tokens = Some(10);
        let b = c.body(&req, Format::Schema, false);
        assert_eq!(b["response_format"]["type"], "json_schema");
        assert_eq!(
            b["response_format"]["json_schema"]["schema"]["type"],
            "object"
        );
        assert_eq!(b["messages"][0]["role"], "system");
        assert_eq!(b["max_tokens"], 10);
        assert!(b.get("stream").is_none());
        let b = c.body(&req, Format::Object, true);
        assert_eq!(b["response_format"]["type"], "json_object");
        assert_eq!(b["stream"], true);
        let b = c.body(&req, Format::Plain, false);
        assert!(b.get("response_format").is_none());
        assert!(b["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("JSON Schema"));
        let plain = GenerateRequest::new("Q");
        assert!(c
            .body(&plain, c.features(&plain), false)
            .get("response_format")
            .is_none());
    }

    #[test]
    fn fallback_only_for_format_errors() {
        let c = client();
        let q = GenerateRequest::new("Q");
        let e = |s: u16, m: &str| LlmError::Http {
            status: s,
            message: m.into(),
        };
        assert_eq!(
            c.fallback(Format::Schema, &q, &e(401, "response_format")),
            None
        );
        assert_eq!(
            c.fallback(Format::Schema, &q, &e(400, "max_tokens too big")),
            None
        );
        assert_eq!(
            c.fallback(Format::Plain, &q, &e(400, "response_format")),
            None
        );
        assert_eq!(
            c.fallback(
                Format::Schema,
                &q,
                &e(400, "Unknown response_format type json_schema")
            ),
            Some(Format::Object)
        );
        // Remembered: a schema request now starts at json_object.
        let mut req = GenerateRequest::new("Q");
        req.json = JsonMode::Schema(json!({}));
        assert_eq!(c.features(&req), Format::Object);
    }

    #[test]
    fn completion_shapes() {
        let v = json!({"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"length"}],
            "usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}});
        let c = parse_completion(&v, false).unwrap();
        assert_eq!(
            (c.text.as_str(), c.finish.as_deref()),
            ("hi", Some("length"))
        );
        assert_eq!(c.usage.output_tokens, Some(2));
        let v = json!({"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't"}}]});
        assert!(parse_completion(&v, false).unwrap().refusal.is_some());
        let v = json!({"choices":[{"index":0,"delta":{},"finish_reason":"content_filter"}]});
        assert_eq!(
            parse_completion(&v, true).unwrap().refusal.as_deref(),
            Some("content_filter")
        );
        assert!(parse_completion(&json!({"choices":[]}), true).is_ok());
        assert!(parse_completion(&json!({"choices":[]}), false).is_err());
        assert!(parse_completion(&json!({"x":1}), false).is_err());
        assert!(matches!(
            parse_completion(&json!({"error":{"message":"boom","code":"x"}}), true),
            Err(LlmError::Http { status: 500, .. })
        ));
    }
}
