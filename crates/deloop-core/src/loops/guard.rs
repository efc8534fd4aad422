//! The engine: events in, verdicts out.
//!
//! State is kept per scope (agent × run id, trimmed; calls without a run id
//! form their own scope): the post-compaction window, the critical count,
//! the user-turn mark. Call history depends on the profile:
//! * `default` and `strict`: each scope keeps its own last `historySize`
//!   calls, so a busy run never pushes a quiet run's history out;
//! * `openclaw`: as OpenClaw does, each agent (session) keeps ONE window of
//!   its last `historySize` records, and a run id only filters which records
//!   of that window count for a call.
//!
//! At most `maxScopes` scopes (and, for `openclaw`, `maxScopes` sessions) are
//! kept; the least recently used is evicted.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::config::{LoopConfig, Settings};
use super::detectors::compaction::Window;
use super::detectors::same_result::may_change_state;
use super::detectors::{decide, Current, Done, Finding, Record, Rules, State, View};
use super::hashing::{call_digest, digest_str, normalize_tool_name, Canon, Digest};
use super::outcome::{classify_call, CallKind, OutcomeHasher, PlainHash};
use super::strict::{
    default_procedure, describe, fingerprint_prefix, ArgEquivalence, Procedure, SearchEquivalence,
};
use super::{Detector, Level, Outcome, Profile, Scope, ToolCall, Verdict};
use serde_json::Value;

/// Distinct tool names remembered by a guard (the cache is cleared when full).
const TOOL_NAME_CACHE: usize = 1024;

/// Distinct run names remembered by a guard (the cache is cleared when full).
const RUN_NAME_CACHE: usize = 1024;

/// The hasher of the guard's maps (scopes, sessions, name caches; keys
/// are names chosen by the caller and every map is capped): foldhash's
/// fast hasher with its fixed seed, so that the hashes a [`super::Replay`]
/// serialises for the shared session store are the same in every process.
pub(crate) type FastBuild = foldhash::fast::FixedState;

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct ScopeState {
    agent: Box<str>,
    /// The scope's own history (`default`, `strict`; empty for `openclaw`).
    history: VecDeque<Record>,
    window: Window,
    criticals: u32,
    turn_seq: u64,
    last_used: u64,
}

/// One agent's shared window (`openclaw`): records of every run, each
/// tagged with its run id.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Session {
    history: VecDeque<Record>,
    last_used: u64,
}

/// What the guard computed about a call, kept by a [`super::replay::Replay`]
/// so that the call's outcome can be recorded without its arguments (and
/// pushed as a record of its own when the call has left the window).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct CallKey {
    tool: Arc<str>,
    call: Digest,
    kind: CallKind,
    procedure: Digest,
    #[serde(default)]
    changes: bool,
}

/// The loop guard. See the [module docs](super) for an example.
///
/// A guard serialises (serde) its state only: the profile, configuration,
/// equivalence rule and caches are not part of it, so a deserialised guard
/// holds the defaults until [`super::replay::Replay::resume`] gives it its
/// own (see [`super::replay`] on saving a replay).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Guard {
    #[serde(skip)]
    profile: Profile,
    #[serde(skip)]
    config: LoopConfig,
    #[serde(skip)]
    hasher: OutcomeHasher,
    #[serde(skip, default = "default_equivalence")]
    equivalence: Box<dyn ArgEquivalence>,
    scopes: HashMap<String, ScopeState, FastBuild>,
    /// Per-agent shared windows (`openclaw` only).
    sessions: HashMap<Box<str>, Session, FastBuild>,
    /// Tool names as written → normalised (bounded; cleared when full), so
    /// recording a call does not allocate its tool name.
    #[serde(skip)]
    tool_names: HashMap<Box<str>, Arc<str>, FastBuild>,
    /// Run names (bounded; cleared when full: records compare by content).
    #[serde(skip)]
    run_names: HashMap<Box<str>, Arc<str>, FastBuild>,
    /// Positions of the records in view for the call being judged.
    #[serde(skip)]
    view: Vec<usize>,
    #[serde(skip)]
    key_buf: String,
    tick: u64,
    seq: u64,
}

