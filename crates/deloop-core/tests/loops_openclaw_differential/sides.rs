//! Running both sides: deloop's verdicts, and where OpenClaw and Node are
//! found.

use crate::loops_support::parse_events;
use deloop_core::loops::replay::Replay;
use deloop_core::loops::{Guard, LoopConfig, Profile};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

pub(crate) const OPENCLAW_VERSION: &str = "2026.9.6";

// ---------------------------------------------------------------------------
// Running both sides.

pub(crate) type Verdicts = Vec<(String, Option<String>, Option<u64>)>;

pub(crate) fn deloop_verdicts(events: &[Value]) -> Result<Verdicts, String> {
    let text: String = events.iter().map(|e| format!("{e}\n")).collect();
    let mut r = Replay::new(Guard::new(Profile::OpenClaw, LoopConfig::default()));
    for ev in parse_events(&text) {
        r.push(ev).map_err(|e| e.to_string())?;
    }
    Ok(r.into_verdicts()
        .into_iter()
        .map(|c| {
            (
                c.verdict.level.as_str().to_string(),
                c.verdict.detector.map(|d| d.as_str().to_string()),
                c.verdict.count.map(u64::from),
            )
        })
        .collect())
}

pub(crate) fn workspace() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The installed package, or why it is not usable.
pub(crate) fn openclaw_dir() -> Result<PathBuf, String> {
    let dir = match std::env::var_os("DELOOP_OPENCLAW_DIR") {
        Some(d) => PathBuf::from(d),
        None => deloop_testdata::cache_dir()
            .join(format!("openclaw-{OPENCLAW_VERSION}/node_modules/openclaw")),
    };
    if !dir.join("package.json").is_file() {
        return Err(format!(
            "OpenClaw {OPENCLAW_VERSION} is not installed at {}",
            dir.display()
        ));
    }
    match Command::new("node").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(dir),
        _ => Err("node is not on PATH".into()),
    }
}

pub(crate) fn require_real() -> bool {
    let on = |k: &str| {
        std::env::var(k)
            .map(|v| {
                let v = v.trim().to_ascii_lowercase();
                !v.is_empty() && v != "0" && v != "false"
            })
            .unwrap_or(false)
    };
    on("CI") || on("DELOOP_REQUIRE_REAL")
}

pub(crate) fn env_number(key: &str, default: u64) -> u64 {
    match std::env::var(key) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{key}={v:?} is not a non-negative integer")),
        Err(_) => default,
    }
}
