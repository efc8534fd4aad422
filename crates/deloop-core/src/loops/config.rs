//! Configuration: OpenClaw's `tools.loopDetection` block, per-agent
//! overrides, and deloop's own keys beside them.
//!
//! Accepted input (JSON5 or JSON):
//! * a full OpenClaw config (`{ tools: { loopDetection: {…} }, agents: { list: [ { id, tools: { loopDetection: {…} } } ] } }`),
//!   other top-level keys are ignored; or
//! * a bare `loopDetection` block (an object without `tools`/`agents` keys).
//!
//! Per-agent blocks are merged over the global block field by field,
//! nested `detectors` and `postCompactionGuard` included. Thresholds are
//! normalised (`criticalThreshold > warningThreshold`,
//! `globalCircuitBreakerThreshold > criticalThreshold`) and every change
//! is reported as an [`Adjustment`]. Unknown keys inside a `loopDetection`
//! block and invalid values are errors that name the key.
//!
//! ```
//! use deloop_core::loops::LoopConfig;
//! let (cfg, adj) = LoopConfig::from_json5(r#"{
//!   tools: { loopDetection: { enabled: true, warningThreshold: 8, criticalThreshold: 8 } },
//!   agents: { list: [ { id: "worker", tools: { loopDetection: { detectors: { pingPong: false } } } } ] },
//! }"#).unwrap();
//! assert_eq!(cfg.settings_for(None).critical_threshold, 9);
//! assert!(!cfg.settings_for(Some("worker")).detectors.ping_pong);
//! assert_eq!(adj[0].key, "tools.loopDetection.criticalThreshold");
//! ```

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::{Map, Value};

use super::detectors::same_result;
use super::profile::Profile;

/// Detector switches. OpenClaw's three plus deloop's own; all default on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detectors {
    /// `detectors.genericRepeat` (OpenClaw).
    pub generic_repeat: bool,
    /// `detectors.knownPollNoProgress` (OpenClaw).
    pub known_poll_no_progress: bool,
    /// `detectors.pingPong` (OpenClaw).
    pub ping_pong: bool,
    /// `detectors.unknownToolRepeat` (deloop; OpenClaw cannot switch it off).
    pub unknown_tool_repeat: bool,
    /// `detectors.globalCircuitBreaker` (deloop; OpenClaw cannot switch it off).
    pub global_circuit_breaker: bool,
    /// `detectors.argumentChurn` (deloop; OpenClaw cannot switch it off).
    pub argument_churn: bool,
    /// `detectors.cycle` (deloop; not used by the `openclaw` profile).
    pub cycle: bool,
    /// `detectors.noProgress` (deloop; not used by the `openclaw` profile).
    pub no_progress: bool,
}

impl Default for Detectors {
    fn default() -> Self {
        Detectors {
            generic_repeat: true,
            known_poll_no_progress: true,
            ping_pong: true,
            unknown_tool_repeat: true,
            global_circuit_breaker: true,
            argument_churn: true,
            cycle: true,
            no_progress: true,
        }
    }
}

/// User normalisation for one tool (or `*` for all tools): keys dropped
/// from results before hashing, and regex replacements applied to every
/// string of the result (and to error text).
#[derive(Debug, Clone)]
pub struct UserNormaliser {
    /// Tool name (normalised) or `*`.
    pub tool: String,
    /// Object keys removed anywhere in the result.
    pub volatile_keys: Vec<String>,
    /// `(pattern, replacement)` pairs applied in order.
    pub patterns: Vec<(Regex, String)>,
}

