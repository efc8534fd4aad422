//! The configuration file `deloop.toml` and its environment overrides.
//!
//! The file is found at `--config PATH`, else `$DELOOP_CONFIG`, else
//! `./deloop.toml` when it exists; with none of them every key takes its
//! default. Environment variables override file values, and command-line
//! flags override both. Every key and variable is documented in
//! `docs/oracle.md`. Unknown keys are errors (exit 2), so a typo never
//! passes silently. API keys are never printed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use deloop_core::repetition::ClampConfig;
use deloop_llm::LlmConfig;
use serde::Deserialize;

use crate::exit::BadInput;

/// Default database path when neither `--db`, `$DELOOP_DB` nor `index.db` is set.
pub const DEFAULT_DB: &str = ".deloop/index.db";

/// The environment variables this module reads (besides those of
/// [`deloop_llm::ENV_VARS`]).
pub const ENV_VARS: &[&str] = &[
    "DELOOP_CONFIG",
    "DELOOP_DB",
    "DELOOP_EMBEDDER",
    "DELOOP_MINILM_DIR",
    "DELOOP_MODE",
    "DELOOP_RETRIEVAL",
    "DELOOP_HYDE",
    "DELOOP_HYDE_QUERY_VECTOR",
    "DELOOP_STREAM",
    "DELOOP_LLM_TIMEOUT",
];

/// `[index]`: where the index lives and which embedder fills it.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IndexSection {
    /// The SQLite index file (`DELOOP_DB`; default `.deloop/index.db`).
    pub db: Option<PathBuf>,
    /// `auto` (MiniLM when its files are found, else none), `minilm`,
    /// `gemini`, `openai` or `none` (`DELOOP_EMBEDDER`).
    pub embedder: Option<String>,
    /// Directory with the MiniLM files (`DELOOP_MINILM_DIR`).
    pub minilm_dir: Option<PathBuf>,
}

/// `[oracle]`: how `deloop ask` retrieves and answers.
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
    /// HyDE query vector: `average` or `concat` (`DELOOP_HYDE_QUERY_VECTOR`).
    pub hyde_query_vector: String,
    /// HyDE call timeout in seconds (15).
    pub hyde_timeout_secs: u64,
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
            hyde_query_vector: deloop_oracle::hyde::QueryVectorMode::default()
                .as_str()
                .into(),
            hyde_timeout_secs: 15,
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
    /// `[server]`: `deloop serve` and `deloop mcp` (listen address, limits,
    /// timeouts, CORS, keys, log format, sessions).
    pub server: deloop_server::ServerSettings,
    /// Where the file came from (none: defaults and environment only).
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

fn env_snapshot() -> HashMap<String, String> {
    ENV_VARS
        .iter()
        .chain(deloop_llm::ENV_VARS.iter())
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect()
}

fn parse_bool(name: &str, v: &str) -> Result<bool, BadInput> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        other => Err(BadInput(format!(
            "{name}={other:?} is not a boolean; use true or false"
        ))),
    }
}

impl Config {
    /// Loads the file (`explicit`, else `$DELOOP_CONFIG`, else
    /// `./deloop.toml` if present) and applies the process environment.
    pub fn load(explicit: Option<&Path>) -> anyhow::Result<Config> {
        Config::load_with(explicit, &env_snapshot(), Path::new("."))
    }

