//! all-MiniLM-L6-v2 run in-process with candle (the `minilm` embedder).

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::Tokenizer;

use super::{
    embed_by_length, fetch_minilm_dir, minilm_tokenizer, normalize, EmbedError, Embedder,
    TokenBatch, MINILM_DIR_ENV, MINILM_ID, MINILM_MAX_TOKENS,
};

/// The local all-MiniLM-L6-v2 sentence embedder (384 dimensions), run on the
/// CPU with candle from `model.safetensors`, `config.json` and
/// `tokenizer.json`.
///
/// Vectors are the attention-masked mean of the last hidden states,
/// L2-normalised, as sentence-transformers computes them. Sequences are padded
/// to the longest in each batch and truncated at 256 word pieces (the shipped
/// `tokenizer.json` pads and truncates to a fixed 128, which is overridden).
pub struct MiniLm {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
}

impl std::fmt::Debug for MiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLm").finish_non_exhaustive()
    }
}

impl MiniLm {
    /// The id recorded in indexes built with this embedder.
    pub const ID: &'static str = MINILM_ID;
    /// The vector length.
    pub const DIM: usize = 384;

    /// Loads the model from a directory holding `model.safetensors`,
    /// `config.json` and `tokenizer.json`.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let file = |name: &str| -> Result<PathBuf, EmbedError> {
            let p = dir.join(name);
            if p.is_file() {
                Ok(p)
            } else {
                Err(EmbedError::Unavailable(format!(
                    "{} is missing; run scripts/setup-model.sh or point {MINILM_DIR_ENV} \
                     at a directory with the all-MiniLM-L6-v2 files",
                    p.display()
                )))
            }
        };
        let weights = file("model.safetensors")?;
        let config = file("config.json")?;

        let bad = |what: &str, e: &dyn std::fmt::Display| {
            EmbedError::Unavailable(format!(
                "cannot load MiniLM {what} from {}: {e}",
                dir.display()
            ))
        };
        let config_text = std::fs::read_to_string(&config).map_err(|e| bad("config.json", &e))?;
        let config: Config =
            serde_json::from_str(&config_text).map_err(|e| bad("config.json", &e))?;
        let tokenizer = minilm_tokenizer(dir, MINILM_MAX_TOKENS)?;
        let device = Device::Cpu;
        // SAFETY: the weights file is memory-mapped read-only; deloop never
        // writes to it, and the user is told not to modify it while running.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[weights], DType::F32, &device) }
            .map_err(|e| bad("model.safetensors", &e))?;
        let model = BertModel::load(vb, &config).map_err(|e| bad("model.safetensors", &e))?;
        if config.hidden_size != Self::DIM {
            return Err(bad(
                "config.json",
                &format!("hidden_size {} is not {}", config.hidden_size, Self::DIM),
            ));
        }
        Ok(Self {
            model,
            tokenizer,
            device,
        })
    }

    /// Loads the model from the directory [`fetch_minilm_dir`] finds (or
    /// fetches).
    pub fn from_env() -> Result<Self, EmbedError> {
        Self::load(&fetch_minilm_dir(None)?)
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let failed = |e: &dyn std::fmt::Display| EmbedError::Failed(format!("MiniLM: {e}"));
        let batch: TokenBatch<u32> = TokenBatch::encode(&self.tokenizer, texts, "MiniLM")?;
        let (n, len, ids, mask) = (batch.n, batch.len, batch.ids, batch.mask);
        let run = || -> candle_core::Result<Vec<Vec<f32>>> {
            let ids = Tensor::from_vec(ids, (n, len), &self.device)?;
            let mask = Tensor::from_vec(mask, (n, len), &self.device)?;
            let types = ids.zeros_like()?;
            let hidden = self.model.forward(&ids, &types, Some(&mask))?; // (n, len, dim)
            let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (n, len, 1)
            let summed = hidden.broadcast_mul(&m)?.sum(1)?; // (n, dim)
            let counts = m.sum(1)?.clamp(1e-9, f64::MAX)?; // (n, 1)
            let mean = summed.broadcast_div(&counts)?;
            mean.to_vec2::<f32>()
        };
        let mut out = run().map_err(|e| failed(&e))?;
        for v in &mut out {
            normalize(v);
        }
        Ok(out)
    }
}

impl Embedder for MiniLm {
    fn id(&self) -> &str {
        Self::ID
    }

    fn dim(&self) -> usize {
        Self::DIM
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        embed_by_length(texts, 1, |_, batch| self.embed_batch(batch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_model_dir_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = MiniLm::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("setup-model.sh"), "{err}");
        assert!(err.contains("model.safetensors"), "{err}");
    }
}
