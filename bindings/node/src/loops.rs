//! The tool-call loop guard: `ToolLoopGuard` (live, call by call) and
//! `check` (a whole transcript, as `deloop check --json`). The OpenClaw
//! drop-in (`detectToolCallLoop`, …) is built on `ToolLoopGuard` in
//! `index.js`.

use deloop_bindings::{CheckRequest, LoopGuard};
use deloop_core::loops::replay::CallVerdict;
use deloop_sessions::{CallInput, ResultInput, ScopeInput, VerdictOut};
use napi::bindgen_prelude::Either;
use napi_derive::napi;
use serde_json::Value;

use crate::{js_err, TextIn};

/// The verdict on one tool call.
#[napi(object)]
pub struct Verdict {
    /// 0-based index of the call (in the guard's session or the transcript).
    pub index: u32,
    /// `ok`, `warning` or `critical` (critical: do not run the call).
    pub level: String,
    /// The detector that fired, or null.
    pub detector: Option<String>,
    /// The detector's count, or null.
    pub count: Option<u32>,
    /// A message for the model or the operator (empty when ok).
    pub message: String,
    /// `AGENT::<agent>::<operation>::<context>::<result-hash>` when not ok.
    pub fingerprint: Option<String>,
    /// The call id (`ToolLoopGuard`: the one given, or the one assigned).
    pub id: Option<String>,
    /// The tool called (`check`).
    pub tool: Option<String>,
    /// The run should end now.
    pub terminate_run: bool,
}

impl From<VerdictOut> for Verdict {
    fn from(v: VerdictOut) -> Self {
        Verdict {
            index: v.index as u32,
            level: v.level,
            detector: v.detector,
            count: v.count,
            message: v.message,
            fingerprint: v.fingerprint,
            id: Some(v.id),
            tool: None,
            terminate_run: v.terminate_run,
        }
    }
}

impl From<CallVerdict> for Verdict {
    fn from(c: CallVerdict) -> Self {
        let v = c.verdict;
        Verdict {
            index: c.index as u32,
            level: v.level.as_str().to_owned(),
            detector: v.detector.map(|d| d.as_str().to_owned()),
            count: v.count,
            message: v.message,
            fingerprint: v.fingerprint,
            id: None,
            tool: Some(c.tool.to_string()),
            terminate_run: false,
        }
    }
}

/// Options of `ToolLoopGuard.call`.
#[napi(object)]
#[derive(Default)]
pub struct CallOptions {
    /// The call id its result will name (deloop assigns one when absent).
    pub id: Option<String>,
    /// The agent (absent means `main`).
    pub agent: Option<String>,
    /// The run: history is compared within a run.
    pub run: Option<String>,
}

/// Options of `ToolLoopGuard.result`.
#[napi(object)]
#[derive(Default)]
pub struct ResultOptions {
    /// The tool's error text (instead of a result).
    pub error: Option<String>,
    /// The tool (finds the call when there is no id).
    pub tool: Option<String>,
    /// The arguments (finds the call when there is no id).
    pub args: Option<Value>,
    /// The agent of the call.
    pub agent: Option<String>,
    /// The run of the call.
    pub run: Option<String>,
}

/// Where a compaction happened.
#[napi(object)]
#[derive(Default)]
pub struct ScopeOptions {
    /// The agent (absent means `main`).
    pub agent: Option<String>,
    /// The run.
    pub run: Option<String>,
}

/// One agent's tool calls, judged as they happen (each call before it
/// runs), as a session of `deloop serve`'s session API judges them.
#[napi]
pub struct ToolLoopGuard {
    guard: LoopGuard,
    adjustments: Vec<String>,
}

#[napi]
impl ToolLoopGuard {
    /// `profile`: `default`, `openclaw` or `strict` (absent: the config's
    /// `profile`, else `default`); `config`: OpenClaw's
    /// `tools.loopDetection` settings (the full config or the bare block).
    #[napi(constructor)]
    pub fn new(profile: Option<String>, config: Option<Value>) -> napi::Result<Self> {
        let (guard, adjustments) =
            LoopGuard::new(profile.as_deref(), config.as_ref()).map_err(js_err)?;
        Ok(ToolLoopGuard { guard, adjustments })
    }

    /// Judges a call before it runs, and records it.
    #[napi]
    pub fn call(
        &mut self,
        tool: String,
        args: Option<Value>,
        options: Option<CallOptions>,
    ) -> napi::Result<Verdict> {
        let o = options.unwrap_or_default();
        let call = CallInput {
            tool,
            args: args.unwrap_or(Value::Null),
            id: o.id,
            agent: o.agent,
            run: o.run,
        };
        self.guard.call(call).map(Verdict::from).map_err(js_err)
    }

    /// Attaches a call's result (or `options.error`) to the call `id` (or,
    /// without id, to the oldest call of `options.tool` with
    /// `options.args` still waiting). Returns the call's new verdict when
    /// the result changed it, else null.
    #[napi]
    pub fn result(
        &mut self,
        id: Option<String>,
        result: Option<Value>,
        options: Option<ResultOptions>,
    ) -> napi::Result<Option<Verdict>> {
        let o = options.unwrap_or_default();
        let result = match (&o.error, result) {
            (Some(_), None) => None,
            (_, Some(r)) => Some(r),
            (None, None) => Some(Value::Null),
        };
        let input = ResultInput {
            id,
            tool: o.tool,
            args: o.args,
            agent: o.agent,
            run: o.run,
            result,
            error: o.error,
        };
        Ok(self.guard.result(input).map_err(js_err)?.map(Verdict::from))
    }

    /// Records a compaction of the agent's context (arms the
    /// post-compaction guard).
    #[napi]
    pub fn compaction(&mut self, options: Option<ScopeOptions>) -> napi::Result<()> {
        let o = options.unwrap_or_default();
        self.guard
            .compaction(ScopeInput {
                agent: o.agent,
                run: o.run,
            })
            .map_err(js_err)
    }

    /// Config values adjusted as OpenClaw adjusts them.
    #[napi(getter)]
    pub fn adjustments(&self) -> Vec<String> {
        self.adjustments.clone()
    }
}

/// Options of `check`.
#[napi(object)]
#[derive(Default)]
pub struct CheckOptions {
    /// `auto` (default), `events`, `openai` or `anthropic`.
    pub format: Option<String>,
    /// `default`, `openclaw` or `strict` (absent: the config's, else `default`).
    pub profile: Option<String>,
    /// OpenClaw's `tools.loopDetection` settings.
    pub config: Option<Value>,
    /// Replace invalid UTF-8 in a Buffer with U+FFFD instead of refusing it.
    pub lossy: Option<bool>,
}

/// Replays a transcript (deloop events JSON lines, OpenAI chat messages or
/// Anthropic messages; a string or a Buffer) through the tool-call loop
/// guard, as `deloop check --json`: one verdict per call.
#[napi]
pub fn check(transcript: TextIn, options: Option<CheckOptions>) -> napi::Result<Vec<Verdict>> {
    let o = options.unwrap_or_default();
    let request = CheckRequest {
        format: o.format.as_deref(),
        profile: o.profile.as_deref(),
        config: o.config.as_ref(),
        lossy: o.lossy.unwrap_or(false),
    };
    let lines = match &transcript {
        Either::A(s) => deloop_bindings::check(s.as_bytes(), &request),
        Either::B(b) => deloop_bindings::check(b, &request),
    }
    .map_err(js_err)?;
    Ok(lines.into_iter().map(Verdict::from).collect())
}
