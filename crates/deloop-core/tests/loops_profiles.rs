//! Behaviour of each detector and profile: progress is never blocked in the
//! default profile, loops are, the strict protocol fingerprints, scoping and
//! configuration take effect.

use deloop_core::loops::replay::{Event, Replay};
use deloop_core::loops::{
    Detector, Guard, Level, LoopConfig, Outcome, OutcomeBody, Profile, ToolCall, Verdict,
};
use proptest::prelude::*;
use serde_json::{json, Value};

fn text(t: &str) -> Value {
    json!({"content": [{"type": "text", "text": t}], "details": {}})
}

/// Runs (tool, args, result) triples as call + result pairs.
fn drive(
    profile: Profile,
    cfg: &str,
    steps: &[(&str, Value, Result<Value, String>)],
) -> Vec<Verdict> {
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

fn first_critical(v: &[Verdict]) -> Option<usize> {
    v.iter().position(|x| x.level == Level::Critical)
}

fn assert_never_critical(name: &str, v: &[Verdict]) {
    if let Some(i) = first_critical(v) {
        panic!("{name}: critical at call {i}: {:?}", v[i]);
    }
}

// ---------- progress is never critical in the default profile ----------

#[test]
fn polling_with_changing_output() {
    let steps: Vec<_> = (0..60)
        .map(|i| {
            (
                "process",
                json!({"action": "poll", "sessionId": "s1"}),
                Ok(
                    json!({"content": [{"type":"text","text": format!("line {i}")}],
                          "details": {"status": "running", "aggregated": format!("{i} lines")}}),
                ),
            )
        })
        .collect();
    assert_never_critical("process poll", &drive(Profile::Default, "{}", &steps));
    let steps: Vec<_> = (0..60)
        .map(|i| {
            (
                "command_status",
                json!({"id": 7}),
                Ok(text(&format!("building {i}%"))),
            )
        })
        .collect();
    assert_never_critical("command_status", &drive(Profile::Default, "{}", &steps));
}

#[test]
fn paged_reads() {
    let steps: Vec<_> = (0..80)
        .map(|i| {
            (
                "read",
                json!({"path": "/big.log", "offset": i * 200, "limit": 200}),
                Ok(text(&format!("page {i}"))),
            )
        })
        .collect();
    assert_never_critical("paged read", &drive(Profile::Default, "{}", &steps));
    // scroll_down style paging: same call, different page each time.
    let steps: Vec<_> = (0..40)
        .map(|i| {
            (
                "scroll_down",
                json!({}),
                Ok(text(&format!("[lines {} to {}]", i * 100, i * 100 + 99))),
            )
        })
        .collect();
    assert_never_critical("scroll_down", &drive(Profile::Default, "{}", &steps));
}

#[test]
fn batch_operations_over_distinct_paths() {
    // Same result text for every file, but each call is a different file.
    let steps: Vec<_> = (0..60)
        .map(|i| {
            (
                "edit",
                json!({"path": format!("src/m{i}.rs"), "old": "foo", "new": "bar"}),
                Ok(text("File edited successfully.")),
            )
        })
        .collect();
    assert_never_critical("batch edit", &drive(Profile::Default, "{}", &steps));
    let steps: Vec<_> = (0..40)
        .map(|i| {
            (
                "write",
                json!({"path": format!("/tmp/{i}.md"), "content": "x"}),
                Ok(json!({"details": {"changed": false, "path": format!("/tmp/{i}.md")}})),
            )
        })
        .collect();
    assert_never_critical(
        "batch write unchanged",
        &drive(Profile::Default, "{}", &steps),
    );
    let steps: Vec<_> = (0..40)
        .map(|i| {
            (
                "exec",
                json!({"command": format!("gzip data/part{i}.csv")}),
                Ok(json!({"details": {"status": "completed", "exitCode": 0, "aggregated": ""}})),
            )
        })
        .collect();
    assert_never_critical("batch exec", &drive(Profile::Default, "{}", &steps));
}

#[test]
fn rebuilds_after_edits() {
    let mut steps = Vec::new();
    for i in 0..25 {
        steps.push((
            "edit",
            json!({"path": "src/lib.rs", "old": format!("v{i}"), "new": format!("v{}", i + 1)}),
            Ok(text("ok")),
        ));
        steps.push((
            "exec",
            json!({"command": "cargo build"}),
            Ok(json!({"details": {"status": "failed", "exitCode": 101, "aggregated": format!("error: {} errors remaining", 30 - i)}})),
        ));
    }
    assert_never_critical("edit/build", &drive(Profile::Default, "{}", &steps));
}

#[test]
fn heartbeat_runs_do_not_inherit_counts() {
    let (config, _) = LoopConfig::from_json5("{}").unwrap();
    let mut r = Replay::new(Guard::new(Profile::Default, config));
    let mut n = 0;
    for run in 0..50 {
        for _ in 0..3 {
            let id = format!("c{n}");
            n += 1;
            r.push(Event::Call {
                id: Some(id.clone()),
                tool: "check_inbox".into(),
                args: json!({}),
                run: Some(format!("hb-{run}")),
                agent: None,
            })
            .unwrap();
            r.push(Event::result(id, text("no new mail"))).unwrap();
        }
    }
    assert!(r.verdicts().iter().all(|c| c.verdict.level == Level::Ok));
}

#[test]
fn known_poll_without_progress_follows_openclaw_thresholds() {
    let steps: Vec<_> = (0..22)
        .map(|_| {
            (
                "process",
                json!({"action": "poll", "sessionId": "s1"}),
                Ok(json!({"details": {"status": "running", "aggregated": "same"}})),
            )
        })
        .collect();
    let v = drive(Profile::Default, "{}", &steps);
    assert_eq!(v[10].detector, Some(Detector::KnownPollNoProgress));
    assert_eq!(v[10].level, Level::Warning);
    assert_eq!(first_critical(&v), Some(20));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Results that change on every call never reach critical in the
    /// default profile, whatever the call pattern.
    #[test]
    fn changing_results_never_critical(pattern in proptest::collection::vec((0usize..4, 0usize..3, any::<bool>()), 1..120)) {
        let tools = ["read", "exec", "grep", "http_get"];
        let steps: Vec<_> = pattern.iter().enumerate().map(|(i, (t, a, err))| {
            let args = json!({"arg": a});
            let res = if *err { Err(format!("failure number {i} here")) } else if *t == 3 {
                Ok(json!({"status": 200, "body": {"n": i}}))
            } else {
                Ok(text(&format!("output {i}")))
            };
            (tools[*t], args, res)
        }).collect();
        let v = drive(Profile::Default, "{}", &steps);
        prop_assert!(first_critical(&v).is_none(), "critical at {:?}", first_critical(&v));
    }

    /// Identical results on a fixed cycle of k ≤ 8 calls are always blocked
    /// in the default profile within 3 laps or streakThreshold+1 calls.
    #[test]
    fn stable_cycles_are_blocked(k in 1usize..=8) {
        let steps: Vec<_> = (0..(3 * k + 9).max(30)).map(|i| {
            let j = i % k;
            ("read", json!({"path": format!("/f{j}")}), Ok(text(&format!("content {j}"))))
        }).collect();
        let v = drive(Profile::Default, "{}", &steps);
        let at = first_critical(&v);
        prop_assert!(at.is_some());
        prop_assert!(at.unwrap() <= (3 * k).max(8), "k={} blocked at {:?}", k, at);
    }
}

// ---------- each detector ----------

fn same(
    n: usize,
    tool: &'static str,
    args: Value,
    res: Result<Value, String>,
) -> Vec<(&'static str, Value, Result<Value, String>)> {
    (0..n).map(|_| (tool, args.clone(), res.clone())).collect()
}

#[test]
fn generic_repeat_back_to_back_streak_blocks_early_in_default() {
    let v = drive(
        Profile::Default,
        "{}",
        &same(12, "read", json!({"path": "/a"}), Ok(text("x"))),
    );
    assert_eq!(v[4].level, Level::Warning);
    assert_eq!(first_critical(&v), Some(8));
    assert_eq!(v[8].detector, Some(Detector::GenericRepeat));
    assert_eq!(v[8].count, Some(8));
    let v = drive(
        Profile::OpenClaw,
        "{}",
        &same(12, "read", json!({"path": "/a"}), Ok(text("x"))),
    );
    assert_eq!(v[10].level, Level::Warning);
    assert_eq!(first_critical(&v), None);
}

#[test]
fn cycle_detector_finds_long_cycles_and_ignores_changing_laps() {
    let lap = ["/a", "/b", "/c", "/d", "/e", "/f"];
    let steps: Vec<_> = (0..30)
        .map(|i| ("read", json!({"path": lap[i % 6]}), Ok(text(lap[i % 6]))))
        .collect();
    let v = drive(Profile::Default, "{}", &steps);
    let at = first_critical(&v).expect("6-cycle blocked");
    assert_eq!(v[at].detector, Some(Detector::Cycle));
    assert_eq!(at, 18, "three laps of 6 seen, the 19th call is blocked");
    assert_never_critical(
        "openclaw misses 6-cycles",
        &drive(Profile::OpenClaw, "{}", &steps),
    );
    // Same calls, but one result changes on every lap: progress.
    let steps: Vec<_> = (0..60)
        .map(|i| {
            let t = if i % 6 == 5 {
                format!("tick {}", i / 6)
            } else {
                lap[i % 6].to_string()
            };
            ("read", json!({"path": lap[i % 6]}), Ok(text(&t)))
        })
        .collect();
    assert_never_critical("changing lap", &drive(Profile::Default, "{}", &steps));
    // Cycles longer than maxCycleLength are not searched for.
    let v = drive(
        Profile::Default,
        "{ maxCycleLength: 5 }",
        &drive_steps_cycle(6, 30),
    );
    assert_never_critical("6-cycle with max 5", &v);
    // The cycle detector can be switched off.
    let v = drive(
        Profile::Default,
        "{ detectors: { cycle: false } }",
        &drive_steps_cycle(6, 30),
    );
    assert_never_critical("cycle off", &v);
}

fn drive_steps_cycle(k: usize, n: usize) -> Vec<(&'static str, Value, Result<Value, String>)> {
    (0..n)
        .map(|i| {
            (
                "read",
                json!({"path": format!("/p{}", i % k)}),
                Ok(text(&format!("r{}", i % k))),
            )
        })
        .collect()
}

#[test]
fn streak_threshold_is_configurable() {
    let v = drive(
        Profile::Default,
        "{ streakThreshold: 4 }",
        &same(10, "read", json!({"p": 1}), Ok(text("x"))),
    );
    assert_eq!(first_critical(&v), Some(4));
}

#[test]
fn ping_pong_critical_needs_stable_results() {
    let steps: Vec<_> = (0..30)
        .map(|i| {
            if i % 2 == 0 {
                ("read", json!({"p": "/a"}), Ok(text(&format!("a{i}"))))
            } else {
                ("list", json!({"d": "/"}), Ok(text("same")))
            }
        })
        .collect();
    assert_never_critical(
        "ping-pong with changing side",
        &drive(Profile::Default, "{}", &steps),
    );
    let v = drive(Profile::OpenClaw, "{}", &steps);
    assert_eq!(v[9].detector, Some(Detector::PingPong));
    assert_eq!(v[9].level, Level::Warning);
    let v = drive(
        Profile::OpenClaw,
        "{ detectors: { pingPong: false } }",
        &steps,
    );
    assert!(v.iter().all(|x| x.detector != Some(Detector::PingPong)));
}

#[test]
fn unknown_tool_repeat_any_args() {
    let steps: Vec<_> = (0..14)
        .map(|i| {
            (
                "browser",
                json!({"url": i}),
                Err("Unknown tool: browser".to_string()),
            )
        })
        .collect();
    let v = drive(Profile::Default, "{}", &steps);
    assert_eq!(first_critical(&v), Some(10));
    assert_eq!(v[10].detector, Some(Detector::UnknownToolRepeat));
    let v = drive(Profile::Default, "{ unknownToolThreshold: 3 }", &steps);
    assert_eq!(first_critical(&v), Some(3));
    let v = drive(
        Profile::Default,
        "{ detectors: { unknownToolRepeat: false } }",
        &steps,
    );
    assert_never_critical("unknown tool off", &v);
}

#[test]
fn global_circuit_breaker_and_thresholds() {
    let steps = same(35, "read", json!({"p": 1}), Ok(text("x")));
    let v = drive(Profile::OpenClaw, "{}", &steps);
    assert_eq!(v[30].detector, Some(Detector::GlobalCircuitBreaker));
    let v = drive(
        Profile::OpenClaw,
        "{ warningThreshold: 3, criticalThreshold: 5, globalCircuitBreakerThreshold: 7 }",
        &steps,
    );
    assert_eq!(v[3].level, Level::Warning);
    assert_eq!(first_critical(&v), Some(5));
    assert_eq!(v[7].detector, Some(Detector::GlobalCircuitBreaker));
    let v = drive(
        Profile::OpenClaw,
        "{ detectors: { genericRepeat: false, globalCircuitBreaker: false } }",
        &steps,
    );
    assert!(v.iter().all(|x| x.level == Level::Ok));
}

#[test]
fn argument_churn_warns_only() {
    let paths = ["/a", "/b", "/c"];
    let steps: Vec<_> = (0..30)
        .map(|i| {
            (
                "read",
                json!({"path": paths[i % 3]}),
                Err("EACCES: permission denied".to_string()),
            )
        })
        .collect();
    let v = drive(Profile::OpenClaw, "{}", &steps);
    assert!(v
        .iter()
        .any(|x| x.detector == Some(Detector::ArgumentChurn) && x.level == Level::Warning));
    assert_never_critical("churn is warning-only in openclaw", &v);
}

#[test]
fn compaction_guard_needs_identical_window() {
    let (config, _) = LoopConfig::from_json5("{}").unwrap();
    let mut r = Replay::new(Guard::new(Profile::Default, config));
    r.push(Event::Compaction {
        run: None,
        agent: None,
    })
    .unwrap();
    for i in 0..3 {
        r.push(Event::call(
            format!("c{i}"),
            "exec",
            json!({"command": "make"}),
        ))
        .unwrap();
        r.push(Event::error(format!("c{i}"), "make: *** [all] Error 2"))
            .unwrap();
    }
    let v = r.verdicts();
    assert_eq!(
        v[2].verdict.detector,
        Some(Detector::CompactionLoopPersisted)
    );
    assert_eq!(v[2].verdict.count, Some(3));
    assert!(v[2].verdict.terminate_run && v[2].from_outcome);
    assert!(v[2].verdict.message.contains("exec"));
    // enabled: false switches the guard off too.
    let (config, _) = LoopConfig::from_json5("{ enabled: false }").unwrap();
    let mut r = Replay::new(Guard::new(Profile::Default, config));
    r.push(Event::Compaction {
        run: None,
        agent: None,
    })
    .unwrap();
    for i in 0..30 {
        r.push(Event::call(
            format!("c{i}"),
            "exec",
            json!({"command": "make"}),
        ))
        .unwrap();
        r.push(Event::error(format!("c{i}"), "boom")).unwrap();
    }
    assert!(r.verdicts().iter().all(|c| c.verdict.level == Level::Ok));
}

// ---------- strict protocol ----------

fn strict_pair(a: &str, b: &str) -> Vec<deloop_core::loops::replay::CallVerdict> {
    let mut r = Replay::new(Guard::new(Profile::Strict, LoopConfig::default()));
    for (i, pat) in [a, b].iter().enumerate() {
        r.push(Event::Call {
            id: Some(format!("c{i}")),
            tool: "grep".into(),
            args: json!({"pattern": pat, "path": "src"}),
            run: None,
            agent: Some("explorer".into()),
        })
        .unwrap();
        r.push(Event::result(
            format!("c{i}"),
            text("src/player.ts:12: doubleJump()"),
        ))
        .unwrap();
    }
    r.into_verdicts()
}

#[test]
fn strict_protocol_equivalent_patterns_terminate_with_fingerprint() {
    let v = strict_pair("double.*jump", "doubleJump");
    assert_eq!(v[0].verdict.level, Level::Ok);
    let second = &v[1].verdict;
    assert_eq!(second.level, Level::Critical);
    assert_eq!(second.detector, Some(Detector::AntiLoopProtocol));
    assert!(second.terminate_run);
    let fp = second.fingerprint.as_deref().unwrap();
    let parts: Vec<&str> = fp.split("::").collect();
    assert_eq!(&parts[..4], &["AGENT", "explorer", "grep", "src"], "{fp}");
    assert_eq!(parts[4].len(), 12);
    assert!(parts[4].bytes().all(|b| b.is_ascii_hexdigit()));
    // A different pattern is a different procedure.
    let v = strict_pair("jump", "doubleJump");
    assert!(v.iter().all(|c| c.verdict.level == Level::Ok));
}

#[test]
fn strict_protocol_needs_same_result_in_a_row() {
    let mk = |steps: &[(&str, &str)]| {
        let mut r = Replay::new(Guard::new(Profile::Strict, LoopConfig::default()));
        for (i, (path, res)) in steps.iter().enumerate() {
            r.push(Event::call(format!("c{i}"), "read", json!({"path": path})))
                .unwrap();
            r.push(Event::result(format!("c{i}"), text(res))).unwrap();
        }
        r.into_verdicts()
    };
    assert!(mk(&[("/a", "1"), ("/a", "2"), ("/a", "3")])
        .iter()
        .all(|c| c.verdict.level == Level::Ok));
    assert!(mk(&[("/a", "1"), ("/b", "1"), ("/a", "1")])
        .iter()
        .all(|c| c.verdict.level == Level::Ok));
    let v = mk(&[("/a", "1"), ("/a", "1"), ("/a", "1")]);
    assert_eq!(v[1].verdict.level, Level::Critical);
    assert_eq!(
        v[2].verdict.level,
        Level::Critical,
        "the next identical call is blocked too"
    );
    assert_eq!(
        v[1].verdict
            .fingerprint
            .as_deref()
            .unwrap()
            .split("::")
            .nth(3),
        Some("/a")
    );
}

#[test]
fn strict_user_turn_restarts_the_chain() {
    let mut r = Replay::new(Guard::new(Profile::Strict, LoopConfig::default()));
    r.push(Event::call("c0", "read", json!({"path": "/a"})))
        .unwrap();
    r.push(Event::result("c0", text("1"))).unwrap();
    r.push(Event::UserTurn {
        run: None,
        agent: None,
    })
    .unwrap();
    r.push(Event::call("c1", "read", json!({"path": "/a"})))
        .unwrap();
    r.push(Event::result("c1", text("1"))).unwrap();
    assert!(r.verdicts().iter().all(|c| c.verdict.level == Level::Ok));
}

// ---------- scoping, memory, hostile input ----------

/// Two runs of one agent, interleaved call by call, each repeating the same
/// call with the same result.
fn interleaved_runs(profile: Profile, calls: usize) -> Vec<Verdict> {
    let mut r = Replay::new(Guard::new(profile, LoopConfig::default()));
    for i in 0..calls {
        let id = format!("c{i}");
        let run = if i % 2 == 0 { "r1" } else { "r2" };
        r.push(Event::Call {
            id: Some(id.clone()),
            tool: "read".into(),
            args: json!({"path": run}),
            run: Some(run.into()),
            agent: None,
        })
        .unwrap();
        r.push(Event::result(id, text("same"))).unwrap();
    }
    r.into_verdicts().into_iter().map(|c| c.verdict).collect()
}

#[test]
fn openclaw_shares_one_window_per_agent_and_filters_it_by_run() {
    // OpenClaw keeps one window of 30 records per session: two interleaved
    // runs hold 15 each, so neither loop ever reaches the critical count 20.
    let v = interleaved_runs(Profile::OpenClaw, 200);
    assert_never_critical("openclaw, two interleaved looping runs", &v);
    let counts: Vec<Option<u32>> = v.iter().map(|x| x.count).collect();
    assert_eq!(counts.iter().flatten().max(), Some(&15));
    // r1's 11th call (index 20) is the first to see 10 of its own records.
    assert_eq!(v.iter().position(|x| x.level == Level::Warning), Some(20));
    // deloop's default keeps a window per run: both loops are blocked.
    let v = interleaved_runs(Profile::Default, 200);
    let first = first_critical(&v).expect("default blocks the interleaved loops");
    assert!(first <= 20, "default blocks at {first}");
    assert!(v[first + 1].is_critical(), "both runs are blocked");
}

/// Ten calls of `read a` whose results arrive only after 30 other calls
/// pushed them out of the window, then `read a` again.
fn late_results(profile: Profile, name_the_call: bool) -> Vec<Verdict> {
    let mut g = Guard::new(profile, LoopConfig::default());
    let a = json!({"path": "a"});
    let result = text("same");
    let ids: Vec<String> = (0..10).map(|i| format!("a{i}")).collect();
    let mut verdicts = Vec::new();
    for id in &ids {
        verdicts.push(g.on_call(&ToolCall::new("read", &a).id(id)));
    }
    for i in 0..30 {
        let args = json!({"path": format!("other{i}")});
        let id = format!("o{i}");
        verdicts.push(g.on_call(&ToolCall::new("read", &args).id(&id)));
        g.on_outcome(&Outcome::new(OutcomeBody::Result(&result)).id(&id));
    }
    for id in &ids {
        let mut outcome = Outcome::new(OutcomeBody::Result(&result)).id(id);
        if name_the_call {
            outcome = outcome.call("read", &a);
        }
        assert!(g.on_outcome(&outcome).is_none());
    }
    verdicts.push(g.on_call(&ToolCall::new("read", &a).id("again")));
    verdicts
}

#[test]
fn an_outcome_whose_call_left_the_window_is_recorded_as_a_call_in_openclaw() {
    // OpenClaw: the ten late outcomes come back as ten records of `read a`,
    // so the next `read a` is the 10th identical call in the window.
    let v = late_results(Profile::OpenClaw, true);
    let last = v.last().unwrap();
    assert_eq!(
        (last.level, last.detector, last.count),
        (Level::Warning, Some(Detector::GenericRepeat), Some(10))
    );
    // An outcome that does not name its call cannot be recorded.
    assert_eq!(
        late_results(Profile::OpenClaw, false).last().unwrap().level,
        Level::Ok
    );
    // deloop's profiles ignore them: those calls were counted while they
    // were in the window.
    for profile in [Profile::Default, Profile::Strict] {
        for named in [true, false] {
            let v = late_results(profile, named);
            assert_eq!(v.last().unwrap().level, Level::Ok, "{profile}");
        }
    }
}

#[test]
fn late_results_in_a_transcript_are_recorded_as_calls() {
    // The same through a replay: results name their call by id, and the
    // replay knows which call that is.
    let mut r = Replay::new(Guard::new(Profile::OpenClaw, LoopConfig::default()));
    for i in 0..10 {
        r.push(Event::call(format!("a{i}"), "read", json!({"path": "a"})))
            .unwrap();
    }
    for i in 0..30 {
        r.push(Event::call(format!("o{i}"), "read", json!({"path": i})))
            .unwrap();
        r.push(Event::result(format!("o{i}"), text("x"))).unwrap();
    }
    for i in 0..10 {
        r.push(Event::result(format!("a{i}"), text("same")))
            .unwrap();
    }
    r.push(Event::call("again", "read", json!({"path": "a"})))
        .unwrap();
    let v = r.into_verdicts();
    let last = &v.last().unwrap().verdict;
    assert_eq!((last.level, last.count), (Level::Warning, Some(10)));
}

#[test]
fn scopes_are_capped_lru() {
    let (config, _) = LoopConfig::from_json5("{ maxScopes: 2 }").unwrap();
    let mut g = Guard::new(Profile::Default, config);
    let args = json!({});
    for run in ["r1", "r2", "r3", "r4"] {
        g.on_call(&deloop_core::loops::ToolCall::new("read", &args).run(run));
    }
    assert_eq!(g.scope_count(), 2);
}

#[test]
fn agents_have_their_own_config_and_state() {
    let cfg = r#"{ tools: { loopDetection: {} }, agents: { list: [ { id: "w", tools: { loopDetection: { streakThreshold: 3 } } } ] } }"#;
    let (config, _) = LoopConfig::from_json5(cfg).unwrap();
    let mut r = Replay::new(Guard::new(Profile::Default, config));
    for i in 0..6 {
        for agent in ["main", "w"] {
            let id = format!("{agent}{i}");
            r.push(Event::Call {
                id: Some(id.clone()),
                tool: "read".into(),
                args: json!({"p": 1}),
                run: None,
                agent: Some(agent.into()),
            })
            .unwrap();
            r.push(Event::result(id, text("x"))).unwrap();
        }
    }
    let v = r.verdicts();
    // Worker calls are the odd indices: blocked at its 4th call; main never.
    assert_eq!(v.iter().position(|c| c.verdict.is_critical()), Some(7));
    assert!(v.iter().step_by(2).all(|c| !c.verdict.is_critical()));
}

#[test]
fn hostile_input_never_panics() {
    let mut deep = json!(0);
    for _ in 0..100 {
        deep = json!({"a": [deep]});
    }
    let huge = "x".repeat(2_000_000);
    let steps = vec![
        ("", json!(null), Ok(json!(null))),
        ("\u{0}weird TOOL name 💥", deep.clone(), Ok(deep.clone())),
        (
            "exec",
            json!({"command": huge.clone()}),
            Ok(json!({"details": {"status": "failed", "exitCode": 1e308, "aggregated": huge}})),
        ),
        (
            "exec",
            json!({"command": 5}),
            Ok(json!({"details": {"status": 7}})),
        ),
        (
            "message",
            json!({"action": "send"}),
            Ok(json!({"details": [1, {"messageId": 2}]})),
        ),
        ("process", json!({"action": "log"}), Err(String::new())),
    ];
    for p in Profile::ALL {
        let _ = drive(p, "{}", &steps);
    }
}

#[test]
fn user_volatile_keys_and_normalisers_take_effect() {
    let steps: Vec<_> = (0..25)
        .map(|i| ("http_get", json!({"url": "https://api/x"}), Ok(json!({"status": 500, "requestId": format!("req-{i}"), "error": format!("failed after {}ms", 100 + i)}))))
        .collect();
    assert_never_critical(
        "volatile data hides the loop",
        &drive(Profile::Default, "{}", &steps),
    );
    let cfg = r##"{ volatileKeys: { http_get: ["requestId"] }, normalizers: { http_get: [ { pattern: "\\d+ms", replace: "#ms" } ] } }"##;
    let v = drive(Profile::Default, cfg, &steps);
    assert_eq!(
        first_critical(&v),
        Some(8),
        "normalised, the repeats are identical"
    );
}

#[test]
fn poll_tools_are_configurable() {
    let steps = same(22, "wait_for", json!({"job": 1}), Ok(text("pending")));
    let v = drive(Profile::OpenClaw, "{}", &steps);
    assert_eq!(v[10].detector, Some(Detector::GenericRepeat));
    let v = drive(
        Profile::OpenClaw,
        r#"{ pollTools: ["command_status", "wait_for"] }"#,
        &steps,
    );
    assert_eq!(v[10].detector, Some(Detector::KnownPollNoProgress));
    assert_eq!(first_critical(&v), Some(20));
}
