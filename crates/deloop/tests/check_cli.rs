//! End-to-end tests of `deloop check`.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

fn scenario(name: &str) -> PathBuf {
    deloop_testdata::corpus("openclaw-loops").join(format!("scenarios/{name}.jsonl"))
}

fn deloop(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_deloop"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn deloop");
    // Feed stdin from a thread: the output streams, so a large input must
    // not wait for the child to finish reading before its output is read.
    let mut sin = child.stdin.take().unwrap();
    let data = stdin.map(<[u8]>::to_vec);
    let writer = std::thread::spawn(move || {
        if let Some(data) = data {
            // The child may stop reading early (bad input): ignore EPIPE.
            let _ = sin.write_all(&data);
        }
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[test]
fn loop_exits_3_with_json_lines_and_summary() {
    let f = scenario("oc47_pingpong_stable_25");
    let out = deloop(&["check", f.to_str().unwrap(), "--json"], None);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 26);
    for (i, l) in lines[..25].iter().enumerate() {
        assert_eq!(l["index"], i);
        for k in [
            "tool",
            "level",
            "detector",
            "count",
            "message",
            "fingerprint",
        ] {
            assert!(l.get(k).is_some(), "missing {k} in {l}");
        }
    }
    assert_eq!(lines[0]["level"], "ok");
    assert_eq!(lines[0]["detector"], Value::Null);
    let s = &lines[25]["summary"];
    assert_eq!(s["calls"], 25);
    assert_eq!(s["profile"], "default");
    assert!(s["criticals"].as_u64().unwrap() > 0);
    let first = s["first_critical"].as_u64().unwrap() as usize;
    assert_eq!(lines[first]["level"], "critical");
    assert!(lines[first]["fingerprint"]
        .as_str()
        .unwrap()
        .starts_with("AGENT::main::"));
}

#[test]
fn openclaw_profile_reproduces_expected_verdicts() {
    for name in [
        "oc01_generic_repeat_read_25",
        "oc43_unknown_tool_varying_args_15",
        "oc61_null_results_22",
        "oc72_compaction_over_warning_15",
    ] {
        let out = deloop(
            &[
                "check",
                scenario(name).to_str().unwrap(),
                "--profile",
                "openclaw",
                "--json",
            ],
            None,
        );
        let lines = json_lines(&out);
        let expected = std::fs::read_to_string(
            deloop_testdata::corpus("openclaw-loops").join(format!("expected/{name}.jsonl")),
        )
        .unwrap();
        let expected: Vec<Value> = expected
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), expected.len() + 1);
        for (g, e) in lines.iter().zip(&expected) {
            assert_eq!(
                (&g["level"], &g["detector"], &g["count"]),
                (&e["level"], &e["detector"], &e["count"]),
                "{name} {g}"
            );
        }
    }
}

#[test]
fn progress_exits_0_and_human_timeline() {
    let out = deloop(
        &[
            "check",
            scenario("oc20_process_poll_progress_25").to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("25 calls"), "{text}");
    assert!(text.contains("result: ok"), "{text}");
    let out = deloop(
        &[
            "check",
            scenario("oc01_generic_repeat_read_25").to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("the loop starts here"), "{text}");
    assert!(text.contains("BLOCK"), "{text}");
    assert!(text.contains("result: LOOP"), "{text}");
}

#[test]
fn stdin_dash_and_empty_input() {
    let data = std::fs::read(scenario("oc01_generic_repeat_read_25")).unwrap();
    let out = deloop(&["check", "-", "--json"], Some(&data));
    assert_eq!(out.status.code(), Some(3));
    let out = deloop(&["check", "--json"], Some(b""));
    assert_eq!(out.status.code(), Some(0));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["summary"]["calls"], 0);
}

fn openai_transcript(n: usize) -> String {
    let mut msgs = vec![json!({"role": "user", "content": "find the bug"})];
    for i in 0..n {
        msgs.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{i}"), "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"cat missing.txt\"}"}}
        ]}));
        msgs.push(json!({"role": "tool", "tool_call_id": format!("call_{i}"), "content": "cat: missing.txt: No such file or directory"}));
    }
    serde_json::to_string(&json!({"messages": msgs})).unwrap()
}