fn default_equivalence() -> Box<dyn ArgEquivalence> {
    Box::new(SearchEquivalence)
}

fn agent_name(agent: Option<&str>) -> &str {
    match agent.map(str::trim) {
        Some(a) if !a.is_empty() => a,
        _ => "main",
    }
}

fn run_name(run: Option<&str>) -> Option<&str> {
    match run.map(str::trim) {
        Some(r) if !r.is_empty() => Some(r),
        _ => None,
    }
}

fn scope_key(buf: &mut String, agent: &str, run: Option<&str>) {
    buf.clear();
    buf.push_str(agent);
    match run {
        Some(r) => {
            buf.push('\u{1}');
            buf.push_str(r);
        }
        None => buf.push('\u{2}'),
    }
}

impl Guard {
    /// A guard with the built-in search-pattern equivalence.
    pub fn new(profile: Profile, config: LoopConfig) -> Self {
        Guard {
            profile,
            config,
            hasher: OutcomeHasher::new(),
            equivalence: Box::new(SearchEquivalence),
            scopes: HashMap::default(),
            sessions: HashMap::default(),
            tool_names: HashMap::default(),
            run_names: HashMap::default(),
            view: Vec::new(),
            key_buf: String::new(),
            tick: 0,
            seq: 0,
        }
    }

    /// Replaces the argument-equivalence rule of the strict protocol.
    pub fn with_equivalence(mut self, eq: Box<dyn ArgEquivalence>) -> Self {
        self.equivalence = eq;
        self
    }

    /// Takes `template`'s profile, configuration and equivalence rule (a
    /// guard restored from its serialised state holds defaults).
    pub(crate) fn take_configuration(&mut self, template: Guard) {
        self.profile = template.profile;
        self.config = template.config;
        self.hasher = template.hasher;
        self.equivalence = template.equivalence;
    }

    /// The profile.
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// The configuration.
    pub fn config(&self) -> &LoopConfig {
        &self.config
    }

    /// Number of scopes currently kept.
    pub fn scope_count(&self) -> usize {
        self.scopes.len()
    }

    /// Forgets all state.
    pub fn reset(&mut self) {
        self.scopes.clear();
        self.sessions.clear();
    }

    /// One window per agent, filtered by run (OpenClaw), or one per scope.
    fn shared_window(&self) -> bool {
        self.profile == Profile::OpenClaw
    }

    fn rules(&self) -> Rules {
        let deloop = self.profile != Profile::OpenClaw;
        Rules {
            sticky: deloop,
            cycles: deloop,
            no_progress: deloop,
        }
    }

    fn plain_hash(&self) -> PlainHash {
        match self.profile {
            Profile::OpenClaw => PlainHash::OpenClaw,
            _ => PlainHash::Content,
        }
    }

    /// Judges a call before it executes, then records it (a critical call
    /// is recorded as vetoed: its outcome will be ignored).
    pub fn on_call(&mut self, call: &ToolCall<'_>) -> Verdict {
        self.judge(call).0
    }

