//! Tests of the guard's internals (history windows, outcome matching).

use super::*;
use crate::loops::OutcomeBody;
use serde_json::json;

fn states(g: &Guard) -> Vec<&'static str> {
    let history = if g.shared_window() {
        &g.sessions.values().next().unwrap().history
    } else {
        &g.scopes.values().next().unwrap().history
    };
    history
        .iter()
        .map(|r| match r.state {
            State::Pending => "pending",
            State::Veto => "veto",
            State::Done(_) => "done",
        })
        .collect()
}

#[test]
fn an_outcome_naming_its_call_never_attaches_to_another_call_with_the_same_id() {
    let (a, b, x) = (json!({"p": "a"}), json!({"p": "b"}), json!({"p": "x"}));
    let r = json!("r");
    for profile in Profile::ALL {
        let (config, _) = LoopConfig::from_json5("{ historySize: 2 }").unwrap();
        let mut g = Guard::new(profile, config);
        g.on_call(&ToolCall::new("read", &a).id("c1"));
        for id in ["x1", "x2"] {
            g.on_call(&ToolCall::new("read", &x).id(id));
            g.on_outcome(&Outcome::new(OutcomeBody::Result(&r)).id(id));
        }
        // `a` has left the window; `b` reuses its id.
        g.on_call(&ToolCall::new("read", &b).id("c1"));
        g.on_outcome(
            &Outcome::new(OutcomeBody::Result(&r))
                .id("c1")
                .call("read", &a),
        );
        if profile == Profile::OpenClaw {
            // OpenClaw records `a`'s outcome as a call of its own.
            assert_eq!(states(&g), ["pending", "done"], "{profile}");
            assert_eq!(
                g.sessions.values().next().unwrap().history[1].call,
                call_digest("read", &a)
            );
        } else {
            assert_eq!(states(&g), ["done", "pending"], "{profile}");
        }
        // Without naming its call, the outcome goes by id alone.
        g.on_outcome(&Outcome::new(OutcomeBody::Result(&r)).id("c1"));
        assert!(!states(&g).contains(&"pending"), "{profile}");
    }
}

#[test]
fn openclaw_filters_one_window_per_agent_by_run() {
    let args = json!({});
    let mut g = Guard::new(Profile::OpenClaw, LoopConfig::default());
    for i in 0..40 {
        let run = ["r1", " r2 ", "r2"][i % 3];
        g.on_call(&ToolCall::new("read", &args).run(run).agent("w"));
    }
    assert_eq!(g.sessions.len(), 1);
    let history = &g.sessions.get("w").unwrap().history;
    assert_eq!(history.len(), 30);
    // Run ids are trimmed: " r2 " and "r2" are one run.
    assert_eq!(
        history
            .iter()
            .filter(|r| r.run.as_deref() == Some("r2"))
            .count(),
        20
    );
    // Every (agent, run) scope still has its own compaction window.
    assert_eq!(g.scope_count(), 2);
    assert!(g.scopes.values().all(|s| s.history.is_empty()));
}
