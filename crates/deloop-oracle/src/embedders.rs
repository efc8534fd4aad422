//! Which embedder fills an index and embeds its queries: the local
//! all-MiniLM-L6-v2 (ONNX Runtime or candle) or a remote one (Gemini,
//! OpenAI-compatible `/v1/embeddings`). A new index takes the embedder its
//! name asks for (`[index] embedder`, `DELOOP_EMBEDDER`, `deloop index
//! --embedder`); an existing one keeps the embedder whose id it recorded,
//! because vectors of two embedders cannot be compared.
//!
//! `deloop index`, `deloop search`, `deloop ask`, the server and MCP all
//! choose here, so that a name means the same embedder everywhere.

use std::path::Path;

use deloop_config::{Config, ConfigError};
use deloop_index::{Index, SharedEmbedder};

use crate::remote_embedder::RemoteEmbedder;
use crate::settings::EMBEDDERS;
use crate::OracleError;

/// The query embedder matching the index's vectors, or why there is none
/// (retrieval then falls back to lexical and reports the reason).
#[derive(Default)]
pub struct QueryEmbedder {
    /// The embedder, when one matches the index's vectors.
    pub embedder: Option<SharedEmbedder>,
    /// Why there is none, when the index has vectors.
    pub problem: Option<String>,
}

impl std::fmt::Debug for QueryEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryEmbedder")
            .field(
                "embedder",
                &self.embedder.as_ref().map(|e| e.id().to_owned()),
            )
            .field("problem", &self.problem)
            .finish()
    }
}

/// The embedder named `name` for a new index (one of [`EMBEDDERS`]): `Ok(Ok)`
/// with it; `Ok(Err(why))` when there is none to use, for `none`, or for
/// `auto` when no local model files can be had (the index is then lexical
/// only, and `why` says how to get them); `Err` when the named embedder
/// cannot be loaded or reached, or the name is unknown.
///
/// `minilm_dir` defaults to `[index] minilm_dir`, and both directories to
/// the environment and deloop's cache (model files are fetched there
/// when missing, unless `DELOOP_MODEL_FETCH=0`). A remote embedder is asked
/// once for its vector length, so a wrong key or URL fails here.
pub fn for_new_index(
    config: &Config,
    name: &str,
    minilm_dir: Option<&Path>,
    onnx_dir: Option<&Path>,
) -> Result<Result<SharedEmbedder, String>, OracleError> {
    let minilm_dir = minilm_dir.or(config.index.minilm_dir.as_deref());
    let loaded = |r: Result<SharedEmbedder, deloop_index::EmbedError>| {
        r.map(Ok).map_err(|e| OracleError::Embedder(e.to_string()))
    };
    match name {
        "none" => Ok(Err("the embedder is `none`".into())),
        "auto" => match deloop_index::auto_local_embedder(minilm_dir, onnx_dir) {
            Ok(m) => Ok(Ok(m)),
            Err(e) => {
                tracing::info!(error = %e, "no local embedder; lexical only");
                Ok(Err(e.to_string()))
            }
        },
        "minilm" => loaded(deloop_index::load_minilm(minilm_dir)),
        "minilm-onnx" => loaded(deloop_index::load_minilm_onnx(minilm_dir, onnx_dir)),
        "gemini" | "openai" => {
            let client = deloop_llm::EmbeddingClient::from_config(&config.llm)
                .map_err(|e| OracleError::Embedder(e.to_string()))?
                .ok_or_else(|| {
                    ConfigError::invalid(
                        "embedder",
                        name,
                        "usable without an LLM provider: configure one (docs/llm.md) \
                         or choose minilm or none",
                    )
                })?;
            let provider = client.id();
            if !provider.starts_with(&format!("{name}:")) {
                return Err(ConfigError::invalid(
                    "embedder",
                    name,
                    format!(
                        "the provider configured for the LLM ({provider}); set \
                         DELOOP_LLM_PROVIDER={name} (docs/llm.md) or choose that embedder"
                    ),
                )
                .into());
            }
            loaded(RemoteEmbedder::new(client, None).map(|e| Box::new(e) as SharedEmbedder))
        }
        other => Err(ConfigError::invalid("embedder", other, EMBEDDERS).into()),
    }
}

/// The embedder that made vectors recorded as `id` (of length `dim`): the
/// local model of that id found under `[index] minilm_dir` and `onnx_dir`
/// (else their defaults), or the configured remote embedder when its id is
/// `id`; otherwise why it cannot be had.
pub fn for_recorded(
    config: &Config,
    id: &str,
    dim: usize,
    onnx_dir: Option<&Path>,
) -> Result<SharedEmbedder, String> {
    if let Some(loaded) =
        deloop_index::local_embedder_for_id(id, config.index.minilm_dir.as_deref(), onnx_dir)
    {
        return loaded.map_err(|e| format!("the index's embedder {id} is not available: {e}"));
    }
    let client = match deloop_llm::EmbeddingClient::from_config(&config.llm) {
        Ok(Some(c)) if c.id() == id => c,
        Ok(Some(c)) => {
            return Err(format!(
                "the index's vectors are from {id}, the configured embedder is {}",
                c.id()
            ))
        }
        Ok(None) => {
            return Err(format!(
                "the index's embedder {id} needs an LLM provider configured"
            ))
        }
        Err(e) => return Err(e.to_string()),
    };
    RemoteEmbedder::new(client, Some(dim))
        .map(|e| Box::new(e) as SharedEmbedder)
        .map_err(|e| e.to_string())
}

/// The query embedder for `index`'s vectors ([`for_recorded`] of the
/// embedder it recorded); none for a lexical index.
pub fn query_embedder(config: &Config, index: &Index, onnx_dir: Option<&Path>) -> QueryEmbedder {
    let info = match index.embedder_info() {
        Ok(Some(info)) if !info.is_none() => info,
        Ok(_) => return QueryEmbedder::default(),
        Err(e) => {
            return QueryEmbedder {
                embedder: None,
                problem: Some(format!("cannot read the index's embedder: {e}")),
            }
        }
    };
    match for_recorded(config, &info.id, info.dim, onnx_dir) {
        Ok(e) => QueryEmbedder {
            embedder: Some(e),
            problem: None,
        },
        Err(p) => QueryEmbedder {
            embedder: None,
            problem: Some(p),
        },
    }
}
