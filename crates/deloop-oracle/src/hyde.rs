//! HyDE (seed `generateHyDE`): a short hypothetical documentation passage
//! that answers the question, used to improve retrieval.
//!
//! * The prompt is in the question's language ([`crate::prompts::hyde_prompt`]).
//! * Generation: temperature 1.0, topP 0.95, topK 64, maxOutputTokens 220,
//!   JSON `{"passage": string}`, 15 s timeout ([`HydeParams`]).
//! * The reply goes through the JSON rescue; a reply with no JSON at all is
//!   used as plain text (the seed's behaviour), both through the loop guard.
//! * On any error, timeout or empty passage, retrieval falls back to the
//!   plain question ([`HydeOutcome::fallback_reason`]).
//! * How the passage joins retrieval ([`QueryVectorMode`]): `fused` (the
//!   default) ranks the passage on its own and fuses that ranking with the
//!   question's lexical and vector rankings by reciprocal rank fusion, so a
//!   bad passage costs little (issue 12 §5b; docs/retrieval.md); `average`
//!   embeds both separately and takes the re-normalised mean (the HyDE
//!   paper, LlamaIndex); `concat` embeds `"question\n\npassage"` (the seed).
//! * Lexical retrieval: with `average` and `concat` the passage expands the
//!   query text; with `fused` the passage's lexical ranking is fused.
//! * Passages are cached per model and question ([`PassageCache`]).

use std::time::Duration;

use deloop_core::pipeline::{guard_answer, AnswerGuardConfig};
use deloop_core::rescue::{rescue, RescueError};
use serde::Serialize;

/// Longest passage kept, in characters (220 tokens are far fewer).
pub const MAX_PASSAGE_CHARS: usize = 2_000;

/// The HyDE generation parameters (the seed's values by default).
#[derive(Debug, Clone, PartialEq)]
pub struct HydeParams {
    /// Sampling temperature (1.0).
    pub temperature: f32,
    /// Nucleus sampling (0.95).
    pub top_p: f32,
    /// Top-k sampling (64).
    pub top_k: u32,
    /// Output token limit (220).
    pub max_output_tokens: u32,
    /// Deadline of the call (15 s).
    pub timeout: Duration,
}

impl Default for HydeParams {
    fn default() -> Self {
        HydeParams {
            temperature: 1.0,
            top_p: 0.95,
            top_k: 64,
            max_output_tokens: 220,
            timeout: Duration::from_secs(15),
        }
    }
}

/// The highest `[oracle] hyde_temperature` accepted.
pub const MAX_HYDE_TEMPERATURE: f32 = 2.0;
/// The highest `[oracle] hyde_max_output_tokens` accepted (a passage is
/// cut at [`MAX_PASSAGE_CHARS`] anyway).
pub const MAX_HYDE_OUTPUT_TOKENS: u32 = 2048;

impl HydeParams {
    /// The parameters of the `[oracle]` section: `hyde_timeout_secs`,
    /// `hyde_temperature` (0 to 2; 0 is greedy) and `hyde_max_output_tokens`
    /// (1 to 2048); top-p and top-k keep the seed's values. An out-of-range
    /// value is an error that names its key.
    ///
    /// ```
    /// let mut config = deloop_config::Config::default();
    /// config.oracle.hyde_temperature = 0.0;
    /// let p = deloop_oracle::hyde::HydeParams::from_config(&config).unwrap();
    /// assert_eq!(p.temperature, 0.0);
    /// config.oracle.hyde_max_output_tokens = 0;
    /// assert!(deloop_oracle::hyde::HydeParams::from_config(&config).is_err());
    /// ```
    pub fn from_config(
        config: &deloop_config::Config,
    ) -> Result<HydeParams, deloop_config::ConfigError> {
        let o = &config.oracle;
        if !(o.hyde_temperature.is_finite()
            && (0.0..=MAX_HYDE_TEMPERATURE).contains(&o.hyde_temperature))
        {
            return Err(deloop_config::ConfigError::invalid(
                "hyde_temperature",
                o.hyde_temperature.to_string(),
                format!("a temperature from 0 to {MAX_HYDE_TEMPERATURE}"),
            ));
        }
        if !(1..=MAX_HYDE_OUTPUT_TOKENS).contains(&o.hyde_max_output_tokens) {
            return Err(deloop_config::ConfigError::invalid(
                "hyde_max_output_tokens",
                o.hyde_max_output_tokens.to_string(),
                format!("a number of tokens from 1 to {MAX_HYDE_OUTPUT_TOKENS}"),
            ));
        }
        Ok(HydeParams {
            temperature: o.hyde_temperature,
            max_output_tokens: o.hyde_max_output_tokens,
            timeout: config.hyde_timeout(),
            ..HydeParams::default()
        })
    }
}

