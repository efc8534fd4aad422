//! # deloop-config
//!
//! deloop's configuration, shared by the command line, the server and the
//! MCP server: the file `deloop.toml`, the environment variables that
//! override it, and where the index lives.
//!
//! The file is found at an explicit path (`--config PATH`), else
//! `$DELOOP_CONFIG`, else `./deloop.toml` when it exists; with none of them
//! every key takes its default. Environment variables override file values,
//! and command-line flags override both (the caller applies them). Every key
//! and variable is documented in `docs/oracle.md`. Unknown keys are errors,
//! so a typo never passes silently, and every [`ConfigError`] names the key
//! or variable at fault. API keys are never printed (`Debug` redacts them).
//!
//! ```
//! use std::collections::HashMap;
//! use std::path::Path;
//! use deloop_config::{Config, DEFAULT_DB};
//!
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("deloop.toml"), "[oracle]\nmode = \"help\"\nk = 4\n").unwrap();
//! let env = HashMap::from([("DELOOP_MODE".to_string(), "tutor".to_string())]);
//! let config = Config::load_with(None, &env, dir.path()).unwrap();
//! assert_eq!(config.oracle.mode, "tutor"); // the environment wins over the file
//! assert_eq!(config.oracle.k, 4);
//! let db = config.db_path(None);
//! assert_eq!(db.path, Path::new(DEFAULT_DB));
//! assert!(!db.explicit);
//!
//! let err = Config::parse("[oracle]\nmdoe = \"help\"\n").unwrap_err();
//! assert!(err.to_string().contains("mdoe"));
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use deloop_core::repetition::ClampConfig;
use deloop_llm::LlmConfig;
use serde::Deserialize;

/// The index path when neither a flag, `$DELOOP_DB` nor `[index] db` names one.
pub const DEFAULT_DB: &str = ".deloop/index.db";

/// The environment variables this crate reads (besides those of
/// [`deloop_llm::ENV_VARS`], which it reads too).
pub const ENV_VARS: &[&str] = &[
    "DELOOP_CONFIG",
    "DELOOP_DB",
    "DELOOP_EMBEDDER",
    "DELOOP_MINILM_DIR",
    "DELOOP_MODE",
    "DELOOP_RETRIEVAL",
    "DELOOP_HYDE",
    "DELOOP_HYDE_QUERY_VECTOR",
    "DELOOP_HYDE_FUSED_WEIGHT",
    "DELOOP_HYDE_AGREEMENT_POWER",
    "DELOOP_PROGRESS_INTERVAL",
    "DELOOP_DB_TIMEOUT_MS",
    "DELOOP_STREAM",
    "DELOOP_LLM_TIMEOUT",
];

/// A configuration the user must fix. Every message names the file, key or
/// variable at fault and what is expected; the CLI reports it with exit 2.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read the config file {}: {cause}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why (kept out of the error chain: the message already says it).
        cause: std::io::Error,
    },
    /// The config file is not valid TOML, has an unknown key or a value of
    /// the wrong type (the message names the key and its line).
    #[error("invalid config file {}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message, naming the key.
        message: String,
    },
    /// An environment variable has a value of the wrong kind.
    #[error("{var}={value:?} is not {expected}")]
    Env {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it must be, and what to do.
        expected: &'static str,
    },
    /// A key (from the file, the environment or a flag) has a value outside
    /// its allowed set.
    #[error("{key} {value:?} is not {expected}")]
    Invalid {
        /// The key, e.g. `mode` or `[oracle] k`.
        key: String,
        /// The value given.
        value: String,
        /// What it must be.
        expected: String,
    },
    /// The `[llm]` section or its variables are invalid (e.g. an unknown
    /// `DELOOP_LLM_PROVIDER`, an OpenAI-compatible provider without a model).
    #[error(transparent)]
    Llm(#[from] deloop_llm::LlmError),
}

impl ConfigError {
    /// An [`ConfigError::Invalid`] value.
    pub fn invalid(
        key: impl Into<String>,
        value: impl Into<String>,
        expected: impl Into<String>,
    ) -> Self {
        ConfigError::Invalid {
            key: key.into(),
            value: value.into(),
            expected: expected.into(),
        }
    }
}

