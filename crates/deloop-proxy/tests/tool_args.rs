//! Issue 22 §1, loops inside tool calls, end to end over real HTTP on
//! 127.0.0.1 with the fake upstream: a call whose arguments degenerate
//! into a wall while they stream is cut as it happens (the upstream is
//! dropped, the client gets a well-formed ending: the call dropped, or its
//! arguments closed into valid JSON with the marker), for OpenAI and
//! Anthropic, streamed and not; dozens of identical calls in one reply are
//! cut the same way; `proxy.tool_args_loops = "off"` passes the wall. The
//! official SDKs read the endings (`tool_args_client.py`).
//!
//! The figure of the issue, bytes the client receives past the loop's
//! start, is printed by `figure_bytes_past_the_loop_start` (run with
//! `--nocapture`).

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

/// The looping fragment of the arguments.
const UNIT: &str = "la continuación de un proceso ";
/// The call's arguments before the loop starts.
const HEAD: &str = "{\"path\": \"notes.md\", \"content\": \"Intro. ";

fn tc(v: Value) -> String {
    chat_delta(0, json!({"tool_calls": [v]}), None)
}

/// A chat stream: a healthy call, then one whose arguments loop up to
/// `max` times (1 ms apart), then the end a `max_tokens` stop gives.
fn looping_call_stream(max: usize) -> Reply {
    Reply::Loop {
        prefix: vec![
            chat_delta(0, json!({"role": "assistant", "content": null}), None),
            tc(json!({"index": 0, "id": "call_ls", "type": "function",
                "function": {"name": "ls", "arguments": "{\"path\": \"/\"}"}})),
            tc(json!({"index": 1, "id": "call_w", "type": "function",
                "function": {"name": "write_file", "arguments": ""}})),
            tc(json!({"index": 1, "function": {"arguments": HEAD}})),
        ],
        repeat: vec![tc(json!({"index": 1, "function": {"arguments": UNIT}}))],
        max,
        suffix: vec![chat_finish(0, "length"), DONE.into()],
        gap: Duration::from_millis(1),
    }
}

/// The same through the Messages API.
fn looping_tool_use_stream(max: usize) -> Reply {
    let input = |s: &str| {
        anthropic_event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": s}}),
        )
    };
    Reply::Loop {
        prefix: vec![
            message_start(),
            block_start(0, "text"),
            text_delta(0, "Writing the notes."),
            block_stop(0),
            anthropic_event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 1, "content_block":
                    {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {}}}),
            ),
            input(HEAD),
        ],
        repeat: vec![input(UNIT)],
        max,
        suffix: message_end("max_tokens", 4096),
        gap: Duration::from_millis(1),
    }
}

fn tools() -> Value {
    json!([{"type": "function", "function": {"name": "write_file",
        "parameters": {"type": "object"}}}])
}

async fn start(fake: &Fake, action: &str, tool_loops: &str) -> Proxy {
    let mut s = settings(&fake.url);
    s.tool_args_loops = action.into();
    s.tool_loops = tool_loops.into();
    start_proxy_with(s, None, Default::default()).await
}

async fn post(url: &str, body: Value) -> (reqwest::header::HeaderMap, String) {
    let res = client().post(url).json(&body).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let h = res.headers().clone();
    (h, res.text().await.unwrap())
}

fn objects(body: &str) -> Vec<Value> {
    events(body)
        .into_iter()
        .filter(|(_, d)| d != "[DONE]")
        .map(|(_, d)| serde_json::from_str(&d).unwrap())
        .collect()
}

/// The argument text of each streamed call, by its index.
fn streamed_args(body: &str) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    for v in objects(body) {
        for c in v["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let i = c["index"].as_u64().unwrap() as usize;
            if args.len() <= i {
                args.resize(i + 1, String::new());
            }
            args[i].push_str(c["function"]["arguments"].as_str().unwrap_or(""));
        }
    }
    args
}

fn chat(stream: bool) -> Value {
    json!({"model": MODEL, "stream": stream, "tools": tools(),
        "messages": [{"role": "user", "content": "write my notes"}]})
}

fn messages(stream: bool) -> Value {
    json!({"model": MODEL, "max_tokens": 4096, "stream": stream,
        "messages": [{"role": "user", "content": "write my notes"}]})
}

