//! End-to-end tests of `deloop rescue` and `deloop repair`.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn deloop(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_deloop"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run deloop");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

const SEED: &str = r#"```json
{"answer": "**Auditoría Suprema** "la revisión final" y más texto"}
```"#;

#[test]
fn rescue_prints_a_string_raw() {
    let o = deloop(&["rescue", "--key", "answer"], SEED.as_bytes());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "**Auditoría Suprema** \"la revisión final\" y más texto\n"
    );
}

#[test]
fn rescue_prints_other_values_as_json_and_reads_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reply.txt");
    std::fs::write(
        &path,
        "Thinking... {\"response\": {\"sources\": [\"a.md\", 'b.md',], \"n\": True}}",
    )
    .unwrap();
    let o = deloop(&["rescue", "-k", "sources", path.to_str().unwrap()], b"");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "[\"a.md\",\"b.md\"]\n");
    let o = deloop(&["rescue", "--key", "n", "-"], b"{\"n\": None}");
    assert_eq!(stdout(&o), "null\n");
}

#[test]
fn rescue_json_report() {
    let o = deloop(
        &["rescue", "--key", "answer", "--json"],
        b"{\"answer\": \"Respuesta cortada en la mit",
    );
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["value"], "Respuesta cortada en la mit");
    assert!(v["repairs"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("closed_truncated")));

    let o = deloop(&["rescue", "--key", "answer", "--json"], b"Sorry, I can't.");
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["value"], serde_json::Value::Null);
    assert!(v["error"].as_str().unwrap().contains("no JSON"));
}

#[test]
fn rescue_nothing_rescued_exits_1_with_a_clear_message() {
    let o = deloop(&["rescue", "--key", "answer"], b"{\"other\": 1}");
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).is_empty());
    assert!(stderr(&o).contains("\"answer\""), "{}", stderr(&o));
    let o = deloop(&["rescue", "--key", "answer"], b"no json here");
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no JSON"), "{}", stderr(&o));
}

#[test]
fn rescue_bad_input_exits_2() {
    let bad = b"{\"answer\": \"caf\xff\"}";
    let o = deloop(&["rescue", "--key", "answer"], bad);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("UTF-8"), "{}", stderr(&o));
    let o = deloop(&["rescue", "--key", "answer", "--lossy"], bad);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "caf\u{fffd}\n");
    let o = deloop(
        &["rescue", "--key", "answer", "--max-bytes", "8"],
        b"{\"answer\": \"long\"}",
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("limit of 8 bytes"), "{}", stderr(&o));
    let o = deloop(&["rescue", "--key", "a"], "[".repeat(100_000).as_bytes());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("nested deeper"), "{}", stderr(&o));
    let o = deloop(&["rescue", "--key", "a", "/nonexistent/file.json"], b"");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot read"), "{}", stderr(&o));
}

#[test]
fn repair_prints_one_compact_document() {
    let o = deloop(
        &["repair"],
        b"<think>draft {\"a\": 0}</think>\nHere: {'a': 1, b: [1, 2,], c: None, // note\n \"d\": \"x \"y\" z\"}",
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"a": 1, "b": [1, 2], "c": null, "d": "x \"y\" z"})
    );
    let o = deloop(&["repair", "--explain"], b"{\"a\": [1, 2");
    assert_eq!(stdout(&o), "{\"a\":[1,2]}\n");
    assert!(stderr(&o).contains("closed_truncated"), "{}", stderr(&o));
}

/// `repair --json` prints `{"value", "repairs"}`: the same document as
/// plain `repair`, with the repairs `--explain` names.
#[test]
fn repair_json_prints_value_and_repairs() {
    let input = b"```json\n{\"a\": [1, 2\n```";
    let plain = deloop(&["repair"], input);
    let o = deloop(&["repair", "--json"], input);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&stdout(&plain)).unwrap();
    assert_eq!(v["value"], doc);
    assert_eq!(v["value"], serde_json::json!({"a": [1, 2]}));
    let repairs: Vec<&str> = v["repairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert!(repairs.contains(&"stripped_code_fence"), "{repairs:?}");
    assert!(repairs.contains(&"closed_truncated"), "{repairs:?}");
    assert_eq!(v.as_object().unwrap().len(), 2);
    // No JSON at all: exit 1, nothing on stdout, as without --json.
    let o = deloop(
        &["repair", "--json"],
        b"Lo siento, no puedo responder a eso.",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).is_empty());
}

#[test]
fn repair_without_json_exits_1() {
    let o = deloop(&["repair", "-"], b"Lo siento, no puedo responder a eso.");
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).is_empty());
    assert!(stderr(&o).contains("no JSON"), "{}", stderr(&o));
    let o = deloop(&["repair"], b"");
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn help_documents_the_flags() {
    for cmd in ["rescue", "repair"] {
        let o = deloop(&[cmd, "--help"], b"");
        assert_eq!(o.status.code(), Some(0));
        let h = stdout(&o);
        assert!(h.contains("--lossy") && h.contains("--max-bytes"), "{h}");
        assert!(h.contains("--json"), "{h}");
    }
}

#[test]
fn max_depth_is_a_flag_and_the_error_names_it() {
    let deep = format!("{{\"answer\": {}1{}}}", "[".repeat(12), "]".repeat(12));
    for cmd in [&["repair"][..], &["rescue", "--key", "answer"][..]] {
        let ok = deloop(cmd, deep.as_bytes());
        assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));

        let mut limited = cmd.to_vec();
        limited.extend(["--max-depth", "5"]);
        let o = deloop(&limited, deep.as_bytes());
        assert_eq!(o.status.code(), Some(2), "{cmd:?}");
        assert!(stderr(&o).contains("--max-depth"), "{}", stderr(&o));
    }
}