/// Resolved settings for one agent.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `enabled`: `Some(false)` switches everything off, the post-compaction
    /// guard included. Absent means on (deloop was asked to check; OpenClaw's
    /// own runtime default is off).
    pub enabled: Option<bool>,
    /// `historySize` (30): calls kept per scope.
    pub history_size: usize,
    /// `warningThreshold` (10).
    pub warning_threshold: u32,
    /// `criticalThreshold` (20).
    pub critical_threshold: u32,
    /// `unknownToolThreshold` (10).
    pub unknown_tool_threshold: u32,
    /// `globalCircuitBreakerThreshold` (30).
    pub global_circuit_breaker_threshold: u32,
    /// `detectors.*`.
    pub detectors: Detectors,
    /// `postCompactionGuard.windowSize` (3).
    pub post_compaction_window: u32,
    /// deloop `maxCycleLength` (8): longest cycle the `cycle` detector looks for.
    pub max_cycle_length: usize,
    /// deloop `streakThreshold` (8): in the `default` and `strict` profiles,
    /// a call that would continue a back-to-back repetition (of one call or
    /// of a cycle) whose previous `streakThreshold` calls all repeated with
    /// identical results is critical; a warning at half of it.
    pub streak_threshold: u32,
    /// deloop `noProgressWarningThreshold` (3, 1–1,000,000): in the
    /// `default` and `strict` profiles, a warning when the previous calls
    /// of the judged call's tool returned the same result this many times
    /// in a row with different arguments (the `no_progress` detector).
    pub no_progress_warning_threshold: u32,
    /// deloop `noProgressCriticalThreshold` (6, 1–1,000,000; raised above
    /// the warning threshold): the same, critical.
    pub no_progress_critical_threshold: u32,
    /// deloop `pollTools` (`["command_status"]`): tools that are always polls.
    pub poll_tools: Vec<String>,
    /// deloop `pollActions` (`["poll", "log"]`): `process` actions that are polls.
    pub poll_actions: Vec<String>,
    /// deloop `volatileKeys` and `normalizers`, per tool.
    pub normalisers: Vec<UserNormaliser>,
    /// deloop `maxScopes` (1024): scopes (agent × run) kept; least recently used evicted.
    pub max_scopes: usize,
    /// deloop `profile`: a profile requested by the file (the CLI flag wins).
    pub profile: Option<Profile>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            enabled: None,
            history_size: 30,
            warning_threshold: 10,
            critical_threshold: 20,
            unknown_tool_threshold: 10,
            global_circuit_breaker_threshold: 30,
            detectors: Detectors::default(),
            post_compaction_window: 3,
            max_cycle_length: 8,
            streak_threshold: 8,
            no_progress_warning_threshold: same_result::DEFAULT_WARNING,
            no_progress_critical_threshold: same_result::DEFAULT_CRITICAL,
            poll_tools: vec!["command_status".to_string()],
            poll_actions: vec!["poll".to_string(), "log".to_string()],
            normalisers: Vec::new(),
            max_scopes: 1024,
            profile: None,
        }
    }
}

impl Settings {
    /// Is the guard switched off entirely (`enabled: false`)?
    pub fn disabled(&self) -> bool {
        self.enabled == Some(false)
    }

    /// Normalisers that apply to `tool`.
    pub(crate) fn normalisers_for(&self, tool: &str) -> Vec<&UserNormaliser> {
        self.normalisers
            .iter()
            .filter(|n| n.tool == "*" || n.tool == tool)
            .collect()
    }
}

/// A configuration: global settings plus per-agent settings.
#[derive(Debug, Clone, Default)]
pub struct LoopConfig {
    base: Settings,
    agents: BTreeMap<String, Settings>,
}

/// A value the loader changed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adjustment {
    /// Full key path, e.g. `tools.loopDetection.criticalThreshold`.
    pub key: String,
    /// Value as written.
    pub from: u32,
    /// Value used.
    pub to: u32,
    /// Why.
    pub reason: String,
}

/// A configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The text is not JSON5/JSON.
    #[error("config is not valid JSON5: {0}")]
    Syntax(String),
    /// A key has an invalid value or is unknown.
    #[error("config key `{key}`: {message}")]
    Invalid {
        /// Full key path.
        key: String,
        /// What is wrong and what is expected.
        message: String,
    },
}

