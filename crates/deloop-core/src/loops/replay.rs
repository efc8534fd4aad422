//! Replaying a recorded transcript the way a runtime would have run it.
//!
//! Conventions (the ones OpenClaw's conformance expectations were produced
//! with):
//! * each call is judged before it is recorded;
//! * a critical call counts as blocked: its own result is ignored and a
//!   veto is recorded in its place;
//! * a result attaches to the oldest earlier call with the same id that has
//!   no result yet (a call that never gets a result stays pending), and is
//!   given to the guard with that call's tool and arguments (see
//!   [`super::Outcome::call`]): a result whose call has left the window is
//!   recorded as a call of its own, as OpenClaw does;
//! * an outcome that ends the run (post-compaction guard, strict protocol)
//!   replaces the verdict of the call it answers.
//!
//! Memory. A [`Replay::streaming`] replay hands verdicts out in call order
//! with [`Replay::pop_settled`] as soon as they can no longer change (the
//! call's result arrived, or it was blocked) and forgets them. What it
//! keeps is bounded by the calls still waiting for a result, and those are
//! capped ([`Replay::with_max_open`], default [`DEFAULT_MAX_OPEN`]). The
//! tolerant rule that bounds it: a call still waiting for its result when
//! `max_open` later calls have been seen is *forgotten* — its verdict
//! becomes final as it stands (exactly as if its result never came; a
//! blocked call's verdict is final anyway), and a result that arrives
//! later for it is ignored rather than reported as an unknown id (the ids of
//! the last `max_open` forgotten calls are remembered for that;
//! [`Replay::ignored_results`] counts them). The guard itself ignores a late
//! result anyway once the call has left its scope's `historySize` window;
//! only a call whose scope stayed quiet while `max_open` calls ran elsewhere
//! could have been judged differently. [`Replay::new`] keeps every verdict (for [`Replay::verdicts`]) but
//! applies the same rule, so both kinds of replay give the same verdicts.
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
use std::hash::BuildHasher;
use std::sync::Arc;

use serde_json::Value;

use super::guard::{CallKey, FastBuild};
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

/// Default cap on calls waiting for a result (see the module docs).
pub const DEFAULT_MAX_OPEN: usize = 10_000;

/// The verdict of one call of the transcript.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CallVerdict {
    /// 0-based index among call events.
    pub index: usize,
    /// The tool name as written in the transcript (shared between calls).
    pub tool: Arc<str>,
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

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Slot {
    id: Option<Box<str>>,
    run: Option<Arc<str>>,
    agent: Option<Arc<str>>,
    /// The call's tool and argument digest, so its outcome names its call.
    key: Option<CallKey>,
    blocked: bool,
    answered: bool,
    forgotten: bool,
}

impl Slot {
    /// The verdict can no longer change.
    fn settled(&self) -> bool {
        self.answered || self.blocked || self.forgotten
    }

    /// A result may still attach to this call.
    fn awaiting(&self) -> bool {
        !self.answered && !self.forgotten
    }
}

/// Calls waiting for a result under one id hash (usually one).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Waiters {
    /// The oldest (no allocation for the usual single waiter).
    first: Option<usize>,
    /// The others, oldest first.
    rest: VecDeque<usize>,
}

