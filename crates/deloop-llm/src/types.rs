//! Requests and results shared by both providers.

use std::time::Duration;

/// How strongly the answer is asked to be JSON.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum JsonMode {
    /// Free text.
    #[default]
    None,
    /// Any JSON object (Gemini `responseMimeType: application/json`,
    /// OpenAI `response_format: json_object`).
    Object,
    /// A JSON object matching this JSON Schema (Gemini `responseSchema`,
    /// OpenAI `response_format: json_schema`).
    Schema(serde_json::Value),
}

/// Who spoke an earlier turn of a dialogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Role {
    /// The user (Gemini role `user`, OpenAI role `user`).
    User,
    /// The model (Gemini role `model`, OpenAI role `assistant`).
    Assistant,
}

impl Role {
    /// `user` or `assistant`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One earlier turn of a dialogue, sent before the request's own prompt.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Turn {
    /// Who spoke.
    pub role: Role,
    /// What was said.
    pub content: String,
}

/// One generation request, provider-neutral: a system instruction, earlier
/// dialogue turns (none for a single-turn request) and the user's prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateRequest {
    /// The system instruction, if any.
    pub system: Option<String>,
    /// Earlier turns of the dialogue, oldest first, sent before `prompt`
    /// (Gemini `contents` with roles `user`/`model`, OpenAI `messages` with
    /// roles `user`/`assistant`).
    pub history: Vec<Turn>,
    /// The user turn.
    pub prompt: String,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Nucleus sampling.
    pub top_p: Option<f32>,
    /// Top-k sampling (Gemini only; OpenAI-compatible servers ignore it).
    pub top_k: Option<u32>,
    /// Output token limit.
    pub max_output_tokens: Option<u32>,
    /// Ask for JSON output.
    pub json: JsonMode,
    /// Deadline for the whole call, retries and backoff included.
    pub timeout: Duration,
}

/// Default timeout of a [`GenerateRequest`]: 60 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

impl GenerateRequest {
    /// A plain request for `prompt` with provider defaults and a 60 s timeout.
    pub fn new(prompt: impl Into<String>) -> Self {
        GenerateRequest {
            system: None,
            history: Vec::new(),
            prompt: prompt.into(),
            temperature: None,
            top_p: None,
            top_k: None,
            max_output_tokens: None,
            json: JsonMode::None,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// Why the model stopped generating.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    /// Natural end of the answer.
    Stop,
    /// The output token limit was hit: the text (and any JSON in it) may be
    /// truncated; callers should still try to rescue it.
    MaxTokens,
    /// Stopped by deloop's streaming loop guard (see `Generation::loop_cut`).
    LoopCut,
    /// Any other provider reason, verbatim.
    Other(String),
}

/// Token counts reported by the provider, when it reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Tokens in the prompt.
    pub prompt_tokens: Option<u32>,
    /// Tokens in the answer.
    pub output_tokens: Option<u32>,
    /// Thinking tokens (Gemini `thoughtsTokenCount`).
    pub thought_tokens: Option<u32>,
}

/// A finished (possibly guard-cut) generation.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// The answer: concatenated non-thought text, cut by the loop guard when
    /// it fired (followed by the guard's marker, if it has one).
    pub text: String,
    /// Why generation ended.
    pub finish: FinishReason,
    /// True when the text may be incomplete: the token limit was hit
    /// ([`FinishReason::MaxTokens`]) or the loop guard cut the stream.
    pub truncated: bool,
    /// The model that answered (as sent in the request).
    pub model: String,
    /// The loop guard's report when it cut a streamed answer.
    pub loop_cut: Option<deloop_core::repetition::ClampReport>,
    /// Characters (Unicode scalar values) of answer text that had been
    /// received but were discarded because they came after the guard's cut
    /// point. Tokens the server never generated because the request was
    /// cancelled are not knowable and are not counted or estimated. 0 when
    /// the guard did not fire.
    pub saved_chars: usize,
    /// HTTP attempts made (1 when the first attempt succeeded; retries and
    /// capability fallbacks add to it).
    pub attempts: u32,
    /// Token counts, when the provider reported them.
    pub usage: Usage,
}

impl Generation {
    /// A generation that ran to the provider's own end: truncated only when
    /// `finish` is [`FinishReason::MaxTokens`], no loop cut.
    pub(crate) fn ended(
        text: String,
        finish: FinishReason,
        model: String,
        attempts: u32,
        usage: Usage,
    ) -> Generation {
        Generation {
            text,
            truncated: finish == FinishReason::MaxTokens,
            finish,
            model,
            loop_cut: None,
            saved_chars: 0,
            attempts,
            usage,
        }
    }
}

/// The instruction appended to the prompt when JSON output cannot be
/// requested through the API (Gemma without JSON mode, OpenAI-compatible
/// servers without `response_format`).
pub(crate) fn json_instruction(mode: &JsonMode) -> Option<String> {
    match mode {
        JsonMode::None => None,
        JsonMode::Object => Some(
            "Reply with one JSON object only: no markdown code fences, no text before or after it."
                .to_string(),
        ),
        JsonMode::Schema(schema) => Some(format!(
            "Reply with one JSON object only: no markdown code fences, no text before or after it. \
             It must match this JSON Schema:\n{schema}"
        )),
    }
}

/// The prompt with the system instruction folded in and/or the JSON
/// instruction appended, for servers that reject either feature.
pub(crate) fn fold_prompt(
    req: &GenerateRequest,
    fold_system: bool,
    json_in_prompt: bool,
) -> String {
    let mut out = String::new();
    if fold_system {
        if let Some(system) = req.system.as_deref().filter(|s| !s.trim().is_empty()) {
            out.push_str(system.trim_end());
            out.push_str("\n\n");
        }
    }
    out.push_str(&req.prompt);
    if json_in_prompt {
        if let Some(instr) = json_instruction(&req.json) {
            out.push_str("\n\n");
            out.push_str(&instr);
        }
    }
    out
}
