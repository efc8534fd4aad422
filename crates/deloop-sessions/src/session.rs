//! One session's state machine: the replay that judges its calls, and the
//! table that finds a call by tool and arguments for a result sent without
//! an id. Every store runs it; its state serialises (serde), so a shared
//! store can hand a session from one process to another
//! ([`Session::resume`]).

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use deloop_core::loops::replay::{CallVerdict, Replay, ReplayError};
use deloop_core::loops::{Guard, OutcomeBody, Scope, ToolCall, Verdict};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::limits::check_result;
use crate::{
    CallInput, GuardSettings, ResultInput, ResultOut, ScopeInput, SessionError, VerdictOut,
};

/// One session's state: the replay and the table that finds a call by
/// tool and arguments for results sent without an id.
#[derive(Debug, Serialize, Deserialize)]
pub struct Session {
    replay: Replay,
    by_call: HashMap<u64, VecDeque<String>>,
    order: VecDeque<u64>,
    next_id: u64,
    max_open: usize,
    #[serde(skip, default = "Instant::now")]
    pub(crate) last_used: Instant,
    /// Estimated bytes, as last measured ([`Session::remeasure`]).
    #[serde(skip)]
    pub(crate) bytes: usize,
    /// Events since the last measurement.
    #[serde(skip)]
    since_measured: u32,
    /// Events the in-process store applied (for its listing; a shared
    /// store counts events in the store).
    #[serde(skip)]
    pub(crate) events: u64,
}

/// The key that finds a waiting call by tool, arguments, agent and run. It
/// is part of the saved state, so it must be the same in every process and
/// every build: a truncated SHA-256, not the standard library's hasher.
fn call_key(tool: &str, args: &Value, agent: Option<&str>, run: Option<&str>) -> u64 {
    use sha2::Digest as _;
    let digest = deloop_core::loops::hashing::call_digest(tool, args);
    let mut h = sha2::Sha256::new();
    h.update(digest.0.to_le_bytes());
    h.update(agent.unwrap_or("main").as_bytes());
    h.update([0]);
    h.update(run.map(str::trim).unwrap_or("").as_bytes());
    let out = h.finalize();
    u64::from_le_bytes(out[..8].try_into().expect("a SHA-256 has 32 bytes"))
}

impl Session {
    /// A new session judged by `guard`.
    pub fn new(guard: &GuardSettings) -> Self {
        Session {
            replay: Replay::streaming(Guard::new(guard.profile, guard.config.clone()))
                .with_max_open(guard.max_open_calls),
            by_call: HashMap::new(),
            order: VecDeque::new(),
            next_id: 0,
            max_open: guard.max_open_calls.max(1),
            last_used: Instant::now(),
            bytes: 0,
            since_measured: 0,
            events: 0,
        }
    }

    /// Drops verdicts that can no longer change: a live session reports
    /// each verdict when its event arrives, so nothing waits to be read.
    fn drain(&mut self) {
        while self.replay.pop_settled().is_some() {}
    }

    /// Judges and records a call.
    pub fn call(&mut self, c: &CallInput) -> VerdictOut {
        let id = match &c.id {
            Some(id) => id.clone(),
            None => {
                self.next_id += 1;
                format!("deloop-{}", self.next_id)
            }
        };
        let mut call = ToolCall::new(&c.tool, &c.args).id(&id);
        call.agent_id = c.agent.as_deref();
        call.run_id = c.run.as_deref();
        let index = self.replay.push_call(&call);
        let out = match self.replay.verdict(index) {
            Some(cv) => VerdictOut::new(index, &id, &cv.verdict),
            None => VerdictOut::new(index, &id, &Verdict::ok()),
        };
        let key = call_key(&c.tool, &c.args, c.agent.as_deref(), c.run.as_deref());
        self.by_call.entry(key).or_default().push_back(id);
        self.order.push_back(key);
        // The lookup table holds at most `max_open` ids (the replay forgets
        // older waiting calls anyway).
        while self.order.len() > self.max_open {
            if let Some(old) = self.order.pop_front() {
                if let Some(q) = self.by_call.get_mut(&old) {
                    q.pop_front();
                    if q.is_empty() {
                        self.by_call.remove(&old);
                    }
                }
            }
        }
        self.drain();
        out
    }

