//! The answer pipeline of the seed (`synthesizeAnswer`, Correo `ask.ts`):
//! word guard, then substring guard, then an honest fallback when the cut
//! leaves too little.
//!
//! ```
//! use deloop_core::pipeline::{guard_answer, AnswerGuardConfig, Language};
//! let config = AnswerGuardConfig::for_language(Language::Es);
//! let looped = "resak-".repeat(100);
//! let out = guard_answer(&looped, &config);
//! assert!(out.clamped && out.degraded);
//! assert!(out.text.starts_with("Se me ha ido la respuesta"));
//! let fine = guard_answer("El wifi se configura en 192.168.1.1.", &config);
//! assert!(!fine.clamped && !fine.degraded);
//! ```

use serde::{Deserialize, Serialize};

use crate::repetition::{clamp_substring, clamp_words, ClampConfig, ClampReport, Clamped};

/// Language of the fallback messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// Spanish (the seed's language).
    Es,
    /// English.
    En,
}

/// Configuration of [`guard_answer`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnswerGuardConfig {
    /// The repetition guards.
    pub clamp: ClampConfig,
    /// When a cut leaves fewer useful characters than this (the kept text
    /// without the marker, trimmed), the answer is replaced by `fallback`
    /// and marked degraded (20).
    pub min_chars: usize,
    /// The honest message used instead of a useless fragment.
    pub fallback: String,
    /// Used when the model's answer is empty or only whitespace (the seed's
    /// `answer || 'Sin respuesta del modelo.'`).
    pub empty_answer: String,
    /// Apply the `min_chars` rule after a word-guard cut too (the seed only
    /// checks the substring cut; a word loop at the very start would
    /// otherwise leave just the marker).
    pub fallback_on_word_cut: bool,
}

/// The seed's Spanish fallback (Correo chat).
pub const FALLBACK_ES: &str = "Se me ha ido la respuesta (el modelo entró en bucle). \
Pregúntamelo otra vez, mejor en una conversación nueva.";
/// The English equivalent.
pub const FALLBACK_EN: &str = "The answer went off the rails (the model got stuck in a loop). \
Please ask again, preferably in a new conversation.";
/// The seed's Spanish text for an empty answer.
pub const EMPTY_ES: &str = "Sin respuesta del modelo.";
/// The English equivalent.
pub const EMPTY_EN: &str = "No answer from the model.";

impl AnswerGuardConfig {
    /// Default guards with the messages in `lang`.
    pub fn for_language(lang: Language) -> Self {
        let (fallback, empty) = match lang {
            Language::Es => (FALLBACK_ES, EMPTY_ES),
            Language::En => (FALLBACK_EN, EMPTY_EN),
        };
        AnswerGuardConfig {
            clamp: ClampConfig::default(),
            min_chars: 20,
            fallback: fallback.to_string(),
            empty_answer: empty.to_string(),
            fallback_on_word_cut: true,
        }
    }

    /// The seed's exact pipeline: seed guards, fallback only after a
    /// substring cut, Spanish messages.
    pub fn seed_compat() -> Self {
        AnswerGuardConfig {
            clamp: ClampConfig::seed_compat(),
            fallback_on_word_cut: false,
            ..AnswerGuardConfig::for_language(Language::Es)
        }
    }
}

impl Default for AnswerGuardConfig {
    fn default() -> Self {
        AnswerGuardConfig::for_language(Language::Es)
    }
}

/// The guarded answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GuardedAnswer {
    /// The text to show.
    pub text: String,
    /// True when some guard cut the text.
    pub clamped: bool,
    /// True when the fallback message replaced the answer.
    pub degraded: bool,
    /// Reports of the guards that fired, in order.
    pub reports: Vec<ClampReport>,
}

/// Useful characters a cut kept: the source text before the marker,
/// trimmed.
fn useful_chars(input: &str, cut: &Clamped) -> usize {
    match cut.report() {
        Some(r) => input[..r.keep_bytes].trim().chars().count(),
        None => input.trim().chars().count(),
    }
}