/// The bytes of argument text the client got past the loop's start, for
/// a closed call: its arguments from the loop's first byte on (the
/// marker and the closing included).
fn past_start(args: &str) -> usize {
    args.len().saturating_sub(HEAD.len())
}

#[tokio::test]
async fn openai_stream_looping_call_is_dropped_and_the_upstream_stops() {
    let fake = Fake::start(vec![looping_call_stream(5000)]).await;
    let proxy = start(&fake, "drop", "block").await;
    let (_, body) = post(&format!("{}/v1/chat/completions", proxy.url), chat(true)).await;
    let objs = objects(&body);
    assert_eq!(streamed_args(&body), ["{\"path\": \"/\"}"], "{body}");
    assert!(
        !body.contains("continuación"),
        "no byte of the looping call"
    );
    let last = objs.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert_eq!(last["id"], CHAT_ID);
    let cut = &last["deloop"]["tool_call_cut"];
    assert_eq!(cut["action"], "dropped");
    assert_eq!(cut["tool"], "write_file");
    assert_eq!(cut["call"], 1);
    assert_eq!(cut["channel"], "arguments");
    assert!(body.ends_with(DONE));
    let probe = fake.probe();
    assert!(eventually(|| probe.dropped_early.load(Ordering::SeqCst) == 1).await);
    assert!(
        probe.sent.load(Ordering::SeqCst) < 1000,
        "the upstream was dropped early"
    );
}

#[tokio::test]
async fn openai_stream_looping_call_closed_into_json_without_the_history_check() {
    let fake = Fake::start(vec![looping_call_stream(5000)]).await;
    let proxy = start(&fake, "close", "off").await;
    let (_, body) = post(&format!("{}/v1/chat/completions", proxy.url), chat(true)).await;
    let args = streamed_args(&body);
    assert_eq!(args.len(), 2);
    let v: Value = serde_json::from_str(&args[1]).expect("closed into JSON");
    assert_eq!(v["path"], "notes.md");
    let content = v["content"].as_str().unwrap();
    assert!(content.starts_with("Intro. la continuación"), "{content}");
    assert!(content.ends_with(" […]"), "{content}");
    assert!(past_start(&args[1]) < 300, "{}", past_start(&args[1]));
    let last = objects(&body).pop().unwrap();
    assert_eq!(last["deloop"]["tool_call_cut"]["action"], "closed");
    let probe = fake.probe();
    assert!(eventually(|| probe.dropped_early.load(Ordering::SeqCst) == 1).await);
}

#[tokio::test]
async fn anthropic_stream_looping_input_is_cut_both_ways() {
    for action in ["drop", "close"] {
        let fake = Fake::start(vec![looping_tool_use_stream(5000)]).await;
        let proxy = start(&fake, action, "block").await;
        let (_, body) = post(&format!("{}/v1/messages", proxy.url), messages(true)).await;
        let evs = events(&body);
        let names: Vec<&str> = evs.iter().filter_map(|(n, _)| n.as_deref()).collect();
        assert_eq!(names.last(), Some(&"message_stop"), "{body}");
        let objs: Vec<Value> = evs
            .iter()
            .map(|(_, d)| serde_json::from_str(d).unwrap())
            .collect();
        let md = objs.iter().find(|v| v["type"] == "message_delta").unwrap();
        assert_eq!(md["delta"]["stop_reason"], "end_turn");
        assert!(md["usage"]["output_tokens"].is_number());
        let input: String = objs
            .iter()
            .filter(|v| v["index"] == 1)
            .filter_map(|v| v["delta"]["partial_json"].as_str())
            .collect();
        match action {
            "drop" => {
                assert_eq!(md["deloop"]["tool_call_cut"]["action"], "dropped");
                assert!(!body.contains("tool_use"), "{body}");
                assert!(input.is_empty());
            }
            _ => {
                assert_eq!(md["deloop"]["tool_call_cut"]["action"], "closed");
                let v: Value = serde_json::from_str(&input).expect("closed into JSON");
                assert!(v["content"].as_str().unwrap().ends_with(" […]"));
                assert!(past_start(&input) < 300, "{}", past_start(&input));
            }
        }
        assert!(body.contains("Writing the notes."));
        let probe = fake.probe();
        assert!(eventually(|| probe.dropped_early.load(Ordering::SeqCst) == 1).await);
    }
}

