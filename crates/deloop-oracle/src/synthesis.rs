//! The reply pipeline of `synthesizeAnswer`, as a pure function over the
//! model's raw reply:
//!
//! 1. JSON rescue of `answer` (and of `citations`), also on replies cut at
//!    the token limit (`MAX_TOKENS`);
//! 2. the word guard;
//! 3. the substring guard;
//! 4. the degraded fallback of the mode and language (`degraded: true`) when
//!    nothing was rescued or a cut left fewer than 20 characters.
//!
//! A refused reply (`SAFETY`, `RECITATION`, …) becomes an honest refusal
//! message instead. Citations are checked against the retrieved passages
//! ([`crate::citations`]).

use deloop_core::pipeline::{guard_answer, AnswerGuardConfig};
use deloop_core::repetition::ClampConfig;
use deloop_core::rescue::rescue;
use serde::Serialize;

use crate::citations::check_citations;
use crate::language::Language;
use crate::messages::{generic_fallback, refusal};
use crate::types::{Citation, Mode, Passage};

/// How the model's reply ended, as far as the pipeline cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyEnd {
    /// The model finished normally.
    Complete,
    /// The reply was cut at the output token limit: rescue it anyway.
    MaxTokens,
    /// The streaming loop guard cut the reply (and cancelled the request):
    /// rescue what came before the cut.
    LoopCut,
    /// The provider refused or blocked the reply; the reason code is kept.
    Refused(String),
}

/// Why the answer shown is not the model's own (complete) answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DegradedReason {
    /// No `answer` could be rescued from the reply (or it was empty).
    NothingRescued,
    /// A loop cut left fewer than the minimum characters.
    LoopTooShort,
    /// The provider refused to answer.
    Refused,
}

/// A synthesised answer after the guards.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Synthesis {
    /// The text to show.
    pub answer: String,
    /// True when a fallback or refusal message replaced the model's answer.
    pub degraded: bool,
    /// Why it is degraded, when it is.
    pub degraded_reason: Option<DegradedReason>,
    /// True when a repetition guard cut the answer.
    pub clamped: bool,
    /// Characters removed by the repetition guards (0 when none fired).
    pub clamped_chars: usize,
    /// True when the reply was cut at the token limit and rescued anyway.
    pub truncated: bool,
    /// The refusal reason code, when the provider refused.
    pub refusal: Option<String>,
    /// The repairs the JSON rescue applied (snake_case names).
    pub repairs: Vec<String>,
    /// Citations of retrieved passages.
    pub citations: Vec<Citation>,
    /// How many cited items were dropped (not retrieved or malformed).
    pub dropped_citations: usize,
}

/// Guard settings of the reply pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyGuards {
    /// The repetition guards (word and substring).
    pub clamp: ClampConfig,
    /// Minimum characters left after a cut before the fallback replaces it (20).
    pub min_chars: usize,
}

impl Default for ReplyGuards {
    fn default() -> Self {
        ReplyGuards {
            clamp: ClampConfig::default(),
            min_chars: 20,
        }
    }
}

fn repair_names(repairs: &[deloop_core::rescue::Repair]) -> Vec<String> {
    repairs
        .iter()
        .filter_map(|r| serde_json::to_value(r).ok())
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

fn strip_markers<'a>(text: &'a str, clamp: &ClampConfig) -> &'a str {
    let mut t = text.trim_end();
    for marker in [clamp.words.marker.trim(), clamp.substring.marker.trim()] {
        if !marker.is_empty() {
            t = t.strip_suffix(marker).unwrap_or(t).trim_end();
        }
    }
    t
}