/// `[index]`: where the index lives and which embedder fills it.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IndexSection {
    /// The SQLite index file (`DELOOP_DB`; default [`DEFAULT_DB`]).
    pub db: Option<PathBuf>,
    /// `auto` (MiniLM when its files are found, else none), `minilm`
    /// (candle), `minilm-onnx` (ONNX Runtime, int8; scripts/setup-onnx.sh),
    /// `gemini`, `openai` or `none` (`DELOOP_EMBEDDER`).
    pub embedder: Option<String>,
    /// Directory with the MiniLM files (`DELOOP_MINILM_DIR`).
    pub minilm_dir: Option<PathBuf>,
    /// Seconds between the progress lines `deloop index` logs when stderr is
    /// not a terminal (`DELOOP_PROGRESS_INTERVAL`; default
    /// [`DEFAULT_PROGRESS_INTERVAL_SECS`]; `0` logs every item).
    pub progress_interval: Option<f64>,
    /// PostgreSQL indexes only: the deadline, in milliseconds, of
    /// connecting, of waiting for a pooled connection and of each
    /// statement (`DELOOP_DB_TIMEOUT_MS`; default [`DEFAULT_DB_TIMEOUT_MS`],
    /// from [`DB_TIMEOUT_MS_BOUNDS`]).
    pub db_timeout_ms: Option<u64>,
}

/// The default of `[index] db_timeout_ms`.
pub const DEFAULT_DB_TIMEOUT_MS: u64 = 30_000;
/// The bounds of `[index] db_timeout_ms`: 100 ms to 10 minutes.
pub const DB_TIMEOUT_MS_BOUNDS: (u64, u64) = (100, 600_000);

/// Default seconds between `deloop index` progress lines on a non-terminal
/// stderr.
pub const DEFAULT_PROGRESS_INTERVAL_SECS: f64 = 10.0;

impl IndexSection {
    /// The PostgreSQL deadline (`db_timeout_ms`), or an error naming the
    /// key and its bounds.
    pub fn db_timeout(&self) -> Result<std::time::Duration, ConfigError> {
        let ms = self.db_timeout_ms.unwrap_or(DEFAULT_DB_TIMEOUT_MS);
        let (lo, hi) = DB_TIMEOUT_MS_BOUNDS;
        if (lo..=hi).contains(&ms) {
            Ok(std::time::Duration::from_millis(ms))
        } else {
            Err(ConfigError::invalid(
                "index.db_timeout_ms",
                ms.to_string(),
                format!("milliseconds from {lo} to {hi}"),
            ))
        }
    }

    /// The progress log interval: the configured value when it is a finite,
    /// non-negative number of seconds, else an error naming the key.
    pub fn progress_interval(&self) -> Result<std::time::Duration, ConfigError> {
        let secs = self
            .progress_interval
            .unwrap_or(DEFAULT_PROGRESS_INTERVAL_SECS);
        progress_interval_from(secs).ok_or_else(|| {
            ConfigError::invalid(
                "index.progress_interval",
                secs.to_string(),
                "a finite number of seconds >= 0",
            )
        })
    }
}

/// `secs` as a [`std::time::Duration`] when it is finite and non-negative
/// (at most a day).
pub fn progress_interval_from(secs: f64) -> Option<std::time::Duration> {
    (secs.is_finite() && (0.0..=86_400.0).contains(&secs))
        .then(|| std::time::Duration::from_secs_f64(secs))
}