/// Runs the word guard, the substring guard, and the fallback rule.
pub fn guard_answer(text: &str, config: &AnswerGuardConfig) -> GuardedAnswer {
    let text = if text.trim().is_empty() {
        config.empty_answer.as_str()
    } else {
        text
    };
    let words = clamp_words(text, &config.clamp);
    let mut degraded = config.fallback_on_word_cut
        && words.is_clamped()
        && useful_chars(text, &words) < config.min_chars;
    let sub = clamp_substring(&words.text, &config.clamp);
    if sub.is_clamped() && useful_chars(&words.text, &sub) < config.min_chars {
        degraded = true;
    }
    let mut reports = words.reports;
    reports.extend(sub.reports);
    GuardedAnswer {
        text: if degraded {
            config.fallback.clone()
        } else {
            sub.text
        },
        clamped: !reports.is_empty(),
        degraded,
        reports,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthy_answer_passes_through() {
        let cfg = AnswerGuardConfig::for_language(Language::En);
        let text = "The router is at 192.168.1.1 and the password is on the sticker.";
        let out = guard_answer(text, &cfg);
        assert_eq!(out.text, text);
        assert!(!out.clamped && !out.degraded && out.reports.is_empty());
    }

    #[test]
    fn substring_cut_with_enough_left_is_kept() {
        let cfg = AnswerGuardConfig::seed_compat();
        let text = format!(
            "La configuración del correo es sencilla: {}",
            "resak-".repeat(40)
        );
        let out = guard_answer(&text, &cfg);
        assert_eq!(out.text, "La configuración del correo es sencilla:");
        assert!(out.clamped && !out.degraded);
    }

    #[test]
    fn short_cut_degrades_to_the_fallback_in_each_language() {
        let text = format!("Ok: {}", "resak-".repeat(40));
        let es = guard_answer(&text, &AnswerGuardConfig::for_language(Language::Es));
        assert!(es.degraded && es.clamped);
        assert_eq!(es.text, FALLBACK_ES);
        let en = guard_answer(&text, &AnswerGuardConfig::for_language(Language::En));
        assert_eq!(en.text, FALLBACK_EN);
        let seed = guard_answer(&text, &AnswerGuardConfig::seed_compat());
        assert_eq!(seed.text, FALLBACK_ES);
    }

    #[test]
    fn word_loop_at_the_start() {
        let text = "hola hola ".repeat(40);
        let out = guard_answer(&text, &AnswerGuardConfig::for_language(Language::Es));
        assert!(out.degraded);
        // The seed only checks the substring cut: it keeps `hola […]`.
        let seed = guard_answer(&text, &AnswerGuardConfig::seed_compat());
        assert!(!seed.degraded);
        assert_eq!(seed.text, "hola […]");
    }

    #[test]
    fn word_then_substring_reports_in_order() {
        let text = format!(
            "Primero quiero decir esto: {} y luego {}",
            "ab".repeat(30),
            "una cosa más ".repeat(30)
        );
        let out = guard_answer(&text, &AnswerGuardConfig::for_language(Language::Es));
        assert!(out.clamped);
        assert_eq!(out.reports.len(), 2);
        assert_eq!(out.text, "Primero quiero decir esto: ab […]");
    }

    #[test]
    fn empty_answer_gets_the_seed_text() {
        let out = guard_answer("  \n", &AnswerGuardConfig::for_language(Language::Es));
        assert_eq!(out.text, EMPTY_ES);
        assert!(!out.degraded);
        let out = guard_answer("", &AnswerGuardConfig::for_language(Language::En));
        assert_eq!(out.text, EMPTY_EN);
    }

    #[test]
    fn config_deserializes_with_defaults() {
        let cfg: AnswerGuardConfig = serde_json::from_str(r#"{"min_chars": 5}"#).unwrap();
        assert_eq!(cfg.min_chars, 5);
        assert_eq!(cfg.fallback, FALLBACK_ES);
    }
}