#[test]
fn openai_format_auto_detected() {
    let t = openai_transcript(12);
    let out = deloop(&["check", "--json"], Some(t.as_bytes()));
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json_lines(&out);
    assert_eq!(lines.last().unwrap()["summary"]["format"], "openai");
    assert_eq!(lines[8]["level"], "critical");
    assert_eq!(lines[8]["tool"], "bash");
    let out = deloop(
        &["check", "--format", "openai"],
        Some(openai_transcript(3).as_bytes()),
    );
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn anthropic_format_with_errors() {
    let mut msgs = Vec::new();
    for i in 0..14 {
        msgs.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": "trying"},
            {"type": "tool_use", "id": format!("tu{i}"), "name": "web_search", "input": {"q": format!("rust {i}")}}
        ]}));
        msgs.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("tu{i}"), "is_error": true, "content": "Unknown tool: web_search"}
        ]}));
    }
    let t = serde_json::to_string(&msgs).unwrap();
    let out = deloop(&["check", "--json"], Some(t.as_bytes()));
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json_lines(&out);
    assert_eq!(lines.last().unwrap()["summary"]["format"], "anthropic");
    assert_eq!(lines[10]["detector"], "unknown_tool_repeat");
}

#[test]
fn strict_profile_fingerprint() {
    let t = concat!(
        "{\"type\":\"call\",\"id\":\"1\",\"tool\":\"grep\",\"args\":{\"pattern\":\"double.*jump\",\"path\":\"src\"},\"agent\":\"explorer\"}\n",
        "{\"type\":\"result\",\"id\":\"1\",\"result\":\"src/a.ts:3\"}\n",
        "{\"type\":\"call\",\"id\":\"2\",\"tool\":\"grep\",\"args\":{\"pattern\":\"doubleJump\",\"path\":\"src\"},\"agent\":\"explorer\"}\n",
        "{\"type\":\"result\",\"id\":\"2\",\"result\":\"src/a.ts:3\"}\n",
    );
    let out = deloop(
        &["check", "--profile", "strict", "--json"],
        Some(t.as_bytes()),
    );
    assert_eq!(out.status.code(), Some(3));
    let lines = json_lines(&out);
    assert_eq!(lines[1]["detector"], "anti_loop_protocol");
    assert!(lines[1]["fingerprint"]
        .as_str()
        .unwrap()
        .starts_with("AGENT::explorer::grep::src::"));
    let out = deloop(
        &["check", "--profile", "default", "--json"],
        Some(t.as_bytes()),
    );
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn bad_input_exits_2_with_line_numbers() {
    let cases: &[(&[u8], &str)] = &[
        (b"{\"type\":\"call\",\"id\":\"a\",\"tool\":\"x\",\"args\":{}}\n{\"type\":\"call\"\n", "line 2"),
        (b"{\"type\":\"call\",\"id\":\"a\",\"tool\":\"x\",\"args\":{}}\n\n{\"type\":\"result\",\"id\":\"zz\",\"result\":1}\n", "line 3"),
        (b"{\"type\":\"bogus\"}\n", "line 1"),
        (b"{\"type\":\"call\",\"id\":\"a\",\"args\":{}}\n", "line 1"),
        (b"[1,2]\n", "line 1"),
        (b"{\"type\":\"call\",\"tool\":\"x\",\"args\":{}}\n\xff\xfe\n", "UTF-8"),
    ];
    for (input, needle) in cases {
        let out = deloop(&["check"], Some(input));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{needle}: {err}");
        assert!(err.contains(needle), "expected {needle:?} in {err}");
    }
}

#[test]
fn config_file_errors_and_adjustments() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json5");
    std::fs::write(
        &bad,
        "{ tools: { loopDetection: { criticalThreshold: 'x' } } }",
    )
    .unwrap();
    let f = scenario("oc01_generic_repeat_read_25");
    let out = deloop(
        &[
            "check",
            f.to_str().unwrap(),
            "--config",
            bad.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("tools.loopDetection.criticalThreshold"));
    let adj = dir.path().join("adj.json5");
    std::fs::write(
        &adj,
        "{ tools: { loopDetection: { warningThreshold: 3, criticalThreshold: 2 } } }",
    )
    .unwrap();
    let out = deloop(
        &[
            "check",
            f.to_str().unwrap(),
            "--config",
            adj.to_str().unwrap(),
            "--profile",
            "openclaw",
            "--json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("criticalThreshold"));
    let lines = json_lines(&out);
    assert_eq!(lines[3]["level"], "warning");
    assert_eq!(lines[4]["level"], "critical", "critical adjusted to 4");
}

#[test]
fn help_mentions_formats() {
    let out = deloop(&["check", "--help"], None);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    for w in [
        "--format",
        "--profile",
        "--config",
        "--json",
        "anthropic",
        "strict",
    ] {
        assert!(text.contains(w), "{w} missing from --help");
    }
}

/// A large input: verdicts stay in order and errors name the right line.
#[test]
fn large_inputs_keep_order_and_line_numbers() {
    let mut text = String::new();
    for i in 0..12_000 {
        text.push_str(&format!(
            "{{\"type\":\"call\",\"id\":\"c{i}\",\"tool\":\"read\",\"args\":{{\"path\":\"/f{}\"}}}}\n",
            i % 97
        ));
        text.push_str(&format!(
            "{{\"type\":\"result\",\"id\":\"c{i}\",\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"body {i} {}\"}}]}}}}\n",
            "x".repeat(40)
        ));
    }
    assert!(text.len() > 1 << 20);
    let out = deloop(&["check", "--json"], Some(text.as_bytes()));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 12_001);
    assert!(lines[..12_000]
        .iter()
        .enumerate()
        .all(|(i, l)| l["index"] == i));

    let mut bad_json = text.clone();
    bad_json.push_str("{\"type\":\"call\",\n");
    let out = deloop(&["check"], Some(bad_json.as_bytes()));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("line 24001"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Parsing runs ahead on its own thread, in batches: an error several
    // batches in still stops at its line, after every verdict before it.
    let mut bad_utf8 = text.clone().into_bytes();
    bad_utf8.extend_from_slice(b"{\"type\":\"call\",\"tool\":\"\xff\"}\n");
    bad_utf8.extend_from_slice(text.as_bytes());
    let out = deloop(&["check", "--json"], Some(&bad_utf8));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 24001") && err.contains("UTF-8"), "{err}");
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 12_000, "every call before the bad line");
    assert_eq!(lines[11_999]["index"], 11_999);

    let mut unknown = text.clone();
    unknown.push_str("{\"type\":\"result\",\"id\":\"nope\",\"result\":1}\n");
    unknown.push_str("not json at all\n");
    let out = deloop(&["check"], Some(unknown.as_bytes()));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 24001") && err.contains("nope"), "{err}");
}

/// A 200k-event stream through stdin: the streaming path keeps one line
/// per call, in order, and the summary counts every call.
#[test]
fn streams_a_large_events_input() {
    let mut text = String::with_capacity(24 << 20);
    let calls = 100_000;
    for i in 0..calls {
        // Mostly distinct calls; every 1000th block of 30 repeats one call
        // with the same result, so some verdicts are not ok.
        let path = if (i / 30) % 1000 == 7 {
            "/same".to_string()
        } else {
            format!("/f{i}")
        };
        text.push_str(&format!(
            "{{\"type\":\"call\",\"id\":\"c{i}\",\"tool\":\"read\",\"args\":{{\"path\":\"{path}\"}}}}\n"
        ));
        text.push_str(&format!(
            "{{\"type\":\"result\",\"id\":\"c{i}\",\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{path}\"}}]}}}}\n"
        ));
    }
    let out = deloop(
        &["check", "--json", "--profile", "openclaw"],
        Some(text.as_bytes()),
    );
    let code = out.status.code();
    assert!(
        code == Some(0) || code == Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json_lines(&out);
    assert_eq!(lines.len(), calls + 1);
    assert!(lines[..calls]
        .iter()
        .enumerate()
        .all(|(i, l)| l["index"] == i && l["tool"] == "read"));
    let summary = &lines[calls]["summary"];
    assert_eq!(summary["calls"], calls);
    assert_eq!(summary["format"], "events");
    let count = |level: &str| {
        lines[..calls]
            .iter()
            .filter(|l| l["level"] == level)
            .count()
    };
    assert_eq!(summary["warnings"], count("warning"));
    assert_eq!(summary["criticals"], count("critical"));
    assert!(count("warning") > 0, "the repeated blocks should warn");
    assert_eq!(code == Some(3), count("critical") > 0);
}

/// The tolerant rule of the streaming replay: a call still waiting for its
/// result 10,000 calls later is settled as it stands; its late result is
/// ignored with a note, not reported as an unknown id.
#[test]
fn late_result_of_a_forgotten_call_is_tolerated() {
    let mut text = String::from(
        "{\"type\":\"call\",\"id\":\"slow\",\"tool\":\"exec\",\"args\":{\"command\":\"sleep 999\"}}\n",
    );
    for i in 0..10_000 {
        text.push_str(&format!(
            "{{\"type\":\"call\",\"id\":\"c{i}\",\"tool\":\"read\",\"args\":{{\"path\":\"/f{i}\"}}}}\n\
             {{\"type\":\"result\",\"id\":\"c{i}\",\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{i}\"}}]}}}}\n"
        ));
    }
    text.push_str("{\"type\":\"result\",\"id\":\"slow\",\"result\":{\"content\":[]}}\n");
    let out = deloop(&["check", "--json"], Some(text.as_bytes()));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("1 late results were ignored"), "{err}");
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 10_002);
    assert_eq!(lines[0]["tool"], "exec");
    assert_eq!(lines[0]["level"], "ok");
    // A result for an id that never existed is still bad input.
    text.push_str("{\"type\":\"result\",\"id\":\"nope\",\"result\":1}\n");
    let out = deloop(&["check"], Some(text.as_bytes()));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 20003"));
}

/// The human timeline is written as it goes: a loop far into a long
/// transcript still gets its start marked, and ok runs are collapsed.
#[test]
fn human_timeline_streams_and_marks_a_late_loop() {
    let mut text = String::new();
    for i in 0..5_000 {
        text.push_str(&format!(
            "{{\"type\":\"call\",\"id\":\"c{i}\",\"tool\":\"read\",\"args\":{{\"path\":\"/f{i}\"}}}}\n\
             {{\"type\":\"result\",\"id\":\"c{i}\",\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{i}\"}}]}}}}\n"
        ));
    }
    for i in 5_000..5_030 {
        text.push_str(&format!(
            "{{\"type\":\"call\",\"id\":\"c{i}\",\"tool\":\"read\",\"args\":{{\"path\":\"/same\"}}}}\n\
             {{\"type\":\"result\",\"id\":\"c{i}\",\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"same\"}}]}}}}\n"
        ));
    }
    let out = deloop(&["check", "--profile", "openclaw"], Some(text.as_bytes()));
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("#0-#4999  5000 calls ok"), "{text}");
    assert!(
        text.contains("---- the loop starts here (call #5000) ----"),
        "{text}"
    );
    assert!(text.contains("result: LOOP - 5030 calls"), "{text}");
}