/// `[oracle]`: how the oracle (`deloop ask`, `/api/oracle`) retrieves and
/// answers. Values are checked where they are used (`deloop-oracle`), so a
/// command-line flag can still override a bad file value.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OracleSection {
    /// `oracle`, `help` or `tutor` (`DELOOP_MODE`; default `oracle`).
    pub mode: String,
    /// Passages retrieved for the answer (6).
    pub k: usize,
    /// `hybrid`, `lexical` or `vector` (`DELOOP_RETRIEVAL`; default `hybrid`).
    pub retrieval: String,
    /// Use HyDE for retrieval when an LLM is configured (`DELOOP_HYDE`; false).
    pub hyde: bool,
    /// How the HyDE passage joins retrieval: `fused` (default: its own
    /// ranking fused by RRF), `average` or `concat` (the query vector)
    /// (`DELOOP_HYDE_QUERY_VECTOR`).
    pub hyde_query_vector: String,
    /// The largest weight of the HyDE passage's ranking in `fused` mode,
    /// against 1 for each of the question's rankings
    /// (`DELOOP_HYDE_FUSED_WEIGHT`; 1.0).
    pub hyde_fused_weight: f32,
    /// How strictly the passage's weight follows the question's agreement
    /// with it in `fused` mode: the weight is `hyde_fused_weight ×
    /// agreement^hyde_agreement_power`; 0 keeps it fixed
    /// (`DELOOP_HYDE_AGREEMENT_POWER`; 3).
    pub hyde_agreement_power: f32,
    /// HyDE call timeout in seconds (15).
    pub hyde_timeout_secs: u64,
    /// Sampling temperature of the HyDE call (1.0, the seed's; 0 is greedy).
    pub hyde_temperature: f32,
    /// Output token limit of the HyDE call (220, the seed's).
    pub hyde_max_output_tokens: u32,
    /// Answer call timeout in seconds, retries included (`DELOOP_LLM_TIMEOUT`; 60).
    pub timeout_secs: u64,
    /// Output token limit of the answer (2048).
    pub max_output_tokens: u32,
    /// Sampling temperature of the answer (0.4).
    pub temperature: f32,
    /// Stream the answer under the streaming loop guard (`DELOOP_STREAM`; true).
    pub stream: bool,
    /// `auto`, `es` or `en`: the answer language (auto = detect from the question).
    pub language: String,
}

impl Default for OracleSection {
    fn default() -> Self {
        OracleSection {
            mode: "oracle".into(),
            k: 6,
            retrieval: "hybrid".into(),
            hyde: false,
            // deloop-oracle's `QueryVectorMode::default()` (a test there
            // checks that the two agree).
            hyde_query_vector: "fused".into(),
            // deloop-oracle's `DEFAULT_FUSED_WEIGHT` and
            // `DEFAULT_AGREEMENT_POWER` (checked there too).
            hyde_fused_weight: 1.0,
            hyde_agreement_power: 3.0,
            hyde_timeout_secs: 15,
            // deloop-oracle's `HydeParams::default()` (a test there checks
            // that they agree).
            hyde_temperature: 1.0,
            hyde_max_output_tokens: 220,
            timeout_secs: 60,
            max_output_tokens: 2048,
            temperature: 0.4,
            stream: true,
            language: "auto".into(),
        }
    }
}

/// `[guards]`: the answer guards.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GuardsSection {
    /// A loop cut leaving fewer characters than this degrades to the
    /// mode's fallback (20).
    pub min_answer_chars: usize,
    /// The repetition guards (`[guards.clamp.words]`,
    /// `[guards.clamp.substring]`, `[guards.clamp.healthy]`; see
    /// docs/repetition.md).
    pub clamp: ClampConfig,
}

impl Default for GuardsSection {
    fn default() -> Self {
        GuardsSection {
            min_answer_chars: 20,
            clamp: ClampConfig::default(),
        }
    }
}

pub mod connections;
pub mod loop_guard;
pub mod proxy;
pub mod server;
pub use connections::ConnectionSettings;
pub use loop_guard::LoopGuardSettings;
pub use proxy::ProxySettings;
pub use server::{ServerSettings, SessionSettings, SettingsError};

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `[llm]`: provider, model, endpoints, keys, retries (see docs/llm.md).
    pub llm: LlmConfig,
    /// `[index]`.
    pub index: IndexSection,
    /// `[oracle]`.
    pub oracle: OracleSection,
    /// `[guards]`.
    pub guards: GuardsSection,
    /// `[server]`.
    pub server: ServerSettings,
    /// `[proxy]`: `deloop proxy` (docs/proxy.md).
    pub proxy: ProxySettings,
    /// Where the file came from (none: defaults and environment only).
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// The index path and how it was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbPath {
    /// The SQLite file.
    pub path: PathBuf,
    /// True when it was named (flag, `$DELOOP_DB` or `[index] db`); false
    /// for [`DEFAULT_DB`], which `deloop ask` may build from the embedded
    /// docs when it is missing.
    pub explicit: bool,
}