/// The largest weight of the passage's ranking in `fused` mode, against 1
/// for each of the question's rankings (`[oracle] hyde_fused_weight`): a
/// passage the question fully corroborates counts as one more list of the
/// question's. The choice is measured in docs/retrieval.md.
pub const DEFAULT_FUSED_WEIGHT: f32 = 1.0;
/// The exponent of the agreement in `fused` mode (`[oracle]
/// hyde_agreement_power`): the passage's list weighs `weight × agreement³`,
/// where the agreement is the share of the passage's top 10 chunks that the
/// question's own (lexical) top 10 holds ([`deloop_index::PassageRanking`]).
/// 3 makes a passage that shares half of its top weigh 1/8; measured in
/// docs/retrieval.md.
pub const DEFAULT_AGREEMENT_POWER: f32 = 3.0;
/// The highest `[oracle] hyde_agreement_power` accepted.
pub const MAX_AGREEMENT_POWER: f32 = 16.0;
/// The highest `[oracle] hyde_fused_weight` accepted.
pub const MAX_FUSED_WEIGHT: f32 = 4.0;

/// How the hypothetical passage joins retrieval (`[oracle]
/// hyde_query_vector`, `DELOOP_HYDE_QUERY_VECTOR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum QueryVectorMode {
    /// Embed `"question\n\npassage"` as one text (the seed's `buildQueryVec`).
    Concat,
    /// Embed question and passage separately and take the re-normalised
    /// mean (the HyDE paper and LlamaIndex).
    Average,
    /// Leave the question's rankings as they are and fuse the passage's own
    /// ranking with them by reciprocal rank fusion
    /// ([`deloop_index::PassageRanking`]). The default: a weak model's
    /// passage cannot pull the query away from the answer (measured in
    /// docs/retrieval.md).
    #[default]
    Fused,
}

impl QueryVectorMode {
    /// `concat`, `average` or `fused`.
    pub fn as_str(self) -> &'static str {
        match self {
            QueryVectorMode::Concat => "concat",
            QueryVectorMode::Average => "average",
            QueryVectorMode::Fused => "fused",
        }
    }

    /// Parses `concat`, `average` (or `mean`) or `fused` (or `rrf`), any case.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "concat" => Some(QueryVectorMode::Concat),
            "average" | "mean" => Some(QueryVectorMode::Average),
            "fused" | "rrf" => Some(QueryVectorMode::Fused),
            _ => None,
        }
    }
}

/// The text embedded in [`QueryVectorMode::Concat`].
pub fn concat_text(question: &str, passage: &str) -> String {
    format!("{}\n\n{}", question.trim(), passage.trim())
}

/// Scales `v` to unit length (a zero or non-finite vector is returned as is).
pub fn normalize(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm.is_finite() && norm > 0.0 {
        for x in &mut v {
            *x /= norm;
        }
    }
    v
}

/// The re-normalised mean of two embeddings, each normalised first so that
/// both weigh the same. `None` when the dimensions differ.
///
/// ```
/// use deloop_oracle::hyde::average_vectors;
/// let v = average_vectors(&[1.0, 0.0], &[0.0, 2.0]).unwrap();
/// assert!((v[0] - v[1]).abs() < 1e-6 && (v[0] * v[0] + v[1] * v[1] - 1.0).abs() < 1e-6);
/// ```
pub fn average_vectors(question: &[f32], passage: &[f32]) -> Option<Vec<f32>> {
    if question.len() != passage.len() {
        return None;
    }
    let q = normalize(question.to_vec());
    let p = normalize(passage.to_vec());
    Some(normalize(
        q.iter().zip(&p).map(|(a, b)| (a + b) / 2.0).collect(),
    ))
}

/// The query text for lexical retrieval: the question expanded by the passage.
pub fn expanded_query(question: &str, passage: Option<&str>) -> String {
    match passage {
        Some(p) if !p.trim().is_empty() => concat_text(question, p),
        _ => question.trim().to_owned(),
    }
}

