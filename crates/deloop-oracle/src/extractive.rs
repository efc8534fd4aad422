//! The extractive answer: without an LLM, the best retrieved passages with
//! their citations, under a heading that says so plainly.

use crate::language::Language;
use crate::messages::{
    extractive_heading, llm_failed_heading, loop_cut_heading, nothing_found,
    nothing_rescued_heading,
};
use crate::prompts::truncate_chars;
use crate::types::{Citation, Passage};

/// At most this many passages are quoted.
pub const MAX_EXTRACTIVE_PASSAGES: usize = 3;
/// At most this many characters of one passage are quoted.
pub const MAX_EXTRACTIVE_CHARS: usize = 900;

/// Why the answer is extractive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtractiveReason {
    /// No LLM is configured.
    NoLlm,
    /// An LLM is configured but the call failed.
    LlmFailed,
    /// The model replied, but no answer could be rescued from the reply.
    NothingRescued,
    /// The model looped and a guard cut its answer to less than the
    /// minimum worth showing.
    LoopCut,
}

/// An extractive answer: markdown text quoting passages, and their citations.
#[derive(Debug, Clone, PartialEq)]
pub struct Extractive {
    /// The answer text (markdown).
    pub answer: String,
    /// One citation per quoted passage.
    pub citations: Vec<Citation>,
}

/// Builds the extractive answer from `passages` (best first).
///
/// ```
/// use deloop_oracle::extractive::{extractive_answer, ExtractiveReason};
/// use deloop_oracle::{Language, Passage};
/// let p = Passage { source: "docs/loops.md".into(), start_line: 1, end_line: 4,
///     heading_trail: vec!["Loops".into()], text: "Cut the stream.".into(), score: 1.0 };
/// let a = extractive_answer(&[p], Language::En, ExtractiveReason::NoLlm);
/// assert!(a.answer.starts_with("No LLM configured: here are the most relevant passages."));
/// assert_eq!(a.citations.len(), 1);
/// ```
pub fn extractive_answer(
    passages: &[Passage],
    lang: Language,
    reason: ExtractiveReason,
) -> Extractive {
    if passages.is_empty() {
        return Extractive {
            answer: nothing_found(lang).to_owned(),
            citations: Vec::new(),
        };
    }
    let mut answer = String::from(match reason {
        ExtractiveReason::NoLlm => extractive_heading(lang),
        ExtractiveReason::LlmFailed => llm_failed_heading(lang),
        ExtractiveReason::NothingRescued => nothing_rescued_heading(lang),
        ExtractiveReason::LoopCut => loop_cut_heading(lang),
    });
    let lines_word = match lang {
        Language::Es => "líneas",
        Language::En => "lines",
    };
    let mut citations = Vec::new();
    for (i, p) in passages.iter().take(MAX_EXTRACTIVE_PASSAGES).enumerate() {
        answer.push_str(&format!(
            "\n\n**[{}] {} ({} {}–{})**",
            i + 1,
            p.source,
            lines_word,
            p.start_line,
            p.end_line
        ));
        if !p.heading_trail.is_empty() {
            answer.push_str(" — ");
            answer.push_str(&p.heading_trail.join(" > "));
        }
        answer.push_str("\n\n");
        let text = truncate_chars(p.text.trim(), MAX_EXTRACTIVE_CHARS);
        for line in text.lines() {
            answer.push_str("> ");
            answer.push_str(line);
            answer.push('\n');
        }
        while answer.ends_with('\n') {
            answer.pop();
        }
        let c = Citation {
            source: p.source.clone(),
            start_line: p.start_line,
            end_line: p.end_line,
        };
        if !citations.contains(&c) {
            citations.push(c);
        }
    }
    Extractive { answer, citations }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(i: u32, text: &str) -> Passage {
        Passage {
            source: format!("docs/{i}.md"),
            start_line: i,
            end_line: i + 3,
            heading_trail: vec![],
            text: text.into(),
            score: 1.0,
        }
    }

    #[test]
    fn quotes_at_most_three_bounded_passages() {
        let ps: Vec<_> = (1..=5).map(|i| p(i, &"palabra ".repeat(500))).collect();
        let a = extractive_answer(&ps, Language::Es, ExtractiveReason::NoLlm);
        assert!(a.answer.starts_with("No hay ningún LLM configurado"));
        assert_eq!(a.citations.len(), 3);
        assert!(a.answer.chars().count() < 3 * (MAX_EXTRACTIVE_CHARS + 200));
        assert!(a.answer.contains("líneas 2–5"));
    }

    #[test]
    fn empty_retrieval_says_so() {
        let a = extractive_answer(&[], Language::En, ExtractiveReason::NoLlm);
        assert!(a.answer.contains("nothing in the index matches"));
        assert!(a.citations.is_empty());
        let a = extractive_answer(&[p(1, "x")], Language::En, ExtractiveReason::LlmFailed);
        assert!(a.answer.starts_with("The configured LLM failed"));
    }

    #[test]
    fn each_failure_has_its_own_note() {
        let ps = [p(1, "x")];
        let notes: Vec<String> = [
            ExtractiveReason::NoLlm,
            ExtractiveReason::LlmFailed,
            ExtractiveReason::NothingRescued,
            ExtractiveReason::LoopCut,
        ]
        .into_iter()
        .map(|r| {
            let a = extractive_answer(&ps, Language::En, r);
            a.answer.lines().next().unwrap().to_owned()
        })
        .collect();
        for (i, n) in notes.iter().enumerate() {
            assert!(notes[i + 1..].iter().all(|m| m != n), "{notes:?}");
        }
        let a = extractive_answer(&ps, Language::Es, ExtractiveReason::LoopCut);
        assert!(a.answer.starts_with("El modelo entró en un bucle"));
    }
}
