//! `deloop serve` end to end: the binary started by the test on
//! 127.0.0.1, its guard endpoints compared with the CLI's `--json` output on
//! the conformance corpora (same parsed value), startup failures and their
//! exit codes, graceful shutdown on SIGTERM.

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

mod common;

use common::{http, post, start};

fn cli(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_deloop"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut sin = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let w = std::thread::spawn(move || {
        let _ = sin.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    w.join().unwrap();
    out
}

fn corpus_inputs() -> Vec<String> {
    let mut out = Vec::new();
    for name in ["jsonrepair", "json-repair-py"] {
        let text =
            std::fs::read_to_string(deloop_testdata::corpus(name).join("cases.jsonl")).unwrap();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: Value = serde_json::from_str(line).unwrap();
            out.push(v["input"].as_str().unwrap().to_string());
        }
    }
    out
}

#[test]
fn guard_endpoints_answer_what_the_cli_prints() {
    let server = start(&[], &[]);
    let inputs = corpus_inputs();
    assert!(inputs.len() > 500);
    // repair and rescue on every conformance input (one in four for rescue).
    for (i, input) in inputs.iter().enumerate() {
        let out = cli(&["repair", "--json"], input.as_bytes());
        let (status, got) = post(
            &format!("{}/v1/repair", server.url),
            &json!({"text": input}),
        );
        if out.status.code() == Some(0) {
            let want: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(status, 200, "case {i}: {input:?}");
            assert_eq!(got, want, "case {i}: {input:?}");
        } else {
            assert_eq!(
                status,
                422,
                "case {i}: {input:?} (CLI exit {:?})",
                out.status.code()
            );
        }
        if i % 4 == 0 {
            let out = cli(&["rescue", "--json", "--key", "a"], input.as_bytes());
            let want: Value = serde_json::from_slice(&out.stdout).unwrap();
            let (status, got) = post(
                &format!("{}/v1/rescue", server.url),
                &json!({"text": input, "key": "a"}),
            );
            if out.status.code() == Some(2) {
                assert_eq!(status, 422, "case {i}");
            } else {
                assert_eq!((status, &got), (200, &want), "case {i}: {input:?}");
            }
        }
    }
    // clamp on loops and healthy text, default and seed rules.
    let mut texts = vec![
        "la continuación de un proceso de automatización automático o la de ".repeat(30),
        format!("Intro. {}", "resak-".repeat(200)),
        "El wifi se configura accediendo a 192.168.1.1. El wifi requiere una contraseña."
            .to_string(),
    ];
    texts.push(format!("{}\n\n| a | a | a |\n|---|---|---|\n", texts[2]));
    for text in &texts {
        for seed in [false, true] {
            let mut args = vec!["clamp", "--json"];
            if seed {
                args.push("--seed-compat");
            }
            let out = cli(&args, text.as_bytes());
            let want: Value = serde_json::from_slice(&out.stdout).unwrap();
            let body = if seed {
                json!({"text": text, "config": {"seed_compat": true}})
            } else {
                json!({"text": text})
            };
            let (status, got) = post(&format!("{}/v1/clamp", server.url), &body);
            assert_eq!((status, got), (200, want), "{text:?} seed={seed}");
        }
    }
}

#[test]
fn check_endpoint_streams_the_cli_json_lines_on_the_openclaw_scenarios() {
    let server = start(&[], &[]);
    let root = deloop_testdata::corpus("openclaw-loops").join("scenarios");
    let mut names: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    for path in names.iter().step_by(3) {
        let body = std::fs::read(path).unwrap();
        for profile in ["default", "openclaw", "strict"] {
            let out = cli(&["check", "--json", "--profile", profile], &body);
            let want: Vec<Value> = String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let (status, text) = http(
                "POST",
                &format!("{}/v1/check?profile={profile}", server.url),
                Some(&body),
                "application/x-ndjson",
            );
            assert_eq!(status, 200);
            let got: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(got, want, "{} {profile}", path.display());
        }
    }
}

#[test]
fn startup_failures_use_the_exit_code_table() {
    // A bad config value: exit 2, naming the key.
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("deloop.toml");
    std::fs::write(&cfg, "[server]\nlisten = \"not an address\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_deloop"))
        .args(["serve", "--config", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("server.listen"));
    // An unknown key: exit 2.
    std::fs::write(&cfg, "[server]\nlistn = \"127.0.0.1:1\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_deloop"))
        .args(["serve", "--config", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The port in use: exit 1 with advice (from a folder without the bad
    // deloop.toml above).
    let clean = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_deloop"))
        .args(["serve", "--listen", &addr])
        .env_remove("DELOOP_CONFIG")
        .current_dir(clean.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--listen"));
}

#[cfg(unix)]
#[test]
fn sigterm_shuts_down_gracefully_with_exit_0() {
    let mut server = start(&[], &[("DELOOP_API_KEYS", "k")]);
    // Auth is on: healthz stays open, the rest needs the key.
    assert_eq!(
        http(
            "GET",
            &format!("{}/healthz", server.url),
            None,
            "text/plain"
        )
        .0,
        200
    );
    assert_eq!(
        http(
            "GET",
            &format!("{}/metrics", server.url),
            None,
            "text/plain"
        )
        .0,
        401
    );
    let pid = server.child.id().to_string();
    let kill = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(kill.success());
    let status = server.child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn api_routes_answer_from_the_embedded_docs_once_ready() {
    let server = start(&[], &[]);
    let mut ready = false;
    for _ in 0..600 {
        let (status, _) = http("GET", &format!("{}/readyz", server.url), None, "text/plain");
        if status == 200 {
            ready = true;
            break;
        }
        assert_eq!(status, 503);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ready, "never ready");
    for mode in ["oracle", "help", "tutor"] {
        let (status, v) = post(
            &format!("{}/api/{mode}", server.url),
            &json!({"question": "How do I stop a looping stream?", "lang": "en"}),
        );
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["mode"], mode);
        assert_eq!(v["provider"], "extractive");
        assert!(!v["citations"].as_array().unwrap().is_empty(), "{v}");
        assert!(!v["answer"].as_str().unwrap().is_empty());
    }
}

#[test]
fn a_named_index_that_does_not_exist_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothing.db");
    let out = Command::new(env!("CARGO_BIN_EXE_deloop"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--db",
            missing.to_str().unwrap(),
        ])
        .env_remove("DELOOP_CONFIG")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("deloop index"), "{stderr}");
}
