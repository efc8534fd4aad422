//! Replaying a recorded transcript the way a runtime would have run it.
//!
//! Conventions (the ones OpenClaw's conformance expectations were produced
//! with):
//! * each call is judged before it is recorded;
//! * a critical call counts as blocked: its own result is ignored and a
//!   veto is recorded in its place;
//! * a result attaches to the oldest earlier call with the same id that has
//!   no result yet (a call that never gets a result stays pending);
//! * an outcome that ends the run (post-compaction guard, strict protocol)
//!   replaces the verdict of the call it answers.
//!
//! ```
//! use deloop_core::loops::replay::{Event, Replay};
//! use deloop_core::loops::{Guard, LoopConfig, Profile, Level};
//! use serde_json::json;
//!
//! let mut r = Replay::new(Guard::new(Profile::OpenClaw, LoopConfig::default()));
//! for i in 0..25 {
//!     r.push(Event::call(format!("c{i}"), "read", json!({"path": "/a"}))).unwrap();
//!     r.push(Event::result(format!("c{i}"), json!({"content": [{"type": "text", "text": "x"}]}))).unwrap();
//! }
//! let v = r.verdicts();
//! assert_eq!(v[10].verdict.level, Level::Warning);
//! assert_eq!(v[20].verdict.level, Level::Critical);
//! ```

use std::collections::{HashMap, VecDeque};

use serde_json::Value;

use super::guard::FastBuild;
use super::{Guard, Outcome, OutcomeBody, Scope, ToolCall, Verdict};

/// One transcript event.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A tool call.
    Call {
        /// Call id (results refer to it).
        id: Option<String>,
        /// Tool name.
        tool: String,
        /// Arguments.
        args: Value,
        /// Run id.
        run: Option<String>,
        /// Agent id.
        agent: Option<String>,
    },
    /// A call's result or error.
    Result {
        /// The call id it answers (`None`: the oldest unanswered call).
        id: Option<String>,
        /// `Ok(result)` or `Err(error text)`.
        body: Result<Value, String>,
    },
    /// A compaction.
    Compaction {
        /// Run id.
        run: Option<String>,
        /// Agent id.
        agent: Option<String>,
    },
    /// A new user turn.
    UserTurn {
        /// Run id.
        run: Option<String>,
        /// Agent id.
        agent: Option<String>,
    },
}

impl Event {
    /// A call with an id and no run/agent.
    pub fn call(id: impl Into<String>, tool: impl Into<String>, args: Value) -> Event {
        Event::Call {
            id: Some(id.into()),
            tool: tool.into(),
            args,
            run: None,
            agent: None,
        }
    }

    /// A JSON result for a call id.
    pub fn result(id: impl Into<String>, result: Value) -> Event {
        Event::Result {
            id: Some(id.into()),
            body: Ok(result),
        }
    }

    /// An error for a call id.
    pub fn error(id: impl Into<String>, error: impl Into<String>) -> Event {
        Event::Result {
            id: Some(id.into()),
            body: Err(error.into()),
        }
    }
}

/// The verdict of one call of the transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallVerdict {
    /// 0-based index among call events.
    pub index: usize,
    /// The tool name as written in the transcript.
    pub tool: String,
    /// The verdict (possibly replaced by one its outcome produced).
    pub verdict: Verdict,
    /// The verdict came from the call's outcome (post-compaction guard,
    /// strict protocol), not from judging the call.
    pub from_outcome: bool,
}

/// Why an event could not be replayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// A result names an id no earlier call has (or all such calls already have results).
    #[error("result for call id {0:?} matches no earlier call waiting for a result")]
    UnknownId(String),
    /// A result without id while no call waits for one.
    #[error("result without id while no call waits for a result")]
    NothingWaiting,
}

#[derive(Debug)]
struct CallSlot {
    run: Option<String>,
    agent: Option<String>,
    blocked: bool,
}

