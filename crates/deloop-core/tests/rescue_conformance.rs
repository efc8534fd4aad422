//! Conformance of `repair` on the two peer corpora in `shared/corpora`:
//! `jsonrepair` (npm jsonrepair 3.15.0 test suite, ISC licence, notice in
//! `corpora/jsonrepair/LICENSE.md`) and `json-repair-py` (Python
//! json-repair test suite, MIT licence, notice in
//! `corpora/json-repair-py/LICENSE`).
//!
//! Every pair must either give the same parsed value as the suite, or be
//! listed in `deliberate_differences.rs` with the value deloop gives
//! instead and the reason.

mod common;

use common::{corpus, same_value, Case};
use deloop_core::rescue::repair;

#[path = "rescue_differences.rs"]
mod differences;

fn check(cases: &[Case], name: &str) -> (usize, usize, Vec<String>) {
    let diffs = differences::table();
    let mut pass = 0;
    let mut documented = 0;
    let mut failures = Vec::new();
    for c in cases {
        let got = repair(&c.input).ok().map(|r| r.value);
        if let Some(d) = diffs.iter().find(|d| d.corpus == name && d.id == c.id) {
            let want: Option<serde_json::Value> = d.ours.map(|t| serde_json::from_str(t).unwrap());
            let ok = match (&got, &want) {
                (None, None) => true,
                (Some(g), Some(w)) => same_value(g, w),
                _ => false,
            };
            if ok {
                documented += 1;
            } else {
                failures.push(format!(
                    "{name} {} (documented difference): input {:?}: got {:?}, documented {:?}",
                    c.id,
                    c.input,
                    got.map(|v| v.to_string()),
                    d.ours
                ));
            }
            continue;
        }
        let ok = match (&got, &c.expected) {
            (None, None) => true,
            (Some(g), Some(e)) => same_value(g, e),
            (Some(g), None) => c.empty_ok && (g.is_null() || g == "" ),
            (None, Some(_)) => false,
        };
        if ok {
            pass += 1;
        } else {
            failures.push(format!(
                "{name} {}: input {:?}: got {:?}, expected {:?}",
                c.id,
                c.input,
                got.map(|v| v.to_string()),
                c.expected.as_ref().map(|v| v.to_string())
            ));
        }
    }
    (pass, documented, failures)
}

#[test]
fn jsonrepair_corpus() {
    let cases = corpus("jsonrepair");
    assert_eq!(cases.len(), 428, "jsonrepair corpus should hold 428 pairs");
    let (pass, documented, failures) = check(&cases, "jsonrepair");
    println!("jsonrepair: {pass} same value, {documented} documented differences, {} failures", failures.len());
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn json_repair_py_corpus() {
    let cases = corpus("json-repair-py");
    assert_eq!(cases.len(), 164, "json-repair-py corpus should hold 164 pairs");
    let (pass, documented, failures) = check(&cases, "json-repair-py");
    println!("json-repair-py: {pass} same value, {documented} documented differences, {} failures", failures.len());
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