fn invalid(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_string(),
        message: message.into(),
    }
}

const OPENCLAW_KEYS: &[&str] = &[
    "enabled",
    "historySize",
    "warningThreshold",
    "criticalThreshold",
    "unknownToolThreshold",
    "globalCircuitBreakerThreshold",
    "detectors",
    "postCompactionGuard",
];
const DELOOP_KEYS: &[&str] = &[
    "maxCycleLength",
    "streakThreshold",
    "noProgressWarningThreshold",
    "noProgressCriticalThreshold",
    "pollTools",
    "pollActions",
    "volatileKeys",
    "normalizers",
    "maxScopes",
    "profile",
];

impl LoopConfig {
    /// Settings for an agent (`None` or an agent without overrides: the global block).
    pub fn settings_for(&self, agent: Option<&str>) -> &Settings {
        agent.and_then(|a| self.agents.get(a)).unwrap_or(&self.base)
    }

    /// The global settings.
    pub fn base(&self) -> &Settings {
        &self.base
    }

    /// Mutable global settings (for programmatic configuration).
    pub fn base_mut(&mut self) -> &mut Settings {
        &mut self.base
    }

    /// A config with the given global settings and no agent overrides.
    pub fn from_settings(base: Settings) -> Self {
        LoopConfig {
            base,
            agents: BTreeMap::new(),
        }
    }

    /// The largest `maxScopes` of any agent (the guard's scope cap).
    pub fn max_scopes(&self) -> usize {
        self.agents
            .values()
            .map(|s| s.max_scopes)
            .chain(std::iter::once(self.base.max_scopes))
            .max()
            .unwrap_or(1024)
    }

    /// Parses a JSON5 (or JSON) config text.
    pub fn from_json5(text: &str) -> Result<(LoopConfig, Vec<Adjustment>), ConfigError> {
        if nesting_depth(text) > MAX_CONFIG_DEPTH {
            return Err(ConfigError::Syntax(format!(
                "nesting deeper than {MAX_CONFIG_DEPTH} levels"
            )));
        }
        let value: Value = json5::from_str(text).map_err(|e| ConfigError::Syntax(e.to_string()))?;
        Self::from_value(&value)
    }

    /// Builds a config from a parsed JSON value (see the module docs for the shapes).
    pub fn from_value(value: &Value) -> Result<(LoopConfig, Vec<Adjustment>), ConfigError> {
        let Value::Object(root) = value else {
            return Err(invalid("<root>", "expected an object"));
        };
        let full = root.contains_key("tools") || root.contains_key("agents");
        let (global_block, global_path) = if full {
            let block = match root.get("tools") {
                None => None,
                Some(Value::Object(t)) => t.get("loopDetection"),
                Some(_) => return Err(invalid("tools", "expected an object")),
            };
            (block.cloned(), "tools.loopDetection".to_string())
        } else {
            (Some(value.clone()), "loopDetection".to_string())
        };
        let global_block = match global_block {
            None => Map::new(),
            Some(Value::Object(m)) => m,
            Some(_) => return Err(invalid(&global_path, "expected an object")),
        };
        let mut adjustments = Vec::new();
        let base = parse_block(&global_block, &global_path, &mut adjustments)?;
        let mut agents = BTreeMap::new();
        if full {
            if let Some(agents_v) = root.get("agents") {
                let list = match agents_v {
                    Value::Object(a) => a.get("list"),
                    _ => return Err(invalid("agents", "expected an object")),
                };
                let list = match list {
                    None => &[][..],
                    Some(Value::Array(l)) => &l[..],
                    Some(_) => return Err(invalid("agents.list", "expected an array")),
                };
                for (i, agent) in list.iter().enumerate() {
                    let path = format!("agents.list[{i}]");
                    let Value::Object(a) = agent else {
                        return Err(invalid(&path, "expected an object"));
                    };
                    let Some(block) = a.get("tools").and_then(|t| t.get("loopDetection")).cloned()
                    else {
                        continue;
                    };
                    let id = match a.get("id") {
                        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
                        _ => return Err(invalid(
                            &format!("{path}.id"),
                            "an agent with a loopDetection override needs a non-empty string id",
                        )),
                    };
                    let bpath = format!("{path}.tools.loopDetection");
                    let Value::Object(block) = block else {
                        return Err(invalid(&bpath, "expected an object"));
                    };
                    let merged = merge(&global_block, &block);
                    let settings = parse_block(&merged, &bpath, &mut adjustments)?;
                    agents.insert(id, settings);
                }
            }
        }
        Ok((LoopConfig { base, agents }, adjustments))
    }
}

