//! Remote embedding clients: Google AI Studio `embedContent` /
//! `batchEmbedContents`, and OpenAI-compatible `/embeddings`.

use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::config::{
    ApiKey, LlmConfig, Provider, RetryPolicy, DEFAULT_GEMINI_BASE_URL,
    DEFAULT_GEMINI_EMBEDDING_MODEL, DEFAULT_OPENAI_EMBEDDING_MODEL,
};
use crate::retry::{self, send_json, with_retries, CallCtx};
use crate::LlmError;

/// Default deadline of one embedding request (one batch): 60 s.
pub const DEFAULT_EMBED_TIMEOUT: Duration = Duration::from_secs(60);

enum Api {
    Gemini { key: ApiKey },
    OpenAi { key: Option<ApiKey> },
}

/// A remote embedding client for one model.
pub struct EmbeddingClient {
    http: reqwest::Client,
    api: Api,
    base_url: String,
    model: String,
    retry: RetryPolicy,
    batch_size: usize,
    timeout: Duration,
}

impl std::fmt::Debug for EmbeddingClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingClient")
            .field("id", &self.id())
            .field("base_url", &self.base_url)
            .field("batch_size", &self.batch_size)
            .finish()
    }
}

impl EmbeddingClient {
    /// Google AI Studio embeddings (`models/{model}:embedContent` for one
    /// text, `:batchEmbedContents` for several). `base_url` defaults to
    /// [`DEFAULT_GEMINI_BASE_URL`].
    pub fn gemini(key: ApiKey, model: &str, base_url: Option<&str>) -> Result<Self, LlmError> {
        let model = model.strip_prefix("models/").unwrap_or(model);
        if model.is_empty() || model.contains(['/', '?', '#', ':']) {
            return Err(LlmError::Config(format!(
                "{model:?} is not a Gemini model id"
            )));
        }
        Self::build(
            Api::Gemini { key },
            base_url.unwrap_or(DEFAULT_GEMINI_BASE_URL),
            model,
        )
    }

    /// OpenAI-compatible embeddings (`{base_url}/embeddings`, `base_url`
    /// including `/v1`).
    pub fn openai(base_url: &str, key: Option<ApiKey>, model: &str) -> Result<Self, LlmError> {
        if model.trim().is_empty() {
            return Err(LlmError::Config(
                "an embedding model name is required".into(),
            ));
        }
        Self::build(Api::OpenAi { key }, base_url, model)
    }

    fn build(api: Api, base_url: &str, model: &str) -> Result<Self, LlmError> {
        Ok(EmbeddingClient {
            http: retry::http_client(base_url)?,
            api,
            base_url: base_url.to_string(),
            model: model.to_string(),
            retry: RetryPolicy::default(),
            batch_size: 100,
            timeout: DEFAULT_EMBED_TIMEOUT,
        })
    }

    /// The remote embedder `config` selects (same provider rule as
    /// generation; model from `embedding_model` or the provider default), or
    /// `None` when no provider is configured.
    pub fn from_config(config: &LlmConfig) -> Result<Option<Self>, LlmError> {
        let client = match config.effective_provider() {
            None => return Ok(None),
            Some(Provider::Gemini) => {
                let key = config.gemini_api_key.clone().ok_or_else(|| {
                    LlmError::Config("Gemini embeddings need GEMINI_API_KEY".into())
                })?;
                let model = config
                    .embedding_model
                    .as_deref()
                    .unwrap_or(DEFAULT_GEMINI_EMBEDDING_MODEL);
                Self::gemini(key, model, Some(&config.gemini_base_url))?
            }
            Some(Provider::Openai) => {
                let base = config
                    .openai_base_url
                    .as_deref()
                    .unwrap_or("https://api.openai.com/v1");
                let model = config
                    .embedding_model
                    .as_deref()
                    .unwrap_or(DEFAULT_OPENAI_EMBEDDING_MODEL);
                Self::openai(base, config.openai_api_key.clone(), model)?
            }
        };
        Ok(Some(
            client
                .retry_policy(config.retry.clone())
                .batch_size(config.embedding_batch_size),
        ))
    }

    /// Replaces the retry policy.
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Texts per request (at least 1; Gemini accepts at most 100).
    pub fn batch_size(mut self, n: usize) -> Self {
        self.batch_size = n.max(1);
        self
    }

    /// Deadline of each request (one batch), retries included.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The model name.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// A stable identifier of the embedder, e.g. `gemini:gemini-embedding-001`
    /// or `openai:text-embedding-3-small`, for an index to record which
    /// embedder made its vectors.
    pub fn id(&self) -> String {
        match self.api {
            Api::Gemini { .. } => format!("gemini:{}", self.model),
            Api::OpenAi { .. } => format!("openai:{}", self.model),
        }
    }

