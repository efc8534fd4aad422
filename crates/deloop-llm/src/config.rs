//! Configuration: provider selection, endpoints, keys and the retry policy,
//! from a config file (serde) and/or the environment.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use serde::Deserialize;

/// Default Google AI Studio API root.
pub const DEFAULT_GEMINI_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";
/// Default generation model (Google AI Studio).
pub const DEFAULT_GEMINI_MODEL: &str = "gemma-4-26b-a4b-it";
/// Default Gemini embedding model.
pub const DEFAULT_GEMINI_EMBEDDING_MODEL: &str = "gemini-embedding-001";
/// Default OpenAI-compatible embedding model.
pub const DEFAULT_OPENAI_EMBEDDING_MODEL: &str = "text-embedding-3-small";

/// An API key. It is never printed: `Debug` shows `ApiKey(<redacted>)`.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// The key itself, for a request header only.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// Which API family to talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// Google AI Studio (`generateContent`), Gemini and Gemma models.
    Gemini,
    /// OpenAI-compatible chat completions (OpenAI, Ollama, llama.cpp, vLLM).
    Openai,
}

/// Retry policy shared by generation and embedding calls.
///
/// Retried: HTTP 429, 500, 502, 503, 504 and connection errors. Never
/// retried: any other status (400, 401, 403, 404...), refusals, decode
/// errors. The wait before retry `n` (1-based) is the server's hint
/// (Gemini `RetryInfo.retryDelay`, else `Retry-After` in seconds or as an
/// HTTP-date) capped at
/// `max_server_delay_ms`, or else `base_delay_ms * 2^(n-1)` capped at
/// `max_delay_ms` with "equal jitter" (a uniformly random wait between half
/// and all of that). A wait that would overrun the call's deadline is not
/// taken: the last error is returned at once.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryPolicy {
    /// Total HTTP attempts per call, first one included (4).
    pub max_attempts: u32,
    /// First backoff, in milliseconds (500).
    pub base_delay_ms: u64,
    /// Largest backoff, in milliseconds (8000).
    pub max_delay_ms: u64,
    /// Largest server-requested wait honoured, in milliseconds (30000).
    pub max_server_delay_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base_delay_ms: 500,
            max_delay_ms: 8_000,
            max_server_delay_ms: 30_000,
        }
    }
}

impl RetryPolicy {
    /// No retries at all: one attempt per call.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    pub(crate) fn max_server_delay(&self) -> Duration {
        Duration::from_millis(self.max_server_delay_ms)
    }
}

/// Everything needed to build the LLM and embedding clients. Every field
/// has a default, so a config file may set only what it needs; environment
/// variables override the file (see [`LlmConfig::with_env_map`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// Force a provider; when unset it is chosen from what is configured
    /// (an OpenAI-compatible base URL wins over a Gemini key).
    pub provider: Option<Provider>,
    /// Generation model (`DELOOP_MODEL`). Defaults per provider:
    /// `gemma-4-26b-a4b-it` for Gemini; required for OpenAI-compatible.
    pub model: Option<String>,
    /// Google AI Studio key (`GEMINI_API_KEY`).
    pub gemini_api_key: Option<ApiKey>,
    /// Google AI Studio API root (`GEMINI_BASE_URL`), version included.
    pub gemini_base_url: String,
    /// OpenAI-compatible API root including `/v1` (`OPENAI_BASE_URL`), e.g.
    /// `http://localhost:11434/v1`.
    pub openai_base_url: Option<String>,
    /// OpenAI-compatible key (`OPENAI_API_KEY`); local servers need none.
    pub openai_api_key: Option<ApiKey>,
    /// Embedding model for the remote embedders (`DELOOP_EMBEDDING_MODEL`).
    pub embedding_model: Option<String>,
    /// Texts per embedding request (100, Gemini's batch limit).
    pub embedding_batch_size: usize,
    /// Retry policy.
    pub retry: RetryPolicy,
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            provider: None,
            model: None,
            gemini_api_key: None,
            gemini_base_url: DEFAULT_GEMINI_BASE_URL.to_string(),
            openai_base_url: None,
            openai_api_key: None,
            embedding_model: None,
            embedding_batch_size: 100,
            retry: RetryPolicy::default(),
        }
    }
}

/// The environment variables [`LlmConfig::with_env_map`] reads.
pub const ENV_VARS: &[&str] = &[
    "DELOOP_LLM_PROVIDER",
    "DELOOP_MODEL",
    "GEMINI_API_KEY",
    "GEMINI_BASE_URL",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "DELOOP_EMBEDDING_MODEL",
];

impl LlmConfig {
    /// Defaults overridden by the process environment.
    pub fn from_env() -> Result<Self, crate::LlmError> {
        let map: HashMap<String, String> = ENV_VARS
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
            .collect();
        Self::from_env_map(&map)
    }

    /// Defaults overridden by the variables in `env` (pure: for tests).
    pub fn from_env_map(env: &HashMap<String, String>) -> Result<Self, crate::LlmError> {
        LlmConfig::default().with_env_map(env)
    }