/// Runs the reply pipeline over the raw model reply.
///
/// ```
/// use deloop_oracle::synthesis::{finish_reply, ReplyEnd, ReplyGuards};
/// use deloop_oracle::{Language, Mode};
/// // The seed's PR #96 case: an unescaped inner quote in markdown.
/// let raw = r#"{"answer": "**Auditoría Suprema** "la revisión final" de todo el sistema."}"#;
/// let s = finish_reply(raw, &ReplyEnd::Complete, Mode::Oracle, Language::Es, &[], &ReplyGuards::default());
/// assert!(s.answer.starts_with("**Auditoría Suprema** \"la revisión final\""));
/// assert!(!s.degraded);
/// ```
pub fn finish_reply(
    raw: &str,
    end: &ReplyEnd,
    mode: Mode,
    lang: Language,
    passages: &[Passage],
    guards: &ReplyGuards,
) -> Synthesis {
    let mut out = Synthesis {
        answer: String::new(),
        degraded: false,
        degraded_reason: None,
        clamped: false,
        clamped_chars: 0,
        truncated: matches!(end, ReplyEnd::MaxTokens | ReplyEnd::LoopCut),
        refusal: None,
        repairs: Vec::new(),
        citations: Vec::new(),
        dropped_citations: 0,
    };
    if let ReplyEnd::Refused(reason) = end {
        out.answer = refusal(reason, lang);
        out.degraded = true;
        out.degraded_reason = Some(DegradedReason::Refused);
        out.refusal = Some(reason.clone());
        return out;
    }
    let fallback = generic_fallback(mode, lang);
    let rescued = match rescue(raw, "answer") {
        Ok(r) => {
            out.repairs = repair_names(&r.repairs);
            r.as_text()
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty())
        }
        Err(err) => {
            tracing::debug!(%err, "no answer rescued from the reply");
            None
        }
    };
    let Some(text) = rescued else {
        out.answer = fallback.to_owned();
        out.degraded = true;
        out.degraded_reason = Some(DegradedReason::NothingRescued);
        return out;
    };
    if let Ok(c) = rescue(raw, "citations") {
        let checked = check_citations(&c.value, passages);
        out.citations = checked.kept;
        out.dropped_citations = checked.dropped;
    }
    let core_lang = match lang {
        Language::Es => deloop_core::pipeline::Language::Es,
        Language::En => deloop_core::pipeline::Language::En,
    };
    let config = AnswerGuardConfig {
        clamp: guards.clamp.clone(),
        min_chars: guards.min_chars,
        fallback: fallback.to_owned(),
        ..AnswerGuardConfig::for_language(core_lang)
    };
    let mut guarded = guard_answer(&text, &config);
    if *end == ReplyEnd::LoopCut {
        // The streaming guard already cut the loop; what is left must still
        // be worth showing.
        guarded.clamped = true;
        let useful = strip_markers(&guarded.text, &guards.clamp).chars().count();
        if !guarded.degraded && useful < guards.min_chars {
            guarded.text = fallback.to_owned();
            guarded.degraded = true;
        }
    }
    out.clamped = guarded.clamped;
    if guarded.clamped && !guarded.degraded {
        out.clamped_chars = text
            .chars()
            .count()
            .saturating_sub(guarded.text.chars().count());
    } else if guarded.degraded {
        out.clamped_chars = text.chars().count();
    }
    out.degraded = guarded.degraded;
    if guarded.degraded {
        out.degraded_reason = Some(DegradedReason::LoopTooShort);
    }
    out.answer = guarded.text;
    out
}

/// Settings of one answer call.
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerOptions {
    /// The mode.
    pub mode: Mode,
    /// The answer language.
    pub language: Language,
    /// Stream the reply under the streaming loop guard.
    pub stream: bool,
    /// Deadline of the call, retries included.
    pub timeout: std::time::Duration,
    /// Output token limit.
    pub max_output_tokens: u32,
    /// Sampling temperature.
    pub temperature: f32,
    /// The answer guards.
    pub guards: ReplyGuards,
    /// Earlier turns of the dialogue, oldest first (already bounded by
    /// [`crate::prompts::history_turns`]); empty for a single question.
    pub history: Vec<deloop_llm::Turn>,
}

impl Default for AnswerOptions {
    fn default() -> Self {
        AnswerOptions {
            mode: Mode::Oracle,
            language: Language::En,
            stream: true,
            timeout: std::time::Duration::from_secs(60),
            max_output_tokens: 2048,
            temperature: 0.4,
            guards: ReplyGuards::default(),
            history: Vec::new(),
        }
    }
}

/// An answer synthesised by an LLM, with what happened on the wire.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LlmAnswer {
    /// The guarded answer.
    #[serde(flatten)]
    pub synthesis: Synthesis,
    /// The model that answered.
    pub model: String,
    /// True when the reply was streamed.
    pub streamed: bool,
    /// True when the streaming loop guard cut the reply and cancelled the request.
    pub loop_cut: bool,
    /// Characters received after the cut and discarded (0 when not cut).
    pub saved_chars: usize,
    /// What the streaming loop guard found, when it cut the reply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loop_report: Option<deloop_core::repetition::ClampReport>,
    /// HTTP attempts made (retries and capability fallbacks included).
    pub attempts: u32,
}

/// The generation request of an answer prompt.
pub fn answer_request(
    question: &str,
    passages: &[Passage],
    opts: &AnswerOptions,
) -> deloop_llm::GenerateRequest {
    let prompt = crate::prompts::answer_prompt(opts.mode, opts.language, question, passages);
    let mut req = deloop_llm::GenerateRequest::new(prompt.user);
    req.system = Some(prompt.system);
    req.history = opts.history.clone();
    req.json = deloop_llm::JsonMode::Schema(prompt.schema);
    req.temperature = Some(opts.temperature);
    req.max_output_tokens = Some(opts.max_output_tokens);
    req.timeout = opts.timeout;
    req
}

