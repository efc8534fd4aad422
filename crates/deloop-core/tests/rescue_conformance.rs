//! Conformance of `repair` on the two peer corpora vendored in `testdata/corpora`:
//! `jsonrepair` (npm jsonrepair 3.15.0 test suite, ISC licence, notice in
//! `corpora/jsonrepair/LICENSE.md`) and `json-repair-py` (Python
//! json-repair test suite, MIT licence, notice in
//! `corpora/json-repair-py/LICENSE`).
//!
//! Every pair must either give the same parsed value as the suite, or be
//! listed in `deliberate_differences.rs` with the value deloop gives
//! instead and the reason.

#[path = "rescue_support/mod.rs"]
mod support;

use deloop_core::rescue::{repair, repair_json};
use support::{corpus, same_value, Case};

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
                    "{name} {} (documented difference: {}): input {:?}: got {:?}, documented {:?}",
                    c.id,
                    d.reason,
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
            (Some(g), None) => c.empty_ok && (g.is_null() || g == ""),
            (None, Some(_)) => false,
        };
        if ok {
            pass += 1;
        } else {
            if let Some(path) = std::env::var_os("DELOOP_DUMP_DIFFS") {
                use std::io::Write;
                let line = serde_json::json!({
                    "corpus": name, "id": c.id, "input": c.input,
                    "ours": got.as_ref().map(|v| v.to_string()),
                });
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .unwrap();
                writeln!(f, "{line}").unwrap();
            }
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
    println!(
        "jsonrepair: {pass} same value, {documented} documented differences, {} failures",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn json_repair_py_corpus() {
    let cases = corpus("json-repair-py");
    assert_eq!(
        cases.len(),
        164,
        "json-repair-py corpus should hold 164 pairs"
    );
    let (pass, documented, failures) = check(&cases, "json-repair-py");
    println!(
        "json-repair-py: {pass} same value, {documented} documented differences, {} failures",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_documented_difference_names_a_real_case_once() {
    let jr = corpus("jsonrepair");
    let py = corpus("json-repair-py");
    let table = differences::table();
    let mut seen = std::collections::HashSet::new();
    for d in &table {
        assert!(
            seen.insert((d.corpus, d.id)),
            "{} {} listed twice",
            d.corpus,
            d.id
        );
        assert!(
            d.reason.len() > 20,
            "{} {}: give a real reason",
            d.corpus,
            d.id
        );
        let cases = match d.corpus {
            "jsonrepair" => &jr,
            "json-repair-py" => &py,
            other => panic!("unknown corpus {other}"),
        };
        let case = cases.iter().find(|c| c.id == d.id);
        let case = case.unwrap_or_else(|| panic!("{} {}: no such case", d.corpus, d.id));
        // A documented difference must really differ from the suite.
        let ours: Option<serde_json::Value> = d.ours.map(|t| serde_json::from_str(t).unwrap());
        let differs = match (&ours, &case.expected) {
            (Some(o), Some(e)) => !same_value(o, e),
            (None, None) => false,
            (Some(o), None) => !(case.empty_ok && (o.is_null() || o == "")),
            (None, Some(_)) => true,
        };
        assert!(
            differs,
            "{} {} is listed but matches the suite",
            d.corpus, d.id
        );
    }
    println!("{} documented differences", table.len());
}

/// `repair_json` gives exactly `repair`'s value serialized, and the same
/// repairs, on every case of both corpora.
#[test]
fn repair_json_is_repair_serialized_on_both_corpora() {
    for name in ["jsonrepair", "json-repair-py"] {
        for c in corpus(name) {
            let want = repair(&c.input).map(|r| (r.value.to_string(), r.repairs));
            let got = repair_json(&c.input).map(|r| (r.json, r.repairs));
            assert_eq!(got, want, "{name} {}: input {:?}", c.id, c.input);
        }
    }
}