    /// This config with any of [`ENV_VARS`] present (and non-empty) in `env`
    /// taking precedence. `DELOOP_LLM_PROVIDER` must be `gemini` or `openai`.
    pub fn with_env_map(mut self, env: &HashMap<String, String>) -> Result<Self, crate::LlmError> {
        let get = |k: &str| env.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        if let Some(p) = get("DELOOP_LLM_PROVIDER") {
            self.provider = Some(match p.to_ascii_lowercase().as_str() {
                "gemini" | "google" | "gemma" => Provider::Gemini,
                "openai" => Provider::Openai,
                other => {
                    return Err(crate::LlmError::Config(format!(
                        "DELOOP_LLM_PROVIDER={other:?} is not a provider; use `gemini` or `openai`"
                    )))
                }
            });
        }
        if let Some(v) = get("DELOOP_MODEL") {
            self.model = Some(v.to_string());
        }
        if let Some(v) = get("GEMINI_API_KEY") {
            self.gemini_api_key = Some(ApiKey::new(v));
        }
        if let Some(v) = get("GEMINI_BASE_URL") {
            self.gemini_base_url = v.to_string();
        }
        if let Some(v) = get("OPENAI_BASE_URL") {
            self.openai_base_url = Some(v.to_string());
        }
        if let Some(v) = get("OPENAI_API_KEY") {
            self.openai_api_key = Some(ApiKey::new(v));
        }
        if let Some(v) = get("DELOOP_EMBEDDING_MODEL") {
            self.embedding_model = Some(v.to_string());
        }
        Ok(self)
    }

    /// The provider to use: the forced one, else OpenAI-compatible when a
    /// base URL is set, else Gemini when a key is set, else none (no LLM).
    pub fn effective_provider(&self) -> Option<Provider> {
        self.provider.or(if self.openai_base_url.is_some() {
            Some(Provider::Openai)
        } else if self.gemini_api_key.is_some() {
            Some(Provider::Gemini)
        } else {
            None
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn nothing_configured_means_no_provider() {
        let c = LlmConfig::from_env_map(&env(&[])).unwrap();
        assert_eq!(c.effective_provider(), None);
        assert_eq!(c.gemini_base_url, DEFAULT_GEMINI_BASE_URL);
    }

    #[test]
    fn gemini_key_selects_gemini_and_model_override() {
        let c = LlmConfig::from_env_map(&env(&[
            ("GEMINI_API_KEY", "k-123"),
            ("DELOOP_MODEL", "gemini-2.5-flash"),
        ]))
        .unwrap();
        assert_eq!(c.effective_provider(), Some(Provider::Gemini));
        assert_eq!(c.model.as_deref(), Some("gemini-2.5-flash"));
    }

    #[test]
    fn openai_base_url_wins_unless_forced() {
        let e = env(&[
            ("GEMINI_API_KEY", "k"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1"),
        ]);
        let c = LlmConfig::from_env_map(&e).unwrap();
        assert_eq!(c.effective_provider(), Some(Provider::Openai));
        let mut e2 = e.clone();
        e2.insert("DELOOP_LLM_PROVIDER".into(), "gemini".into());
        assert_eq!(
            LlmConfig::from_env_map(&e2).unwrap().effective_provider(),
            Some(Provider::Gemini)
        );
    }

    #[test]
    fn bad_provider_is_a_clear_error() {
        let err = LlmConfig::from_env_map(&env(&[("DELOOP_LLM_PROVIDER", "claude")])).unwrap_err();
        assert!(err.to_string().contains("gemini"), "{err}");
    }

    #[test]
    fn empty_values_are_ignored() {
        let c = LlmConfig::from_env_map(&env(&[("GEMINI_API_KEY", "  ")])).unwrap();
        assert!(c.gemini_api_key.is_none());
    }

    #[test]
    fn debug_redacts_keys() {
        let c = LlmConfig::from_env_map(&env(&[
            ("GEMINI_API_KEY", "SECRET-gem"),
            ("OPENAI_API_KEY", "SECRET-oai"),
        ]))
        .unwrap();
        let dbg = format!("{c:?}");
        assert!(!dbg.contains("SECRET"), "{dbg}");
        assert!(dbg.contains("<redacted>"));
    }

    #[test]
    fn file_keys_deserialize_with_defaults() {
        let c: LlmConfig = serde_json::from_str(
            r#"{"provider":"openai","openai_base_url":"http://h/v1","model":"m","retry":{"max_attempts":2}}"#,
        )
        .unwrap();
        assert_eq!(c.provider, Some(Provider::Openai));
        assert_eq!(c.retry.max_attempts, 2);
        assert_eq!(c.retry.base_delay_ms, 500);
        assert_eq!(c.embedding_batch_size, 100);
        assert!(serde_json::from_str::<LlmConfig>(r#"{"modle":"x"}"#).is_err());
    }
}
