//! The answer pipeline of the seed (`synthesizeAnswer`, Correo `ask.ts`):
//! word guard, then substring guard, then an honest fallback when the cut
//! leaves too little.

use serde::{Deserialize, Serialize};

use crate::repetition::{clamp_substring, clamp_words, ClampConfig, ClampReport};

/// Language of the fallback message.
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
    /// When the substring cut leaves fewer characters than this, the answer
    /// is replaced by `fallback` and marked degraded (20).
    pub min_chars: usize,
    /// The honest message used instead of a useless fragment.
    pub fallback: String,
}

/// The seed's Spanish fallback (Correo chat).
pub const FALLBACK_ES: &str = "Se me ha ido la respuesta (el modelo entró en bucle). \
Pregúntamelo otra vez, mejor en una conversación nueva.";
/// The English equivalent.
pub const FALLBACK_EN: &str = "The answer went off the rails (the model got stuck in a loop). \
Please ask again, preferably in a new conversation.";

impl AnswerGuardConfig {
    /// Default guards with the fallback message in `lang`.
    pub fn for_language(lang: Language) -> Self {
        AnswerGuardConfig {
            clamp: ClampConfig::default(),
            min_chars: 20,
            fallback: match lang {
                Language::Es => FALLBACK_ES,
                Language::En => FALLBACK_EN,
            }
            .to_string(),
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

/// Runs the word guard, the substring guard, and the fallback rule.
pub fn guard_answer(text: &str, config: &AnswerGuardConfig) -> GuardedAnswer {
    let words = clamp_words(text, &config.clamp);
    let sub = clamp_substring(&words.text, &config.clamp);
    let mut reports = words.reports;
    let sub_fired = !sub.reports.is_empty();
    reports.extend(sub.reports);
    let degraded = sub_fired && sub.text.chars().count() < config.min_chars;
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
