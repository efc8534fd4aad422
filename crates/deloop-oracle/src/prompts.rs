//! Prompt builders per mode and language (seed `buildOraclePrompts`,
//! `buildHelpPrompts`, `buildTutorPrompts`) and the HyDE prompt (seed
//! `generateHyDE`), each with the JSON schema the reply must follow.
//!
//! Prompts are plain data: a system instruction, a user turn and a JSON
//! schema. The LLM client decides how to send them (Gemma models that
//! reject system instructions or JSON mode get them folded into the user
//! turn by the client).

use serde_json::{json, Value};

use crate::language::Language;
use crate::types::{Mode, Passage};

/// At most this many characters of one passage go into a prompt: a passage
/// merged from two overlapping chunks
/// ([`crate::retrieve::MAX_MERGED_BYTES`]) fits whole.
pub const MAX_PASSAGE_CHARS: usize = 2_400;
/// At most this many characters of passages in total go into a prompt.
pub const MAX_CONTEXT_CHARS: usize = 12_000;
/// At most this many characters of the question go into a prompt.
pub const MAX_QUESTION_CHARS: usize = 2_000;

/// At most this many characters of one earlier dialogue turn go into a prompt.
pub const MAX_TURN_CHARS: usize = 2_000;
/// At most this many earlier dialogue turns go into a prompt (the newest).
pub const MAX_HISTORY_TURNS: usize = 16;
/// At most this many characters of earlier turns in total go into a prompt.
pub const MAX_HISTORY_CHARS: usize = 8_000;

/// The earlier turns of a dialogue as they go into a prompt: empty turns
/// dropped, each cut to [`MAX_TURN_CHARS`], and only the newest that fit in
/// [`MAX_HISTORY_TURNS`] and [`MAX_HISTORY_CHARS`] kept (oldest first), so a
/// long conversation never grows the prompt without bound.
///
/// ```
/// use deloop_llm::{Role, Turn};
/// use deloop_oracle::prompts::{history_turns, MAX_HISTORY_TURNS};
/// let many: Vec<Turn> = (0..100)
///     .map(|i| Turn { role: Role::User, content: format!("turn {i}") })
///     .collect();
/// let kept = history_turns(&many);
/// assert_eq!(kept.len(), MAX_HISTORY_TURNS);
/// assert_eq!(kept.last().unwrap().content, "turn 99");
/// ```
pub fn history_turns(history: &[deloop_llm::Turn]) -> Vec<deloop_llm::Turn> {
    let mut kept = Vec::new();
    let mut chars = 0;
    for turn in history.iter().rev() {
        let text = turn.content.trim();
        if text.is_empty() {
            continue;
        }
        let text = truncate_chars(text, MAX_TURN_CHARS);
        let n = text.chars().count();
        if kept.len() == MAX_HISTORY_TURNS || chars + n > MAX_HISTORY_CHARS {
            break;
        }
        chars += n;
        kept.push(deloop_llm::Turn {
            role: turn.role,
            content: text.into_owned(),
        });
    }
    kept.reverse();
    kept
}

/// A prompt ready for an LLM: instructions, the user turn and the schema of
/// the JSON reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    /// The system instruction.
    pub system: String,
    /// The user turn.
    pub user: String,
    /// The JSON schema of the expected reply (an OpenAPI-style object schema).
    pub schema: Value,
}

/// The JSON schema of an answer: `{"answer": string, "citations": [{"source",
/// "start_line", "end_line"}]}`.
pub fn answer_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "answer": {"type": "string"},
            "citations": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "source": {"type": "string"},
                        "start_line": {"type": "integer"},
                        "end_line": {"type": "integer"}
                    },
                    "required": ["source", "start_line", "end_line"]
                }
            }
        },
        "required": ["answer", "citations"]
    })
}

/// The JSON schema of a HyDE reply: `{"passage": string}`.
pub fn hyde_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"passage": {"type": "string"}},
        "required": ["passage"]
    })
}

/// Cuts `s` to at most `max` characters on a char boundary, marking the cut.
pub(crate) fn truncate_chars(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(max) {
        None => std::borrow::Cow::Borrowed(s),
        Some((idx, _)) => std::borrow::Cow::Owned(format!("{} […]", s[..idx].trim_end())),
    }
}