    /// [`Config::load`] with an explicit environment and working directory.
    pub fn load_with(
        explicit: Option<&Path>,
        env: &HashMap<String, String>,
        cwd: &Path,
    ) -> anyhow::Result<Config> {
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
                let text = std::fs::read_to_string(p).map_err(|e| {
                    BadInput(format!("cannot read the config file {}: {e}", p.display()))
                })?;
                Config::parse(&text)
                    .map_err(|e| BadInput(format!("invalid config file {}: {e}", p.display())))?
            }
            None => Config::default(),
        };
        config.source = path;
        config.apply_env(env)?;
        Ok(config)
    }

    /// Parses the TOML text of a config file.
    pub fn parse(text: &str) -> Result<Config, toml::de::Error> {
        toml::from_str(text)
    }

    /// Applies the environment variables over the file values.
    pub fn apply_env(&mut self, env: &HashMap<String, String>) -> anyhow::Result<()> {
        let llm = std::mem::take(&mut self.llm);
        self.llm = llm.with_env_map(env).map_err(|e| BadInput(e.to_string()))?;
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
        if let Some(v) = get("DELOOP_STREAM") {
            self.oracle.stream = parse_bool("DELOOP_STREAM", v)?;
        }
        if let Some(v) = get("DELOOP_LLM_TIMEOUT") {
            self.oracle.timeout_secs = v.parse().map_err(|_| {
                BadInput(format!(
                    "DELOOP_LLM_TIMEOUT={v:?} is not a whole number of seconds"
                ))
            })?;
        }
        Ok(())
    }

    /// The index path: `flag`, else the configured one, else the default.
    /// The bool is true when the path was given explicitly (flag, file or env).
    pub fn db_path(&self, flag: Option<&Path>) -> (PathBuf, bool) {
        match (flag, &self.index.db) {
            (Some(p), _) => (p.to_path_buf(), true),
            (None, Some(p)) => (p.clone(), true),
            (None, None) => (PathBuf::from(DEFAULT_DB), false),
        }
    }

    /// The answer call timeout.
    pub fn answer_timeout(&self) -> Duration {
        Duration::from_secs(self.oracle.timeout_secs.max(1))
    }

    /// The HyDE call timeout.
    pub fn hyde_timeout(&self) -> Duration {
        Duration::from_secs(self.oracle.hyde_timeout_secs.max(1))
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
    fn defaults_without_file() {
        let dir = tempfile::tempdir().unwrap();
        let c = Config::load_with(None, &env(&[]), dir.path()).unwrap();
        assert_eq!(c.source, None);
        assert_eq!(c.oracle.k, 6);
        assert_eq!(c.db_path(None), (PathBuf::from(DEFAULT_DB), false));
        assert_eq!(c.llm.effective_provider(), None);
    }

    #[test]
    fn file_then_env_then_flag() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("deloop.toml"),
            "[llm]\nmodel = \"file-model\"\n[index]\ndb = \"file.db\"\n\
             [oracle]\nmode = \"help\"\nhyde = true\nk = 3\n[guards]\nmin_answer_chars = 30\n\
             [guards.clamp.words]\nmin_run = 20\n",
        )
        .unwrap();
        let c = Config::load_with(None, &env(&[]), dir.path()).unwrap();
        assert_eq!(c.llm.model.as_deref(), Some("file-model"));
        assert_eq!(c.oracle.mode, "help");
        assert!(c.oracle.hyde);
        assert_eq!(c.guards.min_answer_chars, 30);
        assert_eq!(c.guards.clamp.words.min_run, 20);
        assert_eq!(c.db_path(None), (PathBuf::from("file.db"), true));
        let c = Config::load_with(
            None,
            &env(&[
                ("DELOOP_MODEL", "env-model"),
                ("DELOOP_DB", "env.db"),
                ("DELOOP_HYDE", "false"),
            ]),
            dir.path(),
        )
        .unwrap();
        assert_eq!(c.llm.model.as_deref(), Some("env-model"));
        assert!(!c.oracle.hyde);
        assert_eq!(
            c.db_path(Some(Path::new("flag.db"))).0,
            PathBuf::from("flag.db")
        );
        assert_eq!(c.db_path(None).0, PathBuf::from("env.db"));
    }

    #[test]
    fn explicit_paths_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.toml");
        let err = Config::load_with(Some(&missing), &env(&[]), dir.path()).unwrap_err();
        assert!(err.downcast_ref::<BadInput>().is_some());
        assert!(err.to_string().contains("nope.toml"), "{err}");
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "[oracle]\nmdoe = \"help\"\n").unwrap();
        let err = Config::load_with(
            None,
            &env(&[("DELOOP_CONFIG", bad.to_str().unwrap())]),
            dir.path(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("mdoe"), "{err}");
        let err =
            Config::load_with(None, &env(&[("DELOOP_HYDE", "maybe")]), dir.path()).unwrap_err();
        assert!(err.to_string().contains("DELOOP_HYDE"), "{err}");
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