/// Why a reply gave no usable passage.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PassageError {
    /// The reply was empty.
    #[error("the HyDE reply was empty")]
    Empty,
    /// JSON was found but without a usable `passage` string.
    #[error("the HyDE reply has no usable passage: {0}")]
    NoPassage(String),
    /// The passage was a loop that the guard cut to almost nothing.
    #[error("the HyDE passage was a loop")]
    Looping,
}

/// Extracts the passage from a HyDE reply: JSON rescue of `passage`, else
/// (no JSON at all) the raw text as the seed does; then the loop guard.
///
/// ```
/// use deloop_oracle::hyde::passage_from_reply;
/// let p = passage_from_reply("```json\n{\"passage\": \"Cancel the stream when the watcher fires.\"}\n```").unwrap();
/// assert_eq!(p, "Cancel the stream when the watcher fires.");
/// ```
pub fn passage_from_reply(raw: &str) -> Result<String, PassageError> {
    if raw.trim().is_empty() {
        return Err(PassageError::Empty);
    }
    let text = match rescue(raw, "passage") {
        Ok(r) => match r.as_text() {
            Some(t) => t.to_owned(),
            None => return Err(PassageError::NoPassage("not a string".into())),
        },
        Err(RescueError::NoJson) => raw.to_owned(),
        Err(e) => return Err(PassageError::NoPassage(e.to_string())),
    };
    let text = crate::prompts::truncate_chars(text.trim(), MAX_PASSAGE_CHARS).into_owned();
    if text.is_empty() {
        return Err(PassageError::Empty);
    }
    let guarded = guard_answer(&text, &AnswerGuardConfig::default());
    if guarded.degraded {
        return Err(PassageError::Looping);
    }
    Ok(guarded.text)
}

/// A store of generated passages, keyed by model and question.
pub trait PassageCache {
    /// The cached passage for `model` and `question`, if any.
    fn get(&self, model: &str, question: &str) -> Option<String>;
    /// Stores `passage` for `model` and `question` (errors are logged, not fatal).
    fn put(&self, model: &str, question: &str, passage: &str);
}

/// A cache that stores nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCache;

impl PassageCache for NoCache {
    fn get(&self, _model: &str, _question: &str) -> Option<String> {
        None
    }
    fn put(&self, _model: &str, _question: &str, _passage: &str) {}
}

/// What HyDE produced for one question.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HydeOutcome {
    /// The passage, or `None` when retrieval uses the plain question.
    pub passage: Option<String>,
    /// True when the passage came from the cache.
    pub cached: bool,
    /// Why HyDE fell back to the plain question, when it did.
    pub fallback_reason: Option<String>,
}

impl HydeOutcome {
    /// A fallback to the plain question, logged with its reason.
    pub fn fallback(reason: impl Into<String>) -> Self {
        let reason = reason.into();
        tracing::warn!(%reason, "HyDE fell back to the plain question");
        HydeOutcome {
            passage: None,
            cached: false,
            fallback_reason: Some(reason),
        }
    }
}

/// The generation request of a HyDE call for `question` in `lang`.
pub fn hyde_request(
    question: &str,
    lang: crate::language::Language,
    params: &HydeParams,
) -> deloop_llm::GenerateRequest {
    let prompt = crate::prompts::hyde_prompt(lang, question);
    let mut req = deloop_llm::GenerateRequest::new(prompt.user);
    req.system = Some(prompt.system);
    req.json = deloop_llm::JsonMode::Schema(prompt.schema);
    req.temperature = Some(params.temperature);
    req.top_p = Some(params.top_p);
    req.top_k = Some(params.top_k);
    req.max_output_tokens = Some(params.max_output_tokens);
    req.timeout = params.timeout;
    req
}

/// Generates a hypothetical passage for `question` (no cache, no
/// fallback): the error says why there is none.
pub async fn hyde_passage(
    client: &deloop_llm::LlmClient,
    question: &str,
    lang: crate::language::Language,
    params: &HydeParams,
    cancel: &deloop_llm::CancellationToken,
) -> Result<String, String> {
    let req = hyde_request(question, lang, params);
    let generation = client
        .generate(&req, cancel)
        .await
        .map_err(|e| e.to_string())?;
    passage_from_reply(&generation.text).map_err(|e| e.to_string())
}

