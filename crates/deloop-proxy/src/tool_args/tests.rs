use super::*;

fn wall_args() -> String {
    format!(
        r#"{{"path": "a.md", "content": "Intro. {}"}}"#,
        "la continuación de un proceso ".repeat(200)
    )
}

fn reply(calls: &[(&str, String)]) -> Vec<u8> {
    let list: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"id": format!("c{i}"), "type": "function",
                "function": {"name": name, "arguments": args}})
        })
        .collect();
    json!({"id": "r", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "tool_calls": list}}]})
    .to_string()
    .into_bytes()
}

#[test]
fn a_looping_call_is_dropped_or_closed_in_a_whole_reply() {
    let body = reply(&[
        ("ls", r#"{"path": "/"}"#.into()),
        ("write", wall_args()),
        ("ls", r#"{"path": "/b"}"#.into()),
    ]);
    let cfg = ClampConfig::default();
    let out = guard_openai(&body, ArgsAction::Drop, &cfg, "stop");
    let v: Value = serde_json::from_slice(&out.body.unwrap()).unwrap();
    let calls = v["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "the calls from the looping one on are gone");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["deloop"]["tool_call_cut"]["action"], "dropped");
    assert_eq!(v["deloop"]["tool_call_cut"]["call"], 1);
    assert_eq!(out.cuts[0].headers()[0].1, "dropped");

    let out = guard_openai(&body, ArgsAction::Close, &cfg, "stop");
    let v: Value = serde_json::from_slice(&out.body.unwrap()).unwrap();
    let calls = v["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    let args: Value =
        serde_json::from_str(calls[1]["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args["path"], "a.md");
    let content = args["content"].as_str().unwrap();
    assert!(content.ends_with("[…]") && content.len() < 400, "{content}");
    assert_eq!(v["deloop"]["tool_call_cut"]["action"], "closed");
}

#[test]
fn identical_calls_are_cut_at_the_threshold() {
    let calls: Vec<(&str, String)> = (0..30)
        .map(|_| ("read", r#"{"path": "/a"}"#.to_string()))
        .collect();
    let out = guard_openai(
        &reply(&calls),
        ArgsAction::Close,
        &ClampConfig::default(),
        "stop",
    );
    let v: Value = serde_json::from_slice(&out.body.unwrap()).unwrap();
    let kept = v["choices"][0]["message"]["tool_calls"].as_array().unwrap();
    assert_eq!(kept.len() as u32, IDENTICAL_REPLY_CALLS - 1);
    let cut = &v["deloop"]["tool_call_cut"];
    assert_eq!(cut["detector"], "identical_reply_calls");
    assert_eq!(cut["channel"], "calls");
    assert_eq!(cut["count"], IDENTICAL_REPLY_CALLS);
    // Distinct calls pass.
    let calls: Vec<(&str, String)> = (0..30)
        .map(|i| ("read", format!(r#"{{"path": "/a{i}"}}"#)))
        .collect();
    assert!(guard_openai(
        &reply(&calls),
        ArgsAction::Drop,
        &ClampConfig::default(),
        "stop"
    )
    .body
    .is_none());
}

#[test]
fn anthropic_whole_reply() {
    let input: Value = serde_json::from_str(&wall_args()).unwrap();
    let body = json!({"id": "m", "type": "message", "role": "assistant", "model": "c",
        "content": [{"type": "text", "text": "Writing."},
                    {"type": "tool_use", "id": "t", "name": "write", "input": input}],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 1, "output_tokens": 1}})
    .to_string();
    let cfg = ClampConfig::default();
    let out = guard_anthropic(body.as_bytes(), ArgsAction::Drop, &cfg, "end_turn");
    let v: Value = serde_json::from_slice(&out.body.unwrap()).unwrap();
    assert_eq!(v["content"].as_array().unwrap().len(), 1);
    assert_eq!(v["stop_reason"], "end_turn");
    let out = guard_anthropic(body.as_bytes(), ArgsAction::Close, &cfg, "end_turn");
    let v: Value = serde_json::from_slice(&out.body.unwrap()).unwrap();
    assert!(v["content"][1]["input"]["content"]
        .as_str()
        .unwrap()
        .ends_with("[…]"));
}

#[test]
fn healthy_and_hostile_bodies_pass() {
    let cfg = ClampConfig::default();
    let body = reply(&[("ls", r#"{"path": "/"}"#.into())]);
    assert!(guard_openai(&body, ArgsAction::Drop, &cfg, "stop")
        .body
        .is_none());
    for body in [
        &b"not json"[..],
        b"[]",
        br#"{"choices": [1, {"message": {"tool_calls": [1, {"function": 2}]}}]}"#,
        br#"{"content": [{"type": "tool_use"}, 3]}"#,
    ] {
        assert!(guard_openai(body, ArgsAction::Drop, &cfg, "stop")
            .body
            .is_none());
        assert!(guard_anthropic(body, ArgsAction::Close, &cfg, "end_turn")
            .body
            .is_none());
    }
}

#[test]
fn the_calls_guard_cuts_a_streamed_call_and_counts_completed_ones() {
    let mut g = CallsGuard::new(ArgsAction::Close, ClampConfig::default());
    let args = wall_args();
    let mut cut = None;
    let chars: Vec<char> = args.chars().collect();
    for piece in chars.chunks(8) {
        let piece: String = piece.iter().collect();
        cut = g.piece(0, "write", &piece);
        if cut.is_some() {
            break;
        }
    }
    let cut = cut.expect("cut");
    let closed = cut.closed.expect("closed");
    serde_json::from_str::<Value>(&closed.text(&args)).unwrap();
    assert!(cut.record.removed_bytes.unwrap() < 300);
    let mut g = CallsGuard::new(ArgsAction::Drop, ClampConfig::default());
    let mut fired = None;
    for i in 0..20u64 {
        g.piece(i, "read", r#"{"p": 1}"#);
        fired = fired.or(g.complete(i, "read", &json!({"p": 1})));
    }
    assert_eq!(fired.unwrap().call, u64::from(IDENTICAL_REPLY_CALLS) - 1);
}

#[test]
fn a_call_completed_twice_is_counted_once() {
    let mut g = CallsGuard::new(ArgsAction::Drop, ClampConfig::default());
    for _ in 0..30 {
        // Two parallel calls whose deltas interleave.
        g.piece(0, "read", "");
        assert!(g.complete(0, "read", &json!({"p": 1})).is_none());
        g.piece(1, "read", "");
        assert!(g.complete(1, "read", &json!({"p": 1})).is_none());
    }
}
