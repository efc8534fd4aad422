//! Inputs that the fuzz targets (fuzz/, docs/fuzzing.md) found failing,
//! replayed with the targets' own invariants, so that CI keeps them fixed
//! without AFL++. Each file under `tests/fuzz/TARGET/` is one input's
//! payload (the fuzz header stripped).

use std::path::PathBuf;

use deloop_core::rescue::{repair, repair_json, rescue};

/// The payloads under `tests/fuzz/<target>`, with their names.
fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz")
        .join(target);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| {
            let path = e.expect("a directory entry").path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).expect("a readable input"))
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no inputs in {}", dir.display());
    out
}

/// The `rescue` target's invariants: the repaired document parses, and
/// repairing it again changes nothing and needs no repair.
#[test]
fn repair_is_idempotent_on_fuzz_findings() {
    for (name, bytes) in inputs("rescue") {
        let text = String::from_utf8_lossy(&bytes);
        let Ok(out) = repair_json(&text) else {
            assert!(
                repair(&text).is_err(),
                "{name}: repair and repair_json disagree"
            );
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(&out.json)
            .unwrap_or_else(|e| panic!("{name}: repair's output does not parse: {e}"));
        let again = repair_json(&out.json).expect("repair's output repairs");
        assert_eq!(again.json, out.json, "{name}: repair is not idempotent");
        assert!(again.repairs.is_empty(), "{name}: {:?}", again.repairs);
        assert_eq!(repair(&text).expect("agrees").value, v, "{name}");
        for key in ["answer", "a", "text", "reasoning"] {
            let _ = rescue(&text, key);
        }
    }
}
