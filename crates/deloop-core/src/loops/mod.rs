//! Tool-call loop detection for agents.
//!
//! One engine, three [`Profile`]s:
//! * `openclaw` reproduces OpenClaw's `tools.loopDetection` verdicts (level,
//!   detector and count on every call);
//! * `default` is deloop's own: OpenClaw's detectors plus back-to-back streaks
//!   and cycles up to `maxCycleLength` calls, `no_progress` (one tool
//!   returning the same result back to back whatever its arguments),
//!   content-based hashing of plain results and sticky blocks — never
//!   critical while results change;
//! * `strict` adds the anti-loop protocol: the same procedure with the same
//!   result twice in a row terminates, with a fingerprint
//!   `AGENT::<agent>::<operation>::<context>::<result-hash>`; calls whose
//!   arguments differ only in spelling ([`normalise`]) are one procedure.
//!
//! The [`Guard`] is fed events: a call (judged *before* it runs), its
//! outcome, a compaction, a new user turn. It does no I/O.
//!
//! ```
//! use deloop_core::loops::{Guard, Level, LoopConfig, Outcome, OutcomeBody, Profile, ToolCall};
//! use serde_json::json;
//!
//! let mut guard = Guard::new(Profile::Default, LoopConfig::default());
//! let args = json!({"command": "cat missing.txt"});
//! let result = json!({"content": [{"type": "text", "text": "No such file"}]});
//! let mut last = Level::Ok;
//! for i in 0..12 {
//!     let id = format!("c{i}");
//!     let verdict = guard.on_call(&ToolCall::new("bash", &args).id(&id));
//!     last = verdict.level;
//!     if verdict.level == Level::Critical {
//!         assert!(verdict.fingerprint.unwrap().starts_with("AGENT::main::"));
//!         break;
//!     }
//!     guard.on_outcome(&Outcome::new(OutcomeBody::Result(&result)).id(&id));
//! }
//! assert_eq!(last, Level::Critical);
//! ```

pub mod config;
pub mod detectors;
pub mod guard;
pub mod hashing;
pub mod normalise;
pub mod outcome;
pub mod profile;
pub mod replay;
pub mod reply_calls;
pub mod strict;
pub mod transcript;

pub use config::{Adjustment, ConfigError, Detectors, LoopConfig, Settings};
pub use guard::Guard;
pub use outcome::OutcomeBody;
pub use profile::Profile;
pub use strict::{ArgEquivalence, Procedure, SearchEquivalence};

use serde_json::Value;

/// The `id`, `run` and `agent` builder methods of a type with `call_id`,
/// `run_id` and `agent_id` fields ([`ToolCall`], [`Outcome`]).
macro_rules! id_setters {
    () => {
        /// Sets the call id.
        pub fn id(mut self, id: &'a str) -> Self {
            self.call_id = Some(id);
            self
        }

        /// Sets the run id.
        pub fn run(mut self, run: &'a str) -> Self {
            self.run_id = Some(run);
            self
        }

        /// Sets the agent id.
        pub fn agent(mut self, agent: &'a str) -> Self {
            self.agent_id = Some(agent);
            self
        }
    };
}

/// A tool call, judged before it executes.
#[derive(Debug, Clone, Copy)]
pub struct ToolCall<'a> {
    /// Tool name as the model wrote it (normalised by the guard).
    pub tool: &'a str,
    /// Arguments (any JSON; usually an object).
    pub args: &'a Value,
    /// The call id, used to attach its outcome.
    pub call_id: Option<&'a str>,
    /// The run id: history is compared only within a run (trimmed).
    pub run_id: Option<&'a str>,
    /// The agent id (absent means `main`).
    pub agent_id: Option<&'a str>,
}

impl<'a> ToolCall<'a> {
    /// A call without id, run or agent.
    pub fn new(tool: &'a str, args: &'a Value) -> Self {
        ToolCall {
            tool,
            args,
            call_id: None,
            run_id: None,
            agent_id: None,
        }
    }

    id_setters!();

    /// The call's scope.
    pub fn scope(&self) -> Scope<'a> {
        Scope {
            agent_id: self.agent_id,
            run_id: self.run_id,
        }
    }
}

/// The outcome of an executed call.
#[derive(Debug, Clone, Copy)]
pub struct Outcome<'a> {
    /// The call id it answers (`None`: the oldest call still waiting in the scope).
    pub call_id: Option<&'a str>,
    /// The run id of the call.
    pub run_id: Option<&'a str>,
    /// The agent id of the call.
    pub agent_id: Option<&'a str>,
    /// The call's tool (with [`Outcome::args`]; see [`Outcome::call`]).
    pub tool: Option<&'a str>,
    /// The call's arguments (with [`Outcome::tool`]).
    pub args: Option<&'a Value>,
    /// A JSON result or an error text.
    pub body: OutcomeBody<'a>,
}

impl<'a> Outcome<'a> {
    /// An outcome without id, run or agent.
    pub fn new(body: OutcomeBody<'a>) -> Self {
        Outcome {
            call_id: None,
            run_id: None,
            agent_id: None,
            tool: None,
            args: None,
            body,
        }
    }

