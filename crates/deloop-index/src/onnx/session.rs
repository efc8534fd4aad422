//! The `minilm-onnx` embedder itself: ONNX Runtime sessions on the int8
//! model, one per core (cargo feature `local-embedders`).

use std::path::Path;
use std::sync::{Mutex, OnceLock};

use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::Tensor;
use sha2::{Digest, Sha256};
use tokenizers::Tokenizer;

use super::{fetch_onnx_dir, ONNX_MAX_TOKENS, ONNX_MODEL_FILE, ORT_LIBRARY_FILE, SETUP_HINT};
use crate::embed::{
    embed_by_length, minilm_tokenizer, normalize, EmbedError, Embedder, TokenBatch,
    MINILM_ONNX_ID_PREFIX,
};

/// all-MiniLM-L6-v2 (384 dimensions) run by ONNX Runtime on the CPU with
/// int8 matrix products. Vectors are computed as [`crate::MiniLm`] computes
/// them (masked mean of the last hidden states, L2-normalised) but from the
/// first [`ONNX_MAX_TOKENS`] word pieces, so they are not identical: an
/// index records this embedder under its own id ([`MiniLmOnnx::ID_PREFIX`],
/// the model file's hash and the word-piece limit) and never mixes its
/// vectors with candle's.
///
/// Many texts are embedded on all cores with one single-threaded session per
/// core, each running its own batches (ONNX Runtime's threads inside one
/// session kept about one core busy on this model). The extra sessions are
/// made the first time a call has more than one batch, so a query costs one.
pub struct MiniLmOnnx {
    session: Mutex<Session>,
    extra: OnceLock<Result<Vec<Mutex<Session>>, String>>,
    model: Vec<u8>,
    workers: usize,
    tokenizer: Tokenizer,
    inputs: Vec<String>,
    id: String,
}

impl std::fmt::Debug for MiniLmOnnx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLmOnnx")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl MiniLmOnnx {
    /// The start of the ids of indexes built with this embedder; the rest is
    /// the first 12 hex digits of the model file's SHA-256, `:t` and the
    /// word-piece limit ([`ONNX_MAX_TOKENS`]).
    pub const ID_PREFIX: &'static str = MINILM_ONNX_ID_PREFIX;
    /// The vector length.
    pub const DIM: usize = 384;

    /// Loads ONNX Runtime and the model from `onnx_dir` (see
    /// [`crate::find_onnx_dir`]) and the tokenizer from `minilm_dir`.
    pub fn load(onnx_dir: &Path, minilm_dir: &Path) -> Result<Self, EmbedError> {
        let library = onnx_dir.join(ORT_LIBRARY_FILE);
        let model = onnx_dir.join(ONNX_MODEL_FILE);
        for p in [&library, &model] {
            if !p.is_file() {
                return Err(EmbedError::Unavailable(format!(
                    "{} is missing; {SETUP_HINT}",
                    p.display()
                )));
            }
        }
        let tokenizer = minilm_tokenizer(minilm_dir, ONNX_MAX_TOKENS)?;
        let bad = |what: &str, e: &dyn std::fmt::Display| {
            EmbedError::Unavailable(format!("cannot load {what}: {e}; {SETUP_HINT}"))
        };
        let bytes = std::fs::read(&model).map_err(|e| bad(&model.display().to_string(), &e))?;
        let digest = Sha256::digest(&bytes);
        let hash: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();

        // Loads the library once per process; a second call keeps the first.
        ort::init_from(&library)
            .map_err(|e| bad("ONNX Runtime", &e))?
            .commit();
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
        let session = new_session(&bytes).map_err(|e| bad(&model.display().to_string(), &e))?;
        let inputs: Vec<String> = session
            .inputs()
            .iter()
            .map(|o| o.name().to_string())
            .collect();
        for name in &inputs {
            if !matches!(
                name.as_str(),
                "input_ids" | "attention_mask" | "token_type_ids"
            ) {
                return Err(bad(
                    &model.display().to_string(),
                    &format!("unexpected model input `{name}`"),
                ));
            }
        }
        if !inputs.iter().any(|n| n == "input_ids") {
            return Err(bad(&model.display().to_string(), &"no `input_ids` input"));
        }
        Ok(Self {
            session: Mutex::new(session),
            extra: OnceLock::new(),
            model: bytes,
            workers,
            tokenizer,
            inputs,
            id: format!("{}{hash}:t{ONNX_MAX_TOKENS}", Self::ID_PREFIX),
        })
    }

    /// Loads from the directories [`crate::find_onnx_dir`] and
    /// [`crate::find_minilm_dir`] find.
    pub fn from_env() -> Result<Self, EmbedError> {
        Self::load(&fetch_onnx_dir(None)?, &crate::fetch_minilm_dir(None)?)
    }

    /// The session of worker `worker`: the first one, or one of the extra
    /// sessions, made on first use.
    fn session(&self, worker: usize) -> Result<&Mutex<Session>, EmbedError> {
        if worker == 0 {
            return Ok(&self.session);
        }
        let extra = self.extra.get_or_init(|| {
            (1..self.workers)
                .map(|_| new_session(&self.model).map(Mutex::new))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())
        });
        match extra {
            Ok(sessions) => sessions.get(worker - 1).ok_or_else(|| {
                EmbedError::Failed(format!("MiniLM ONNX: no session for worker {worker}"))
            }),
            Err(e) => Err(EmbedError::Failed(format!(
                "MiniLM ONNX: cannot open another session: {e}"
            ))),
        }
    }

    fn embed_batch(&self, worker: usize, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let failed = |e: &dyn std::fmt::Display| EmbedError::Failed(format!("MiniLM ONNX: {e}"));
        let TokenBatch {
            encodings,
            n,
            len,
            ids,
            mask,
        } = TokenBatch::<i64>::encode(&self.tokenizer, texts, "MiniLM ONNX")?;
        if n == 0 || len == 0 {
            return Ok(vec![vec![0.0; Self::DIM]; n]);
        }
        let shape = [n, len];
        let mut feed = Vec::with_capacity(self.inputs.len());
        for name in &self.inputs {
            let data = match name.as_str() {
                "input_ids" => ids.clone(),
                "attention_mask" => mask.clone(),
                _ => vec![0i64; n * len],
            };
            let t = Tensor::from_array((shape, data)).map_err(|e| failed(&e))?;
            feed.push((name.as_str(), t));
        }
        let mut session = self
            .session(worker)?
            .lock()
            .map_err(|_| failed(&"the ONNX session lock is poisoned"))?;
        let outputs = session.run(feed).map_err(|e| failed(&e))?;
        let (out_shape, hidden) = outputs[0]
            .try_extract_tensor::<f32>()
            .map_err(|e| failed(&e))?;
        let dims: Vec<i64> = out_shape.iter().copied().collect();
        if dims != [n as i64, len as i64, Self::DIM as i64] {
            return Err(failed(&format!(
                "output shape {dims:?}, expected [{n}, {len}, {}]",
                Self::DIM
            )));
        }
        let mut out = Vec::with_capacity(n);
        for (row, enc) in encodings.iter().enumerate() {
            let mut v = vec![0.0f32; Self::DIM];
            let mut count = 0.0f32;
            for (t, &m) in enc.get_attention_mask().iter().enumerate() {
                if m == 0 {
                    continue;
                }
                count += 1.0;
                let start = (row * len + t) * Self::DIM;
                for (acc, x) in v.iter_mut().zip(&hidden[start..start + Self::DIM]) {
                    *acc += x;
                }
            }
            if count > 0.0 {
                for x in &mut v {
                    *x /= count;
                }
            }
            normalize(&mut v);
            out.push(v);
        }
        Ok(out)
    }
}