    /// [`Guard::on_call`], also returning what the guard computed about the
    /// call (`None` when detection is off for its agent).
    pub(crate) fn judge(&mut self, call: &ToolCall<'_>) -> (Verdict, Option<CallKey>) {
        let rules = self.rules();
        let strict = self.profile == Profile::Strict;
        let shared = self.shared_window();
        let Guard {
            config,
            equivalence,
            scopes,
            sessions,
            tool_names,
            run_names,
            view,
            key_buf,
            tick,
            seq,
            ..
        } = self;
        let settings = config.settings_for(call.agent_id.map(str::trim));
        if settings.disabled() {
            return (Verdict::ok(), None);
        }
        let tool_arc = intern(tool_names, call.tool, TOOL_NAME_CACHE, normalize_tool_name);
        let tool: &str = &tool_arc;
        let digest = call_digest(tool, call.args);
        let changes = !shared && may_change_state(tool, call.args);
        let kind = classify_call(
            tool,
            call.args,
            &settings.poll_tools,
            &settings.poll_actions,
        );
        let agent = agent_name(call.agent_id);
        let run = run_name(call.run_id);
        let (procedure, fp_prefix) = if strict {
            let p = equivalence
                .procedure(tool, call.args)
                .unwrap_or_else(|| default_procedure(tool, call.args));
            (
                digest_str(&p.key, Canon::Args),
                Some(fingerprint_prefix(agent, &p).into_boxed_str()),
            )
        } else {
            (digest, None)
        };
        let max_scopes = config.max_scopes();
        let scope = scope_mut(scopes, key_buf, tick, max_scopes, agent, run);
        let history = if shared {
            &mut session_mut(sessions, tick, max_scopes, agent).history
        } else {
            &mut scope.history
        };
        view.clear();
        if shared {
            view.extend(
                history
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.run.as_deref() == run)
                    .map(|(i, _)| i),
            );
        } else {
            view.extend(0..history.len());
        }
        let in_view = View::new(history, view);
        let cur = Current {
            tool,
            call: digest,
            kind,
            turn_seq: scope.turn_seq,
        };
        let finding = decide(in_view, cur, settings, rules);
        let mut verdict = match finding {
            Some(f) => {
                let prefix = match &fp_prefix {
                    Some(p) => p.to_string(),
                    None => {
                        let (operation, context) = match equivalence.procedure(tool, call.args) {
                            Some(p) => (p.operation, p.context),
                            None => describe(tool, call.args),
                        };
                        fingerprint_prefix(
                            agent,
                            &Procedure {
                                operation,
                                context,
                                key: String::new(),
                            },
                        )
                    }
                };
                to_verdict(f, &prefix)
            }
            None => Verdict::ok(),
        };
        if strict && verdict.level != Level::Critical {
            if let Some(v) =
                protocol_precheck(in_view, procedure, scope.turn_seq, fp_prefix.as_deref())
            {
                verdict = v;
            }
        }
        if verdict.level == Level::Critical {
            scope.criticals += 1;
            if scope.criticals >= 2 && !verdict.terminate_run {
                verdict.terminate_run = true;
                verdict
                    .message
                    .push_str(" This run already had a critical verdict: end the run.");
            }
        }
        *seq += 1;
        history.push_back(Record {
            tool: tool_arc.clone(),
            run: run.map(|r| intern(run_names, r, RUN_NAME_CACHE, str::to_string)),
            call: digest,
            procedure,
            call_id: call.call_id.map(Box::from),
            kind,
            changes,
            state: if verdict.level == Level::Critical {
                State::Veto
            } else {
                State::Pending
            },
            seq: *seq,
            fp_prefix,
        });
        while history.len() > settings.history_size {
            history.pop_front();
        }
        let key = CallKey {
            tool: tool_arc,
            call: digest,
            kind,
            procedure,
            changes,
        };
        (verdict, Some(key))
    }

    /// Records a call's outcome. Returns a verdict when the outcome itself
    /// ends the run (the post-compaction guard, or the strict protocol);
    /// that verdict belongs to the call this outcome answers.
    ///
    /// The outcome attaches to a call of its scope still waiting for one:
    /// in `default`/`strict` the oldest with the same id (no id: the oldest),
    /// in `openclaw` the newest with the same id (no id: any), as OpenClaw
    /// does; when the outcome names its call ([`Outcome::call`]), the call's
    /// tool and arguments must match too. An outcome that finds no such call
    /// (it left the window, or was never seen) is recorded as a call of its
    /// own with that outcome, as OpenClaw's `recordToolCallOutcome` does —
    /// when it names its call; otherwise it is ignored. The outcome of a
    /// vetoed call is ignored either way.
    pub fn on_outcome(&mut self, outcome: &Outcome<'_>) -> Option<Verdict> {
        let key = match (outcome.tool, outcome.args) {
            (Some(tool), Some(args)) => self.call_key(tool, args, outcome.agent_id),
            _ => None,
        };
        self.record_outcome(outcome, key.as_ref())
    }

    /// The key [`Guard::judge`] computes, for an outcome that names its call.
    fn call_key(&mut self, tool: &str, args: &Value, agent: Option<&str>) -> Option<CallKey> {
        let strict = self.profile == Profile::Strict;
        let settings = self.config.settings_for(agent.map(str::trim));
        if settings.disabled() {
            return None;
        }
        let tool = intern(
            &mut self.tool_names,
            tool,
            TOOL_NAME_CACHE,
            normalize_tool_name,
        );
        let kind = classify_call(&tool, args, &settings.poll_tools, &settings.poll_actions);
        let call = call_digest(&tool, args);
        let procedure = if strict {
            let p = self
                .equivalence
                .procedure(&tool, args)
                .unwrap_or_else(|| default_procedure(&tool, args));
            digest_str(&p.key, Canon::Args)
        } else {
            call
        };
        let changes = self.profile != Profile::OpenClaw && may_change_state(&tool, args);
        Some(CallKey {
            tool,
            call,
            kind,
            procedure,
            changes,
        })
    }

    /// [`Guard::on_outcome`] with the call's key already known (`None`:
    /// the outcome does not name its call).
    pub(crate) fn record_outcome(
        &mut self,
        outcome: &Outcome<'_>,
        key: Option<&CallKey>,
    ) -> Option<Verdict> {
        let plain = self.plain_hash();
        let strict = self.profile == Profile::Strict;
        let shared = self.shared_window();
        let Guard {
            config,
            hasher,
            scopes,
            sessions,
            run_names,
            key_buf,
            tick,
            seq,
            ..
        } = self;
        let settings: &Settings = config.settings_for(outcome.agent_id.map(str::trim));
        if settings.disabled() {
            return None;
        }
        let max_scopes = config.max_scopes();
        let agent = agent_name(outcome.agent_id);
        let run = run_name(outcome.run_id);
        let id = outcome.call_id.filter(|i| !shared || !i.is_empty());
        let matches = |r: &Record| {
            r.state == State::Pending
                && id.is_none_or(|i| r.call_id.as_deref() == Some(i))
                && key.is_none_or(|k| r.call == k.call)
        };
        // Find the waiting call: the scope's own history, or the agent's
        // shared window filtered by run.
        let (history, idx) = if shared {
            let session = match key {
                Some(_) => session_mut(sessions, tick, max_scopes, agent),
                None => {
                    let s = sessions.get_mut(agent)?;
                    *tick += 1;
                    s.last_used = *tick;
                    s
                }
            };
            let idx = session
                .history
                .iter()
                .rposition(|r| r.run.as_deref() == run && matches(r));
            (&mut session.history, idx)
        } else {
            // deloop's profiles ignore an outcome that finds no waiting call:
            // its call was counted while it was in the window, and a record
            // out of call order would break the streak and cycle rules.
            scope_key(key_buf, agent, run);
            let scope = scopes.get_mut(key_buf.as_str())?;
            *tick += 1;
            scope.last_used = *tick;
            let idx = Some(scope.history.iter().position(matches)?);
            (&mut scope.history, idx)
        };
        let (tool, kind) = match (idx, key) {
            (Some(i), _) => (history[i].tool.clone(), history[i].kind),
            (None, Some(k)) => (k.tool.clone(), k.kind),
            (None, None) => return None,
        };
        let user = settings.normalisers_for(&tool);
        let info = hasher.hash(&tool, kind, outcome.body, plain, &user);
        let state = if info.veto {
            State::Veto
        } else {
            State::Done(Done {
                hash: info.hash?,
                no_progress: info.no_progress,
                error: info.error,
                failure: info.failure_identity,
                unknown: info.unknown_tool.map(String::into_boxed_str),
                blank: info.blank,
                error_shape: info.error_shape,
            })
        };
        let hash = match &state {
            State::Done(d) => Some(d.hash),
            _ => None,
        };
        let (idx, orphan) = match (idx, key) {
            (Some(i), _) => {
                history[i].state = state;
                (i, false)
            }
            (None, Some(k)) => {
                *seq += 1;
                history.push_back(Record {
                    tool: k.tool.clone(),
                    run: run.map(|r| intern(run_names, r, RUN_NAME_CACHE, str::to_string)),
                    call: k.call,
                    procedure: k.procedure,
                    call_id: outcome.call_id.map(Box::from),
                    kind: k.kind,
                    changes: k.changes,
                    state,
                    seq: *seq,
                    fp_prefix: None,
                });
                while history.len() > settings.history_size {
                    history.pop_front();
                }
                (history.len() - 1, true)
            }
            (None, None) => return None,
        };
        let hash = hash?;
        let rec = &history[idx];
        let (call, procedure, rec_seq) = (rec.call, rec.procedure, rec.seq);
        let prev = if strict && !orphan && idx > 0 {
            let p = &history[idx - 1];
            Some((p.procedure, p.seq, p.result()))
        } else {
            None
        };
        let fp_prefix = rec.fp_prefix.clone();
        // The post-compaction guard and the critical count live in the
        // call's (agent, run) scope.
        scope_key(key_buf, agent, run);
        let scope = scopes.get_mut(key_buf.as_str())?;
        let prefix = || {
            fp_prefix
                .as_deref()
                .map(str::to_string)
                .unwrap_or_else(|| format!("AGENT::{}::{}::-", scope.agent, tool))
        };
        if scope.window.armed() {
            if let Some(n) = scope.window.observe(call, hash) {
                let fingerprint = Some(format!("{}::{}", prefix(), hash.short(12)));
                scope.criticals += 1;
                let v = Verdict {
                    level: Level::Critical,
                    detector: Some(Detector::CompactionLoopPersisted),
                    count: Some(n),
                    message: format!(
                        "CRITICAL: compaction_loop_persisted: `{tool}` repeated the identical call and result {n} times right after a compaction; the run is aborted."
                    ),
                    fingerprint,
                    key: Some(format!("compaction:{}:{}", tool, call.short(16))),
                    terminate_run: true,
                };
                return Some(v);
            }
        }
        if let Some((p_procedure, p_seq, p_result)) = prev {
            if p_procedure == procedure
                && p_seq >= scope.turn_seq
                && rec_seq >= scope.turn_seq
                && p_result == Some(hash)
            {
                let fp = format!("{}::{}", prefix(), hash.short(12));
                scope.criticals += 1;
                return Some(Verdict {
                    level: Level::Critical,
                    detector: Some(Detector::AntiLoopProtocol),
                    count: Some(2),
                    message: format!(
                        "CRITICAL: the same procedure returned the same result twice in a row; terminate and ask for help. Loop fingerprint: {fp}"
                    ),
                    fingerprint: Some(fp),
                    key: Some(format!("protocol:{}", procedure.short(16))),
                    terminate_run: true,
                });
            }
        }
        None
    }

    /// A compaction happened in this scope: arms the post-compaction guard
    /// (unless `enabled` is explicitly `false`).
    pub fn on_compaction(&mut self, scope: &Scope<'_>) {
        let settings = self.config.settings_for(scope.agent_id.map(str::trim));
        if settings.disabled() {
            return;
        }
        let size = settings.post_compaction_window;
        let max_scopes = self.config.max_scopes();
        let st = scope_mut(
            &mut self.scopes,
            &mut self.key_buf,
            &mut self.tick,
            max_scopes,
            agent_name(scope.agent_id),
            run_name(scope.run_id),
        );
        st.window.arm(size);
    }

    /// A new user turn: the human spoke, so the run's critical count and the
    /// strict protocol's "in a row" chain start over (history is kept).
    pub fn on_user_turn(&mut self, scope: &Scope<'_>) {
        scope_key(
            &mut self.key_buf,
            agent_name(scope.agent_id),
            run_name(scope.run_id),
        );
        if let Some(st) = self.scopes.get_mut(self.key_buf.as_str()) {
            st.criticals = 0;
            st.turn_seq = self.seq + 1;
        }
    }
}