/// HyDE with the cache and the fallback: the cached passage for
/// `(model, question)` if any, else a new one generated on `runtime` (and
/// cached), else — on any error or timeout — the plain question, with the
/// reason logged and returned. Must not be called from inside an async
/// context (it blocks on `runtime`).
pub fn run_hyde(
    runtime: &tokio::runtime::Runtime,
    client: &deloop_llm::LlmClient,
    cache: &dyn PassageCache,
    question: &str,
    lang: crate::language::Language,
    params: &HydeParams,
) -> HydeOutcome {
    let model = client.model().to_owned();
    let key = question.trim();
    if let Some(passage) = cache.get(&model, key) {
        tracing::debug!("HyDE passage from the cache");
        return HydeOutcome {
            passage: Some(passage),
            cached: true,
            fallback_reason: None,
        };
    }
    let cancel = deloop_llm::CancellationToken::new();
    match runtime.block_on(hyde_passage(client, key, lang, params, &cancel)) {
        Ok(passage) => {
            cache.put(&model, key, &passage);
            HydeOutcome {
                passage: Some(passage),
                cached: false,
                fallback_reason: None,
            }
        }
        Err(reason) => HydeOutcome::fallback(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn replies() {
        assert_eq!(
            passage_from_reply(r#"{"passage": "Use the watcher."}"#).unwrap(),
            "Use the watcher."
        );
        // Truncated at the token limit.
        assert_eq!(
            passage_from_reply(r#"{"passage": "Use the watcher to cut"#).unwrap(),
            "Use the watcher to cut"
        );
        // No JSON at all: the raw text (seed).
        assert_eq!(
            passage_from_reply("  Plain passage text.  ").unwrap(),
            "Plain passage text."
        );
        assert_eq!(passage_from_reply("   "), Err(PassageError::Empty));
        assert!(matches!(
            passage_from_reply(r#"{"other": 1}"#),
            Err(PassageError::NoPassage(_))
        ));
        assert_eq!(
            passage_from_reply(&format!(r#"{{"passage": "ab{}"}}"#, "resak-".repeat(100))),
            Err(PassageError::Looping)
        );
    }

    #[test]
    fn modes_and_texts() {
        assert_eq!(
            QueryVectorMode::parse("CONCAT"),
            Some(QueryVectorMode::Concat)
        );
        assert_eq!(
            QueryVectorMode::parse("mean"),
            Some(QueryVectorMode::Average)
        );
        assert_eq!(
            QueryVectorMode::parse(" Fused "),
            Some(QueryVectorMode::Fused)
        );
        assert_eq!(QueryVectorMode::parse("rrf"), Some(QueryVectorMode::Fused));
        assert_eq!(QueryVectorMode::default(), QueryVectorMode::Fused);
        assert_eq!(QueryVectorMode::parse("x"), None);
        assert_eq!(concat_text(" q ", " p "), "q\n\np");
        assert_eq!(expanded_query("q", None), "q");
        assert_eq!(expanded_query("q", Some("  ")), "q");
        assert_eq!(expanded_query("q", Some("p")), "q\n\np");
        assert!(average_vectors(&[1.0], &[1.0, 2.0]).is_none());
        assert_eq!(normalize(vec![0.0, 0.0]), vec![0.0, 0.0]);
    }

    proptest! {
        #[test]
        fn average_is_unit_and_between(a in proptest::collection::vec(-10.0f32..10.0, 8),
                                       b in proptest::collection::vec(-10.0f32..10.0, 8)) {
            let v = average_vectors(&a, &b).unwrap();
            let n: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            prop_assert!(n == 0.0 || (n - 1.0).abs() < 1e-3);
            let cos = |x: &[f32], y: &[f32]| {
                let d: f32 = x.iter().zip(y).map(|(p, q)| p * q).sum();
                let nx: f32 = x.iter().map(|p| p * p).sum::<f32>().sqrt();
                let ny: f32 = y.iter().map(|p| p * p).sum::<f32>().sqrt();
                d / (nx * ny)
            };
            let an: f32 = a.iter().map(|x| x * x).sum();
            let bn: f32 = b.iter().map(|x| x * x).sum();
            if an > 1e-3 && bn > 1e-3 && n > 0.5 {
                // The mean is at least as close to each input as they are to each other.
                prop_assert!(cos(&v, &a) >= cos(&a, &b) - 1e-3);
                prop_assert!(cos(&v, &b) >= cos(&a, &b) - 1e-3);
            }
        }

        #[test]
        fn reply_parsing_never_panics(s in ".{0,500}") {
            let _ = passage_from_reply(&s);
        }
    }
}
