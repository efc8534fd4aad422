//! Rescue and repair of broken JSON model output: never a panic; a
//! rescued value and a repaired document serialise to JSON that parses;
//! repair is idempotent (repairing its own output gives the same document
//! and needs no repair); the partial extractor fed in chunks agrees with
//! itself across chunks. Options (byte 0, low two bits):
//! the key to rescue.

use deloop_core::rescue::{partial_string, repair, repair_json, rescue, PartialExtractor};
use deloop_fuzz::Input;

const KEYS: [&str; 4] = ["answer", "a", "text", "reasoning"];

fn check(data: &[u8]) {
    let input = Input::read(data);
    let key = KEYS[usize::from(input.flags & 3)];
    let text = String::from_utf8_lossy(input.payload);
    let text = text.as_ref();

    if let Ok(r) = rescue(text, key) {
        let s = serde_json::to_string(&r.value).expect("a rescued value serialises");
        let back: serde_json::Value = serde_json::from_str(&s).expect("a rescued value parses");
        assert_eq!(back, r.value);
    }

    match repair_json(text) {
        Ok(out) => {
            let v: serde_json::Value =
                serde_json::from_str(&out.json).expect("repair's output parses as JSON");
            let again = repair_json(&out.json).expect("repair's output repairs");
            assert_eq!(again.json, out.json, "repair is not idempotent");
            assert!(
                again.repairs.is_empty(),
                "valid JSON needed repairs: {:?}",
                again.repairs
            );
            let value = repair(text).expect("repair and repair_json agree").value;
            assert_eq!(value, v);
        }
        Err(_) => assert!(repair(text).is_err(), "repair and repair_json disagree"),
    }

    // Streaming extraction: what the pushes return concatenates to the
    // extractor's text, and `finish` only adds to it. (That it is a prefix
    // of the batch value is stated only for replies whose chosen value is
    // the one streamed, docs/rescue.md; tests/rescue_stream.rs checks it.)
    let mut x = PartialExtractor::new(key);
    let mut got = String::new();
    for c in input.chunks() {
        got.push_str(x.push(&String::from_utf8_lossy(c)));
        assert_eq!(got, x.text());
    }
    got.push_str(x.finish());
    assert_eq!(got, x.text());
    let _ = partial_string(&got, key);
}

fn main() {
    afl::fuzz!(|data: &[u8]| check(data));
}