#[tokio::test]
async fn identical_parallel_calls_in_a_stream_are_cut() {
    let mut events = vec![chat_delta(
        0,
        json!({"role": "assistant", "content": null}),
        None,
    )];
    let repeat: Vec<String> = (0..60)
        .map(|i| {
            tc(
                json!({"index": i, "id": format!("call_{i}"), "type": "function",
                "function": {"name": "read_file", "arguments": "{\"path\": \"a.txt\"}"}}),
            )
        })
        .collect();
    events.extend(repeat);
    let fake = Fake::start(vec![Reply::Loop {
        prefix: events,
        repeat: vec![": keep-alive\n\n".into()],
        max: 2000,
        suffix: vec![chat_finish(0, "tool_calls"), DONE.into()],
        gap: Duration::from_millis(1),
    }])
    .await;
    let proxy = start(&fake, "drop", "block").await;
    let (_, body) = post(&format!("{}/v1/chat/completions", proxy.url), chat(true)).await;
    let n = streamed_args(&body).len();
    assert_eq!(
        n as u32,
        deloop_core::loops::reply_calls::IDENTICAL_REPLY_CALLS - 1,
        "{body}"
    );
    let last = objects(&body).pop().unwrap();
    assert_eq!(
        last["deloop"]["tool_call_cut"]["detector"],
        "identical_reply_calls"
    );
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    let probe = fake.probe();
    assert!(eventually(|| probe.dropped_early.load(Ordering::SeqCst) == 1).await);
}

#[tokio::test]
async fn whole_replies_are_cut_with_headers() {
    let wall = format!("{HEAD}{}\"}}", UNIT.repeat(300));
    let openai = json!({"id": CHAT_ID, "object": "chat.completion", "created": CREATED,
        "model": MODEL, "choices": [{"index": 0, "logprobs": null, "finish_reason": "length",
        "message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_w", "type": "function",
             "function": {"name": "write_file", "arguments": wall}}]}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 4096, "total_tokens": 4101}});
    let input: Value = serde_json::from_str(&wall).unwrap();
    let anthropic = json!({"id": "msg_1", "type": "message", "role": "assistant",
        "model": MODEL, "content": [{"type": "tool_use", "id": "toolu_1",
        "name": "write_file", "input": input}], "stop_reason": "max_tokens",
        "stop_sequence": null, "usage": {"input_tokens": 5, "output_tokens": 4096}});
    let fake = Fake::start(vec![
        json_reply(200, openai.clone()),
        json_reply(200, anthropic.clone()),
        json_reply(200, openai),
    ])
    .await;
    let proxy = start(&fake, "close", "block").await;
    let (h, body) = post(&format!("{}/v1/chat/completions", proxy.url), chat(false)).await;
    assert_eq!(h["x-deloop-tool-call-cut"], "closed");
    assert_eq!(h["x-deloop-tool-call-cut-detector"], "word_period");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    let args = v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap();
    let a: Value = serde_json::from_str(args).unwrap();
    assert!(a["content"].as_str().unwrap().ends_with(" […]"));
    assert!(past_start(args) < 300, "{}", past_start(args));

    let (h, body) = post(&format!("{}/v1/messages", proxy.url), messages(false)).await;
    assert_eq!(h["x-deloop-tool-call-cut"], "closed");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(v["deloop"]["tool_call_cut"]["tool"], "write_file");
    assert!(v["content"][0]["input"]["content"]
        .as_str()
        .unwrap()
        .ends_with(" […]"));
    drop(proxy);

    let proxy = start(&fake, "drop", "off").await;
    let (h, body) = post(&format!("{}/v1/chat/completions", proxy.url), chat(false)).await;
    assert_eq!(h["x-deloop-tool-call-cut"], "dropped");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(
        v["choices"][0]["message"].get("tool_calls").is_none(),
        "{v}"
    );
}

#[tokio::test]
async fn off_passes_the_wall_as_before() {
    let fake = Fake::start(vec![looping_call_stream(300)]).await;
    let proxy = start(&fake, "off", "off").await;
    let (h, body) = post(&format!("{}/v1/chat/completions", proxy.url), chat(true)).await;
    assert!(h.get("x-deloop-tool-call-cut").is_none());
    assert_eq!(streamed_args(&body)[1].len(), HEAD.len() + 300 * UNIT.len());
    assert!(body.contains("\"finish_reason\":\"length\""));
}

