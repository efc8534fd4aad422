//! Spanish/English language detection for questions (seed `detectLanguage`).
//!
//! A pure, linear-time heuristic: Spanish-only punctuation and letters
//! (`¿ ¡ ñ` and accented vowels) and common function words of each language
//! vote; the language with more votes wins and ties go to English. It is
//! meant for short questions, where it only has to choose the prompt
//! language and the fallback messages.

use serde::{Deserialize, Serialize};

/// A language the oracle speaks: prompts and fallback messages exist in both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Language {
    /// Spanish (`es`).
    Es,
    /// English (`en`).
    En,
}

impl Language {
    /// The ISO 639-1 code: `"es"` or `"en"`.
    pub fn code(self) -> &'static str {
        match self {
            Language::Es => "es",
            Language::En => "en",
        }
    }

    /// Parses `es`/`en` (also `spanish`/`english`, any case).
    pub fn parse(s: &str) -> Option<Language> {
        match s.trim().to_ascii_lowercase().as_str() {
            "es" | "spa" | "spanish" | "español" | "espanol" => Some(Language::Es),
            "en" | "eng" | "english" => Some(Language::En),
            _ => None,
        }
    }
}

impl std::fmt::Display for Language {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

const SPANISH_WORDS: &[&str] = &[
    "el",
    "la",
    "los",
    "las",
    "de",
    "del",
    "que",
    "qué",
    "cómo",
    "como",
    "cuál",
    "cuáles",
    "cuándo",
    "dónde",
    "por",
    "para",
    "con",
    "una",
    "uno",
    "unos",
    "unas",
    "es",
    "son",
    "está",
    "están",
    "se",
    "mi",
    "mis",
    "puedo",
    "hago",
    "hacer",
    "y",
    "o",
    "en",
    "al",
    "lo",
    "le",
    "su",
    "sus",
    "sin",
    "pero",
    "si",
    "sí",
    "no",
    "muy",
    "más",
    "este",
    "esta",
    "esto",
    "ese",
    "esa",
    "cuando",
    "donde",
    "qué",
    "quiero",
    "debo",
    "hay",
    "tiene",
    "tengo",
    "bucle",
    "bucles",
    "respuesta",
    "modelo",
    "configuro",
    "funciona",
    "sirve",
    "entre",
    "también",
    "desde",
];

const ENGLISH_WORDS: &[&str] = &[
    "the", "a", "an", "is", "are", "was", "be", "how", "what", "which", "when", "where", "why",
    "who", "do", "does", "did", "can", "could", "should", "would", "i", "my", "you", "your", "to",
    "of", "and", "or", "in", "on", "for", "with", "it", "its", "this", "that", "these", "from",
    "by", "at", "as", "not", "stop", "use", "using", "get", "set", "make", "there", "have", "has",
    "if", "into", "about", "loop", "loops", "looping", "answer", "model",
];

/// Detects whether `text` is Spanish or English. Ties (including text with
/// no signal at all) go to English.
///
/// ```
/// use deloop_oracle::language::{detect_language, Language};
/// assert_eq!(detect_language("¿Cómo detengo un bucle en el stream?"), Language::Es);
/// assert_eq!(detect_language("How do I stop a looping stream?"), Language::En);
/// assert_eq!(detect_language(""), Language::En);
/// ```
pub fn detect_language(text: &str) -> Language {
    let mut es = 0usize;
    let mut en = 0usize;
    // Only the first few kilobytes matter; keeps the cost bounded.
    let mut budget = 4096usize;
    for ch in text.chars() {
        if budget == 0 {
            break;
        }
        budget -= 1;
        if matches!(ch, '¿' | '¡' | 'ñ' | 'Ñ') {
            es += 3;
        } else if matches!(
            ch,
            'á' | 'é' | 'í' | 'ó' | 'ú' | 'Á' | 'É' | 'Í' | 'Ó' | 'Ú' | 'ü'
        ) {
            es += 1;
        }
    }
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(400)
    {
        let lower = word.to_lowercase();
        if SPANISH_WORDS.contains(&lower.as_str()) {
            es += 1;
        }
        if ENGLISH_WORDS.contains(&lower.as_str()) {
            en += 1;
        }
    }
    if es > en {
        Language::Es
    } else {
        Language::En
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn spanish_questions() {
        for q in [
            "¿Qué es la auditoría suprema?",
            "como configuro el modelo para que no entre en bucle",
            "¿Cómo configuro multi-tenancy?",
            "Explícame el rescate de JSON",
            "qué hace la guarda de subcadenas",
        ] {
            assert_eq!(detect_language(q), Language::Es, "{q}");
        }
    }

    #[test]
    fn english_questions() {
        for q in [
            "How do I stop a looping stream?",
            "What is the substring guard?",
            "explain JSON rescue",
            "Why does the model repeat itself?",
        ] {
            assert_eq!(detect_language(q), Language::En, "{q}");
        }
    }

    #[test]
    fn parse_codes() {
        assert_eq!(Language::parse("ES"), Some(Language::Es));
        assert_eq!(Language::parse("english"), Some(Language::En));
        assert_eq!(Language::parse("fr"), None);
        assert_eq!(Language::Es.to_string(), "es");
    }

    proptest! {
        #[test]
        fn never_panics(s in ".{0,2000}") {
            let _ = detect_language(&s);
        }
    }
}
