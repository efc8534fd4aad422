use super::*;
use crate::sse::SseReader;
use deloop_core::loops::{LoopConfig, Profile};
use std::collections::BTreeMap;

fn history(n: usize) -> History {
    let mut m = vec![json!({"role": "user", "content": "go"})];
    for i in 0..n {
        m.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("c{i}"), "type": "function",
             "function": {"name": "read", "arguments": "{\"path\":\"/a\"}"}}]}));
        m.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": "same"}));
    }
    History::read(Api::OpenAi, &m)
}

fn chunk(choice: Value) -> String {
    format!(
        "data: {}\n\n",
        json!({"id": "s", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [choice]})
    )
}

fn run(layer: &mut ToolStream, text: &str) -> String {
    let mut reader = SseReader::new(1 << 20);
    let mut evs = Vec::new();
    reader.push(text.as_bytes(), &mut evs).unwrap();
    let mut out = Vec::new();
    for e in evs {
        layer.on_event(e, &mut out);
    }
    layer.on_end(true, &mut out);
    String::from_utf8(concat(&out).to_vec()).unwrap()
}

fn openai_calls_stream(index_for_second: u64) -> String {
    let mut s = chunk(
        json!({"index": 0, "delta": {"role": "assistant", "content": null,
        "tool_calls": [{"index": 0, "id": "a", "type": "function",
          "function": {"name": "read", "arguments": ""}}]}, "finish_reason": null}),
    );
    for piece in ["{\"path\"", ":\"/a\"}"] {
        s += &chunk(json!({"index": 0, "delta": {"tool_calls": [{"index": 0,
            "function": {"name": "read", "arguments": piece}}]}, "finish_reason": null}));
    }
    s += &chunk(
        json!({"index": 0, "delta": {"tool_calls": [{"index": index_for_second,
        "id": "b", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        "finish_reason": null}),
    );
    s += &chunk(json!({"index": 0, "delta": {}, "finish_reason": "tool_calls"}));
    s += "data: [DONE]\n\n";
    s
}

#[test]
fn observe_passes_every_byte() {
    let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
    let mut layer = judged(Api::OpenAi, judge, history(25), false);
    let input = openai_calls_stream(0);
    assert_eq!(run(&mut layer, &input), input);
    let found = layer.take_found();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].tool, "read");
    assert!(found[0].verdict.is_critical());
}

#[test]
fn block_replaces_calls_with_index_reuse() {
    let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
    for second in [0, 1] {
        let mut layer = judged(Api::OpenAi, judge.clone(), history(25), true);
        let out = run(&mut layer, &openai_calls_stream(second));
        assert!(!out.contains("tool_calls\":["), "{out}");
        assert!(out.contains("\"finish_reason\":\"stop\""), "{out}");
        assert!(out.contains("\"tool_loop\""), "{out}");
        assert!(out.ends_with("data: [DONE]\n\n"));
        assert_eq!(layer.take_found()[0].action, "blocked");
    }
    // A healthy history: the held events go on unchanged.
    let mut layer = judged(Api::OpenAi, judge, history(1), true);
    let input = openai_calls_stream(0);
    assert_eq!(run(&mut layer, &input), input);
    assert!(layer.take_found().is_empty());
}

#[test]
fn text_before_the_calls_streams_at_once_and_stays() {
    let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
    let mut layer = judged(Api::OpenAi, judge, history(25), true);
    let text = chunk(json!({"index": 0, "delta": {"role": "assistant",
        "content": "Let me look again."}, "finish_reason": null}));
    let mut reader = SseReader::new(1 << 20);
    let mut evs = Vec::new();
    reader.push(text.as_bytes(), &mut evs).unwrap();
    let mut out = Vec::new();
    for e in evs {
        layer.on_event(e, &mut out);
    }
    assert_eq!(String::from_utf8(concat(&out).to_vec()).unwrap(), text);
    let rest = run(&mut layer, &openai_calls_stream(0));
    assert!(rest.contains("did not run the tool call `read`"), "{rest}");
    // The synthesized parts carry the stream's id.
    assert!(rest.contains("\"id\":\"s\""));
}

#[test]
fn anthropic_block() {
    let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
    let ev = |name: &str, v: Value| format!("event: {name}\ndata: {v}\n\n");
    let mut s = ev(
        "message_start",
        json!({"type": "message_start", "message": {"id": "m",
        "type": "message", "role": "assistant", "content": [], "model": "c",
        "usage": {"input_tokens": 1, "output_tokens": 0}}}),
    );
    s += &ev(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "tool_use", "id": "t", "name": "read", "input": {}}}),
    );
    for p in ["{\"path\": ", "\"/a\"}"] {
        s += &ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": p}}),
        );
    }
    s += &ev(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    s += &ev(
        "message_delta",
        json!({"type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": null},
        "usage": {"output_tokens": 9}}),
    );
    s += &ev("message_stop", json!({"type": "message_stop"}));
    let mut layer = judged(Api::Anthropic, judge.clone(), history(25), true);
    let out = run(&mut layer, &s);
    assert!(!out.contains("tool_use\""), "{out}");
    assert!(out.contains("\"stop_reason\":\"end_turn\""), "{out}");
    assert!(out.contains("text_delta"));
    assert!(out.contains("\"output_tokens\":9"));
    assert!(out.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
    let mut layer = judged(Api::Anthropic, judge, history(25), false);
    assert_eq!(run(&mut layer, &s), s);
    assert!(layer.take_found()[0].verdict.is_critical());
}

