//! Saving and resuming a replay: a replay serialised after any event and
//! resumed (possibly many times) judges every later event exactly as the
//! replay that never stopped. This is what lets a shared session store hand
//! a session from one process to another.

use deloop_core::loops::replay::{CallVerdict, Event, Replay};
use deloop_core::loops::{Guard, LoopConfig, Profile};
use proptest::prelude::*;
use serde_json::{json, Value};

const PROFILES: [Profile; 3] = [Profile::OpenClaw, Profile::Default, Profile::Strict];

fn fresh(profile: Profile, max_open: usize) -> Replay {
    Replay::new(Guard::new(profile, LoopConfig::default())).with_max_open(max_open)
}

fn text(t: &str) -> Value {
    json!({"content": [{"type": "text", "text": t}]})
}

/// One event from small alphabets, so that loops, ping-pong, shared ids,
/// id-less results, several agents and runs, compactions and user turns
/// all happen.
fn event(kind: u8, a: u8, b: u8) -> Event {
    let agent = (a % 2 == 1).then(|| "helper".to_string());
    let run = (!b.is_multiple_of(3)).then(|| format!("r{}", b % 3));
    match kind {
        0..=3 => Event::Call {
            id: (!a.is_multiple_of(5)).then(|| format!("i{}", a % 7)),
            tool: ["read", "exec", "grep", "process"][usize::from(b % 4)].into(),
            args: match b % 4 {
                3 => json!({"action": "poll", "sessionId": "s1"}),
                2 => json!({"pattern": format!("fo+{}", a % 2), "path": "src/"}),
                _ => json!({"path": format!("/f{}", a % 3)}),
            },
            run,
            agent,
        },
        4..=6 => Event::Result {
            id: (!b.is_multiple_of(4)).then(|| format!("i{}", a % 7)),
            body: Ok(text(&format!("body {}", a % 3))),
        },
        7 => Event::Result {
            id: Some(format!("i{}", a % 7)),
            body: Err("ECONNREFUSED 127.0.0.1:5432".into()),
        },
        8 => Event::Compaction { run, agent },
        _ => Event::UserTurn { run, agent },
    }
}

/// Replays `events` without stopping; `Err` events are skipped as the
/// session API skips them (nothing is recorded).
fn straight(events: &[Event], profile: Profile, max_open: usize) -> Vec<CallVerdict> {
    let mut r = fresh(profile, max_open);
    for e in events {
        let _ = r.push(e.clone());
    }
    r.into_verdicts()
}

/// Replays `events`, saving the replay to JSON after every `every`-th event
/// and going on from a replay resumed from that text.
fn resumed(events: &[Event], profile: Profile, max_open: usize, every: usize) -> Vec<CallVerdict> {
    let mut r = fresh(profile, max_open);
    for (i, e) in events.iter().enumerate() {
        let _ = r.push(e.clone());
        if (i + 1) % every == 0 {
            let saved = serde_json::to_string(&r).expect("a replay serialises");
            let back: Replay = serde_json::from_str(&saved).expect("and deserialises");
            r = Replay::resume(fresh(profile, max_open), back);
        }
    }
    r.into_verdicts()
}

#[test]
fn resuming_after_every_event_changes_no_verdict() {
    // Stretches of mixed events between stretches of one call repeated
    // with the same result, so that every profile warns and blocks.
    let mut events = Vec::new();
    for i in 0..600u32 {
        if (i / 50) % 2 == 1 {
            let id = format!("loop{i}");
            events.push(Event::call(&id, "exec", json!({"command": "make test"})));
            events.push(Event::result(&id, text("FAILED")));
        } else {
            events.push(event(
                (i % 10) as u8,
                (i * 7 % 11) as u8,
                (i * 5 % 13) as u8,
            ));
        }
    }
    for profile in PROFILES {
        let a = straight(&events, profile, 64);
        assert!(
            a.iter()
                .any(|v| v.verdict.level != deloop_core::loops::Level::Ok),
            "{profile:?}: the transcript should contain loops"
        );
        assert_eq!(a, resumed(&events, profile, 64, 1), "{profile:?}");
    }
}

#[test]
fn a_resumed_replay_takes_the_templates_configuration() {
    // The saved replay ran under `strict`; resumed under the openclaw
    // template it must judge as openclaw does (configuration is not state).
    let events: Vec<Event> = (0..40u32)
        .map(|i| {
            if i % 2 == 0 {
                Event::call(format!("c{i}"), "read", json!({"path": "/a"}))
            } else {
                Event::result(format!("c{}", i - 1), text("same"))
            }
        })
        .collect();
    let mut r = fresh(Profile::Strict, 64);
    r.push(events[0].clone()).unwrap();
    let saved = serde_json::to_string(&r).unwrap();
    let mut r = Replay::resume(
        fresh(Profile::OpenClaw, 64),
        serde_json::from_str(&saved).unwrap(),
    );
    for e in &events[1..] {
        r.push(e.clone()).unwrap();
    }
    assert_eq!(r.guard().profile(), Profile::OpenClaw);
    assert_eq!(r.into_verdicts(), straight(&events, Profile::OpenClaw, 64));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any transcript, any profile, any save interval and `max_open`: the
    /// resumed replay's verdicts equal the straight replay's.
    #[test]
    fn resumed_replays_match_straight_ones(
        ops in proptest::collection::vec((0u8..10, 0u8..16, 0u8..16), 1..400),
        profile in 0usize..3,
        every in 1usize..25,
        max_open in 1usize..40,
    ) {
        let events: Vec<Event> = ops.into_iter().map(|(k, a, b)| event(k, a, b)).collect();
        let profile = PROFILES[profile];
        prop_assert_eq!(
            straight(&events, profile, max_open),
            resumed(&events, profile, max_open, every)
        );
    }
}