/// Deepest nesting accepted in a config file (the JSON5 parser recurses).
const MAX_CONFIG_DEPTH: usize = 64;

/// Maximum bracket nesting outside strings and comments (linear scan).
fn nesting_depth(text: &str) -> usize {
    let b = text.as_bytes();
    let (mut depth, mut max, mut i) = (0usize, 0usize, 0usize);
    while i < b.len() {
        match b[i] {
            q @ (b'"' | b'\'') => {
                i += 1;
                while i < b.len() && b[i] != q {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 1;
            }
            b'{' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    max
}

/// Field-by-field merge: objects merge recursively, everything else is replaced.
fn merge(base: &Map<String, Value>, over: &Map<String, Value>) -> Map<String, Value> {
    let mut out = base.clone();
    for (k, v) in over {
        match (out.get(k), v) {
            (Some(Value::Object(b)), Value::Object(o)) => {
                let m = merge(b, o);
                out.insert(k.clone(), Value::Object(m));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

fn positive(
    block: &Map<String, Value>,
    key: &str,
    path: &str,
    max: u64,
) -> Result<Option<u32>, ConfigError> {
    let Some(v) = block.get(key) else {
        return Ok(None);
    };
    let full = format!("{path}.{key}");
    let n = match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                .map(|f| f as u64)
        }),
        _ => None,
    };
    match n {
        Some(n) if n >= 1 && n <= max => Ok(Some(n as u32)),
        _ => Err(invalid(
            &full,
            format!("expected a positive integer between 1 and {max}, got {v}"),
        )),
    }
}

fn boolean(block: &Map<String, Value>, key: &str, path: &str) -> Result<Option<bool>, ConfigError> {
    match block.get(key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(invalid(
            &format!("{path}.{key}"),
            format!("expected true or false, got {v}"),
        )),
    }
}

fn strings(v: &Value, path: &str) -> Result<Vec<String>, ConfigError> {
    let Value::Array(items) = v else {
        return Err(invalid(path, "expected an array of strings"));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, s)| match s {
            Value::String(s) => Ok(s.clone()),
            _ => Err(invalid(&format!("{path}[{i}]"), "expected a string")),
        })
        .collect()
}

fn parse_block(
    block: &Map<String, Value>,
    path: &str,
    adjustments: &mut Vec<Adjustment>,
) -> Result<Settings, ConfigError> {
    for k in block.keys() {
        if !OPENCLAW_KEYS.contains(&k.as_str()) && !DELOOP_KEYS.contains(&k.as_str()) {
            return Err(invalid(
                &format!("{path}.{k}"),
                "unknown key (see docs/loops.md for the accepted keys)",
            ));
        }
    }
    let mut s = Settings {
        enabled: boolean(block, "enabled", path)?,
        ..Settings::default()
    };
    if let Some(n) = positive(block, "historySize", path, 10_000)? {
        s.history_size = n as usize;
    }
    if let Some(n) = positive(block, "warningThreshold", path, 1_000_000)? {
        s.warning_threshold = n;
    }
    if let Some(n) = positive(block, "criticalThreshold", path, 1_000_000)? {
        s.critical_threshold = n;
    }
    if let Some(n) = positive(block, "unknownToolThreshold", path, 1_000_000)? {
        s.unknown_tool_threshold = n;
    }
    if let Some(n) = positive(block, "globalCircuitBreakerThreshold", path, 1_000_000)? {
        s.global_circuit_breaker_threshold = n;
    }
    match block.get("detectors") {
        None => {}
        Some(Value::Object(d)) => {
            let dpath = format!("{path}.detectors");
            for k in d.keys() {
                if ![
                    "genericRepeat",
                    "knownPollNoProgress",
                    "pingPong",
                    "unknownToolRepeat",
                    "globalCircuitBreaker",
                    "argumentChurn",
                    "cycle",
                    "noProgress",
                ]
                .contains(&k.as_str())
                {
                    return Err(invalid(&format!("{dpath}.{k}"), "unknown detector"));
                }
            }
            let det = &mut s.detectors;
            let set = |slot: &mut bool, key: &str| -> Result<(), ConfigError> {
                if let Some(b) = boolean(d, key, &dpath)? {
                    *slot = b;
                }
                Ok(())
            };
            set(&mut det.generic_repeat, "genericRepeat")?;
            set(&mut det.known_poll_no_progress, "knownPollNoProgress")?;
            set(&mut det.ping_pong, "pingPong")?;
            set(&mut det.unknown_tool_repeat, "unknownToolRepeat")?;
            set(&mut det.global_circuit_breaker, "globalCircuitBreaker")?;
            set(&mut det.argument_churn, "argumentChurn")?;
            set(&mut det.cycle, "cycle")?;
            set(&mut det.no_progress, "noProgress")?;
        }
        Some(v) => {
            return Err(invalid(
                &format!("{path}.detectors"),
                format!("expected an object, got {v}"),
            ))
        }
    }
    match block.get("postCompactionGuard") {
        None => {}
        Some(Value::Object(p)) => {
            let ppath = format!("{path}.postCompactionGuard");
            for k in p.keys() {
                if k != "windowSize" {
                    return Err(invalid(&format!("{ppath}.{k}"), "unknown key"));
                }
            }
            if let Some(n) = positive(p, "windowSize", &ppath, 1000)? {
                s.post_compaction_window = n;
            }
        }
        Some(v) => {
            return Err(invalid(
                &format!("{path}.postCompactionGuard"),
                format!("expected an object, got {v}"),
            ))
        }
    }
    if let Some(n) = positive(block, "maxCycleLength", path, 64)? {
        s.max_cycle_length = n as usize;
    }
    if let Some(n) = positive(block, "streakThreshold", path, 1_000_000)? {
        s.streak_threshold = n;
    }
    if let Some(n) = positive(block, "noProgressWarningThreshold", path, 1_000_000)? {
        s.no_progress_warning_threshold = n;
    }
    if let Some(n) = positive(block, "noProgressCriticalThreshold", path, 1_000_000)? {
        s.no_progress_critical_threshold = n;
    }
    if let Some(n) = positive(block, "maxScopes", path, 10_000_000)? {
        s.max_scopes = n as usize;
    }
    if let Some(v) = block.get("pollTools") {
        s.poll_tools = strings(v, &format!("{path}.pollTools"))?
            .iter()
            .map(|t| super::hashing::normalize_tool_name(t))
            .collect();
    }
    if let Some(v) = block.get("pollActions") {
        s.poll_actions = strings(v, &format!("{path}.pollActions"))?;
    }
    match block.get("profile") {
        None => {}
        Some(Value::String(p)) => {
            s.profile = Some(
                p.parse()
                    .map_err(|e: String| invalid(&format!("{path}.profile"), e))?,
            )
        }
        Some(v) => {
            return Err(invalid(
                &format!("{path}.profile"),
                format!("expected a string, got {v}"),
            ))
        }
    }
    let mut norms: BTreeMap<String, UserNormaliser> = BTreeMap::new();
    match block.get("volatileKeys") {
        None => {}
        Some(Value::Object(m)) => {
            for (tool, keys) in m {
                let t = tool_key(tool);
                let keys = strings(keys, &format!("{path}.volatileKeys.{tool}"))?;
                entry(&mut norms, &t).volatile_keys.extend(keys);
            }
        }
        Some(v) => {
            return Err(invalid(
                &format!("{path}.volatileKeys"),
                format!("expected an object of tool -> [keys], got {v}"),
            ))
        }
    }
    match block.get("normalizers") {
        None => {}
        Some(Value::Object(m)) => {
            for (tool, rules) in m {
                let t = tool_key(tool);
                let rpath = format!("{path}.normalizers.{tool}");
                let Value::Array(rules) = rules else {
                    return Err(invalid(&rpath, "expected an array of {pattern, replace}"));
                };
                for (i, rule) in rules.iter().enumerate() {
                    let ipath = format!("{rpath}[{i}]");
                    let pattern = rule.get("pattern").and_then(Value::as_str).ok_or_else(|| {
                        invalid(&format!("{ipath}.pattern"), "expected a regex string")
                    })?;
                    let replace = match rule.get("replace") {
                        None => "#".to_string(),
                        Some(Value::String(r)) => r.clone(),
                        Some(_) => {
                            return Err(invalid(&format!("{ipath}.replace"), "expected a string"))
                        }
                    };
                    let re = regex::RegexBuilder::new(pattern)
                        .size_limit(1 << 20)
                        .build()
                        .map_err(|e| {
                            invalid(&format!("{ipath}.pattern"), format!("invalid regex: {e}"))
                        })?;
                    entry(&mut norms, &t).patterns.push((re, replace));
                }
            }
        }
        Some(v) => {
            return Err(invalid(
                &format!("{path}.normalizers"),
                format!("expected an object of tool -> [{{pattern, replace}}], got {v}"),
            ))
        }
    }
    s.normalisers = norms.into_values().collect();

    raise_above(
        adjustments,
        path,
        ("criticalThreshold", &mut s.critical_threshold),
        ("warningThreshold", s.warning_threshold),
    );
    raise_above(
        adjustments,
        path,
        (
            "globalCircuitBreakerThreshold",
            &mut s.global_circuit_breaker_threshold,
        ),
        ("criticalThreshold", s.critical_threshold),
    );
    raise_above(
        adjustments,
        path,
        (
            "noProgressCriticalThreshold",
            &mut s.no_progress_critical_threshold,
        ),
        (
            "noProgressWarningThreshold",
            s.no_progress_warning_threshold,
        ),
    );
    Ok(s)
}

/// Keeps a threshold above the one it must exceed: when `value` is not
/// above `floor`, it becomes `floor + 1` and the change is recorded.
fn raise_above(
    adjustments: &mut Vec<Adjustment>,
    path: &str,
    (key, value): (&str, &mut u32),
    (floor_key, floor): (&str, u32),
) {
    if *value <= floor {
        let to = floor + 1;
        adjustments.push(Adjustment {
            key: format!("{path}.{key}"),
            from: *value,
            to,
            reason: format!("must be above {floor_key} ({floor})"),
        });
        *value = to;
    }
}

fn tool_key(tool: &str) -> String {
    if tool == "*" {
        "*".to_string()
    } else {
        super::hashing::normalize_tool_name(tool)
    }
}

fn entry<'a>(
    norms: &'a mut BTreeMap<String, UserNormaliser>,
    tool: &str,
) -> &'a mut UserNormaliser {
    norms
        .entry(tool.to_string())
        .or_insert_with(|| UserNormaliser {
            tool: tool.to_string(),
            volatile_keys: Vec::new(),
            patterns: Vec::new(),
        })
}

#[cfg(test)]
mod tests;
