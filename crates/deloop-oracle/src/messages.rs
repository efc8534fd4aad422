//! Every fixed message the oracle can show, per mode and language.
//!
//! The generic fallbacks follow the seed (`synthesizeAnswer`): oracle says
//! the question is too broad, help is shorter, tutor invites the user to
//! rephrase. All are at least 20 characters, so they pass the answer guard's
//! minimum length themselves.

use crate::language::Language;
use crate::types::Mode;

/// The generic fallback of `mode` in `lang`, used when nothing could be
/// rescued from the reply or a loop cut left less than 20 characters.
///
/// ```
/// use deloop_oracle::messages::generic_fallback;
/// use deloop_oracle::{Language, Mode};
/// assert_eq!(generic_fallback(Mode::Oracle, Language::Es),
///            "Tu pregunta es muy amplia. Consulta la documentación específica.");
/// ```
pub fn generic_fallback(mode: Mode, lang: Language) -> &'static str {
    match (mode, lang) {
        (Mode::Oracle, Language::Es) => {
            "Tu pregunta es muy amplia. Consulta la documentación específica."
        }
        (Mode::Oracle, Language::En) => {
            "Your question is very broad. Please check the specific documentation."
        }
        (Mode::Help, Language::Es) => "No tengo una respuesta clara. Revisa la documentación.",
        (Mode::Help, Language::En) => "I have no clear answer. Please check the documentation.",
        (Mode::Tutor, Language::Es) => {
            "No he podido preparar una buena explicación. ¿Puedes reformular la pregunta con más detalle?"
        }
        (Mode::Tutor, Language::En) => {
            "I could not put together a good explanation. Could you rephrase the question with more detail?"
        }
    }
}

/// The honest message for a reply the provider blocked or refused
/// (`SAFETY`, `RECITATION`, `PROHIBITED_CONTENT`, a prompt block…). The
/// reason code is shown as given; refusals are never retried.
pub fn refusal(reason: &str, lang: Language) -> String {
    match lang {
        Language::Es => format!(
            "El modelo se ha negado a responder a esta pregunta (motivo: {reason}). \
deloop no reintenta las negativas; prueba a reformular la pregunta."
        ),
        Language::En => format!(
            "The model declined to answer this question (reason: {reason}). \
deloop does not retry refusals; try rephrasing the question."
        ),
    }
}

/// The heading of an extractive answer (no LLM configured).
pub fn extractive_heading(lang: Language) -> &'static str {
    match lang {
        Language::Es => "No hay ningún LLM configurado: estos son los pasajes más relevantes.",
        Language::En => "No LLM configured: here are the most relevant passages.",
    }
}

/// The heading of an extractive answer used because the LLM call failed.
pub fn llm_failed_heading(lang: Language) -> &'static str {
    match lang {
        Language::Es => {
            "El LLM configurado ha fallado: estos son los pasajes más relevantes en su lugar."
        }
        Language::En => "The configured LLM failed: here are the most relevant passages instead.",
    }
}

/// The heading of an extractive answer used because nothing usable could
/// be rescued from the model's reply.
pub fn nothing_rescued_heading(lang: Language) -> &'static str {
    match lang {
        Language::Es => {
            "No se ha podido leer una respuesta del modelo: estos son los pasajes más relevantes en su lugar."
        }
        Language::En => {
            "No answer could be read from the model's reply: here are the most relevant passages instead."
        }
    }
}

/// The heading of an extractive answer used because the model looped and
/// a guard cut its answer before anything useful was said.
pub fn loop_cut_heading(lang: Language) -> &'static str {
    match lang {
        Language::Es => {
            "El modelo entró en un bucle y deloop cortó su respuesta antes de que dijera algo útil: estos son los pasajes más relevantes en su lugar."
        }
        Language::En => {
            "The model looped and deloop cut its answer before it said anything useful: here are the most relevant passages instead."
        }
    }
}

/// The answer when retrieval found nothing and no LLM is configured.
pub fn nothing_found(lang: Language) -> &'static str {
    match lang {
        Language::Es => {
            "No hay ningún LLM configurado y nada del índice coincide con la pregunta. \
Prueba con otras palabras o indexa más documentos con `deloop index`."
        }
        Language::En => {
            "No LLM configured, and nothing in the index matches the question. \
Try other words, or index more documents with `deloop index`."
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallbacks_are_distinct_and_long_enough() {
        let mut seen = std::collections::HashSet::new();
        for mode in [Mode::Oracle, Mode::Help, Mode::Tutor] {
            for lang in [Language::Es, Language::En] {
                let f = generic_fallback(mode, lang);
                assert!(f.chars().count() >= 20, "{f}");
                assert!(seen.insert(f));
            }
        }
        assert!(
            generic_fallback(Mode::Help, Language::Es).len()
                < generic_fallback(Mode::Oracle, Language::Es).len()
        );
        assert!(refusal("SAFETY", Language::En).contains("SAFETY"));
        assert!(refusal("SAFETY", Language::Es).contains("motivo: SAFETY"));
    }
}