#[test]
fn failed_upstream_drops_held_calls() {
    let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
    let mut layer = judged(Api::OpenAi, judge, history(25), true);
    let text = chunk(
        json!({"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "a",
        "function": {"name": "read", "arguments": "{"}}]}, "finish_reason": null}),
    );
    let mut reader = SseReader::new(1 << 20);
    let mut evs = Vec::new();
    reader.push(text.as_bytes(), &mut evs).unwrap();
    let mut out = Vec::new();
    for e in evs {
        layer.on_event(e, &mut out);
    }
    assert!(out.is_empty());
    assert_eq!(layer.held(), 1);
    layer.on_end(false, &mut out);
    assert!(out.is_empty() && layer.held() == 0);
}

fn judged(api: Api, judge: LoopJudge, history: History, block: bool) -> ToolStream {
    ToolStream::new(
        api,
        Some(Judging {
            judge,
            history,
            block,
        }),
        None,
        1,
        false,
    )
}

fn watching(api: Api, action: crate::tool_args::ArgsAction, usage: bool) -> ToolStream {
    ToolStream::new(
        api,
        None,
        Some(ArgsWatch {
            action,
            config: deloop_core::repetition::ClampConfig::default(),
            end_reason: "stop".into(),
        }),
        1,
        usage,
    )
}

const WALL_UNIT: &str = "la continuación de un proceso ";

/// An OpenAI stream: a healthy call, then one whose arguments loop
/// forever (`pieces` pieces of the wall), never finishing.
fn openai_wall(pieces: usize) -> String {
    let mut s = chunk(
        json!({"index": 0, "delta": {"role": "assistant", "content": null,
        "tool_calls": [{"index": 0, "id": "a", "type": "function",
          "function": {"name": "ls", "arguments": "{\"path\": \"/\"}"}}]}, "finish_reason": null}),
    );
    s += &chunk(
        json!({"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "b",
        "type": "function", "function": {"name": "write",
        "arguments": "{\"path\": \"a.md\", \"content\": \"Intro. "}}]}, "finish_reason": null}),
    );
    for _ in 0..pieces {
        s += &chunk(json!({"index": 0, "delta": {"tool_calls": [{"index": 1,
            "function": {"arguments": WALL_UNIT}}]}, "finish_reason": null}));
    }
    s
}

fn parse_events(text: &str) -> Vec<Value> {
    let mut reader = SseReader::new(1 << 20);
    let mut evs = Vec::new();
    reader.push(text.as_bytes(), &mut evs).unwrap();
    evs.iter()
        .filter_map(|e| e.data.as_deref())
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .collect()
}

/// Feeds events until the layer ends the stream; the output and how many
/// upstream events were read.
fn run_until_end(layer: &mut ToolStream, text: &str) -> (String, usize) {
    let mut reader = SseReader::new(1 << 20);
    let mut evs = Vec::new();
    reader.push(text.as_bytes(), &mut evs).unwrap();
    let mut out = Vec::new();
    let mut read = 0;
    for e in evs {
        read += 1;
        layer.on_event(e, &mut out);
        if layer.ended {
            break;
        }
    }
    (String::from_utf8(concat(&out).to_vec()).unwrap(), read)
}

