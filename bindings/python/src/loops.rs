//! The tool-call loop guard: `ToolLoopGuard` (live, call by call) and
//! `check` (a whole transcript, as `deloop check --json`).

use std::sync::{Mutex, MutexGuard};

use deloop_bindings::{CheckRequest, LoopGuard};
use deloop_core::loops::replay::CallVerdict;
use deloop_sessions::{CallInput, ResultInput, ScopeInput, VerdictOut};
use pyo3::prelude::*;

use crate::convert::{to_json, TextIn};
use crate::{guarded, py_err};

/// The verdict on one tool call.
#[pyclass(frozen, get_all, module = "deloop")]
#[derive(Clone)]
pub struct Verdict {
    /// 0-based index of the call (in the guard's session or the transcript).
    index: usize,
    /// `ok`, `warning` or `critical` (critical: do not run the call).
    level: String,
    /// The detector that fired, or None.
    detector: Option<String>,
    /// The detector's count, or None.
    count: Option<u32>,
    /// A message for the model or the operator (empty when ok).
    message: String,
    /// `AGENT::<agent>::<operation>::<context>::<result-hash>` when not ok.
    fingerprint: Option<String>,
    /// The call id (`ToolLoopGuard`: the one given, or the one assigned).
    id: Option<String>,
    /// The tool called (`check`).
    tool: Option<String>,
    /// The run should end now.
    terminate_run: bool,
}

#[pymethods]
impl Verdict {
    fn __repr__(&self) -> String {
        match (&self.detector, self.count) {
            (Some(d), Some(n)) => format!(
                "Verdict(index={}, level={:?}, detector={d:?}, count={n})",
                self.index, self.level
            ),
            _ => format!("Verdict(index={}, level={:?})", self.index, self.level),
        }
    }
}

impl From<VerdictOut> for Verdict {
    fn from(v: VerdictOut) -> Self {
        Verdict {
            index: v.index,
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
            index: c.index,
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

/// One agent's tool calls, judged as they happen (each call before it
/// runs), as a session of `deloop serve`'s session API judges them.
#[pyclass(module = "deloop")]
pub struct ToolLoopGuard {
    /// The guard is not `Sync` (lazily compiled regexes); Python objects
    /// may be shared between threads, so calls take turns.
    guard: Mutex<LoopGuard>,
    adjustments: Vec<String>,
}

impl ToolLoopGuard {
    /// The guard (a panic cannot leave it half-updated: the pure guard
    /// does not panic, and a poisoned lock is taken as it stands).
    fn lock(&self) -> MutexGuard<'_, LoopGuard> {
        self.guard.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl ToolLoopGuard {
    /// `profile`: `default`, `openclaw` or `strict` (None: the config's
    /// `profile`, else `default`). `config`: OpenClaw's
    /// `tools.loopDetection` settings as a dict (the full config or the
    /// bare block).
    #[new]
    #[pyo3(signature = (profile=None, config=None))]
    fn new(profile: Option<String>, config: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let config = match config {
            Some(c) => Some(to_json("config", c)?),
            None => None,
        };
        let (guard, adjustments) =
            LoopGuard::new(profile.as_deref(), config.as_ref()).map_err(py_err)?;
        Ok(ToolLoopGuard {
            guard: Mutex::new(guard),
            adjustments,
        })
    }

    /// Judges a call before it runs, and records it.
    #[pyo3(signature = (tool, args=None, id=None, *, agent=None, run=None))]
    fn call(
        &mut self,
        tool: String,
        args: Option<&Bound<'_, PyAny>>,
        id: Option<String>,
        agent: Option<String>,
        run: Option<String>,
    ) -> PyResult<Verdict> {
        let args = match args {
            Some(a) => to_json("args", a)?,
            None => serde_json::Value::Null,
        };
        let call = CallInput {
            tool,
            args,
            id,
            agent,
            run,
        };
        self.lock().call(call).map(Verdict::from).map_err(py_err)
    }

    /// Attaches a call's result (or `error`, a string) to the call `id`
    /// (or, without id, to the oldest call of `tool` with `args` still
    /// waiting). Returns the call's new verdict when the result changed it
    /// (the post-compaction guard, the strict protocol), else None.
    #[pyo3(signature = (id=None, result=None, *, error=None, tool=None, args=None, agent=None, run=None))]
    #[allow(clippy::too_many_arguments)]
    fn result(
        &mut self,
        id: Option<String>,
        result: Option<&Bound<'_, PyAny>>,
        error: Option<String>,
        tool: Option<String>,
        args: Option<&Bound<'_, PyAny>>,
        agent: Option<String>,
        run: Option<String>,
    ) -> PyResult<Option<Verdict>> {
        let result = match (&error, result) {
            (Some(_), None) => None,
            (_, Some(r)) => Some(to_json("result", r)?),
            (None, None) => Some(serde_json::Value::Null),
        };
        let args = match args {
            Some(a) => Some(to_json("args", a)?),
            None => None,
        };
        let input = ResultInput {
            id,
            tool,
            args,
            agent,
            run,
            result,
            error,
        };
        Ok(self
            .lock()
            .result(input)
            .map_err(py_err)?
            .map(Verdict::from))
    }

    /// Records a compaction of the agent's context (arms the
    /// post-compaction guard).
    #[pyo3(signature = (*, agent=None, run=None))]
    fn compaction(&mut self, agent: Option<String>, run: Option<String>) -> PyResult<()> {
        self.lock()
            .compaction(ScopeInput { agent, run })
            .map_err(py_err)
    }

    /// Config values that were out of OpenClaw's range and adjusted as
    /// OpenClaw adjusts them (`config KEY: FROM adjusted to TO (why)`).
    #[getter]
    fn adjustments(&self) -> Vec<String> {
        self.adjustments.clone()
    }
}

/// Replays a transcript (deloop events JSON lines, OpenAI chat messages or
/// Anthropic messages; `str` or `bytes`) through the tool-call loop guard,
/// as `deloop check --json`: one verdict per call.
#[pyfunction]
#[pyo3(signature = (transcript, *, format=None, profile=None, config=None, lossy=false))]
pub fn check(
    py: Python<'_>,
    transcript: TextIn<'_>,
    format: Option<String>,
    profile: Option<String>,
    config: Option<&Bound<'_, PyAny>>,
    lossy: bool,
) -> PyResult<Vec<Verdict>> {
    let config = match config {
        Some(c) => Some(to_json("config", c)?),
        None => None,
    };
    let bytes = transcript.as_bytes();
    let request = CheckRequest {
        format: format.as_deref(),
        profile: profile.as_deref(),
        config: config.as_ref(),
        lossy,
    };
    let lines =
        guarded(py, bytes.len(), || deloop_bindings::check(bytes, &request)).map_err(py_err)?;
    Ok(lines.into_iter().map(Verdict::from).collect())
}
