//! The real-output set (`shared/data/real-llm-text/cases.jsonl`): 52 real
//! loops and 66 healthy answers with legitimate repetition. Computes and
//! prints how many loops each guard catches and how many healthy answers
//! it leaves unchanged, and asserts the acceptance thresholds of issue 2.

use deloop_core::repetition::{clamp, ClampConfig};

struct Case {
    id: String,
    label: String,
    text: String,
    onset: usize,
    unit_chars: usize,
}

/// The cases, or `None` when the real-data folder is absent (and not required).
fn load(suite: &str) -> Option<Vec<Case>> {
    let path = deloop_testdata::shared_data("data/real-llm-text/cases.jsonl", suite)?;
    let data = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let cases = data
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("valid JSON line");
            Case {
                id: v["id"].as_str().expect("id").to_string(),
                label: v["label"].as_str().expect("label").to_string(),
                text: v["text"].as_str().expect("text").to_string(),
                onset: v["onset"].as_u64().unwrap_or(0) as usize,
                unit_chars: v["unit"].as_str().map_or(0, |u| u.chars().count()),
            }
        })
        .collect();
    Some(cases)
}

/// The rule: a loop is caught when the output keeps what comes
/// before `onset` and ends no later than `onset + 3 × len(unit) + 200`
/// characters (Python string indices, i.e. Unicode scalar values).
fn caught(case: &Case, out: &str) -> bool {
    let before: String = case.text.chars().take(case.onset).collect();
    out.starts_with(&before) && out.chars().count() <= case.onset + 3 * case.unit_chars + 200
}

fn evaluate(config: &ClampConfig, name: &str) -> Option<(usize, usize, usize, usize)> {
    let cases = load(&format!("repetition_real [{name}]"))?;
    assert_eq!(cases.len(), 118, "the set has 118 cases");
    let (mut loops, mut hit, mut healthy, mut intact) = (0, 0, 0, 0);
    let mut fired_on_loops = 0;
    for case in &cases {
        let out = clamp(&case.text, config);
        if case.label == "loop" {
            loops += 1;
            if out.is_clamped() {
                fired_on_loops += 1;
            }
            if caught(case, &out.text) {
                hit += 1;
            } else {
                println!("[{name}] missed loop {} ({:?})", case.id, out.report());
            }
        } else {
            healthy += 1;
            if out.text == case.text {
                intact += 1;
            } else {
                println!("[{name}] changed healthy {} ({:?})", case.id, out.report());
            }
        }
    }
    println!(
        "[{name}] loops caught: {hit}/{loops} (fired on {fired_on_loops}); \
         healthy unchanged: {intact}/{healthy}"
    );
    Some((hit, loops, intact, healthy))
}

#[test]
fn default_guard_meets_the_real_set_bar() {
    let Some((hit, loops, intact, healthy)) = evaluate(&ClampConfig::default(), "default") else {
        return;
    };
    assert_eq!((loops, healthy), (52, 66));
    assert!(hit >= 50, "default guard caught only {hit}/52 loops");
    assert!(
        intact >= 64,
        "default guard changed {} healthy answers",
        66 - intact
    );
}

#[test]
fn seed_compat_counts_are_reported() {
    let Some((hit, _, intact, _)) = evaluate(&ClampConfig::seed_compat(), "seed-compat") else {
        return;
    };
    // The seed's rules are the baseline the default guard improves on: they
    // miss every long-period loop and mangle many healthy answers.
    assert!(hit < 48, "seed-compat unexpectedly caught {hit} loops");
    assert!(
        intact < 64,
        "seed-compat unexpectedly left {intact} healthy intact"
    );
}
