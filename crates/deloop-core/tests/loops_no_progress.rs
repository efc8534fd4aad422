//! Tool-call loops with trivial variations (issue 22 §2): one tool keeps
//! returning the same result whatever its arguments. `default` and `strict`
//! warn and then block (`no_progress`), `strict` also stops the run once the
//! normalised procedure returns the same result twice in a row, and
//! healthy agents (paging, test-fix-test, progressing polls, cursors) pass.

use deloop_core::loops::replay::{Event, Replay};
use deloop_core::loops::{Detector, Guard, Level, LoopConfig, Profile, Verdict};
use proptest::prelude::*;
use serde_json::{json, Value};

fn text(t: &str) -> Value {
    json!({"content": [{"type": "text", "text": t}], "details": {}})
}

fn exec_done(code: i64, output: &str) -> Value {
    let status = if code == 0 { "completed" } else { "failed" };
    json!({"content": [{"type": "text", "text": output}],
           "details": {"status": status, "exitCode": code, "aggregated": output}})
}

type Step = (&'static str, Value, Result<Value, String>);

/// Runs (tool, args, result) triples as call + result pairs.
fn drive(profile: Profile, cfg: &str, steps: &[Step]) -> Vec<Verdict> {
    let (config, _) = LoopConfig::from_json5(cfg).unwrap();
    let mut r = Replay::new(Guard::new(profile, config));
    for (i, (tool, args, res)) in steps.iter().enumerate() {
        let id = format!("c{i}");
        r.push(Event::call(&id, *tool, args.clone())).unwrap();
        r.push(Event::Result {
            id: Some(id),
            body: res.clone(),
        })
        .unwrap();
    }
    r.into_verdicts().into_iter().map(|c| c.verdict).collect()
}

fn first(v: &[Verdict], level: Level) -> Option<usize> {
    v.iter().position(|x| x.level >= level)
}

/// The `default` profile warns on the 4th call and blocks the 7th with
/// `no_progress`; `strict` blocks no later. Returns the strict verdicts.
fn assert_caught(name: &str, steps: &[Step]) -> Vec<Verdict> {
    let v = drive(Profile::Default, "{}", steps);
    assert_eq!(first(&v, Level::Warning), Some(3), "{name}: {v:#?}");
    assert_eq!(v[3].detector, Some(Detector::NoProgress), "{name}");
    assert_eq!(v[3].count, Some(3), "{name}");
    assert_eq!(first(&v, Level::Critical), Some(6), "{name}: {v:#?}");
    assert_eq!(v[6].detector, Some(Detector::NoProgress), "{name}");
    assert!(v[6].message.contains("different arguments"), "{name}");
    assert!(v[6]
        .fingerprint
        .as_deref()
        .unwrap()
        .starts_with("AGENT::main::"));
    let s = drive(Profile::Strict, "{}", steps);
    assert!(first(&s, Level::Critical) <= Some(6), "{name}: {s:#?}");
    // OpenClaw's profile stays OpenClaw's: it has no such rule.
    let o = drive(Profile::OpenClaw, "{}", steps);
    assert!(
        o.iter().all(|x| x.detector != Some(Detector::NoProgress)),
        "{name}"
    );
    s
}

fn protocol_at(s: &[Verdict]) -> Option<usize> {
    s.iter()
        .position(|x| x.detector == Some(Detector::AntiLoopProtocol))
}

/// Never critical, and never a `no_progress` warning (OpenClaw's own
/// `generic_repeat` warning on ten identical calls may still appear).
fn assert_healthy(name: &str, steps: &[Step]) {
    for p in [Profile::Default, Profile::Strict] {
        let v = drive(p, "{}", steps);
        let bad =
            |x: &Verdict| x.level == Level::Critical || x.detector == Some(Detector::NoProgress);
        if let Some(i) = v.iter().position(bad) {
            panic!("{name} ({p}): {:?} at call {i}", v[i]);
        }
    }
}

// ---------- loops with trivial variations are caught ----------

#[test]
fn same_listing_with_flags_reordered_spaces_and_trailing_slash() {
    let listing = "total 8\n-rw-r--r-- 1 me me 120 main.rs\n-rw-r--r-- 1 me me 80 lib.rs";
    let commands = [
        "ls -la src/",
        "ls -al src",
        "ls  -l -a ./src",
        "ls -a -l src//",
        "ls   -la   src",
        "ls -la ./src/",
        "ls -lA src",
        "ls -al ./src",
    ];
    let steps: Vec<Step> = commands
        .iter()
        .map(|c| ("bash", json!({ "command": c }), Ok(exec_done(0, listing))))
        .collect();
    let s = assert_caught("ls variants", &steps);
    // The strict normaliser makes the first two one procedure.
    assert_eq!(protocol_at(&s), Some(1));
    assert!(s[1].terminate_run);
}

#[test]
fn head_with_growing_counts_on_a_file_shorter_than_any() {
    let short = "[package]\nname = \"demo\"\nversion = \"0.1.0\"";
    let steps: Vec<Step> = [20, 30, 50, 80, 100, 200, 500, 1000]
        .iter()
        .map(|n| {
            (
                "bash",
                json!({ "command": format!("head -n {n} Cargo.toml") }),
                Ok(exec_done(0, short)),
            )
        })
        .collect();
    let s = assert_caught("head -n", &steps);
    assert_eq!(protocol_at(&s), Some(1));
}

#[test]
fn reads_of_one_file_at_offsets_that_return_the_same_content() {
    let steps: Vec<Step> = (0..8)
        .map(|i| {
            (
                "read",
                json!({"path": "notes/todo.md", "offset": i * 50, "limit": 50}),
                Ok(text("- ship the release\n- update the changelog")),
            )
        })
        .collect();
    let s = assert_caught("read offsets", &steps);
    assert_eq!(protocol_at(&s), Some(1));
}

#[test]
fn reworded_searches_that_return_the_same_results() {
    let hits = "src/auth.rs:12: fn login(user: &User)\nsrc/auth.rs:40: fn logout()";
    let queries = [
        "login function",
        "where is login defined",
        "user login handler",
        "authentication entry point",
        "sign in code",
        "login implementation",
        "function that logs users in",
        "auth login",
    ];
    let steps: Vec<Step> = queries
        .iter()
        .map(|q| ("codebase_search", json!({ "query": q }), Ok(text(hits))))
        .collect();
    assert_caught("reworded searches", &steps);
}

#[test]
fn an_edit_retried_with_other_old_strings_gets_the_same_error() {
    let olds = [
        "fn parse(input: &str)",
        "fn parse(input:&str)",
        "fn parse( input: &str )",
        "pub fn parse(input: &str)",
        "fn  parse(input: &str)",
        "fn parse(s: &str)",
        "fn parse(input: &String)",
        "fn parse",
    ];
    let steps: Vec<Step> = olds
        .iter()
        .map(|o| {
            (
                "edit",
                json!({"file_path": "src/parser.rs", "old_string": o, "new_string": "fn parse(input: &[u8])"}),
                Err("String to replace not found in file.".to_string()),
            )
        })
        .collect();
    let s = assert_caught("edit old_string", &steps);
    // `fn parse(input: &str)` and `fn parse(input:&str)` differ in more
    // than whitespace; `fn  parse(…)` (call 4) only in whitespace, but it
    // does not follow its twin directly.
    assert_eq!(protocol_at(&s), None);
}

#[test]
fn an_edit_error_that_echoes_each_old_string_is_still_the_same_error() {
    let steps: Vec<Step> = (0..8)
        .map(|i| {
            let old = format!("def handler(request{}):", " ".repeat(i));
            (
                "str_replace_editor",
                json!({"command": "str_replace", "path": "/w/app.py", "old_str": old, "new_str": "def handler(req):"}),
                Err(format!(
                    "No replacement was performed, old_str `{old}` did not appear verbatim in /w/app.py."
                )),
            )
        })
        .collect();
    assert_caught("echoed old_str", &steps);
}

#[test]
fn retries_with_different_sleeps_get_connection_refused_every_time() {
    let steps: Vec<Step> = [1, 2, 5, 10, 15, 30, 60, 120]
        .iter()
        .enumerate()
        .map(|(i, n)| {
            (
                "bash",
                json!({ "command": format!("sleep {n} && curl -s http://localhost:8080/health") }),
                // The time differs on every attempt; the failure is the same.
                Ok(exec_done(
                    7,
                    &format!("curl: (7) Failed to connect to localhost port 8080 after {i} ms: Connection refused"),
                )),
            )
        })
        .collect();
    let s = assert_caught("sleep + curl", &steps);
    assert_eq!(protocol_at(&s), None, "the outputs differ by their timing");
}

// ---------- healthy agents pass ----------

#[test]
fn paging_through_different_results_passes() {
    let steps: Vec<Step> = (0..30)
        .map(|i| {
            (
                "read",
                json!({"path": "big.log", "offset": i * 100, "limit": 100}),
                Ok(text(&format!(
                    "lines {} to {}: request served",
                    i * 100,
                    i * 100 + 99
                ))),
            )
        })
        .collect();
    assert_healthy("paging", &steps);
}

#[test]
fn test_fix_test_with_changing_output_passes() {
    let mut steps: Vec<Step> = Vec::new();
    for i in 0..12 {
        steps.push((
            "bash",
            json!({"command": "cargo test"}),
            Ok(exec_done(
                101,
                &format!("test result: FAILED. {} passed; {} failed", 20 + i, 12 - i),
            )),
        ));
        steps.push((
            "edit",
            json!({"file_path": "src/lib.rs", "old_string": format!("bug{i}"), "new_string": "fix"}),
            Ok(text("The file src/lib.rs has been updated.")),
        ));
    }
    assert_healthy("test-fix-test", &steps);
}

#[test]
fn a_poll_whose_status_progresses_passes() {
    let states = [
        "queued",
        "running 10%",
        "running 40%",
        "running 80%",
        "finishing",
        "done",
    ];
    let steps: Vec<Step> = states
        .iter()
        .cycle()
        .take(24)
        .enumerate()
        .map(|(i, s)| {
            (
                "get_job_status",
                json!({"job": "build-7", "wait_seconds": 5 + i}),
                Ok(json!({"status": s, "checked": i})),
            )
        })
        .collect();
    assert_healthy("poll", &steps);
}

#[test]
fn cursor_pagination_passes() {
    let steps: Vec<Step> = (0..30)
        .map(|i| {
            let cursor = if i == 0 {
                Value::Null
            } else {
                json!(format!("c{i:04}x"))
            };
            (
                "list_issues",
                json!({"repo": "acme/app", "cursor": cursor, "per_page": 25}),
                Ok(
                    json!({"items": [format!("issue {}", i * 25), format!("issue {}", i * 25 + 1)],
                          "next": format!("c{:04}x", i + 1)}),
                ),
            )
        })
        .collect();
    assert_healthy("cursor", &steps);
}

#[test]
fn different_edits_that_all_print_nothing_pass() {
    let steps: Vec<Step> = (0..20)
        .map(|i| {
            (
                "bash",
                json!({"command": format!("sed -i 's/old{i}/new{i}/' src/app.py")}),
                Ok(text("<returncode>0</returncode>\n<output>\n</output>")),
            )
        })
        .collect();
    assert_healthy("sed edits", &steps);
}

#[test]
fn another_tool_or_a_user_turn_in_between_resets_the_count() {
    let same = "Error: build directory is locked by another process";
    let mut steps: Vec<Step> = Vec::new();
    for i in 0..12 {
        steps.push((
            "bash",
            json!({"command": format!("make -j{i}")}),
            Err(same.into()),
        ));
        if i % 2 == 1 {
            steps.push((
                "read",
                json!({"path": format!("Makefile{i}")}),
                Ok(text("all: build")),
            ));
        }
    }
    let v = drive(Profile::Default, "{}", &steps);
    assert!(v.iter().all(|x| x.detector != Some(Detector::NoProgress)));

    let (config, _) = LoopConfig::from_json5("{}").unwrap();
    let mut r = Replay::new(Guard::new(Profile::Default, config));
    for i in 0..12 {
        if i % 3 == 0 {
            r.push(Event::UserTurn {
                run: None,
                agent: None,
            })
            .unwrap();
        }
        let id = format!("c{i}");
        r.push(Event::call(
            &id,
            "bash",
            json!({"command": format!("make -j{i}")}),
        ))
        .unwrap();
        r.push(Event::Result {
            id: Some(id),
            body: Err(same.into()),
        })
        .unwrap();
    }
    assert!(r.verdicts().iter().all(|c| c.verdict.level == Level::Ok));
}

// ---------- configuration ----------

#[test]
fn thresholds_and_switch_are_configurable() {
    let steps: Vec<Step> = (0..10)
        .map(|i| {
            (
                "read",
                json!({"path": "a.txt", "offset": i}),
                Ok(text("the same short file")),
            )
        })
        .collect();
    let v = drive(
        Profile::Default,
        "{ noProgressWarningThreshold: 2, noProgressCriticalThreshold: 4 }",
        &steps,
    );
    assert_eq!(
        (first(&v, Level::Warning), first(&v, Level::Critical)),
        (Some(2), Some(4))
    );
    let v = drive(
        Profile::Default,
        "{ detectors: { noProgress: false } }",
        &steps,
    );
    assert!(v.iter().all(|x| x.level == Level::Ok));
    let (c, adj) =
        LoopConfig::from_json5("{ noProgressWarningThreshold: 5, noProgressCriticalThreshold: 5 }")
            .unwrap();
    assert_eq!(c.base().no_progress_critical_threshold, 6);
    assert_eq!(adj[0].key, "loopDetection.noProgressCriticalThreshold");
    for bad in [
        "{ noProgressWarningThreshold: 0 }",
        "{ noProgressCriticalThreshold: 1000001 }",
        "{ noProgressCriticalThreshold: 'six' }",
        "{ detectors: { noProgress: 1 } }",
    ] {
        let err = LoopConfig::from_json5(bad).unwrap_err().to_string();
        assert!(err.contains("noProgress"), "{bad}: {err}");
    }
}

// ---------- properties ----------

proptest! {
    /// Whatever the arguments, changing results are never no-progress.
    #[test]
    fn changing_results_are_never_no_progress(
        args in proptest::collection::vec("[a-z ./-]{0,12}", 1..30),
    ) {
        let steps: Vec<Step> = args
            .iter()
            .enumerate()
            .map(|(i, a)| ("bash", json!({ "command": a }), Ok(exec_done(0, &format!("output number {i} of the run")))))
            .collect();
        for p in [Profile::Default, Profile::Strict] {
            let v = drive(p, "{}", &steps);
            prop_assert!(v.iter().all(|x| x.level == Level::Ok), "{p}: {v:?}");
        }
    }

    /// The same informative result under ever different arguments warns at
    /// the warning threshold and blocks at the critical one.
    #[test]
    fn the_same_result_under_new_arguments_is_blocked_at_the_threshold(
        warn in 1u32..6,
        extra in 1u32..6,
        calls in 12usize..30,
    ) {
        let crit = warn + extra;
        let steps: Vec<Step> = (0..calls)
            .map(|i| ("fetch_page", json!({"url": format!("https://example.org/p{i}")}), Ok(text("503 Service Unavailable: try later"))))
            .collect();
        let cfg = format!("{{ noProgressWarningThreshold: {warn}, noProgressCriticalThreshold: {crit} }}");
        let v = drive(Profile::Default, &cfg, &steps);
        prop_assert_eq!(first(&v, Level::Warning), Some(warn as usize));
        prop_assert_eq!(first(&v, Level::Critical), Some(crit as usize));
        prop_assert_eq!(v[crit as usize].detector, Some(Detector::NoProgress));
    }
}
