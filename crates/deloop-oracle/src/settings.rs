//! The oracle's settings, parsed once from the `[oracle]`, `[index]` and
//! `[guards]` sections of the configuration. Every invalid value is a
//! [`ConfigError`] that names its key.

use std::path::PathBuf;
use std::time::Duration;

use deloop_config::{Config, ConfigError};
use deloop_index::Retrieval;

use crate::hyde::HydeParams;
#[cfg(test)]
use crate::hyde::{QueryVectorMode, DEFAULT_AGREEMENT_POWER, DEFAULT_FUSED_WEIGHT};
use crate::language::Language;
use crate::retrieve::HydeJoin;
use crate::synthesis::ReplyGuards;
use crate::types::Mode;

/// The most passages one ask or search may retrieve.
pub const MAX_K: usize = 100;

/// The embedders `[index] embedder` may name.
pub(crate) const EMBEDDERS: &str = "one of auto, minilm, minilm-onnx, gemini, openai, none";

/// Typed settings of an [`crate::Oracle`]: the defaults of every request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settings {
    pub mode: Mode,
    pub retrieval: Retrieval,
    pub k: usize,
    /// `None`: detect from the question.
    pub language: Option<Language>,
    pub hyde: bool,
    pub hyde_join: HydeJoin,
    pub hyde_params: HydeParams,
    pub stream: bool,
    pub answer_timeout: Duration,
    pub max_output_tokens: u32,
    pub temperature: f32,
    pub guards: ReplyGuards,
    /// `[index] embedder` (`auto` when unset), for building the default index.
    pub embedder: String,
    pub minilm_dir: Option<PathBuf>,
}

/// Checks that `k` passages may be retrieved.
pub fn check_k(k: usize) -> Result<usize, String> {
    if (1..=MAX_K).contains(&k) {
        Ok(k)
    } else {
        Err(format!(
            "k = {k} passages is out of range: ask for 1 to {MAX_K}"
        ))
    }
}

impl Settings {
    /// Parses the configuration; the first invalid value is the error.
    pub fn from_config(config: &Config) -> Result<Settings, ConfigError> {
        let o = &config.oracle;
        let mode = Mode::parse(&o.mode)
            .ok_or_else(|| ConfigError::invalid("mode", &o.mode, "one of oracle, help, tutor"))?;
        let retrieval = Retrieval::parse(&o.retrieval).ok_or_else(|| {
            ConfigError::invalid("retrieval", &o.retrieval, "one of hybrid, lexical, vector")
        })?;
        let k = check_k(o.k).map_err(|_| {
            ConfigError::invalid(
                "k",
                o.k.to_string(),
                format!("a number of passages from 1 to {MAX_K}"),
            )
        })?;
        let language =
            match o.language.trim().to_ascii_lowercase().as_str() {
                "auto" | "" => None,
                other => Some(Language::parse(other).ok_or_else(|| {
                    ConfigError::invalid("language", other, "one of auto, es, en")
                })?),
            };
        let hyde_join = HydeJoin::from_config(config)?;
        let hyde_params = HydeParams::from_config(config)?;
        let embedder = config
            .index
            .embedder
            .as_deref()
            .unwrap_or("auto")
            .trim()
            .to_ascii_lowercase();
        if !matches!(
            embedder.as_str(),
            "auto" | "minilm" | "minilm-onnx" | "gemini" | "openai" | "none"
        ) {
            return Err(ConfigError::invalid("embedder", embedder, EMBEDDERS));
        }
        Ok(Settings {
            mode,
            retrieval,
            k,
            language,
            hyde: o.hyde,
            hyde_join,
            hyde_params,
            stream: o.stream,
            answer_timeout: config.answer_timeout(),
            max_output_tokens: o.max_output_tokens,
            temperature: o.temperature,
            guards: ReplyGuards {
                clamp: config.guards.clamp.clone(),
                min_chars: config.guards.min_answer_chars,
            },
            embedder,
            minilm_dir: config.index.minilm_dir.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_agree_with_the_config_crate() {
        let s = Settings::from_config(&Config::default()).unwrap();
        assert_eq!(s.mode, Mode::default());
        assert_eq!(s.hyde_join.mode, QueryVectorMode::default());
        assert_eq!(s.hyde_join.fused_weight, DEFAULT_FUSED_WEIGHT);
        assert_eq!(s.hyde_join.agreement_power, DEFAULT_AGREEMENT_POWER);
        assert_eq!(s.hyde_join, HydeJoin::default());
        assert_eq!(s.retrieval, Retrieval::default());
        assert_eq!(s.language, None);
        assert_eq!(s.guards, ReplyGuards::default());
        assert_eq!(s.hyde_params, HydeParams::default());
    }

    #[test]
    fn invalid_values_name_their_key() {
        type Case = (fn(&mut Config), &'static str);
        let cases: [Case; 12] = [
            (|c| c.oracle.mode = "oracel".into(), "mode \"oracel\""),
            (|c| c.oracle.retrieval = "bm25".into(), "retrieval \"bm25\""),
            (|c| c.oracle.k = 0, "k \"0\""),
            (|c| c.oracle.language = "fr".into(), "language \"fr\""),
            (
                |c| c.oracle.hyde_query_vector = "sum".into(),
                "hyde_query_vector \"sum\"",
            ),
            (
                |c| c.oracle.hyde_temperature = -0.1,
                "hyde_temperature \"-0.1\"",
            ),
            (
                |c| c.oracle.hyde_temperature = f32::NAN,
                "hyde_temperature \"NaN\"",
            ),
            (
                |c| c.oracle.hyde_fused_weight = -1.0,
                "hyde_fused_weight \"-1\"",
            ),
            (
                |c| c.oracle.hyde_agreement_power = -1.0,
                "hyde_agreement_power \"-1\"",
            ),
            (
                |c| c.oracle.hyde_agreement_power = f32::INFINITY,
                "hyde_agreement_power \"inf\"",
            ),
            (
                |c| c.oracle.hyde_max_output_tokens = 0,
                "hyde_max_output_tokens \"0\"",
            ),
            (
                |c| c.index.embedder = Some("bert".into()),
                "embedder \"bert\"",
            ),
        ];
        for (set, want) in cases {
            let mut c = Config::default();
            set(&mut c);
            let err = Settings::from_config(&c).unwrap_err().to_string();
            assert!(err.starts_with(want), "{err}");
        }
    }
}
