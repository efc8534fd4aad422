//! The differential test itself, and the generator's own test.

use crate::scenario::*;
use crate::sides::*;
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

#[test]
fn openclaw_profile_agrees_with_openclaw_on_random_scenarios() {
    let dir = match openclaw_dir() {
        Ok(d) => d,
        Err(why) => {
            assert!(
                !require_real(),
                "{why}; CI=true or DELOOP_REQUIRE_REAL=1 needs the OpenClaw differential test: run `bash scripts/setup-openclaw.sh`"
            );
            // Straight to stderr, past the test harness's capture, so the
            // line shows in a plain `cargo test` run.
            let _ = writeln!(
                std::io::stderr().lock(),
                "skipped loops_openclaw_differential: {why}; to run it: bash scripts/setup-openclaw.sh"
            );
            return;
        }
    };
    let count = env_number("DELOOP_OPENCLAW_SCENARIOS", 1000);
    let seed = env_number("DELOOP_OPENCLAW_SEED", 1);

    let t0 = Instant::now();
    let scenarios: Vec<Vec<Value>> = (0..count).map(|i| scenario(seed + i)).collect();
    let t_gen = t0.elapsed();

    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let input = tmp.join(format!("openclaw-differential-{seed}-{count}.jsonl"));
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
        for (i, events) in scenarios.iter().enumerate() {
            let line = json!({"name": format!("seed-{}", seed + i as u64), "events": events});
            writeln!(f, "{line}").unwrap();
        }
    }
    // OpenClaw runs in its own process while deloop replays the same
    // scenarios here.
    let t1 = Instant::now();
    let oracle = Command::new("node")
        .arg(workspace().join("scripts/openclaw-oracle.mjs"))
        .arg("--batch")
        .arg("--openclaw")
        .arg(&dir)
        .arg(&input)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run node");
    let ours: Vec<Verdicts> = scenarios
        .iter()
        .enumerate()
        .map(|(i, events)| {
            deloop_verdicts(events)
                .unwrap_or_else(|e| panic!("seed-{}: deloop: {e}", seed + i as u64))
        })
        .collect();
    let t_deloop = t1.elapsed();
    let out = oracle.wait_with_output().expect("wait for node");
    let t_both = t1.elapsed();
    assert!(
        out.status.success(),
        "openclaw-oracle.mjs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).expect("oracle output is UTF-8");
    let oracle: Vec<Value> = stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("oracle line is JSON"))
        .collect();
    assert_eq!(
        oracle.len(),
        scenarios.len(),
        "one oracle line per scenario"
    );

    let mut calls = 0usize;
    let mut mismatched_calls = 0usize;
    let mut bad_scenarios: Vec<String> = Vec::new();
    let mut report = Vec::new();
    let (mut with_runs, mut two_agents, mut compactions, mut criticals) = (0, 0, 0, 0);
    let (mut late, mut very_late) = (0, 0);
    let mut detectors: std::collections::BTreeMap<String, usize> = Default::default();
    for (i, ((events, expected), got)) in scenarios.iter().zip(&oracle).zip(ours).enumerate() {
        let name = format!("seed-{}", seed + i as u64);
        assert_eq!(expected["name"], json!(name));
        if let Some(e) = expected.get("error") {
            panic!("{name}: the oracle could not replay it: {e}");
        }
        let want: Verdicts = expected["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v[0].as_str().unwrap().to_string(),
                    v[1].as_str().map(String::from),
                    v[2].as_u64(),
                )
            })
            .collect();
        assert_eq!(got.len(), want.len(), "{name}: call count");
        calls += got.len();
        with_runs += events.iter().any(|e| e.get("run").is_some()) as usize;
        two_agents += events.iter().any(|e| {
            e.get("agent")
                .and_then(Value::as_str)
                .is_some_and(|a| a.trim() != "main")
        }) as usize;
        compactions += events.iter().any(|e| e["type"] == "compaction") as usize;
        criticals += want.iter().any(|w| w.0 == "critical") as usize;
        let lag = longest_result_lag(events);
        late += (lag > 0) as usize;
        very_late += (lag >= 30) as usize;
        for w in &want {
            if let Some(d) = &w.1 {
                *detectors.entry(format!("{}/{d}", w.0)).or_default() += 1;
            }
        }
        let wrong: Vec<usize> = (0..got.len()).filter(|&k| got[k] != want[k]).collect();
        if !wrong.is_empty() {
            mismatched_calls += wrong.len();
            bad_scenarios.push(name.clone());
            if report.len() < 12 {
                let k = wrong[0];
                report.push(format!(
                    "{name}: {} of {} calls differ; first at call {k}: deloop {:?}, OpenClaw {:?}",
                    wrong.len(),
                    got.len(),
                    got[k],
                    want[k]
                ));
            }
            let path = tmp.join(format!("openclaw-mismatch-{name}.jsonl"));
            let text: String = events.iter().map(|e| format!("{e}\n")).collect();
            std::fs::write(&path, text).unwrap();
        }
    }
    println!(
        "openclaw differential: {count} scenarios (seeds {seed}..{}), {calls} calls; {with_runs} with run ids, {two_agents} with two agents, {late} with late results ({very_late} with a result 30+ calls late), {compactions} with compactions, {criticals} with a critical verdict",
        seed + count - 1,
    );
    println!("OpenClaw's non-ok verdicts by level/detector: {detectors:?}");
    println!(
        "timings: generate {:.2} s; deloop {:.2} s and OpenClaw (node, alongside) {:.2} s",
        t_gen.as_secs_f64(),
        t_deloop.as_secs_f64(),
        t_both.as_secs_f64()
    );
    assert!(
        bad_scenarios.is_empty(),
        "deloop's openclaw profile disagrees with OpenClaw {OPENCLAW_VERSION} on {mismatched_calls} of {calls} calls, in {} of {count} scenarios (transcripts written to {}):\n{}",
        bad_scenarios.len(),
        tmp.display(),
        report.join("\n")
    );
}

/// How many calls after its call the latest-arriving result came (0: every
/// result came before the next call).
pub(crate) fn longest_result_lag(events: &[Value]) -> usize {
    // (call id, position among calls) of the calls still waiting.
    let mut waiting: Vec<(Option<&str>, usize)> = Vec::new();
    let mut calls = 0;
    let mut lag = 0;
    for e in events {
        match e["type"].as_str() {
            Some("call") => {
                waiting.push((e.get("id").and_then(Value::as_str), calls));
                calls += 1;
            }
            Some("result") => {
                let id = e.get("id").and_then(Value::as_str);
                let found = match id {
                    Some(_) => waiting.iter().position(|w| w.0 == id),
                    None => (!waiting.is_empty()).then_some(0),
                };
                if let Some(p) = found {
                    lag = lag.max(calls - 1 - waiting[p].1);
                    waiting.remove(p);
                }
            }
            _ => {}
        }
    }
    lag
}

#[test]
fn generator_is_deterministic_and_varied() {
    assert_eq!(scenario(7), scenario(7));
    assert_ne!(scenario(7), scenario(8));
    // The generated transcripts replay without error in deloop.
    for s in 1..=50 {
        deloop_verdicts(&scenario(s)).unwrap_or_else(|e| panic!("seed {s}: {e}"));
    }
}
