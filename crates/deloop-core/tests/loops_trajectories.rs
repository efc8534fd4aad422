//! Real agent runs (`shared/data/trajectories`, 317 runs): how often each
//! profile reaches critical on resolved runs (false positives) and how many
//! of the 57 runs labelled `plausible_loop` it catches, and where the
//! `no_progress` detector (same result, varied arguments) speaks.

mod loops_support;

use deloop_core::loops::replay::Replay;
use deloop_core::loops::{Detector, Guard, LoopConfig, Profile};
use loops_support::parse_events;
use serde_json::Value;

#[derive(Debug, Default, Clone, Copy)]
struct Numbers {
    resolved: usize,
    resolved_critical: usize,
    loops: usize,
    loops_caught: usize,
    runs_critical: usize,
    /// Runs with a `no_progress` verdict: resolved, unresolved, outcome
    /// unknown, plausible loops.
    no_progress: [usize; 4],
    /// Runs with a critical `no_progress` verdict, in the same classes.
    no_progress_critical: [usize; 4],
}

/// Each run's file and the index of its first critical call.
type Firsts = Vec<(String, Option<usize>)>;

fn evaluate(profile: Profile) -> Option<(Numbers, Firsts)> {
    let root = deloop_testdata::shared_data("data/trajectories", "loops_trajectories")?;
    let index = std::fs::read_to_string(root.join("index.jsonl")).expect("index.jsonl");
    let mut n = Numbers::default();
    let mut runs = 0;
    let mut firsts = Vec::new();
    for line in index.lines().filter(|l| !l.trim().is_empty()) {
        let row: Value = serde_json::from_str(line).unwrap();
        let file = row["file"].as_str().unwrap();
        let text =
            std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let mut r = Replay::new(Guard::new(profile, LoopConfig::default()));
        for ev in parse_events(&text) {
            r.push(ev).unwrap_or_else(|e| panic!("{file}: {e}"));
        }
        let first = r.verdicts().iter().position(|c| c.verdict.is_critical());
        firsts.push((file.to_string(), first));
        let critical = first.is_some();
        let np = |critical_only: bool| {
            r.verdicts().iter().any(|c| {
                c.verdict.detector == Some(Detector::NoProgress)
                    && (!critical_only || c.verdict.is_critical())
            })
        };
        let (np_any, np_critical) = (np(false), np(true));
        runs += 1;
        let resolved = row["outcome"] == "resolved";
        let looped = row["plausible_loop"] == true;
        n.resolved += resolved as usize;
        n.loops += looped as usize;
        n.resolved_critical += (resolved && critical) as usize;
        n.loops_caught += (looped && critical) as usize;
        n.runs_critical += critical as usize;
        let unresolved = row["outcome"] == "unresolved";
        let unknown = !resolved && !unresolved;
        if std::env::var_os("DELOOP_TRAJ_DEBUG").is_some() && np_any && !unresolved {
            println!("{profile}: no_progress (critical: {np_critical}) in {file}");
        }
        let classes = [resolved, unresolved, unknown, looped];
        for (i, in_class) in classes.into_iter().enumerate() {
            n.no_progress[i] += (in_class && np_any) as usize;
            n.no_progress_critical[i] += (in_class && np_critical) as usize;
        }
    }
    assert_eq!(runs, 317, "the trajectory set has 317 runs");
    Some((n, firsts))
}

#[test]
fn trajectories_all_profiles() {
    let mut all = Vec::new();
    for p in Profile::ALL {
        let Some((n, firsts)) = evaluate(p) else {
            return;
        };
        println!(
            "{p:>8}: critical on {}/{} resolved runs, caught {}/{} plausible loops, {} of 317 runs with a critical",
            n.resolved_critical, n.resolved, n.loops_caught, n.loops, n.runs_critical
        );
        if p != Profile::OpenClaw {
            println!(
                "{p:>8}: no_progress on {} resolved / {} unresolved / {} unknown-outcome / {} plausible-loop runs (critical: {} / {} / {} / {})",
                n.no_progress[0],
                n.no_progress[1],
                n.no_progress[2],
                n.no_progress[3],
                n.no_progress_critical[0],
                n.no_progress_critical[1],
                n.no_progress_critical[2],
                n.no_progress_critical[3]
            );
        }
        all.push((p, n, firsts));
    }
    let get = |p: Profile| all.iter().find(|(q, _, _)| *q == p).unwrap().1;
    let firsts = |p: Profile| &all.iter().find(|(q, _, _)| *q == p).unwrap().2;
    // Every run OpenClaw blocks, default blocks at the same call or earlier.
    for ((file, oc), (_, dl)) in firsts(Profile::OpenClaw)
        .iter()
        .zip(firsts(Profile::Default))
    {
        if let Some(oc) = oc {
            assert!(
                dl.is_some_and(|d| d <= *oc),
                "{file}: openclaw blocks at call {oc}, default at {dl:?}"
            );
        }
    }
    let d = get(Profile::Default);
    assert_eq!((d.resolved, d.loops), (122, 57));
    assert_eq!(
        d.resolved_critical, 0,
        "default must never block a resolved run"
    );
    assert!(
        d.loops_caught >= 15,
        "default must catch at least 15 of 57 plausible loops, caught {}",
        d.loops_caught
    );
    assert_eq!(
        d.no_progress_critical[0], 0,
        "no_progress must never block a resolved run"
    );
    let o = get(Profile::OpenClaw);
    assert_eq!(
        o.resolved_critical, 0,
        "OpenClaw's detector blocks no resolved run"
    );
    assert_eq!(
        o.loops_caught, 5,
        "OpenClaw's detector catches 5 of the 57 plausible loops"
    );
    let s = get(Profile::Strict);
    assert!(
        s.loops_caught >= d.loops_caught,
        "strict catches at least what default catches"
    );
}