/// The figure of the issue: bytes of argument text the client receives
/// past the loop's start, with `close` (with `drop` it receives none of
/// the call), streamed, for both APIs. Printed, bounded, not timed.
#[tokio::test]
async fn figure_bytes_past_the_loop_start() {
    let fake = Fake::start(vec![
        looping_call_stream(5000),
        looping_tool_use_stream(5000),
    ])
    .await;
    let proxy = start(&fake, "close", "block").await;
    let probe = fake.probe();
    let (_, body) = post(&format!("{}/v1/chat/completions", proxy.url), chat(true)).await;
    let openai = past_start(&streamed_args(&body)[1]);
    let openai_cut = objects(&body).pop().unwrap()["deloop"]["tool_call_cut"].clone();
    assert!(eventually(|| probe.dropped_early.load(Ordering::SeqCst) == 1).await);
    let openai_sent = probe.sent.load(Ordering::SeqCst);
    let (_, body) = post(&format!("{}/v1/messages", proxy.url), messages(true)).await;
    let objs: Vec<Value> = events(&body)
        .iter()
        .filter_map(|(_, d)| serde_json::from_str::<Value>(d).ok())
        .collect();
    let input: String = objs
        .iter()
        .filter(|v| v["index"] == 1)
        .filter_map(|v| v["delta"]["partial_json"].as_str().map(String::from))
        .collect();
    let anthropic = past_start(&input);
    let anthropic_cut = objs.iter().find(|v| v["type"] == "message_delta").unwrap()["deloop"]
        ["tool_call_cut"]
        .clone();
    assert!(eventually(|| probe.dropped_early.load(Ordering::SeqCst) == 2).await);
    let anthropic_sent = probe.sent.load(Ordering::SeqCst) - openai_sent;
    println!(
        "figure: bytes past the loop's start received by the client (close; drop: 0): \
         OpenAI {openai}, Anthropic {anthropic}; unit {} bytes; cut records: OpenAI {openai_cut}, \
         Anthropic {anthropic_cut}; upstream events sent before the drop: OpenAI {openai_sent}, \
         Anthropic {anthropic_sent} (of 5006 each)",
        UNIT.len(),
    );
    assert!(openai < 300 && anthropic < 300);
}

/// The official SDKs read the endings: `chat.completions.stream()` rebuilds
/// a closed call whose arguments parse, a dropped call leaves the healthy
/// one, and `messages.stream()` rebuilds both Anthropic endings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_sdks_read_cut_tool_calls() {
    let python = sdk::python();
    if !deloop_testdata::real_component(
        sdk::present(&python),
        "tool_args SDK clients (openai and anthropic Python SDKs)",
        "bash scripts/setup-proxy-clients.sh",
    ) {
        return;
    }
    let fake = Fake::start(vec![
        looping_call_stream(5000),
        looping_call_stream(5000),
        looping_tool_use_stream(5000),
        looping_tool_use_stream(5000),
    ])
    .await;
    // The first two scenarios close, the last two drop: two proxies.
    let close = start(&fake, "close", "block").await;
    let drop_ = start(&fake, "drop", "block").await;
    let r = sdk::run(
        &python,
        "tool_args_client.py",
        &[close.url.clone(), drop_.url.clone()],
        Duration::from_secs(120),
    )
    .await;
    let c = r.get("openai_closed_call_stream");
    assert_eq!(c["finish_reason"], "stop");
    assert_eq!(c["tool_calls"][0]["name"], "ls");
    let parsed = &c["tool_calls"][1]["parsed"];
    assert!(parsed["content"].as_str().unwrap().ends_with(" […]"), "{c}");
    assert_eq!(c["cut"]["action"], "closed");
    let d = r.get("openai_dropped_call_stream");
    assert_eq!(d["finish_reason"], "stop");
    assert_eq!(
        d["arguments"],
        json!(["{\"path\": \"/\"}"]),
        "only the healthy call"
    );
    assert_eq!(d["cut"]["action"], "dropped");
    let a = r.get("anthropic_closed_input_stream");
    assert_eq!(a["stop_reason"], "end_turn");
    assert_eq!(a["content"][1]["type"], "tool_use");
    assert!(a["content"][1]["input"]["content"]
        .as_str()
        .unwrap()
        .ends_with(" […]"));
    let b = r.get("anthropic_dropped_input_stream");
    assert_eq!(b["stop_reason"], "end_turn");
    assert_eq!(b["content"].as_array().unwrap().len(), 1, "{b}");
}