/// `map[name]`, made by `make` and remembered (the map is cleared when it
/// holds `cap` names).
fn intern(
    map: &mut HashMap<Box<str>, Arc<str>, FastBuild>,
    name: &str,
    cap: usize,
    make: impl FnOnce(&str) -> String,
) -> Arc<str> {
    if let Some(a) = map.get(name) {
        return a.clone();
    }
    if map.len() >= cap {
        map.clear();
    }
    let a: Arc<str> = Arc::from(make(name));
    map.insert(Box::from(name), a.clone());
    a
}

/// The agent's shared window (`openclaw`), created on first use; the least
/// recently used session is evicted beyond `max_sessions`.
fn session_mut<'a>(
    sessions: &'a mut HashMap<Box<str>, Session, FastBuild>,
    tick: &mut u64,
    max_sessions: usize,
    agent: &str,
) -> &'a mut Session {
    *tick += 1;
    if !sessions.contains_key(agent) {
        if sessions.len() >= max_sessions.max(1) {
            if let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(k, _)| k.clone())
            {
                sessions.remove(&oldest);
            }
        }
        sessions.insert(Box::from(agent), Session::default());
    }
    let s = sessions.get_mut(agent).expect("session inserted above");
    s.last_used = *tick;
    s
}

fn scope_mut<'a>(
    scopes: &'a mut HashMap<String, ScopeState, FastBuild>,
    key_buf: &mut String,
    tick: &mut u64,
    max_scopes: usize,
    agent: &str,
    run: Option<&str>,
) -> &'a mut ScopeState {
    scope_key(key_buf, agent, run);
    *tick += 1;
    if !scopes.contains_key(key_buf.as_str()) {
        if scopes.len() >= max_scopes.max(1) {
            if let Some(oldest) = scopes
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(k, _)| k.clone())
            {
                scopes.remove(&oldest);
            }
        }
        scopes.insert(
            key_buf.clone(),
            ScopeState {
                agent: agent.into(),
                history: VecDeque::new(),
                window: Window::default(),
                criticals: 0,
                turn_seq: 0,
                last_used: *tick,
            },
        );
    }
    let st = scopes
        .get_mut(key_buf.as_str())
        .expect("scope inserted above");
    st.last_used = *tick;
    st
}

