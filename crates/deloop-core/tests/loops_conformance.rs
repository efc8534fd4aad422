//! The OpenClaw conformance corpus: every one of the 74 scenarios replayed
//! through the `openclaw` profile must give OpenClaw's own verdict (level,
//! detector, count) on every call. The `default` profile must block every
//! loop OpenClaw blocks, no later.

mod loops_support;

use deloop_core::loops::replay::{CallVerdict, Replay};
use deloop_core::loops::{Guard, Level, LoopConfig, Profile};
use loops_support::parse_events;
use serde_json::Value;

struct Scenario {
    name: String,
    events: String,
    expected: Vec<(String, Option<String>, Option<u64>)>,
}

fn scenarios() -> Vec<Scenario> {
    let root = deloop_testdata::corpus("openclaw-loops");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("manifest.json")).unwrap())
            .unwrap();
    let mut out = Vec::new();
    for name in manifest.as_object().expect("manifest object").keys() {
        let events = std::fs::read_to_string(root.join(format!("scenarios/{name}.jsonl")))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected = std::fs::read_to_string(root.join(format!("expected/{name}.jsonl")))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                (
                    v["level"].as_str().unwrap().to_string(),
                    v["detector"].as_str().map(String::from),
                    v["count"].as_u64(),
                )
            })
            .collect();
        out.push(Scenario {
            name: name.clone(),
            events,
            expected,
        });
    }
    out
}

fn run(profile: Profile, events: &str) -> Vec<CallVerdict> {
    let mut r = Replay::new(Guard::new(profile, LoopConfig::default()));
    for ev in parse_events(events) {
        r.push(ev).unwrap();
    }
    r.into_verdicts()
}

#[test]
fn openclaw_profile_matches_all_74_scenarios() {
    let all = scenarios();
    assert_eq!(all.len(), 74, "the corpus has 74 scenarios");
    let mut failures = Vec::new();
    let mut calls = 0;
    for s in &all {
        let got = run(Profile::OpenClaw, &s.events);
        assert_eq!(got.len(), s.expected.len(), "{}: call count", s.name);
        for (g, e) in got.iter().zip(&s.expected) {
            calls += 1;
            let v = &g.verdict;
            let gl = v.level.as_str().to_string();
            let gd = v.detector.map(|d| d.as_str().to_string());
            let gc = v.count.map(u64::from);
            if (gl.as_str(), gd.as_deref(), gc) != (e.0.as_str(), e.1.as_deref(), e.2) {
                failures.push(format!(
                    "{} call {}: got {}/{:?}/{:?}, expected {}/{:?}/{:?}",
                    s.name, g.index, gl, gd, gc, e.0, e.1, e.2
                ));
            }
        }
    }
    println!(
        "openclaw profile: {} calls in 74 scenarios, {} mismatches",
        calls,
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Scenarios where OpenClaw's critical is a known false positive (not a
/// loop), so the default profile is not required to block them.
const OPENCLAW_FALSE_POSITIVES: &[(&str, &str)] = &[(
    "oc58_plain_object_results_changing_22",
    "plain JSON results whose data changes: OpenClaw hashes them all alike",
)];

#[test]
fn default_profile_blocks_every_openclaw_block_no_later() {
    let mut report = Vec::new();
    for s in scenarios() {
        if OPENCLAW_FALSE_POSITIVES.iter().any(|(n, _)| *n == s.name) {
            continue;
        }
        let Some(first_oc) = s.expected.iter().position(|e| e.0 == "critical") else {
            continue;
        };
        let got = run(Profile::Default, &s.events);
        let first_dl = got.iter().position(|c| c.verdict.level == Level::Critical);
        match first_dl {
            Some(i) if i <= first_oc => {}
            other => report.push(format!(
                "{}: openclaw blocks at {first_oc}, default at {other:?}",
                s.name
            )),
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}

#[test]
fn default_profile_does_better_on_openclaw_weaknesses() {
    let by_name = |n: &str| {
        scenarios()
            .into_iter()
            .find(|s| s.name.starts_with(n))
            .unwrap()
    };
    // oc58: changing plain results are progress.
    let got = run(Profile::Default, &by_name("oc58").events);
    assert!(got.iter().all(|c| c.verdict.level != Level::Critical));
    // oc43: once the unknown tool is blocked it stays blocked.
    let got = run(Profile::Default, &by_name("oc43").events);
    let first = got.iter().position(|c| c.verdict.is_critical()).unwrap();
    assert!(got[first..].iter().all(|c| c.verdict.is_critical()));
    // oc47: the ping-pong block is sticky, no fallback to warnings.
    let got = run(Profile::Default, &by_name("oc47").events);
    let first = got.iter().position(|c| c.verdict.is_critical()).unwrap();
    assert!(got[first..].iter().all(|c| c.verdict.is_critical()));
    // The second critical in a run says to terminate it.
    assert!(got[first + 1].verdict.terminate_run);
    assert!(!got[first].verdict.terminate_run);
}
