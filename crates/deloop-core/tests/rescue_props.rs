//! Property tests of the rescue guard.

#[path = "rescue_support/mod.rs"]
mod support;

use deloop_core::rescue::{partial_string, repair, repair_json, rescue};
use proptest::prelude::*;
use serde_json::{Map, Value};
use support::same_value;

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e300f64..1e300).prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        "[ -~]{0,12}".prop_map(Value::String),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((any::<String>(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn jsonish() -> impl Strategy<Value = String> {
    "[\\[\\]{}\"':,a-zA-Z0-9 \\n\\\\/*#`.+éñ😀\u{85}\u{2028}\u{3000}\u{200b}\u{feff}“”‘’´-]{0,80}"
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn valid_json_passes_through_unchanged(v in value()) {
        for text in [serde_json::to_string(&v).unwrap(), serde_json::to_string_pretty(&v).unwrap()] {
            let got = repair(&text).map(|r| r.value);
            prop_assert!(
                got.as_ref().is_ok_and(|g| same_value(g, &v)),
                "input {text}: got {got:?}"
            );
        }
    }

    #[test]
    fn rescue_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let s = String::from_utf8_lossy(&bytes);
        let _ = rescue(&s, "answer");
        let _ = repair(&s);
        let _ = partial_string(&s, "answer");
    }

    #[test]
    fn rescue_never_panics_on_strings(s in any::<String>()) {
        let _ = rescue(&s, "answer");
        let _ = repair(&s);
    }

    #[test]
    fn rescue_never_panics_on_jsonish_text(s in jsonish()) {
        let _ = rescue(&s, "a");
        if let Ok(r) = repair(&s) {
            // Whatever comes out is valid JSON that reparses to itself.
            let text = r.value.to_string();
            let back: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(back, r.value);
        }
    }

    /// `repair_json` (text written while parsing, and the serde_json fast
    /// path) gives exactly `repair`'s value serialized, and its repairs.
    #[test]
    fn repair_json_is_repair_serialized(s in jsonish(), v in value(), cut in any::<usize>()) {
        let valid = serde_json::to_string(&v).unwrap();
        let mut c = cut % (valid.len() + 1);
        while !valid.is_char_boundary(c) {
            c -= 1;
        }
        let dup = format!("{{\"a\": 1, \"b\": {valid}, \"a\": 2, \"b\"");
        for text in [s.as_str(), valid.as_str(), &valid[..c], dup.as_str()] {
            let want = repair(text).map(|r| (r.value.to_string(), r.repairs));
            let got = repair_json(text).map(|r| (r.json, r.repairs));
            prop_assert_eq!(got, want, "input {:?}", text);
        }
    }

    #[test]
    fn truncated_valid_json_is_repaired_and_prefix_consistent(
        answer in any::<String>(),
        other in value(),
        answer_first in any::<bool>(),
        pretty in any::<bool>(),
    ) {
        let mut m = Map::new();
        if answer_first {
            m.insert("answer".into(), Value::String(answer.clone()));
            m.insert("zz_other".into(), other);
        } else {
            m.insert("aa_other".into(), other);
            m.insert("answer".into(), Value::String(answer.clone()));
        }
        let v = Value::Object(m);
        let text = if pretty {
            serde_json::to_string_pretty(&v).unwrap()
        } else {
            serde_json::to_string(&v).unwrap()
        };
        for (i, _) in text.char_indices().skip(1).chain([(text.len(), ' ')]) {
            let prefix = &text[..i];
            prop_assert!(repair(prefix).is_ok(), "repair failed on {prefix:?}");
            if let Ok(r) = rescue(prefix, "answer") {
                if let Some(t) = r.as_text() {
                    prop_assert!(
                        answer.starts_with(t),
                        "prefix {prefix:?} gave {t:?}, not a prefix of {answer:?}"
                    );
                }
            }
        }
        let full = rescue(&text, "answer").unwrap();
        prop_assert_eq!(full.as_text(), Some(answer.as_str()));
    }
}