#[test]
fn openai_looping_arguments_end_the_stream_with_the_call_dropped() {
    use crate::tool_args::ArgsAction;
    let mut layer = watching(Api::OpenAi, ArgsAction::Drop, true);
    let (out, read) = run_until_end(&mut layer, &openai_wall(500));
    assert!(layer.ended, "the layer ended the stream");
    assert!(read < 30, "cut after {read} events of 502");
    assert!(out.ends_with("data: [DONE]\n\n"), "{out}");
    let evs = parse_events(&out);
    let args: String = evs
        .iter()
        .filter_map(|v| v["choices"][0]["delta"]["tool_calls"].as_array())
        .flatten()
        .filter_map(|c| c["function"]["arguments"].as_str())
        .collect();
    assert_eq!(args, "{\"path\": \"/\"}", "only the healthy call is left");
    let last = evs
        .iter()
        .rev()
        .find(|v| v["choices"][0]["finish_reason"].is_string())
        .unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert_eq!(last["deloop"]["tool_call_cut"]["action"], "dropped");
    assert_eq!(last["deloop"]["tool_call_cut"]["tool"], "write");
    assert_eq!(last["id"], "s");
    // The usage chunk (null: the upstream sent none).
    assert!(evs
        .iter()
        .any(|v| v["choices"] == json!([]) && v["usage"].is_null()));
    assert_eq!(layer.take_cuts().len(), 1);
}

#[test]
fn openai_looping_arguments_closed_into_json() {
    use crate::tool_args::ArgsAction;
    let mut layer = watching(Api::OpenAi, ArgsAction::Close, false);
    let (out, _) = run_until_end(&mut layer, &openai_wall(500));
    let evs = parse_events(&out);
    let mut by_index: BTreeMap<u64, String> = BTreeMap::new();
    for c in evs
        .iter()
        .filter_map(|v| v["choices"][0]["delta"]["tool_calls"].as_array())
        .flatten()
    {
        let i = c["index"].as_u64().unwrap();
        by_index
            .entry(i)
            .or_default()
            .push_str(c["function"]["arguments"].as_str().unwrap_or(""));
    }
    let args: Value = serde_json::from_str(&by_index[&1]).unwrap();
    let content = args["content"].as_str().unwrap();
    assert!(content.starts_with("Intro. la continuación"), "{content}");
    assert!(content.ends_with("[…]"), "{content}");
    // The figure: bytes of the loop the client got past its start.
    let start = "Intro. ".len();
    assert!(
        content.len() - start < 300,
        "{} bytes past the start",
        content.len() - start
    );
    assert!(!out.contains("usage"));
}

#[test]
fn identical_parallel_calls_end_the_stream() {
    use crate::tool_args::ArgsAction;
    let mut s = String::new();
    for i in 0..40 {
        s += &chunk(
            json!({"index": 0, "delta": {"tool_calls": [{"index": i, "id": format!("c{i}"),
            "type": "function", "function": {"name": "read", "arguments": ""}}]},
            "finish_reason": null}),
        );
        s += &chunk(json!({"index": 0, "delta": {"tool_calls": [{"index": i,
            "function": {"arguments": "{\"path\": \"/a\"}"}}]}, "finish_reason": null}));
    }
    let mut layer = watching(Api::OpenAi, ArgsAction::Drop, false);
    let (out, read) = run_until_end(&mut layer, &s);
    assert!(layer.ended);
    assert!(read < 30, "{read}");
    let evs = parse_events(&out);
    let ids: Vec<&str> = evs
        .iter()
        .filter_map(|v| v["choices"][0]["delta"]["tool_calls"].as_array())
        .flatten()
        .filter_map(|c| c["id"].as_str())
        .collect();
    assert_eq!(
        ids.len() as u32,
        deloop_core::loops::reply_calls::IDENTICAL_REPLY_CALLS - 1
    );
    assert!(out.contains("identical_reply_calls"));
}