/// The variables of [`ENV_VARS`] and [`deloop_llm::ENV_VARS`] set in the
/// process environment.
pub fn env_snapshot() -> HashMap<String, String> {
    ENV_VARS
        .iter()
        .chain(deloop_llm::ENV_VARS.iter())
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect()
}

fn parse_bool(var: &'static str, v: &str) -> Result<bool, ConfigError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        other => Err(ConfigError::Env {
            var,
            value: other.to_owned(),
            expected: "a boolean; use true or false",
        }),
    }
}

/// A number from environment variable `var`; `expected` names what it
/// must be in the error.
fn parse_number<T: std::str::FromStr>(
    var: &'static str,
    v: &str,
    expected: &'static str,
) -> Result<T, ConfigError> {
    v.parse().map_err(|_| ConfigError::Env {
        var,
        value: v.to_owned(),
        expected,
    })
}

impl Config {
    /// Loads the file (`explicit`, else `$DELOOP_CONFIG`, else
    /// `./deloop.toml` if present) and applies the process environment.
    pub fn load(explicit: Option<&Path>) -> Result<Config, ConfigError> {
        Config::load_with(explicit, &env_snapshot(), Path::new("."))
    }

    /// [`Config::load`] with an explicit environment and working directory.
    pub fn load_with(
        explicit: Option<&Path>,
        env: &HashMap<String, String>,
        cwd: &Path,
    ) -> Result<Config, ConfigError> {
        let get = |k: &str| env.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        let path = match (explicit, get("DELOOP_CONFIG")) {
            (Some(p), _) => Some(p.to_path_buf()),
            (None, Some(p)) => Some(PathBuf::from(p)),
            (None, None) => {
                let p = cwd.join("deloop.toml");
                p.is_file().then_some(p)
            }
        };
        let mut config = match &path {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|cause| ConfigError::Read {
                    path: p.clone(),
                    cause,
                })?;
                Config::parse(&text).map_err(|e| ConfigError::Parse {
                    path: p.clone(),
                    message: e.to_string(),
                })?
            }
            None => Config::default(),
        };
        config.source = path;
        config.apply_env(env)?;
        config.check_bounds()?;
        Ok(config)
    }

    /// Checks the settings that have bounds (the repetition guards'
    /// table, `deloop_core::repetition::bounds`): a value outside them is
    /// an error naming the key and its range, never clamped silently.
    pub fn check_bounds(&self) -> Result<(), ConfigError> {
        self.index.db_timeout()?;
        self.guards.clamp.check_bounds().map_err(|e| {
            ConfigError::invalid(
                format!("[guards.clamp] {}", e.key),
                e.value.to_string(),
                format!(
                    "{} (the bounds are listed in docs/repetition.md)",
                    e.expected
                ),
            )
        })
    }

    /// Parses the TOML text of a config file.
    pub fn parse(text: &str) -> Result<Config, toml::de::Error> {
        toml::from_str(text)
    }

    /// Applies the environment variables in `env` over the file values.
    /// Empty variables are ignored.
    pub fn apply_env(&mut self, env: &HashMap<String, String>) -> Result<(), ConfigError> {
        let llm = std::mem::take(&mut self.llm);
        self.llm = llm.with_env_map(env)?;
        let get = |k: &str| env.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        if let Some(v) = get("DELOOP_DB") {
            self.index.db = Some(PathBuf::from(v));
        }
        if let Some(v) = get("DELOOP_EMBEDDER") {
            self.index.embedder = Some(v.to_string());
        }
        if let Some(v) = get("DELOOP_MINILM_DIR") {
            self.index.minilm_dir = Some(PathBuf::from(v));
        }
        if let Some(v) = get("DELOOP_PROGRESS_INTERVAL") {
            let secs = v
                .parse::<f64>()
                .ok()
                .filter(|s| progress_interval_from(*s).is_some())
                .ok_or_else(|| ConfigError::Env {
                    var: "DELOOP_PROGRESS_INTERVAL",
                    value: v.to_owned(),
                    expected: "seconds between progress lines, a number from 0 to 86400",
                })?;
            self.index.progress_interval = Some(secs);
        }
        if let Some(v) = get("DELOOP_DB_TIMEOUT_MS") {
            let (lo, hi) = DB_TIMEOUT_MS_BOUNDS;
            let ms = v
                .parse::<u64>()
                .ok()
                .filter(|ms| (lo..=hi).contains(ms))
                .ok_or_else(|| ConfigError::Env {
                    var: "DELOOP_DB_TIMEOUT_MS",
                    value: v.to_owned(),
                    expected: "milliseconds, a whole number from 100 to 600000",
                })?;
            self.index.db_timeout_ms = Some(ms);
        }
        if let Some(v) = get("DELOOP_MODE") {
            self.oracle.mode = v.to_string();
        }
        if let Some(v) = get("DELOOP_RETRIEVAL") {
            self.oracle.retrieval = v.to_string();
        }
        if let Some(v) = get("DELOOP_HYDE") {
            self.oracle.hyde = parse_bool("DELOOP_HYDE", v)?;
        }
        if let Some(v) = get("DELOOP_HYDE_QUERY_VECTOR") {
            self.oracle.hyde_query_vector = v.to_string();
        }
        if let Some(v) = get("DELOOP_HYDE_FUSED_WEIGHT") {
            self.oracle.hyde_fused_weight = parse_number(
                "DELOOP_HYDE_FUSED_WEIGHT",
                v,
                "a number (the weight of the HyDE ranking)",
            )?;
        }
        if let Some(v) = get("DELOOP_HYDE_AGREEMENT_POWER") {
            self.oracle.hyde_agreement_power = parse_number(
                "DELOOP_HYDE_AGREEMENT_POWER",
                v,
                "a number (the exponent of the HyDE agreement)",
            )?;
        }
        if let Some(v) = get("DELOOP_STREAM") {
            self.oracle.stream = parse_bool("DELOOP_STREAM", v)?;
        }
        if let Some(v) = get("DELOOP_LLM_TIMEOUT") {
            self.oracle.timeout_secs =
                parse_number("DELOOP_LLM_TIMEOUT", v, "a whole number of seconds")?;
        }
        Ok(())
    }

    /// The index path: `flag`, else the configured one (`$DELOOP_DB` or
    /// `[index] db`), else [`DEFAULT_DB`]. Every command resolves it here.
    pub fn db_path(&self, flag: Option<&Path>) -> DbPath {
        match (flag, &self.index.db) {
            (Some(p), _) => DbPath {
                path: p.to_path_buf(),
                explicit: true,
            },
            (None, Some(p)) => DbPath {
                path: p.clone(),
                explicit: true,
            },
            (None, None) => DbPath {
                path: PathBuf::from(DEFAULT_DB),
                explicit: false,
            },
        }
    }

    /// The answer call timeout (at least 1 s).
    pub fn answer_timeout(&self) -> Duration {
        Duration::from_secs(self.oracle.timeout_secs.max(1))
    }

    /// The HyDE call timeout (at least 1 s).
    pub fn hyde_timeout(&self) -> Duration {
        Duration::from_secs(self.oracle.hyde_timeout_secs.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `env_snapshot` reads only the variables of [`ENV_VARS`], so a
    /// variable read here but missing from the list is silently ignored
    /// in the process environment (`DELOOP_HYDE_AGREEMENT_POWER` was).
    #[test]
    fn every_variable_read_is_listed() {
        let source = include_str!("lib.rs");
        let mut read = Vec::new();
        for piece in source.split("get(\"").skip(1) {
            let name: String = piece
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                .collect();
            if name.starts_with("DELOOP_") && piece[name.len()..].starts_with("\")") {
                read.push(name);
            }
        }
        assert!(read.len() >= 10, "{read:?}");
        for name in read {
            assert!(
                ENV_VARS.contains(&name.as_str()),
                "{name} is not in ENV_VARS"
            );
        }
    }

    #[test]
    fn db_timeout_out_of_bounds_names_the_key_and_its_bounds() {
        let mut c = Config::default();
        assert_eq!(c.index.db_timeout().unwrap().as_millis(), 30_000);
        c.index.db_timeout_ms = Some(99);
        let e = c.check_bounds().unwrap_err().to_string();
        assert!(
            e.contains("index.db_timeout_ms") && e.contains("100 to 600000"),
            "{e}"
        );
        let e = Config::default()
            .apply_env(&env(&[("DELOOP_DB_TIMEOUT_MS", "700000")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("DELOOP_DB_TIMEOUT_MS"), "{e}");
        let mut c = Config::default();
        c.apply_env(&env(&[("DELOOP_DB_TIMEOUT_MS", "250")]))
            .unwrap();
        assert_eq!(c.index.db_timeout().unwrap().as_millis(), 250);
    }

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_console_ring_is_bounded_both_ways() {
        let mut s = ServerSettings::default();
        assert_eq!(s.console_ring_bytes, 4 << 20);
        assert!(s.validate().is_ok());
        for bad in [0, (64 << 10) - 1, (1 << 30) + 1] {
            s.console_ring_bytes = bad;
            let e = s.validate().unwrap_err();
            assert_eq!(e.key, "server.console_ring_bytes", "{bad}");
        }
    }

    #[test]
    fn defaults_without_file() {
        let dir = tempfile::tempdir().unwrap();
        let c = Config::load_with(None, &env(&[]), dir.path()).unwrap();
        assert_eq!(c.source, None);
        assert_eq!(c.oracle.k, 6);
        assert_eq!(
            c.db_path(None),
            DbPath {
                path: PathBuf::from(DEFAULT_DB),
                explicit: false
            }
        );
        assert_eq!(c.llm.effective_provider(), None);
    }

    #[test]
    fn file_then_env_then_flag() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("deloop.toml"),
            "[llm]\nmodel = \"file-model\"\n[index]\ndb = \"file.db\"\n\
             [oracle]\nmode = \"help\"\nhyde = true\nk = 3\nhyde_temperature = 0.0\n\
             hyde_max_output_tokens = 64\nhyde_fused_weight = 0.5\nhyde_agreement_power = 2\n[guards]\nmin_answer_chars = 30\n\
             [guards.clamp.words]\nmin_run = 20\n[server]\n",
        )
        .unwrap();
        let c = Config::load_with(None, &env(&[]), dir.path()).unwrap();
        assert_eq!(c.llm.model.as_deref(), Some("file-model"));
        assert_eq!(c.oracle.mode, "help");
        assert!(c.oracle.hyde);
        assert_eq!(c.oracle.hyde_temperature, 0.0);
        assert_eq!(c.oracle.hyde_max_output_tokens, 64);
        assert_eq!(c.oracle.hyde_fused_weight, 0.5);
        assert_eq!(c.oracle.hyde_agreement_power, 2.0);
        assert_eq!(c.oracle.hyde_query_vector, "fused");
        assert_eq!(c.guards.min_answer_chars, 30);
        assert_eq!(c.guards.clamp.words.min_run, 20);
        assert_eq!(
            c.db_path(None),
            DbPath {
                path: PathBuf::from("file.db"),
                explicit: true
            }
        );
        let c = Config::load_with(
            None,
            &env(&[
                ("DELOOP_MODEL", "env-model"),
                ("DELOOP_DB", "env.db"),
                ("DELOOP_HYDE", "false"),
                ("DELOOP_HYDE_QUERY_VECTOR", "average"),
                ("DELOOP_HYDE_FUSED_WEIGHT", "0.75"),
                ("DELOOP_HYDE_AGREEMENT_POWER", "0"),
            ]),
            dir.path(),
        )
        .unwrap();
        assert_eq!(c.llm.model.as_deref(), Some("env-model"));
        assert!(!c.oracle.hyde);
        assert_eq!(c.oracle.hyde_query_vector, "average");
        assert_eq!(c.oracle.hyde_fused_weight, 0.75);
        assert_eq!(c.oracle.hyde_agreement_power, 0.0);
        assert_eq!(
            c.db_path(Some(Path::new("flag.db"))).path,
            PathBuf::from("flag.db")
        );
        assert_eq!(c.db_path(None).path, PathBuf::from("env.db"));
    }

    #[test]
    fn explicit_paths_and_errors_name_the_culprit() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.toml");
        let err = Config::load_with(Some(&missing), &env(&[]), dir.path()).unwrap_err();
        assert!(matches!(err, ConfigError::Read { .. }), "{err:?}");
        assert!(err.to_string().contains("nope.toml"), "{err}");
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "[oracle]\nmdoe = \"help\"\n").unwrap();
        let err = Config::load_with(
            None,
            &env(&[("DELOOP_CONFIG", bad.to_str().unwrap())]),
            dir.path(),
        )
        .unwrap_err();
        assert!(matches!(err, ConfigError::Parse { .. }), "{err:?}");
        assert!(err.to_string().contains("mdoe"), "{err}");
        assert!(err.to_string().contains("bad.toml"), "{err}");
        let err =
            Config::load_with(None, &env(&[("DELOOP_HYDE", "maybe")]), dir.path()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "DELOOP_HYDE=\"maybe\" is not a boolean; use true or false"
        );
        let err =
            Config::load_with(None, &env(&[("DELOOP_LLM_TIMEOUT", "1m")]), dir.path()).unwrap_err();
        assert!(err.to_string().contains("DELOOP_LLM_TIMEOUT"), "{err}");
        let err = Config::load_with(
            None,
            &env(&[("DELOOP_HYDE_FUSED_WEIGHT", "half")]),
            dir.path(),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("DELOOP_HYDE_FUSED_WEIGHT"),
            "{err}"
        );
        let err = Config::load_with(
            None,
            &env(&[("DELOOP_HYDE_AGREEMENT_POWER", "cubed")]),
            dir.path(),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "DELOOP_HYDE_AGREEMENT_POWER=\"cubed\" is not a number (the exponent of the HyDE agreement)"
        );
        let err =
            Config::load_with(None, &env(&[("DELOOP_LLM_PROVIDER", "x")]), dir.path()).unwrap_err();
        assert!(err.to_string().contains("DELOOP_LLM_PROVIDER"), "{err}");
        let err = Config::parse("[server]\nlisten = 1\n").unwrap_err();
        assert!(err.to_string().contains("listen"), "{err}");
    }

    #[test]
    fn out_of_range_guard_settings_are_errors_naming_key_and_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let path = dir.join("deloop.toml");
        std::fs::write(&path, "[guards.clamp.words]\nmax_period = 40\n").unwrap();
        let err = Config::load_with(Some(&path), &env(&[]), dir).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, ConfigError::Invalid { .. }), "{err:?}");
        assert!(msg.contains("[guards.clamp] words.max_period"), "{msg}");
        assert!(msg.contains("\"40\""), "{msg}");
        assert!(msg.contains("1 to 16"), "{msg}");
        std::fs::write(&path, "[guards.clamp.words]\nmax_period = 16\n").unwrap();
        Config::load_with(Some(&path), &env(&[]), dir).expect("16 is in range");
    }

    #[test]
    fn hostile_files_are_errors_not_panics() {
        for text in [
            "[".repeat(100_000),
            "a = ".to_string() + &"[".repeat(100_000),
            "\u{0}\u{feff}".into(),
            "[oracle]\nk = -1\n".into(),
            "[oracle]\nk = 1e400\n".into(),
        ] {
            assert!(Config::parse(&text).is_err());
        }
        assert_eq!(Config::parse("").unwrap(), Config::default());
    }

    #[test]
    fn keys_are_not_printed() {
        let dir = tempfile::tempdir().unwrap();
        let c = Config::load_with(
            None,
            &env(&[
                ("GEMINI_API_KEY", "SECRET-1"),
                ("OPENAI_API_KEY", "SECRET-2"),
            ]),
            dir.path(),
        )
        .unwrap();
        assert!(!format!("{c:?}").contains("SECRET"));
    }
}