    /// Embeds `texts` (one vector per text, in order), in batches.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        self.embed_cancellable(texts, &CancellationToken::new())
            .await
    }

    /// [`EmbeddingClient::embed`] with a cancellation token.
    pub async fn embed_cancellable(
        &self,
        texts: &[String],
        cancel: &CancellationToken,
    ) -> Result<Vec<Vec<f32>>, LlmError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.batch_size) {
            let key = match &self.api {
                Api::Gemini { key } => Some(key.expose()),
                Api::OpenAi { key } => key.as_ref().map(ApiKey::expose),
            };
            let ctx = CallCtx::new(self.timeout, cancel, key);
            let mut attempts = 0;
            let vectors = match &self.api {
                Api::Gemini { key } => self.gemini_batch(batch, key, &ctx, &mut attempts).await,
                Api::OpenAi { key } => {
                    self.openai_batch(batch, key.as_ref(), &ctx, &mut attempts)
                        .await
                }
            };
            let vectors = vectors.map_err(|e| ctx.redact(e))?;
            if vectors.len() != batch.len() {
                return Err(LlmError::Decode(format!(
                    "asked for {} embeddings, got {}",
                    batch.len(),
                    vectors.len()
                )));
            }
            out.extend(vectors);
        }
        Ok(out)
    }

    async fn gemini_batch(
        &self,
        batch: &[String],
        key: &ApiKey,
        ctx: &CallCtx<'_>,
        attempts: &mut u32,
    ) -> Result<Vec<Vec<f32>>, LlmError> {
        let content = |t: &String| json!({"parts": [{"text": t}]});
        let (method, body) = if batch.len() == 1 {
            ("embedContent", json!({"content": content(&batch[0])}))
        } else {
            let model = format!("models/{}", self.model);
            let requests: Vec<Value> = batch
                .iter()
                .map(|t| json!({"model": model, "content": content(t)}))
                .collect();
            ("batchEmbedContents", json!({"requests": requests}))
        };
        let url = retry::join(&self.base_url, &format!("models/{}:{method}", self.model));
        let v = with_retries(&self.retry, ctx, attempts, || {
            send_json(retry::google_key(self.http.post(&url), key.expose()).json(&body))
        })
        .await?;
        if batch.len() == 1 {
            let values = v.get("embedding").and_then(|e| e.get("values"));
            Ok(vec![floats(values)?])
        } else {
            let list = v
                .get("embeddings")
                .and_then(Value::as_array)
                .ok_or_else(|| {
                    LlmError::Decode("batchEmbedContents reply has no `embeddings`".into())
                })?;
            list.iter().map(|e| floats(e.get("values"))).collect()
        }
    }

    async fn openai_batch(
        &self,
        batch: &[String],
        key: Option<&ApiKey>,
        ctx: &CallCtx<'_>,
        attempts: &mut u32,
    ) -> Result<Vec<Vec<f32>>, LlmError> {
        let url = retry::join(&self.base_url, "embeddings");
        let body = json!({"model": self.model, "input": batch});
        let v = with_retries(&self.retry, ctx, attempts, || {
            let mut rb = self.http.post(&url).json(&body);
            if let Some(k) = key {
                rb = rb.bearer_auth(k.expose());
            }
            send_json(rb)
        })
        .await?;
        let data = v
            .get("data")
            .and_then(Value::as_array)
            .ok_or_else(|| LlmError::Decode("embeddings reply has no `data`".into()))?;
        let mut slots: Vec<Option<Vec<f32>>> = vec![None; batch.len()];
        for (pos, item) in data.iter().enumerate() {
            let index = item
                .get("index")
                .and_then(Value::as_u64)
                .map_or(pos, |i| usize::try_from(i).unwrap_or(usize::MAX));
            let slot = slots
                .get_mut(index)
                .ok_or_else(|| LlmError::Decode(format!("embedding index {index} out of range")))?;
            if slot.is_some() {
                return Err(LlmError::Decode(format!(
                    "embedding index {index} repeated"
                )));
            }
            *slot = Some(floats(item.get("embedding"))?);
        }
        slots
            .into_iter()
            .enumerate()
            .map(|(i, s)| s.ok_or_else(|| LlmError::Decode(format!("embedding {i} missing"))))
            .collect()
    }
}

fn floats(v: Option<&Value>) -> Result<Vec<f32>, LlmError> {
    let arr = v
        .and_then(Value::as_array)
        .ok_or_else(|| LlmError::Decode("embedding values missing".into()))?;
    arr.iter()
        .map(|x| {
            x.as_f64()
                .map(|f| f as f32)
                .ok_or_else(|| LlmError::Decode("embedding value is not a number".into()))
        })
        .collect()
}
