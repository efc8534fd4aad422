//! The replay conventions: streaming gives the same verdicts as a retaining
//! replay, its memory stays bounded, and the tolerant rule for calls that
//! wait too long for their result behaves as documented.

use deloop_core::loops::replay::{CallVerdict, Event, Replay, ReplayError};
use deloop_core::loops::{Guard, Level, LoopConfig, OutcomeBody, Profile, ToolCall};
use proptest::prelude::*;
use serde_json::{json, Value};

fn guard(profile: Profile) -> Guard {
    Guard::new(profile, LoopConfig::default())
}

fn text(t: &str) -> Value {
    json!({"content": [{"type": "text", "text": t}]})
}

/// A transcript with healthy stretches, loops, shared ids, id-less
/// results, calls that never get a result, and compactions.
fn transcript(n: usize) -> Vec<Event> {
    let mut ev = Vec::new();
    for i in 0..n {
        let looping = (i / 40) % 3 == 1;
        let args = if looping {
            json!({"command": "make test"})
        } else {
            json!({"path": format!("/src/f{}.rs", i % 17)})
        };
        let tool = if looping { "exec" } else { "read" };
        // Every 7th call reuses the id "dup"; every 11th has no id.
        let id = if i % 11 == 0 {
            None
        } else if i % 7 == 0 {
            Some("dup".to_string())
        } else {
            Some(format!("c{i}"))
        };
        ev.push(Event::Call {
            id: id.clone(),
            tool: tool.into(),
            args,
            run: Some(format!("r{}", i / 100)),
            agent: None,
        });
        if i % 13 == 5 {
            continue; // never answered
        }
        let body = if looping {
            Ok(text("FAILED"))
        } else {
            Ok(text(&format!("body {}", i % 5)))
        };
        ev.push(Event::Result { id, body });
        if i % 97 == 50 {
            ev.push(Event::Compaction {
                run: Some(format!("r{}", i / 100)),
                agent: None,
            });
        }
    }
    ev
}

fn retained(events: &[Event], max_open: usize) -> Vec<CallVerdict> {
    let mut r = Replay::new(guard(Profile::Default)).with_max_open(max_open);
    for e in events {
        r.push(e.clone()).unwrap();
    }
    r.into_verdicts()
}

/// Streams the events, checking the bound on what the replay keeps.
fn streamed(events: &[Event], max_open: usize, profile: Profile) -> Vec<CallVerdict> {
    let mut r = Replay::streaming(guard(profile)).with_max_open(max_open);
    let mut out = Vec::new();
    for e in events {
        r.push(e.clone()).unwrap();
        while let Some(v) = r.pop_settled() {
            out.push(v);
        }
        assert!(
            r.verdicts().len() <= max_open + 1,
            "kept {} verdicts with max_open {max_open}",
            r.verdicts().len()
        );
    }
    r.finish();
    while let Some(v) = r.pop_settled() {
        out.push(v);
    }
    assert!(r.verdicts().is_empty());
    out
}

#[test]
fn streaming_equals_retaining() {
    let events = transcript(3000);
    for max_open in [DEFAULT, 5, 50] {
        let a = retained(&events, max_open);
        let b = streamed(&events, max_open, Profile::Default);
        assert_eq!(a.len(), 3000);
        assert_eq!(a, b, "max_open {max_open}");
        assert!(a.iter().any(|c| c.verdict.level == Level::Critical));
    }
}

const DEFAULT: usize = deloop_core::loops::replay::DEFAULT_MAX_OPEN;

#[test]
fn pop_settled_waits_for_the_result_then_keeps_order() {
    let mut r = Replay::streaming(guard(Profile::OpenClaw));
    let args = json!({"path": "/a"});
    let res = text("x");
    r.push_call(&ToolCall::new("read", &args).id("a"));
    r.push_call(&ToolCall::new("read", &args).id("b"));
    r.push_result(Some("b"), OutcomeBody::Result(&res)).unwrap();
    // `a` still waits: nothing can be handed out, `b` is held behind it.
    assert!(r.pop_settled().is_none());
    assert!(r.is_settled(1) && !r.is_settled(0));
    r.push_result(Some("a"), OutcomeBody::Result(&res)).unwrap();
    assert_eq!(r.pop_settled().map(|c| c.index), Some(0));
    assert_eq!(r.pop_settled().map(|c| c.index), Some(1));
    assert!(r.pop_settled().is_none());
    assert_eq!(r.calls(), 2);
}

#[test]
fn retaining_replay_keeps_everything_and_pop_copies() {
    let mut r = Replay::new(guard(Profile::Default));
    let args = json!({});
    r.push_call(&ToolCall::new("read", &args).id("a"));
    r.push_result(Some("a"), OutcomeBody::Result(&text("x")))
        .unwrap();
    let c = r.pop_settled().unwrap();
    assert_eq!(&*c.tool, "read");
    assert_eq!(r.verdicts().len(), 1);
    assert_eq!(r.verdicts()[0], c);
}