    /// Attaches a result to its call.
    pub fn result(&mut self, r: &ResultInput) -> Result<ResultOut, SessionError> {
        check_result(r)?;
        let body = match (&r.result, &r.error) {
            (Some(v), None) => OutcomeBody::Result(v),
            (None, Some(e)) => OutcomeBody::Error(e),
            // check_result refused both cases above.
            _ => {
                return Err(SessionError::BadEvent(
                    "send one of `result` and `error`".into(),
                ))
            }
        };
        let id = match (&r.id, &r.tool, &r.args) {
            (Some(id), _, _) => id.clone(),
            (None, Some(tool), Some(args)) => {
                let key = call_key(tool, args, r.agent.as_deref(), r.run.as_deref());
                let found = self.by_call.get_mut(&key).and_then(VecDeque::pop_front);
                if self.by_call.get(&key).is_some_and(VecDeque::is_empty) {
                    self.by_call.remove(&key);
                }
                found.ok_or_else(|| {
                    SessionError::BadEvent(format!(
                        "no call of tool {tool:?} with these arguments waits for a result in this \
                         session (send the call first, or name it by `id`)"
                    ))
                })?
            }
            (None, _, _) => {
                return Err(SessionError::BadEvent(
                    "a result without `id` needs `tool` and `args` to find its call".into(),
                ))
            }
        };
        let index = self
            .replay
            .push_result_indexed(Some(&id), body)
            .map_err(|e| match e {
                ReplayError::UnknownId(_) => SessionError::BadEvent(format!(
                    "no call with id {id:?} waits for a result in this session"
                )),
                other => SessionError::BadEvent(other.to_string()),
            })?;
        if r.id.is_some() {
            self.forget_id(&id);
        }
        let verdict = index.and_then(|i| {
            self.replay
                .verdict(i)
                .filter(|cv: &&CallVerdict| cv.from_outcome)
                .map(|cv| VerdictOut::new(i, &id, &cv.verdict))
        });
        self.drain();
        Ok(ResultOut { index, verdict })
    }

    /// Removes `id` from the tool-and-arguments table after a result by id
    /// (looking through the calls oldest first, so that every process
    /// removes the same entry when a caller reused an id).
    fn forget_id(&mut self, id: &str) {
        let Some(key) = self.order.iter().copied().find(|k| {
            self.by_call
                .get(k)
                .is_some_and(|q| q.iter().any(|x| x == id))
        }) else {
            return;
        };
        if let Some(q) = self.by_call.get_mut(&key) {
            if let Some(p) = q.iter().position(|x| x == id) {
                q.remove(p);
            }
            if q.is_empty() {
                self.by_call.remove(&key);
            }
        }
    }

    /// Continues a session saved with serde: `saved` holds its state, and
    /// `guard` the settings it was created with. The result answers every
    /// later event exactly as the saved session would have.
    pub fn resume(guard: &GuardSettings, mut saved: Session) -> Session {
        let template = Session::new(guard);
        saved.replay = Replay::resume(template.replay, saved.replay);
        saved.max_open = template.max_open;
        saved
    }

    /// Counts one event and, every `every` events (and the first time),
    /// measures the session again: its saved size (postcard, counted
    /// without allocating) plus `extra`. Between measurements each event
    /// is counted at its capped fields' size.
    pub(crate) fn remeasure(&mut self, extra: usize, every: u32) {
        self.since_measured += 1;
        if self.bytes != 0 && self.since_measured < every {
            self.bytes += 4 * crate::limits::MAX_FIELD;
            return;
        }
        self.since_measured = 0;
        let size = postcard::serialize_with_flavor::<Session, postcard::ser_flavors::Size, usize>(
            self,
            postcard::ser_flavors::Size::default(),
        )
        .unwrap_or(0);
        self.bytes = size + extra;
    }

    /// Records a compaction.
    pub fn compaction(&mut self, s: &ScopeInput) {
        self.replay.push_compaction(&Scope {
            agent_id: s.agent.as_deref(),
            run_id: s.run.as_deref(),
        });
    }
}

/// One event of a session, as a shared store logs it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Event {
    /// A call to judge.
    Call(CallInput),
    /// A result to attach.
    Result(ResultInput),
    /// A compaction.
    Compaction(ScopeInput),
}

/// What applying an [`Event`] answers.
#[derive(Debug)]
pub enum Answer {
    /// A call's verdict.
    Call(VerdictOut),
    /// A result's answer (or why it did not fit the session).
    Result(Result<ResultOut, SessionError>),
    /// A compaction was recorded.
    Compaction,
}

impl Session {
    /// Applies one event.
    pub fn apply(&mut self, event: &Event) -> Answer {
        match event {
            Event::Call(c) => Answer::Call(self.call(c)),
            Event::Result(r) => Answer::Result(self.result(r)),
            Event::Compaction(s) => {
                self.compaction(s);
                Answer::Compaction
            }
        }
    }
}