fn to_verdict(f: Finding, prefix: &str) -> Verdict {
    let result = f
        .latest
        .map(|d: Digest| d.short(12))
        .unwrap_or_else(|| "none".into());
    Verdict {
        level: f.level,
        detector: Some(f.detector),
        count: Some(f.count),
        message: f.message,
        fingerprint: Some(format!("{prefix}::{result}")),
        key: Some(f.key),
        terminate_run: false,
    }
}

/// Strict protocol before a call: the previous call in the scope is the same
/// procedure and was blocked, or it and the call before it are the same
/// procedure with the same result.
fn protocol_precheck(
    history: View<'_>,
    procedure: Digest,
    turn_seq: u64,
    prefix: Option<&str>,
) -> Option<Verdict> {
    let n = history.len();
    let last = history.back()?;
    if last.procedure != procedure || last.seq < turn_seq {
        return None;
    }
    let result = match &last.state {
        State::Veto => None,
        State::Done(d) => {
            let prev = history.get(n.checked_sub(2)?);
            if prev.procedure != procedure || prev.seq < turn_seq || prev.result() != Some(d.hash) {
                return None;
            }
            Some(d.hash)
        }
        State::Pending => return None,
    };
    let fp = format!(
        "{}::{}",
        prefix.unwrap_or("AGENT::main::-::-"),
        result
            .map(|h| h.short(12))
            .unwrap_or_else(|| "blocked".into())
    );
    Some(Verdict {
        level: Level::Critical,
        detector: Some(Detector::AntiLoopProtocol),
        count: Some(2),
        message: format!(
            "CRITICAL: this procedure already returned the same result twice in a row; do not run it again. Loop fingerprint: {fp}"
        ),
        fingerprint: Some(fp),
        key: Some(format!("protocol:{}", procedure.short(16))),
        terminate_run: true,
    })
}

#[cfg(test)]
mod tests;