fn mode_instructions(mode: Mode, lang: Language) -> &'static str {
    match (mode, lang) {
        (Mode::Oracle, Language::En) => {
            "You are deloop's library oracle. Answer the question using only the \
documentation passages provided. Write rich markdown: short paragraphs, **bold** for \
key terms, lists or code blocks where they help, and name the sources you rely on. \
If the passages do not contain the answer, say so plainly instead of guessing. \
Answer in English. Never repeat a sentence or phrase."
        }
        (Mode::Oracle, Language::Es) => {
            "Eres el oráculo de la biblioteca de deloop. Responde a la pregunta usando solo \
los pasajes de documentación proporcionados. Escribe markdown rico: párrafos cortos, \
**negrita** para los términos clave, listas o bloques de código cuando ayuden, y nombra \
las fuentes en que te apoyas. Si los pasajes no contienen la respuesta, dilo con claridad \
en vez de inventar. Responde en español. No repitas nunca una frase."
        }
        (Mode::Help, Language::En) => {
            "You are deloop's help desk. Answer the question in at most three short \
sentences of plain text (no markdown, no lists), using only the documentation passages \
provided. If they do not contain the answer, say so in one sentence. Answer in English. \
Never repeat yourself."
        }
        (Mode::Help, Language::Es) => {
            "Eres la ayuda de deloop. Responde a la pregunta en como mucho tres frases \
cortas de texto plano (sin markdown ni listas), usando solo los pasajes de documentación \
proporcionados. Si no contienen la respuesta, dilo en una frase. Responde en español. \
No te repitas."
        }
        (Mode::Tutor, Language::En) => {
            "You are deloop's tutor. Teach the answer to the question step by step, using \
only the documentation passages provided: explain the idea, why it works, and a small \
example when the passages allow it. End the answer with two or three open questions \
that make the learner think further. Answer in English. Never repeat yourself."
        }
        (Mode::Tutor, Language::Es) => {
            "Eres el tutor de deloop. Enseña la respuesta a la pregunta paso a paso, usando \
solo los pasajes de documentación proporcionados: explica la idea, por qué funciona y un \
ejemplo pequeño cuando los pasajes lo permitan. Termina la respuesta con dos o tres \
preguntas abiertas que hagan pensar al alumno. Responde en español. No te repitas."
        }
    }
}

fn json_instructions(lang: Language) -> &'static str {
    match lang {
        Language::En => {
            "Reply with one JSON object only, no text before or after it: \
{\"answer\": string, \"citations\": [{\"source\": string, \"start_line\": integer, \
\"end_line\": integer}]}. Each citation copies the source and the line numbers of a \
passage given below that supports the answer; cite nothing else. Escape every double \
quote inside the answer as \\\"."
        }
        Language::Es => {
            "Responde solo con un objeto JSON, sin texto antes ni después: \
{\"answer\": string, \"citations\": [{\"source\": string, \"start_line\": integer, \
\"end_line\": integer}]}. Cada cita copia la fuente y los números de línea de un pasaje \
de los de abajo que respalde la respuesta; no cites nada más. Escapa cada comilla doble \
dentro de la respuesta como \\\"."
        }
    }
}

/// Builds the answer prompt for `mode` in `lang` over the retrieved
/// `passages` (best first). Passage and context sizes are bounded by
/// [`MAX_PASSAGE_CHARS`] and [`MAX_CONTEXT_CHARS`].
///
/// ```
/// use deloop_oracle::prompts::answer_prompt;
/// use deloop_oracle::{Language, Mode, Passage};
/// let p = Passage { source: "docs/loops.md".into(), start_line: 3, end_line: 9,
///     heading_trail: vec!["Loops".into()], text: "Cut the stream.".into(), score: 1.0 };
/// let prompt = answer_prompt(Mode::Help, Language::En, "How?", &[p]);
/// assert!(prompt.user.contains("docs/loops.md (lines 3-9)"));
/// assert!(prompt.system.contains("JSON"));
/// ```
pub fn answer_prompt(mode: Mode, lang: Language, question: &str, passages: &[Passage]) -> Prompt {
    let system = format!(
        "{}\n\n{}",
        mode_instructions(mode, lang),
        json_instructions(lang)
    );
    let (heading, q_label, none) = match lang {
        Language::En => (
            "Documentation passages:",
            "Question:",
            "(no passages were found)",
        ),
        Language::Es => (
            "Pasajes de documentación:",
            "Pregunta:",
            "(no se encontró ningún pasaje)",
        ),
    };
    let mut user = String::new();
    user.push_str(heading);
    user.push('\n');
    let mut used = 0usize;
    let mut any = false;
    for (i, p) in passages.iter().enumerate() {
        if used >= MAX_CONTEXT_CHARS {
            break;
        }
        let budget = MAX_PASSAGE_CHARS.min(MAX_CONTEXT_CHARS - used);
        let text = truncate_chars(p.text.trim(), budget);
        used += text.chars().count();
        any = true;
        user.push_str(&format!(
            "\n[{}] {} (lines {}-{})",
            i + 1,
            p.source,
            p.start_line,
            p.end_line
        ));
        if !p.heading_trail.is_empty() {
            user.push_str(" — ");
            user.push_str(&p.heading_trail.join(" > "));
        }
        user.push('\n');
        user.push_str(&text);
        user.push('\n');
    }
    if !any {
        user.push_str(none);
        user.push('\n');
    }
    user.push_str(&format!(
        "\n{} {}\n",
        q_label,
        truncate_chars(question.trim(), MAX_QUESTION_CHARS)
    ));
    Prompt {
        system,
        user,
        schema: answer_schema(),
    }
}