    /// Names the call this outcome answers (its tool and arguments, as
    /// given to [`Guard::on_call`]). The outcome then attaches only to a
    /// waiting call with the same tool and arguments, and when no such call
    /// is in the window any more (or it was never seen), it is recorded as
    /// a call of its own with this outcome, as OpenClaw does. Without it the
    /// outcome attaches by id alone and is ignored when nothing matches.
    ///
    /// ```
    /// use deloop_core::loops::{Guard, Level, LoopConfig, Outcome, OutcomeBody, Profile, ToolCall};
    /// use serde_json::json;
    ///
    /// let mut guard = Guard::new(Profile::OpenClaw, LoopConfig::default());
    /// let (args, result) = (json!({"path": "/a"}), json!("same"));
    /// // Ten calls whose results come back only after 30 other calls.
    /// for i in 0..10 {
    ///     guard.on_call(&ToolCall::new("read", &args).id(&format!("a{i}")));
    /// }
    /// for i in 0..30 {
    ///     guard.on_call(&ToolCall::new("read", &json!({"path": i})));
    /// }
    /// for i in 0..10 {
    ///     let id = format!("a{i}");
    ///     guard.on_outcome(&Outcome::new(OutcomeBody::Result(&result)).id(&id).call("read", &args));
    /// }
    /// // The ten late outcomes were recorded as calls: ten identical calls in view.
    /// let verdict = guard.on_call(&ToolCall::new("read", &args));
    /// assert_eq!((verdict.level, verdict.count), (Level::Warning, Some(10)));
    /// ```
    pub fn call(mut self, tool: &'a str, args: &'a Value) -> Self {
        self.tool = Some(tool);
        self.args = Some(args);
        self
    }

    id_setters!();
}

/// Where history lives: one agent, one run (or no run).
#[derive(Debug, Clone, Copy, Default)]
pub struct Scope<'a> {
    /// The agent id (absent means `main`).
    pub agent_id: Option<&'a str>,
    /// The run id (trimmed; empty means none).
    pub run_id: Option<&'a str>,
}

/// Severity of a verdict: `ok`, `warning` (a loop is forming; the call may
/// run) or `critical` (do not run the call).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(
    feature = "openapi",
    derive(utoipa::ToSchema),
    schema(as = LoopLevel, rename_all = "lowercase")
)]
pub enum Level {
    /// Nothing to report.
    Ok,
    /// A loop is forming; the call may run.
    Warning,
    /// Block the call (the runtime should not execute it).
    Critical,
}

impl Level {
    /// Every level, mildest first.
    pub const ALL: [Level; 3] = [Level::Ok, Level::Warning, Level::Critical];

    /// `ok`, `warning` or `critical`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Warning => "warning",
            Level::Critical => "critical",
        }
    }
}

/// Which detector produced a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(
    feature = "openapi",
    derive(utoipa::ToSchema),
    schema(as = LoopDetector, rename_all = "snake_case")
)]
pub enum Detector {
    /// Identical calls (and identical no-progress outcomes).
    GenericRepeat,
    /// A known poll tool polling without progress.
    KnownPollNoProgress,
    /// Strict A/B alternation.
    PingPong,
    /// Repeated calls to an unavailable tool.
    UnknownToolRepeat,
    /// The global no-progress breaker.
    GlobalCircuitBreaker,
    /// One tool cycling through argument variants with the same no-progress result.
    ArgumentChurn,
    /// A repeated sequence of calls with identical results every lap.
    Cycle,
    /// The post-compaction guard.
    CompactionLoopPersisted,
    /// The strict anti-loop protocol (same procedure, same result, twice in a row).
    AntiLoopProtocol,
    /// One tool returning the same result back to back, whatever its arguments.
    NoProgress,
    /// One reply asking for the same call (tool and arguments) many times
    /// in parallel ([`reply_calls`]).
    IdenticalReplyCalls,
}

impl Detector {
    /// Every detector, in declaration order.
    pub const ALL: [Detector; 11] = [
        Detector::GenericRepeat,
        Detector::KnownPollNoProgress,
        Detector::PingPong,
        Detector::UnknownToolRepeat,
        Detector::GlobalCircuitBreaker,
        Detector::ArgumentChurn,
        Detector::Cycle,
        Detector::CompactionLoopPersisted,
        Detector::AntiLoopProtocol,
        Detector::NoProgress,
        Detector::IdenticalReplyCalls,
    ];

    /// The detector's wire name (`generic_repeat`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Detector::GenericRepeat => "generic_repeat",
            Detector::KnownPollNoProgress => "known_poll_no_progress",
            Detector::PingPong => "ping_pong",
            Detector::UnknownToolRepeat => "unknown_tool_repeat",
            Detector::GlobalCircuitBreaker => "global_circuit_breaker",
            Detector::ArgumentChurn => "argument_churn",
            Detector::Cycle => "cycle",
            Detector::CompactionLoopPersisted => "compaction_loop_persisted",
            Detector::AntiLoopProtocol => "anti_loop_protocol",
            Detector::NoProgress => "no_progress",
            Detector::IdenticalReplyCalls => "identical_reply_calls",
        }
    }
}

/// The guard's decision about one call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Verdict {
    /// ok, warning or critical.
    pub level: Level,
    /// The detector that fired (`None` when ok).
    pub detector: Option<Detector>,
    /// The detector's count (repeats, alternation length, …).
    pub count: Option<u32>,
    /// A message for the model or the operator (empty when ok).
    pub message: String,
    /// `AGENT::<agent>::<operation>::<context>::<result-hash>` (when not ok).
    pub fingerprint: Option<String>,
    /// A stable key for rate-limiting repeated warnings about one pattern.
    pub key: Option<String>,
    /// The run should end now (a second critical in the run, a persisting
    /// post-compaction loop, or the strict protocol).
    pub terminate_run: bool,
}

impl Verdict {
    /// The ok verdict.
    pub fn ok() -> Self {
        Verdict {
            level: Level::Ok,
            detector: None,
            count: None,
            message: String::new(),
            fingerprint: None,
            key: None,
            terminate_run: false,
        }
    }

    /// Is this verdict critical?
    pub fn is_critical(&self) -> bool {
        self.level == Level::Critical
    }
}