/// Asks `client` to answer `question` from `passages` and runs the reply
/// pipeline. Streaming (when `opts.stream`) goes through the streaming loop
/// guard, which cancels the request on a loop; `on_answer` then receives
/// the answer text as it arrives (rescued from the partial JSON). A refusal
/// becomes an honest message; any other failure is returned as an error so
/// the caller can fall back to an extractive answer.
pub async fn synthesize(
    client: &deloop_llm::LlmClient,
    question: &str,
    passages: &[Passage],
    opts: &AnswerOptions,
    cancel: &deloop_llm::CancellationToken,
    mut on_answer: impl FnMut(&str),
) -> Result<LlmAnswer, deloop_llm::LlmError> {
    let req = answer_request(question, passages, opts);
    let result = if opts.stream {
        let mut partial = deloop_core::rescue::PartialExtractor::new("answer");
        let streamed = client
            .generate_stream(&req, cancel, Some(opts.guards.clamp.clone()), |delta| {
                let text = partial.push(delta);
                if !text.is_empty() {
                    on_answer(text);
                }
            })
            .await;
        // The extractor holds back text the end-of-input rules could still
        // drop; the stream has ended, so flush it.
        if streamed.is_ok() {
            let rest = partial.finish();
            if !rest.is_empty() {
                on_answer(rest);
            }
        }
        streamed
    } else {
        client.generate(&req, cancel).await
    };
    let generation = match result {
        Ok(g) => g,
        Err(deloop_llm::LlmError::Refused { reason }) => {
            tracing::warn!(%reason, "the model refused to answer");
            let synthesis = finish_reply(
                "",
                &ReplyEnd::Refused(reason),
                opts.mode,
                opts.language,
                passages,
                &opts.guards,
            );
            return Ok(LlmAnswer {
                synthesis,
                model: client.model().to_owned(),
                streamed: opts.stream,
                loop_cut: false,
                saved_chars: 0,
                loop_report: None,
                attempts: 0,
            });
        }
        Err(e) => return Err(e),
    };
    let end = match &generation.finish {
        deloop_llm::FinishReason::MaxTokens => ReplyEnd::MaxTokens,
        deloop_llm::FinishReason::LoopCut => ReplyEnd::LoopCut,
        _ if generation.loop_cut.is_some() => ReplyEnd::LoopCut,
        _ => ReplyEnd::Complete,
    };
    let synthesis = finish_reply(
        &generation.text,
        &end,
        opts.mode,
        opts.language,
        passages,
        &opts.guards,
    );
    Ok(LlmAnswer {
        synthesis,
        model: generation.model,
        streamed: opts.stream,
        loop_cut: end == ReplyEnd::LoopCut,
        saved_chars: generation.saved_chars,
        loop_report: generation.loop_cut,
        attempts: generation.attempts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passages() -> Vec<Passage> {
        vec![Passage {
            source: "docs/loops.md".into(),
            start_line: 10,
            end_line: 30,
            heading_trail: vec![],
            text: "Stop the stream when the watcher fires.".into(),
            score: 1.0,
        }]
    }

    fn run(raw: &str, end: ReplyEnd, mode: Mode, lang: Language) -> Synthesis {
        finish_reply(raw, &end, mode, lang, &passages(), &ReplyGuards::default())
    }

    #[test]
    fn valid_json_with_one_bogus_citation() {
        let raw = r#"{"answer": "Cancel the request when the **watcher** fires.", "citations": [
            {"source": "docs/loops.md", "start_line": 12, "end_line": 14},
            {"source": "docs/made-up.md", "start_line": 1, "end_line": 3}]}"#;
        let s = run(raw, ReplyEnd::Complete, Mode::Oracle, Language::En);
        assert_eq!(s.answer, "Cancel the request when the **watcher** fires.");
        assert!(!s.degraded);
        assert_eq!(s.citations.len(), 1);
        assert_eq!(s.dropped_citations, 1);
    }

    #[test]
    fn seed_broken_replies_are_rescued() {
        // Garbage after the closing brace, raw newline inside the string.
        let raw = "{\"answer\": \"Línea uno\nlínea dos con la respuesta completa.\"}\n```garbage";
        let s = run(raw, ReplyEnd::Complete, Mode::Help, Language::Es);
        assert_eq!(s.answer, "Línea uno\nlínea dos con la respuesta completa.");
        assert!(!s.degraded);
        // Correct escapes.
        let raw = r#"{"answer": "Usa \"deloop clamp\"\ty sigue.\nFin."}"#;
        let s = run(raw, ReplyEnd::Complete, Mode::Help, Language::Es);
        assert_eq!(s.answer, "Usa \"deloop clamp\"\ty sigue.\nFin.");
    }

    #[test]
    fn max_tokens_is_rescued() {
        let raw = r#"{"answer": "The watcher cuts the stream as soon as a loop is seen and the"#;
        let s = run(raw, ReplyEnd::MaxTokens, Mode::Oracle, Language::En);
        assert!(s.truncated);
        assert!(!s.degraded);
        assert!(s.answer.starts_with("The watcher cuts the stream"));
    }

    #[test]
    fn nothing_rescued_gives_the_mode_fallback() {
        for (mode, lang) in [(Mode::Oracle, Language::Es), (Mode::Tutor, Language::En)] {
            let s = run(
                "I cannot produce JSON today.",
                ReplyEnd::Complete,
                mode,
                lang,
            );
            assert!(s.degraded);
            assert_eq!(s.degraded_reason, Some(DegradedReason::NothingRescued));
            assert_eq!(s.answer, generic_fallback(mode, lang));
        }
        let s = run(
            r#"{"answer": "   "}"#,
            ReplyEnd::Complete,
            Mode::Help,
            Language::En,
        );
        assert_eq!(s.answer, generic_fallback(Mode::Help, Language::En));
    }

    #[test]
    fn word_loop_is_clamped() {
        let looping =
            "la continuación de un proceso de automatización automático o la de ".repeat(40);
        let raw = serde_json::json!({
            "answer": format!("El guardián corta los bucles así: {looping}")
        })
        .to_string();
        let s = run(&raw, ReplyEnd::Complete, Mode::Oracle, Language::Es);
        assert!(s.clamped);
        assert!(!s.degraded);
        assert!(s.answer.len() < 400, "{}", s.answer);
        assert!(s.clamped_chars > 1000);
    }

    #[test]
    fn substring_loop_to_nothing_degrades_in_the_right_language() {
        let raw = serde_json::json!({"answer": format!("ok {}", "resak-".repeat(300))}).to_string();
        let es = run(&raw, ReplyEnd::Complete, Mode::Help, Language::Es);
        assert!(es.degraded);
        assert_eq!(es.degraded_reason, Some(DegradedReason::LoopTooShort));
        assert_eq!(es.answer, generic_fallback(Mode::Help, Language::Es));
        let en = run(&raw, ReplyEnd::Complete, Mode::Tutor, Language::En);
        assert_eq!(en.answer, generic_fallback(Mode::Tutor, Language::En));
    }

    #[test]
    fn loop_cut_keeps_what_came_before_or_degrades() {
        let raw = r#"{"answer": "The watcher cut this answer after a long and useful first sentence. […]"#;
        let s = run(raw, ReplyEnd::LoopCut, Mode::Oracle, Language::En);
        assert!(s.clamped && s.truncated && !s.degraded, "{s:?}");
        let s = run(
            r#"{"answer": "Short […]"#,
            ReplyEnd::LoopCut,
            Mode::Help,
            Language::Es,
        );
        assert!(s.degraded);
        assert_eq!(s.answer, generic_fallback(Mode::Help, Language::Es));
    }

    #[test]
    fn hostile_replies_never_panic() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let huge = format!("{{\"answer\": \"{}\"}}", "palabra ".repeat(200_000));
        for raw in [
            deep.as_str(),
            huge.as_str(),
            "\u{0}\u{feff}{",
            "{\"answer\": 42}",
        ] {
            let s = run(raw, ReplyEnd::Complete, Mode::Oracle, Language::En);
            assert!(!s.answer.is_empty());
        }
    }

    proptest::proptest! {
        #[test]
        fn any_reply_gives_a_non_empty_answer(raw in ".{0,400}", cut in proptest::bool::ANY) {
            let end = if cut { ReplyEnd::LoopCut } else { ReplyEnd::Complete };
            let s = run(&raw, end, Mode::Tutor, Language::Es);
            proptest::prop_assert!(!s.answer.trim().is_empty());
            if s.degraded {
                proptest::prop_assert_eq!(s.answer, generic_fallback(Mode::Tutor, Language::Es));
            }
        }
    }

    #[test]
    fn refusal_is_honest() {
        let s = run(
            "",
            ReplyEnd::Refused("SAFETY".into()),
            Mode::Oracle,
            Language::En,
        );
        assert!(s.degraded);
        assert_eq!(s.refusal.as_deref(), Some("SAFETY"));
        assert!(s.answer.contains("declined"));
    }
}
