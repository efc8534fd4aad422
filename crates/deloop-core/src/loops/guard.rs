//! The engine: events in, verdicts out.
//!
//! State is kept per scope (agent × run id, trimmed; calls without a run id
//! form their own scope). Each scope keeps its last `historySize` calls; at
//! most `maxScopes` scopes are kept, the least recently used is evicted.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::config::{LoopConfig, Settings};
use super::detectors::compaction::Window;
use super::detectors::{decide, Current, Done, Finding, Record, Rules, State};
use super::hashing::{call_digest, digest_str, normalize_tool_name, Canon, Digest};
use super::outcome::{classify_call, OutcomeHasher, PlainHash};
use super::strict::{
    default_procedure, describe, fingerprint_prefix, ArgEquivalence, Procedure, SearchEquivalence,
};
use super::{Detector, Level, Outcome, Profile, Scope, ToolCall, Verdict};

/// Distinct tool names remembered by a guard (the cache is cleared when full).
const TOOL_NAME_CACHE: usize = 1024;

/// A small, fast, non-cryptographic hasher for the scope map (keys are
/// agent and run names chosen by the caller; the map is capped anyway).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FastHasher(u64);

impl std::hash::Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0 ^ 0xcbf2_9ce4_8422_2325;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let v = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            h = (h.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
        for &b in chunks.remainder() {
            h = (h.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
        self.0 = h;
    }
}

/// `BuildHasher` for [`FastHasher`].
pub(crate) type FastBuild = std::hash::BuildHasherDefault<FastHasher>;

#[derive(Debug)]
struct ScopeState {
    agent: Box<str>,
    history: VecDeque<Record>,
    window: Window,
    criticals: u32,
    turn_seq: u64,
    last_used: u64,
}

/// The loop guard. See the [module docs](super) for an example.
#[derive(Debug)]
pub struct Guard {
    profile: Profile,
    config: LoopConfig,
    hasher: OutcomeHasher,
    equivalence: Box<dyn ArgEquivalence>,
    scopes: HashMap<String, ScopeState, FastBuild>,
    /// Tool names as written → normalised (bounded; cleared when full), so
    /// recording a call does not allocate its tool name.
    tool_names: HashMap<Box<str>, Arc<str>, FastBuild>,
    key_buf: String,
    tick: u64,
    seq: u64,
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
            tool_names: HashMap::default(),
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
    }

    fn rules(&self) -> Rules {
        let deloop = self.profile != Profile::OpenClaw;
        Rules {
            sticky: deloop,
            cycles: deloop,
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
        let rules = self.rules();
        let strict = self.profile == Profile::Strict;
        let Guard {
            config,
            equivalence,
            scopes,
            tool_names,
            key_buf,
            tick,
            seq,
            ..
        } = self;
        let settings = config.settings_for(call.agent_id.map(str::trim));
        if settings.disabled() {
            return Verdict::ok();
        }
        let tool_arc = match tool_names.get(call.tool) {
            Some(t) => t.clone(),
            None => {
                if tool_names.len() >= TOOL_NAME_CACHE {
                    tool_names.clear();
                }
                let t: Arc<str> = Arc::from(normalize_tool_name(call.tool));
                tool_names.insert(Box::from(call.tool), t.clone());
                t
            }
        };
        let tool: &str = &tool_arc;
        let digest = call_digest(tool, call.args);
        let kind = classify_call(
            tool,
            call.args,
            &settings.poll_tools,
            &settings.poll_actions,
        );
        let agent = agent_name(call.agent_id);
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
        let scope = scope_mut(
            scopes,
            key_buf,
            tick,
            max_scopes,
            agent,
            run_name(call.run_id),
        );
        let cur = Current {
            tool,
            call: digest,
            kind,
        };
        let finding = decide(&scope.history, cur, settings, rules);
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
            if let Some(v) = protocol_precheck(
                &scope.history,
                procedure,
                scope.turn_seq,
                fp_prefix.as_deref(),
            ) {
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
        scope.history.push_back(Record {
            tool: tool_arc.clone(),
            call: digest,
            procedure,
            call_id: call.call_id.map(Box::from),
            kind,
            state: if verdict.level == Level::Critical {
                State::Veto
            } else {
                State::Pending
            },
            seq: *seq,
            fp_prefix,
        });
        while scope.history.len() > settings.history_size {
            scope.history.pop_front();
        }
        verdict
    }

    /// Records a call's outcome. Returns a verdict when the outcome itself
    /// ends the run (the post-compaction guard, or the strict protocol);
    /// that verdict belongs to the call this outcome answers.
    ///
    /// An outcome that matches no waiting call in its scope (unknown id,
    /// a vetoed call's result, a call already trimmed from history) is
    /// ignored.
    pub fn on_outcome(&mut self, outcome: &Outcome<'_>) -> Option<Verdict> {
        let plain = self.plain_hash();
        let strict = self.profile == Profile::Strict;
        let settings: &Settings = self.config.settings_for(outcome.agent_id.map(str::trim));
        if settings.disabled() {
            return None;
        }
        let agent = agent_name(outcome.agent_id);
        scope_key(&mut self.key_buf, agent, run_name(outcome.run_id));
        let scope = self.scopes.get_mut(self.key_buf.as_str())?;
        self.tick += 1;
        scope.last_used = self.tick;
        let idx = scope.history.iter().position(|r| {
            r.state == State::Pending
                && match outcome.call_id {
                    Some(id) => r.call_id.as_deref() == Some(id),
                    None => true,
                }
        })?;
        let rec = &scope.history[idx];
        let user = settings.normalisers_for(&rec.tool);
        let info = self
            .hasher
            .hash(&rec.tool, rec.kind, outcome.body, plain, &user);
        let rec = &mut scope.history[idx];
        if info.veto {
            rec.state = State::Veto;
            return None;
        }
        let hash = info.hash?;
        rec.state = State::Done(Done {
            hash,
            no_progress: info.no_progress,
            error: info.error,
            failure: info.failure_identity,
            unknown: info.unknown_tool.map(String::into_boxed_str),
        });
        let rec = &scope.history[idx];
        let prefix = |rec: &Record| {
            rec.fp_prefix
                .as_deref()
                .map(str::to_string)
                .unwrap_or_else(|| format!("AGENT::{}::{}::-", scope.agent, rec.tool))
        };
        if scope.window.armed() {
            if let Some(n) = scope.window.observe(rec.call, hash) {
                scope.criticals += 1;
                let v = Verdict {
                    level: Level::Critical,
                    detector: Some(Detector::CompactionLoopPersisted),
                    count: Some(n),
                    message: format!(
                        "CRITICAL: compaction_loop_persisted: `{}` repeated the identical call and result {n} times right after a compaction; the run is aborted.",
                        rec.tool
                    ),
                    fingerprint: Some(format!("{}::{}", prefix(rec), hash.short(12))),
                    key: Some(format!("compaction:{}:{}", rec.tool, rec.call.short(16))),
                    terminate_run: true,
                };
                return Some(v);
            }
        }
        if strict && idx > 0 {
            let prev = &scope.history[idx - 1];
            if prev.procedure == rec.procedure
                && prev.seq >= scope.turn_seq
                && rec.seq >= scope.turn_seq
                && prev.result() == Some(hash)
            {
                scope.criticals += 1;
                let fp = format!("{}::{}", prefix(rec), hash.short(12));
                return Some(Verdict {
                    level: Level::Critical,
                    detector: Some(Detector::AntiLoopProtocol),
                    count: Some(2),
                    message: format!(
                        "CRITICAL: the same procedure returned the same result twice in a row; terminate and ask for help. Loop fingerprint: {fp}"
                    ),
                    fingerprint: Some(fp),
                    key: Some(format!("protocol:{}", rec.procedure.short(16))),
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
    history: &VecDeque<Record>,
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
            let prev = history.get(n.checked_sub(2)?)?;
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