/// Builds the HyDE prompt in `lang` (seed `generateHyDE`): a 2–4 sentence
/// hypothetical documentation passage answering `question`, as JSON
/// `{"passage": string}`.
///
/// ```
/// use deloop_oracle::prompts::hyde_prompt;
/// use deloop_oracle::Language;
/// let p = hyde_prompt(Language::Es, "¿Cómo corto un bucle?");
/// assert!(p.system.contains("2-4 frases"));
/// ```
pub fn hyde_prompt(lang: Language, question: &str) -> Prompt {
    let (system, label) = match lang {
        Language::En => (
            "Write a short hypothetical documentation passage (2-4 sentences) that would \
answer the question, as if it were an excerpt from the technical documentation. Use the \
terminology such documentation would most likely use and plausible concrete details. No \
disclaimers, no preamble, no reasoning. Reply with one JSON object only: \
{\"passage\": string}.",
            "Question:",
        ),
        Language::Es => (
            "Escribe un breve pasaje hipotético de documentación (2-4 frases) que respondería \
a la pregunta, como si fuera un fragmento de la documentación técnica. Usa la terminología \
que probablemente usaría esa documentación y detalles concretos plausibles. Sin avisos, sin \
preámbulo, sin razonamiento. Responde solo con un objeto JSON: {\"passage\": string}.",
            "Pregunta:",
        ),
    };
    Prompt {
        system: system.to_string(),
        user: format!(
            "{label} {}",
            truncate_chars(question.trim(), MAX_QUESTION_CHARS)
        ),
        schema: hyde_schema(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passage(n: usize, len: usize) -> Passage {
        Passage {
            source: format!("docs/{n}.md"),
            start_line: 1,
            end_line: 5,
            heading_trail: vec![],
            text: "x".repeat(len),
            score: 1.0,
        }
    }

    #[test]
    fn every_mode_and_language_has_its_own_prompt() {
        let mut seen = std::collections::HashSet::new();
        for mode in [Mode::Oracle, Mode::Help, Mode::Tutor] {
            for lang in [Language::En, Language::Es] {
                let p = answer_prompt(mode, lang, "q", &[]);
                assert!(seen.insert(p.system.clone()));
                assert!(p.system.contains("JSON"));
            }
        }
        assert!(answer_prompt(Mode::Tutor, Language::En, "q", &[])
            .system
            .contains("open questions"));
        assert!(answer_prompt(Mode::Tutor, Language::Es, "q", &[])
            .system
            .contains("preguntas abiertas"));
        assert!(answer_prompt(Mode::Oracle, Language::Es, "q", &[])
            .user
            .contains("no se encontró"));
    }

    #[test]
    fn context_is_bounded() {
        let passages: Vec<_> = (0..50).map(|i| passage(i, 5_000)).collect();
        let p = answer_prompt(Mode::Oracle, Language::En, &"q".repeat(10_000), &passages);
        assert!(p.user.chars().count() < MAX_CONTEXT_CHARS + MAX_QUESTION_CHARS + 2_000);
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        let s = "ñ".repeat(10);
        assert_eq!(truncate_chars(&s, 3), "ñññ […]");
        assert_eq!(truncate_chars(&s, 10), s);
    }

    #[test]
    fn hyde_prompts_per_language() {
        assert!(hyde_prompt(Language::En, "q")
            .system
            .contains("2-4 sentences"));
        assert!(hyde_prompt(Language::Es, "q").user.starts_with("Pregunta:"));
        assert_eq!(hyde_prompt(Language::En, "q").schema, hyde_schema());
    }
}