/// Incremental replay of a transcript through a [`Guard`].
#[derive(Debug)]
pub struct Replay {
    guard: Guard,
    calls: Vec<CallSlot>,
    verdicts: Vec<CallVerdict>,
    waiting: HashMap<String, VecDeque<usize>, FastBuild>,
    all: VecDeque<usize>,
    answered: Vec<bool>,
}

impl Replay {
    /// A replay through `guard`.
    pub fn new(guard: Guard) -> Self {
        Replay {
            guard,
            calls: Vec::new(),
            verdicts: Vec::new(),
            waiting: HashMap::default(),
            all: VecDeque::new(),
            answered: Vec::new(),
        }
    }

    /// Feeds one event. On error nothing is recorded.
    pub fn push(&mut self, event: Event) -> Result<(), ReplayError> {
        match event {
            Event::Call {
                id,
                tool,
                args,
                run,
                agent,
            } => {
                let index = self.calls.len();
                let mut call = ToolCall::new(&tool, &args);
                call.call_id = id.as_deref();
                call.run_id = run.as_deref();
                call.agent_id = agent.as_deref();
                let verdict = self.guard.on_call(&call);
                let blocked = verdict.is_critical();
                if let Some(id) = id {
                    self.waiting.entry(id).or_default().push_back(index);
                }
                self.all.push_back(index);
                self.answered.push(false);
                self.calls.push(CallSlot {
                    run,
                    agent,
                    blocked,
                });
                self.verdicts.push(CallVerdict {
                    index,
                    tool,
                    verdict,
                    from_outcome: false,
                });
                Ok(())
            }
            Event::Result { id, body } => {
                let index = match &id {
                    Some(i) => {
                        let q = self
                            .waiting
                            .get_mut(i.as_str())
                            .ok_or_else(|| ReplayError::UnknownId(i.clone()))?;
                        let index = q
                            .pop_front()
                            .ok_or_else(|| ReplayError::UnknownId(i.clone()))?;
                        if q.is_empty() {
                            self.waiting.remove(i.as_str());
                        }
                        index
                    }
                    None => loop {
                        let index = self.all.pop_front().ok_or(ReplayError::NothingWaiting)?;
                        if !self.answered[index] {
                            if let Some(q) = self
                                .waiting
                                .values_mut()
                                .find(|q| q.front() == Some(&index))
                            {
                                q.pop_front();
                            }
                            break index;
                        }
                    },
                };
                self.answered[index] = true;
                let slot = &self.calls[index];
                if slot.blocked {
                    return Ok(());
                }
                let body = match &body {
                    Ok(v) => OutcomeBody::Result(v),
                    Err(e) => OutcomeBody::Error(e),
                };
                let mut outcome = Outcome::new(body);
                outcome.call_id = id.as_deref();
                outcome.run_id = slot.run.as_deref();
                outcome.agent_id = slot.agent.as_deref();
                if let Some(v) = self.guard.on_outcome(&outcome) {
                    let cv = &mut self.verdicts[index];
                    cv.verdict = v;
                    cv.from_outcome = true;
                }
                Ok(())
            }
            Event::Compaction { run, agent } => {
                self.guard.on_compaction(&Scope {
                    agent_id: agent.as_deref(),
                    run_id: run.as_deref(),
                });
                Ok(())
            }
            Event::UserTurn { run, agent } => {
                self.guard.on_user_turn(&Scope {
                    agent_id: agent.as_deref(),
                    run_id: run.as_deref(),
                });
                Ok(())
            }
        }
    }

    /// Verdicts so far, one per call, in order.
    pub fn verdicts(&self) -> &[CallVerdict] {
        &self.verdicts
    }

    /// Whether call `index`'s verdict can no longer change: its result
    /// arrived, or it was blocked (its result is ignored). `false` for an
    /// index that is not a call yet.
    pub fn is_settled(&self, index: usize) -> bool {
        index < self.calls.len() && (self.answered[index] || self.calls[index].blocked)
    }

    /// Consumes the replay, returning the verdicts.
    pub fn into_verdicts(self) -> Vec<CallVerdict> {
        self.verdicts
    }

    /// The guard.
    pub fn guard(&self) -> &Guard {
        &self.guard
    }
}