#[test]
fn a_call_waiting_too_long_is_forgotten_and_its_late_result_ignored() {
    let mut r = Replay::streaming(guard(Profile::Default)).with_max_open(3);
    let args = json!({"path": "/x"});
    r.push_call(&ToolCall::new("read", &args).id("slow"));
    for i in 0..3 {
        let id = format!("c{i}");
        let a = json!({"path": format!("/{i}")});
        r.push_call(&ToolCall::new("read", &a).id(&id));
        r.push_result(Some(&id), OutcomeBody::Result(&text("y")))
            .unwrap();
    }
    // Three later calls: `slow` is forgotten, its verdict final.
    assert_eq!(r.forgotten_calls(), 1);
    assert!(r.is_settled(0));
    let first = r.pop_settled().unwrap();
    assert_eq!((first.index, first.verdict.level), (0, Level::Ok));
    // Its late result is tolerated (ignored), once.
    assert_eq!(
        r.push_result(Some("slow"), OutcomeBody::Result(&text("z"))),
        Ok(())
    );
    assert_eq!(r.ignored_results(), 1);
    assert_eq!(
        r.push_result(Some("slow"), OutcomeBody::Result(&text("z"))),
        Err(ReplayError::UnknownId("slow".into()))
    );
    // An id never seen is still an error.
    assert_eq!(
        r.push_result(Some("never"), OutcomeBody::Result(&text("z"))),
        Err(ReplayError::UnknownId("never".into()))
    );
}

#[test]
fn blocked_calls_without_results_do_not_hold_the_stream() {
    // A runtime that does not run blocked calls writes no result for them.
    let mut r = Replay::streaming(guard(Profile::OpenClaw)).with_max_open(64);
    let args = json!({"path": "/same"});
    let res = text("same");
    let mut levels = Vec::new();
    for i in 0..20_000 {
        let id = format!("c{i}");
        let v = r.push_call(&ToolCall::new("read", &args).id(&id));
        if !r.is_settled(v) {
            r.push_result(Some(&id), OutcomeBody::Result(&res)).unwrap();
        }
        while let Some(c) = r.pop_settled() {
            levels.push(c.verdict.level);
        }
        assert!(r.verdicts().len() <= 65);
    }
    r.finish();
    while let Some(c) = r.pop_settled() {
        levels.push(c.verdict.level);
    }
    assert_eq!(levels.len(), 20_000);
    assert_eq!(levels[20], Level::Critical);
    assert_eq!(levels[19_999], Level::Critical);
}

#[test]
fn idless_results_answer_the_oldest_waiting_call() {
    let mut r = Replay::new(guard(Profile::Default));
    let args = json!({});
    r.push_call(&ToolCall::new("a", &args).id("x"));
    r.push_call(&ToolCall::new("b", &args));
    r.push_call(&ToolCall::new("c", &args).id("x"));
    let res = text("r");
    r.push_result(None, OutcomeBody::Result(&res)).unwrap(); // a
    r.push_result(Some("x"), OutcomeBody::Result(&res)).unwrap(); // c
    assert!(r.is_settled(0) && !r.is_settled(1) && r.is_settled(2));
    r.push_result(None, OutcomeBody::Result(&res)).unwrap(); // b
    assert_eq!(
        r.push_result(None, OutcomeBody::Result(&res)),
        Err(ReplayError::NothingWaiting)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Any mix of calls, results (by id, shared ids, or none) and missing
    /// results: the streamed verdicts equal the retained ones, errors
    /// agree, and the stream never keeps more than `max_open + 1` verdicts.
    #[test]
    fn streaming_matches_retaining_on_random_transcripts(
        ops in proptest::collection::vec((0u8..4, 0u8..6, 0u8..3), 1..300),
        max_open in 1usize..20,
    ) {
        let mut a = Replay::new(guard(Profile::Default)).with_max_open(max_open);
        let mut b = Replay::streaming(guard(Profile::Default)).with_max_open(max_open);
        let mut streamed = Vec::new();
        for (kind, id, res) in ops {
            let id = format!("i{id}");
            let args = json!({"p": res});
            let r = text(&format!("{res}"));
            let (ra, rb) = match kind {
                0 | 1 => {
                    a.push_call(&ToolCall::new("read", &args).id(&id));
                    b.push_call(&ToolCall::new("read", &args).id(&id));
                    (Ok(()), Ok(()))
                }
                2 => (
                    a.push_result(Some(&id), OutcomeBody::Result(&r)),
                    b.push_result(Some(&id), OutcomeBody::Result(&r)),
                ),
                _ => (
                    a.push_result(None, OutcomeBody::Result(&r)),
                    b.push_result(None, OutcomeBody::Result(&r)),
                ),
            };
            prop_assert_eq!(ra, rb);
            while let Some(v) = b.pop_settled() {
                streamed.push(v);
            }
            prop_assert!(b.verdicts().len() <= max_open + 1);
        }
        b.finish();
        while let Some(v) = b.pop_settled() {
            streamed.push(v);
        }
        prop_assert_eq!(a.into_verdicts(), streamed);
    }
}
