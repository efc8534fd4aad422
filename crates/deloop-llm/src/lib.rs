//! LLM clients for deloop: Google AI Studio (Gemini/Gemma) and
//! OpenAI-compatible chat completions, plus remote embedding clients.
//!
//! Every call has a deadline ([`GenerateRequest::timeout`]) and a
//! [`CancellationToken`]; transient failures (429, 500, 502, 503, 504,
//! connection errors) are retried with exponential backoff and jitter,
//! honouring the server's `RetryInfo.retryDelay` / `Retry-After`. Streamed
//! calls run through deloop-core's streaming loop guard: when it fires, the
//! HTTP request is dropped at once and the answer is cut there.
//!
//! ```
//! use std::collections::HashMap;
//! use deloop_llm::{LlmClient, LlmConfig};
//!
//! // Nothing configured: no client (callers answer extractively).
//! let cfg = LlmConfig::from_env_map(&HashMap::new()).unwrap();
//! assert!(LlmClient::from_config(&cfg).unwrap().is_none());
//!
//! // A Gemini key selects Google AI Studio with the default Gemma model.
//! let env = HashMap::from([("GEMINI_API_KEY".to_string(), "k".to_string())]);
//! let cfg = LlmConfig::from_env_map(&env).unwrap();
//! let client = LlmClient::from_config(&cfg).unwrap().unwrap();
//! assert_eq!(client.model(), "gemma-4-26b-a4b-it");
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod call;
pub mod config;
mod embed;
mod error;
mod gemini;
mod guard;
mod openai;
mod retry;
mod sse;
mod types;

pub use config::{
    ApiKey, LlmConfig, Provider, RetryPolicy, DEFAULT_GEMINI_BASE_URL,
    DEFAULT_GEMINI_EMBEDDING_MODEL, DEFAULT_GEMINI_MODEL, DEFAULT_OPENAI_EMBEDDING_MODEL, ENV_VARS,
};
pub use deloop_core::repetition::{ClampConfig, ClampReport};
pub use embed::{EmbeddingClient, DEFAULT_EMBED_TIMEOUT};
pub use error::LlmError;
pub use gemini::GeminiClient;
pub use openai::OpenAiClient;
pub use tokio_util::sync::CancellationToken;
pub use types::{
    FinishReason, GenerateRequest, Generation, JsonMode, Role, Turn, Usage, DEFAULT_TIMEOUT,
};

/// A generation client for the configured provider.
#[derive(Debug)]
pub enum LlmClient {
    /// Google AI Studio (Gemini, Gemma).
    Gemini(GeminiClient),
    /// An OpenAI-compatible chat completions server.
    OpenAi(OpenAiClient),
}

impl LlmClient {
    /// The client `config` selects (see [`LlmConfig::effective_provider`]),
    /// or `None` when no provider is configured.
    pub fn from_config(config: &LlmConfig) -> Result<Option<Self>, LlmError> {
        match config.effective_provider() {
            None => Ok(None),
            Some(Provider::Gemini) => {
                let key = config.gemini_api_key.clone().ok_or_else(|| {
                    LlmError::Config("the Gemini provider needs GEMINI_API_KEY".into())
                })?;
                let model = config.model.as_deref().unwrap_or(DEFAULT_GEMINI_MODEL);
                let client = GeminiClient::with_base_url(key, model, &config.gemini_base_url)?
                    .retry_policy(config.retry.clone());
                Ok(Some(LlmClient::Gemini(client)))
            }
            Some(Provider::Openai) => {
                let base = config
                    .openai_base_url
                    .as_deref()
                    .unwrap_or("https://api.openai.com/v1");
                let model = config.model.as_deref().ok_or_else(|| {
                    LlmError::Config(
                        "the OpenAI-compatible provider needs a model: set DELOOP_MODEL".into(),
                    )
                })?;
                let client = OpenAiClient::new(base, config.openai_api_key.clone(), model)?
                    .retry_policy(config.retry.clone());
                Ok(Some(LlmClient::OpenAi(client)))
            }
        }
    }

    /// Which API family this client speaks.
    pub fn provider(&self) -> Provider {
        match self {
            LlmClient::Gemini(_) => Provider::Gemini,
            LlmClient::OpenAi(_) => Provider::Openai,
        }
    }

    /// The model id requests go to.
    pub fn model(&self) -> &str {
        match self {
            LlmClient::Gemini(c) => c.model(),
            LlmClient::OpenAi(c) => c.model(),
        }
    }

    /// One non-streamed generation.
    pub async fn generate(
        &self,
        req: &GenerateRequest,
        cancel: &CancellationToken,
    ) -> Result<Generation, LlmError> {
        match self {
            LlmClient::Gemini(c) => c.generate(req, cancel).await,
            LlmClient::OpenAi(c) => c.generate(req, cancel).await,
        }
    }

    /// One streamed generation under the loop guard (`guard: None` turns the
    /// guard off). See [`GeminiClient::generate_stream`].
    pub async fn generate_stream(
        &self,
        req: &GenerateRequest,
        cancel: &CancellationToken,
        guard: Option<ClampConfig>,
        on_delta: impl FnMut(&str),
    ) -> Result<Generation, LlmError> {
        match self {
            LlmClient::Gemini(c) => c.generate_stream(req, cancel, guard, on_delta).await,
            LlmClient::OpenAi(c) => c.generate_stream(req, cancel, guard, on_delta).await,
        }
    }
}