#[test]
fn healthy_calls_pass_byte_for_byte_when_watched() {
    use crate::tool_args::ArgsAction;
    let mut layer = watching(Api::OpenAi, ArgsAction::Drop, false);
    let input = openai_calls_stream(1);
    assert_eq!(run(&mut layer, &input), input);
    assert!(layer.take_cuts().is_empty());
}

fn anthropic_wall(pieces: usize) -> String {
    let ev = |name: &str, v: Value| format!("event: {name}\ndata: {v}\n\n");
    let mut s = ev(
        "message_start",
        json!({"type": "message_start", "message": {"id": "m",
        "type": "message", "role": "assistant", "content": [], "model": "c",
        "usage": {"input_tokens": 5, "output_tokens": 1}}}),
    );
    s += &ev(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "text", "text": ""}}),
    );
    s += &ev(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0,
        "delta": {"type": "text_delta", "text": "Writing it."}}),
    );
    s += &ev(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    s += &ev(
        "content_block_start",
        json!({"type": "content_block_start", "index": 1,
        "content_block": {"type": "tool_use", "id": "t", "name": "write", "input": {}}}),
    );
    s += &ev(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"a.md\", \"content\": \"Intro. "}}),
    );
    for _ in 0..pieces {
        s += &ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": WALL_UNIT}}),
        );
    }
    s
}

#[test]
fn anthropic_looping_input_drop_and_close() {
    use crate::tool_args::ArgsAction;
    let mut layer = watching(Api::Anthropic, ArgsAction::Drop, false);
    let (out, read) = run_until_end(&mut layer, &anthropic_wall(500));
    assert!(layer.ended && read < 30, "{read}");
    assert!(!out.contains("tool_use"), "{out}");
    assert!(out.contains("Writing it."));
    assert!(
        out.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"),
        "{out}"
    );
    let evs = parse_events(&out);
    let md = evs.iter().find(|v| v["type"] == "message_delta").unwrap();
    assert_eq!(md["delta"]["stop_reason"], "stop");
    assert_eq!(md["usage"]["output_tokens"], 1);
    assert_eq!(md["deloop"]["tool_call_cut"]["action"], "dropped");

    let mut layer = watching(Api::Anthropic, ArgsAction::Close, false);
    let (out, _) = run_until_end(&mut layer, &anthropic_wall(500));
    let evs = parse_events(&out);
    let json_text: String = evs
        .iter()
        .filter(|v| v["index"] == 1)
        .filter_map(|v| v["delta"]["partial_json"].as_str())
        .collect();
    let input: Value = serde_json::from_str(&json_text).unwrap();
    assert!(input["content"].as_str().unwrap().ends_with("[…]"));
    let stops = evs
        .iter()
        .filter(|v| v["type"] == "content_block_stop" && v["index"] == 1)
        .count();
    assert_eq!(stops, 1);
}

#[test]
fn identical_calls_without_arguments_are_counted() {
    use crate::tool_args::ArgsAction;
    let mut s = String::new();
    for i in 0..30 {
        s += &chunk(json!({"index": 0, "delta": {"tool_calls": [{"index": i,
            "id": format!("c{i}"), "type": "function",
            "function": {"name": "get_time", "arguments": ""}}]}, "finish_reason": null}));
    }
    s += &chunk(json!({"index": 0, "delta": {}, "finish_reason": "tool_calls"}));
    let mut layer = watching(Api::OpenAi, ArgsAction::Drop, false);
    let (out, _) = run_until_end(&mut layer, &s);
    assert!(layer.ended);
    assert!(out.contains("identical_reply_calls"), "{out}");
}

