//! Helpers shared by the rescue test files: locating and loading the
//! conformance corpora, and comparing parsed values.
#![allow(dead_code)]

use serde_json::Value;

/// One input → expected pair.
#[derive(Debug, Clone)]
pub struct Case {
    /// `jsonrepair`: `L<line number>` in cases.jsonl; py: its `id`.
    pub id: String,
    pub input: String,
    /// `None`: the suite refuses the input (jsonrepair `error`) or returns
    /// nothing (json-repair `empty_output`).
    pub expected: Option<Value>,
    /// json-repair `empty_output`: `null` or `""` count as the same answer.
    pub empty_ok: bool,
}

/// Loads `corpora/<name>/cases.jsonl`.
pub fn corpus(name: &str) -> Vec<Case> {
    let path = deloop_testdata::corpus(name).join("cases.jsonl");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), i + 1));
        let input = v["input"].as_str().expect("input").to_owned();
        let (id, expected, empty_ok) = if name == "jsonrepair" {
            let exp = if v.get("error").and_then(Value::as_bool) == Some(true) {
                None
            } else {
                let t = v["expected"].as_str().expect("expected text");
                Some(serde_json::from_str(t).unwrap_or_else(|e| panic!("line {}: {e}", i + 1)))
            };
            (format!("L{}", i + 1), exp, false)
        } else {
            let empty = v.get("empty_output").and_then(Value::as_bool) == Some(true);
            let exp = if empty {
                None
            } else {
                Some(v["expected"].clone())
            };
            (v["id"].as_str().expect("id").to_owned(), exp, empty)
        };
        out.push(Case {
            id,
            input,
            expected,
            empty_ok,
        });
    }
    out
}

/// Equality of parsed values, with numbers compared by value (`2.0 == 2`).
pub fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y || (x.as_f64().is_some() && x.as_f64() == y.as_f64())
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_value(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
        }
        _ => a == b,
    }
}