impl Waiters {
    fn push(&mut self, index: usize) {
        if self.first.is_none() && self.rest.is_empty() {
            self.first = Some(index);
        } else {
            self.rest.push_back(index);
        }
    }

    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.first.into_iter().chain(self.rest.iter().copied())
    }

    /// Removes the `p`-th waiter (in [`Waiters::iter`] order).
    fn remove(&mut self, p: usize) {
        match (p, self.first) {
            (0, Some(_)) => self.first = self.rest.pop_front(),
            (p, Some(_)) => {
                self.rest.remove(p - 1);
            }
            (p, None) => {
                self.rest.remove(p);
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.first.is_none() && self.rest.is_empty()
    }
}

/// Interns short strings (tool, run and agent names) so that each call
/// shares one allocation; the table is bounded (cleared when full).
#[derive(Debug, Default)]
struct Interner(HashMap<Box<str>, Arc<str>, FastBuild>);

impl Interner {
    const CAP: usize = 4096;

    fn get(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.0.get(s) {
            return a.clone();
        }
        if self.0.len() >= Self::CAP {
            self.0.clear();
        }
        let a: Arc<str> = Arc::from(s);
        self.0.insert(Box::from(s), a.clone());
        a
    }
}

/// Incremental replay of a transcript through a [`Guard`].
///
/// A replay serialises (serde) its state, not its configuration: see
/// [`Replay::resume`].
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Replay {
    guard: Guard,
    /// Keep every verdict ([`Replay::new`]) or hand them out ([`Replay::streaming`]).
    #[serde(skip)]
    retain: bool,
    #[serde(skip)]
    max_open: usize,
    /// Global index of `slots[0]` / `verdicts[0]`.
    base: usize,
    slots: Vec<Slot>,
    verdicts: Vec<CallVerdict>,
    /// Global index of the next verdict [`Replay::pop_settled`] returns.
    taken: usize,
    /// Every call before this global index is no longer awaiting a result.
    oldest_awaiting: usize,
    /// Awaiting calls by the hash of their id.
    waiting: HashMap<u64, Waiters, FastBuild>,
    /// Ids of recently forgotten calls (count per id) and their order.
    forgotten: HashMap<Box<str>, u32, FastBuild>,
    forgotten_order: VecDeque<Box<str>>,
    forgotten_calls: usize,
    ignored: usize,
    #[serde(skip)]
    names: Interner,
    #[serde(skip, default = "empty_name")]
    empty: Arc<str>,
}

fn empty_name() -> Arc<str> {
    Arc::from("")
}

fn id_hash(id: &str) -> u64 {
    FastBuild::default().hash_one(id)
}

impl Replay {
    /// A replay through `guard` that keeps every verdict ([`Replay::verdicts`]).
    pub fn new(guard: Guard) -> Self {
        Replay {
            guard,
            retain: true,
            max_open: DEFAULT_MAX_OPEN,
            base: 0,
            slots: Vec::new(),
            verdicts: Vec::new(),
            taken: 0,
            oldest_awaiting: 0,
            waiting: HashMap::default(),
            forgotten: HashMap::default(),
            forgotten_order: VecDeque::new(),
            forgotten_calls: 0,
            ignored: 0,
            names: Interner::default(),
            empty: Arc::from(""),
        }
    }

    /// A replay through `guard` whose memory does not grow with the
    /// transcript: take verdicts with [`Replay::pop_settled`] (and
    /// [`Replay::finish`] at the end); they are forgotten once taken.
    ///
    /// ```
    /// use deloop_core::loops::replay::Replay;
    /// use deloop_core::loops::{Guard, Level, LoopConfig, Outcome, OutcomeBody, Profile, ToolCall};
    /// use serde_json::json;
    ///
    /// let mut r = Replay::streaming(Guard::new(Profile::OpenClaw, LoopConfig::default()));
    /// let (args, result) = (json!({"path": "/a"}), json!({"content": [{"type": "text", "text": "x"}]}));
    /// let mut levels = Vec::new();
    /// for i in 0..25 {
    ///     let id = format!("c{i}");
    ///     r.push_call(&ToolCall::new("read", &args).id(&id));
    ///     r.push_result(Some(&id), OutcomeBody::Result(&result)).unwrap();
    ///     while let Some(v) = r.pop_settled() {
    ///         levels.push(v.verdict.level);
    ///     }
    /// }
    /// r.finish();
    /// assert!(r.pop_settled().is_none());
    /// assert_eq!((levels[10], levels[20]), (Level::Warning, Level::Critical));
    /// ```
    pub fn streaming(guard: Guard) -> Self {
        Replay {
            retain: false,
            ..Replay::new(guard)
        }
    }

    /// Sets the cap on calls waiting for a result (at least 1; see the
    /// module docs for what happens to the oldest one beyond it).
    pub fn with_max_open(mut self, max_open: usize) -> Self {
        self.max_open = max_open.max(1);
        self
    }

    /// Continues a saved replay: `saved` is a replay deserialised from what
    /// [`Replay`]'s `Serialize` wrote, which holds state only; `template` is a
    /// fresh replay built as the saved one was (same guard profile,
    /// configuration, equivalence rule, retention and `max_open`), whose
    /// configuration it takes. The result judges every later event exactly
    /// as the replay that was saved would have.
    ///
    /// ```
    /// use deloop_core::loops::replay::{Event, Replay};
    /// use deloop_core::loops::{Guard, Level, LoopConfig, Profile};
    /// use serde_json::json;
    ///
    /// let fresh = || Replay::new(Guard::new(Profile::OpenClaw, LoopConfig::default()));
    /// let mut r = fresh();
    /// let read = |i: usize| Event::call(format!("c{i}"), "read", json!({"path": "/a"}));
    /// let same = |i: usize| Event::result(format!("c{i}"), json!("x"));
    /// for i in 0..9 {
    ///     r.push(read(i)).unwrap();
    ///     r.push(same(i)).unwrap();
    /// }
    /// let saved = serde_json::to_string(&r).unwrap();
    /// let mut r = Replay::resume(fresh(), serde_json::from_str(&saved).unwrap());
    /// r.push(read(9)).unwrap();
    /// r.push(same(9)).unwrap();
    /// r.push(read(10)).unwrap();
    /// assert_eq!(r.verdict(10).unwrap().verdict.level, Level::Warning);
    /// ```
    pub fn resume(template: Replay, saved: Replay) -> Replay {
        let Replay {
            guard,
            retain,
            max_open,
            ..
        } = template;
        let mut out = saved;
        out.guard.take_configuration(guard);
        out.retain = retain;
        out.max_open = max_open;
        out
    }

    fn slot(&self, index: usize) -> &Slot {
        &self.slots[index - self.base]
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
                let mut call = ToolCall::new(&tool, &args);
                call.call_id = id.as_deref();
                call.run_id = run.as_deref();
                call.agent_id = agent.as_deref();
                self.push_call(&call);
                Ok(())
            }
            Event::Result { id, body } => {
                let body = match &body {
                    Ok(v) => OutcomeBody::Result(v),
                    Err(e) => OutcomeBody::Error(e),
                };
                self.push_result(id.as_deref(), body)
            }
            Event::Compaction { run, agent } => {
                self.push_compaction(&Scope {
                    agent_id: agent.as_deref(),
                    run_id: run.as_deref(),
                });
                Ok(())
            }
            Event::UserTurn { run, agent } => {
                self.push_user_turn(&Scope {
                    agent_id: agent.as_deref(),
                    run_id: run.as_deref(),
                });
                Ok(())
            }
        }
    }

    /// Feeds a call (borrowed; same as [`Event::Call`]). Returns its index.
    pub fn push_call(&mut self, call: &ToolCall<'_>) -> usize {
        let index = self.base + self.slots.len();
        let (verdict, key) = self.guard.judge(call);
        let blocked = verdict.is_critical();
        if let Some(id) = call.call_id {
            self.waiting.entry(id_hash(id)).or_default().push(index);
        }
        let tool = self.names.get(call.tool);
        let run = call.run_id.map(|r| self.names.get(r));
        let agent = call.agent_id.map(|a| self.names.get(a));
        self.slots.push(Slot {
            id: call.call_id.map(Box::from),
            run,
            agent,
            key,
            blocked,
            answered: false,
            forgotten: false,
        });
        self.verdicts.push(CallVerdict {
            index,
            tool,
            verdict,
            from_outcome: false,
        });
        self.enforce_cap();
        index
    }

    /// Moves `oldest_awaiting` past calls that no longer await a result,
    /// then forgets the oldest awaiting calls beyond the cap.
    fn enforce_cap(&mut self) {
        let end = self.base + self.slots.len();
        loop {
            while self.oldest_awaiting < end && !self.slot(self.oldest_awaiting).awaiting() {
                self.oldest_awaiting += 1;
            }
            if end - self.oldest_awaiting <= self.max_open {
                break;
            }
            self.forget(self.oldest_awaiting);
        }
    }

    /// Forgets an awaiting call: its verdict is final, a late result is ignored.
    fn forget(&mut self, index: usize) {
        let i = index - self.base;
        self.slots[i].forgotten = true;
        self.forgotten_calls += 1;
        if let Some(id) = self.slots[i].id.clone() {
            self.unwait(&id, index);
            *self.forgotten.entry(id.clone()).or_default() += 1;
            self.forgotten_order.push_back(id);
            if self.forgotten_order.len() > self.max_open {
                if let Some(old) = self.forgotten_order.pop_front() {
                    if let Some(n) = self.forgotten.get_mut(&old) {
                        *n -= 1;
                        if *n == 0 {
                            self.forgotten.remove(&old);
                        }
                    }
                }
            }
        }
    }

    /// Removes `index` from the waiters of `id`.
    fn unwait(&mut self, id: &str, index: usize) {
        let h = id_hash(id);
        if let Some(w) = self.waiting.get_mut(&h) {
            let found = w.iter().position(|i| i == index);
            if let Some(p) = found {
                w.remove(p);
            }
            if w.is_empty() {
                self.waiting.remove(&h);
            }
        }
    }

    /// The oldest call waiting for a result under `id`.
    fn find_waiting(&self, id: &str) -> Option<(u64, usize, usize)> {
        let h = id_hash(id);
        let w = self.waiting.get(&h)?;
        w.iter().enumerate().find_map(|(p, index)| {
            (self.slot(index).id.as_deref() == Some(id)).then_some((h, p, index))
        })
    }

    /// Feeds a result or an error (borrowed; same as [`Event::Result`]).
    /// `id: None` answers the oldest call still waiting for a result.
    pub fn push_result(
        &mut self,
        id: Option<&str>,
        body: OutcomeBody<'_>,
    ) -> Result<(), ReplayError> {
        self.push_result_indexed(id, body).map(|_| ())
    }

    /// [`Replay::push_result`], returning the index of the call the outcome
    /// answered (`None` when it was ignored: a late result of a forgotten
    /// call). A live API uses it to report the answered call's verdict,
    /// which an outcome may replace ([`CallVerdict::from_outcome`]).
    pub fn push_result_indexed(
        &mut self,
        id: Option<&str>,
        body: OutcomeBody<'_>,
    ) -> Result<Option<usize>, ReplayError> {
        let index = match id {
            Some(i) => match self.find_waiting(i) {
                Some((h, p, index)) => {
                    let w = self.waiting.get_mut(&h).expect("found above");
                    w.remove(p);
                    if w.is_empty() {
                        self.waiting.remove(&h);
                    }
                    index
                }
                None => {
                    if let Some(n) = self.forgotten.get_mut(i) {
                        *n -= 1;
                        if *n == 0 {
                            self.forgotten.remove(i);
                        }
                        self.ignored += 1;
                        return Ok(None);
                    }
                    return Err(ReplayError::UnknownId(i.to_string()));
                }
            },
            None => {
                let end = self.base + self.slots.len();
                let index = (self.oldest_awaiting..end)
                    .find(|&i| self.slot(i).awaiting())
                    .ok_or(ReplayError::NothingWaiting)?;
                if let Some(id) = self.slot(index).id.clone() {
                    self.unwait(&id, index);
                }
                index
            }
        };
        let i = index - self.base;
        self.slots[i].answered = true;
        let slot = &self.slots[i];
        if slot.blocked {
            return Ok(Some(index));
        }
        let mut outcome = Outcome::new(body);
        outcome.call_id = id;
        outcome.run_id = slot.run.as_deref();
        outcome.agent_id = slot.agent.as_deref();
        if let Some(v) = self.guard.record_outcome(&outcome, slot.key.as_ref()) {
            let cv = &mut self.verdicts[i];
            cv.verdict = v;
            cv.from_outcome = true;
        }
        Ok(Some(index))
    }

    /// Feeds a compaction (same as [`Event::Compaction`]).
    pub fn push_compaction(&mut self, scope: &Scope<'_>) {
        self.guard.on_compaction(scope);
    }

    /// Feeds a new user turn (same as [`Event::UserTurn`]).
    pub fn push_user_turn(&mut self, scope: &Scope<'_>) {
        self.guard.on_user_turn(scope);
    }

    /// The next verdict, in call order, once it can no longer change
    /// ([`Replay::is_settled`]); `None` while the next call still waits for
    /// its result. A streaming replay hands the verdict over and forgets
    /// it; a replay from [`Replay::new`] returns a copy and keeps it.
    pub fn pop_settled(&mut self) -> Option<CallVerdict> {
        let i = self.taken.checked_sub(self.base)?;
        if i >= self.slots.len() || !self.slots[i].settled() {
            return None;
        }
        self.taken += 1;
        if self.retain {
            return Some(self.verdicts[i].clone());
        }
        let placeholder = CallVerdict {
            index: self.taken - 1,
            tool: self.empty.clone(),
            verdict: Verdict::ok(),
            from_outcome: false,
        };
        let out = std::mem::replace(&mut self.verdicts[i], placeholder);
        self.compact();
        Some(out)
    }

    /// Drops the slots a streaming replay no longer needs (taken, and not
    /// awaiting a result), in batches so the cost stays amortised O(1).
    fn compact(&mut self) {
        let keep_from = self.taken.min(self.oldest_awaiting);
        let n = keep_from.saturating_sub(self.base);
        if n >= 1024 && n * 2 >= self.slots.len() {
            self.slots.drain(..n);
            self.verdicts.drain(..n);
            self.base += n;
        }
    }

    /// The end of the transcript: every call still waiting for a result
    /// keeps its verdict as it stands, so every verdict is settled.
    pub fn finish(&mut self) {
        let end = self.base + self.slots.len();
        for i in self.oldest_awaiting.max(self.base)..end {
            let s = &mut self.slots[i - self.base];
            if s.awaiting() {
                s.forgotten = true;
            }
        }
        self.oldest_awaiting = end;
        self.waiting.clear();
    }

    /// Verdicts kept, one per call, in order: every call's for a replay from
    /// [`Replay::new`]; for a streaming replay only those not taken yet.
    pub fn verdicts(&self) -> &[CallVerdict] {
        if self.retain {
            &self.verdicts
        } else {
            &self.verdicts[self.taken - self.base..]
        }
    }

    /// The verdict of call `index` while the replay still holds it: every
    /// call for a replay from [`Replay::new`]; for a streaming replay, calls
    /// not yet handed out by [`Replay::pop_settled`].
    pub fn verdict(&self, index: usize) -> Option<&CallVerdict> {
        let first = if self.retain {
            self.base
        } else {
            self.taken.max(self.base)
        };
        if index < first {
            return None;
        }
        self.verdicts.get(index - self.base)
    }

    /// Number of calls seen so far.
    pub fn calls(&self) -> usize {
        self.base + self.slots.len()
    }

    /// Whether call `index`'s verdict can no longer change: its result
    /// arrived, it was blocked (its result is ignored), or it was forgotten
    /// (see the module docs). `false` for an index that is not a call yet.
    pub fn is_settled(&self, index: usize) -> bool {
        if index < self.base {
            return true;
        }
        self.slots.get(index - self.base).is_some_and(Slot::settled)
    }

    /// Calls forgotten while waiting for a result, because `max_open` later
    /// calls had been seen (not counting [`Replay::finish`]).
    pub fn forgotten_calls(&self) -> usize {
        self.forgotten_calls
    }

    /// Late results ignored because their call had been forgotten.
    pub fn ignored_results(&self) -> usize {
        self.ignored
    }

    /// Consumes the replay, returning the verdicts it kept.
    pub fn into_verdicts(self) -> Vec<CallVerdict> {
        if self.retain {
            self.verdicts
        } else {
            let skip = self.taken - self.base;
            self.verdicts.into_iter().skip(skip).collect()
        }
    }

    /// The guard.
    pub fn guard(&self) -> &Guard {
        &self.guard
    }
}