mod hostile {
    use super::*;
    use crate::tool_args::ArgsAction;
    use proptest::prelude::*;

    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(WALL_UNIT.to_string()),
            Just("{\"a\": \"".to_string()),
            Just("\\u00e9\\".to_string()),
            "[a-z \"{}\\[\\]:,\\\\]{0,12}",
        ]
    }

    proptest! {
        /// Random call deltas (indexes, ids, argument pieces, finishes)
        /// for both APIs and both actions: the layer never panics, and
        /// every event it writes is JSON or `[DONE]`; once it ends the
        /// stream, it ends with `[DONE]` (OpenAI) or `message_stop`.
        #[test]
        fn the_layer_survives_hostile_call_streams(
            steps in proptest::collection::vec((0u64..4, any::<bool>(), piece(), 0u8..12), 1..300),
            anthropic in any::<bool>(),
            close in any::<bool>(),
            n in 1usize..3,
        ) {
            let action = if close { ArgsAction::Close } else { ArgsAction::Drop };
            let api = if anthropic { Api::Anthropic } else { Api::OpenAi };
            let mut layer = ToolStream::new(
                api,
                Some(Judging {
                    judge: LoopJudge::new(Profile::Default, LoopConfig::default()),
                    history: history(25),
                    block: true,
                }),
                Some(ArgsWatch {
                    action,
                    config: deloop_core::repetition::ClampConfig::default(),
                    end_reason: "stop".into(),
                }),
                n,
                true,
            );
            let mut text = String::new();
            for (index, new_id, p, kind) in &steps {
                if anthropic {
                    let ev = |name: &str, v: Value| format!("event: {name}\ndata: {v}\n\n");
                    text += &match kind {
                        0 => ev("content_block_start", json!({"type": "content_block_start",
                            "index": index, "content_block": {"type": "tool_use", "id": "t",
                            "name": "w", "input": {}}})),
                        1 => ev("content_block_stop", json!({"type": "content_block_stop",
                            "index": index})),
                        2 => ev("message_delta", json!({"type": "message_delta",
                            "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}})),
                        _ => ev("content_block_delta", json!({"type": "content_block_delta",
                            "index": index, "delta": {"type": "input_json_delta",
                            "partial_json": p}})),
                    };
                } else {
                    let mut d = json!({"index": index, "function": {"arguments": p}});
                    if *new_id {
                        d["id"] = json!(format!("id{kind}"));
                        d["function"]["name"] = json!("w");
                    }
                    let finish = if *kind == 0 { json!("tool_calls") } else { Value::Null };
                    text += &format!("data: {}\n\n", json!({"id": "s", "choices": [
                        {"index": index % n as u64, "delta": {"tool_calls": [d]},
                         "finish_reason": finish}]}));
                }
            }
            let mut reader = SseReader::new(1 << 20);
            let mut evs = Vec::new();
            reader.push(text.as_bytes(), &mut evs).unwrap();
            let mut out = Vec::new();
            for e in evs {
                layer.on_event(e, &mut out);
            }
            let ended = layer.ended;
            layer.on_end(true, &mut out);
            for e in &out {
                let d = e.data.as_deref().unwrap_or("");
                prop_assert!(d == "[DONE]" || serde_json::from_str::<Value>(d).is_ok(), "{}", d);
            }
            if ended {
                let last = out.last().and_then(|e| e.data.clone()).unwrap_or_default();
                prop_assert!(last == "[DONE]" || last.contains("message_stop"), "{}", last);
            }
        }
    }
}

#[test]
fn with_two_choices_the_other_one_goes_on() {
    use crate::tool_args::ArgsAction;
    let mut layer = ToolStream::new(
        Api::OpenAi,
        None,
        Some(ArgsWatch {
            action: ArgsAction::Drop,
            config: deloop_core::repetition::ClampConfig::default(),
            end_reason: "stop".into(),
        }),
        2,
        false,
    );
    let text1 =
        |t: &str| chunk(json!({"index": 1, "delta": {"content": t}, "finish_reason": null}));
    let mut s = openai_wall(100);
    s += &text1("Fine, ");
    s += &openai_wall(3);
    s += &text1("thanks.");
    s += &chunk(json!({"index": 1, "delta": {}, "finish_reason": "stop"}));
    s += "data: [DONE]\n\n";
    let out = run(&mut layer, &s);
    let evs = parse_events(&out);
    let text: String = evs
        .iter()
        .filter(|v| v["choices"][0]["index"] == 1)
        .filter_map(|v| v["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Fine, thanks.");
    assert!(!out.contains("continuación"), "{out}");
    let cuts: Vec<&Value> = evs
        .iter()
        .filter(|v| v["deloop"]["tool_call_cut"].is_object())
        .collect();
    assert_eq!(cuts.len(), 1);
    assert_eq!(cuts[0]["choices"][0]["index"], 0);
    assert!(out.ends_with("data: [DONE]\n\n"));
    assert_eq!(out.matches("[DONE]").count(), 1);
}