impl Embedder for MiniLmOnnx {
    fn id(&self) -> &str {
        &self.id
    }

    fn dim(&self) -> usize {
        Self::DIM
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        embed_by_length(texts, self.workers, |worker, batch| {
            self.embed_batch(worker, batch)
        })
    }
}

/// One single-threaded ONNX Runtime session on `model` (the parallelism is
/// one session per core, see [`MiniLmOnnx`]).
fn new_session(model: &[u8]) -> Result<Session, ort::Error> {
    Session::builder()?
        .with_optimization_level(GraphOptimizationLevel::Level3)?
        .with_intra_threads(1)?
        .with_inter_threads(1)?
        // Sleeping instead of spinning between operators: on a shared
        // machine spinning threads burn the CPU other work needs.
        .with_intra_op_spinning(false)?
        .with_inter_op_spinning(false)?
        .commit_from_memory(model)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::find_onnx_dir;

    #[test]
    fn loading_from_an_empty_dir_names_the_setup_script() {
        let dir = tempfile::tempdir().unwrap();
        let err = MiniLmOnnx::load(dir.path(), dir.path())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("setup-onnx.sh") && err.contains("--embedder minilm"),
            "{err}"
        );
    }

    #[test]
    fn a_file_that_is_not_a_library_or_model_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(ORT_LIBRARY_FILE), b"not a library").unwrap();
        std::fs::write(dir.path().join(ONNX_MODEL_FILE), b"not a model").unwrap();
        assert!(find_onnx_dir(Some(dir.path())).is_ok());
        // Without the tokenizer the load stops before the library.
        let err = MiniLmOnnx::load(dir.path(), dir.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("tokenizer.json"), "{err}");
        // With it, the bad library (or, when another test already loaded
        // the real one, the bad model) is an error, not a panic.
        if let Ok(minilm) = crate::find_minilm_dir(None) {
            if minilm.join("tokenizer.json").is_file() {
                let err = MiniLmOnnx::load(dir.path(), &minilm)
                    .unwrap_err()
                    .to_string();
                assert!(err.contains("cannot load"), "{err}");
            }
        }
    }
}
