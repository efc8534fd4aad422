//! Issue 11 §3, tool-call loops from the message history, end to end over
//! real HTTP on 127.0.0.1: a repeated call warned (the note appended, every
//! byte before it unchanged), blocked (whole and streamed replies, endings
//! an SDK parses), ping-pong, `observe` changing nothing but headers, and
//! streamed calls reassembled across a reused index.

mod common;

use common::histories::repeated_history;
use common::*;
use deloop_proxy::tool_loops::OpenAiCalls;
use serde_json::{json, Value};

fn ping_pong_history(n: usize) -> Vec<Value> {
    let mut m = vec![json!({"role": "user", "content": "Fix the build."})];
    for i in 0..n {
        let (name, args) = if i % 2 == 0 {
            ("run_tests", "{}")
        } else {
            ("read_file", "{\"path\":\"src/lib.rs\"}")
        };
        m.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{i}"), "type": "function",
             "function": {"name": name, "arguments": args}}]}));
        m.push(json!({"role": "tool", "tool_call_id": format!("call_{i}"),
            "content": format!("{name}: same output")}));
    }
    m
}

/// A non-streamed reply asking for this call.
fn call_reply(name: &str, args: &str) -> Value {
    json!({"id": CHAT_ID, "object": "chat.completion", "created": CREATED, "model": MODEL,
        "choices": [{"index": 0, "logprobs": null, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_new", "type": "function",
                 "function": {"name": name, "arguments": args}}]}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}})
}

async fn start_with(fake: &Fake, action: &str) -> Proxy {
    let mut s = settings(&fake.url);
    s.tool_loops = action.into();
    start_proxy_with(s, None, Default::default()).await
}

async fn post_raw(url: &str, body: &str) -> (reqwest::header::HeaderMap, String) {
    let res = client()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let h = res.headers().clone();
    (h, res.text().await.unwrap())
}

#[tokio::test]
async fn a_repeated_call_is_warned_with_the_prefix_unchanged() {
    let fake = Fake::start(vec![json_reply(200, chat_completion(&["ok"]))]).await;
    let proxy = start_with(&fake, "warn").await;
    // Odd spacing and key order: the forwarded prefix must keep them.
    let messages = serde_json::to_string(&repeated_history(6)).unwrap();
    let body = format!(
        "{{ \"model\" : \"{MODEL}\",\n \"messages\": {messages} ,\"cache_prompt\":true, \"temperature\":0.0}}"
    );
    let (h, _) = post_raw(&format!("{}/v1/chat/completions", proxy.url), &body).await;
    assert_eq!(h["x-deloop-history-loop"], "warning");
    assert_eq!(h["x-deloop-history-loop-detector"], "generic_repeat");
    assert_eq!(h["x-deloop-loop-action"], "warned");
    let seen = fake.last().body;
    let end = body.find("] ,\"cache_prompt\"").unwrap();
    assert_eq!(&seen[..end], &body.as_bytes()[..end], "the prefix changed");
    let tail = std::str::from_utf8(&seen[end..]).unwrap();
    assert!(
        tail.ends_with("] ,\"cache_prompt\":true, \"temperature\":0.0}"),
        "{tail}"
    );
    let v: Value = serde_json::from_slice(&seen).unwrap();
    let msgs = v["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 14);
    let note = msgs.last().unwrap();
    assert_eq!(note["role"], "user");
    let text = note["content"].as_str().unwrap();
    assert!(text.contains("`read_file`"), "{text}");
    assert!(text.contains("/etc/app.toml"), "{text}");
    assert!(text.contains("tell the user"), "{text}");
    // A fresh history is forwarded byte for byte, without headers.
    fake.always(json_reply(200, chat_completion(&["ok"])));
    let body = json!({"model": MODEL, "messages": repeated_history(2)}).to_string();
    let (h, _) = post_raw(&format!("{}/v1/chat/completions", proxy.url), &body).await;
    assert!(h.get("x-deloop-history-loop").is_none());
    assert_eq!(fake.last().body, body.as_bytes());
    // An assistant prefill last: no note after it (it would change what
    // the model continues); the headers still say what was seen.
    let mut prefill = repeated_history(6);
    prefill.push(json!({"role": "assistant", "content": "The file"}));
    let body = json!({"model": MODEL, "messages": prefill}).to_string();
    let (h, _) = post_raw(&format!("{}/v1/chat/completions", proxy.url), &body).await;
    assert_eq!(fake.last().body, body.as_bytes());
    assert!(
        h.get("x-deloop-history-loop").is_none(),
        "no round is latest"
    );
    let metrics = proxy.state.metrics().render();
    assert!(
        metrics.contains(r#"deloop_proxy_tool_loops_total{source="history",level="warning",detector="generic_repeat",action="warned"} 1"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn anthropic_history_gets_its_note_as_a_user_text_block() {
    let mut m = vec![json!({"role": "user", "content": "Find it."})];
    for i in 0..6 {
        m.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": format!("t{i}"), "name": "grep", "input": {"q": "x"}}]}));
        m.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("t{i}"), "content": "no match"}]}));
    }
    let fake = Fake::start(vec![sse_reply(&messages_stream(&["Still looking."]))]).await;
    let proxy = start_with(&fake, "warn").await;
    let body = json!({"model": MODEL, "max_tokens": 100, "stream": true, "messages": m});
    let (h, out) = post_raw(&format!("{}/v1/messages", proxy.url), &body.to_string()).await;
    assert_eq!(h["x-deloop-history-loop"], "warning");
    assert!(out.contains("Still looking."));
    let v = fake.last().json();
    let last = v["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "user");
    assert!(last["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("`grep`"));
}

#[tokio::test]
async fn a_critical_call_in_a_whole_reply_is_blocked() {
    let reply = call_reply("read_file", "{\"path\": \"/etc/app.toml\"}");
    let fake = Fake::start(vec![json_reply(200, reply.clone())]).await;
    let proxy = start_with(&fake, "block").await;
    let body = json!({"model": MODEL, "messages": repeated_history(25)}).to_string();
    let (h, out) = post_raw(&format!("{}/v1/chat/completions", proxy.url), &body).await;
    assert_eq!(h["x-deloop-reply-loop"], "critical");
    assert_eq!(h["x-deloop-loop-action"], "warned, blocked");
    let v: Value = serde_json::from_str(&out).unwrap();
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "stop");
    assert!(choice["message"].get("tool_calls").is_none());
    assert_eq!(choice["message"]["role"], "assistant");
    assert!(choice["message"]["content"]
        .as_str()
        .unwrap()
        .contains("did not run the tool call `read_file`"));
    assert_eq!(v["deloop"]["tool_loop"]["action"], "blocked");
    assert_eq!(v["usage"], reply["usage"]);
    assert_eq!(h["content-length"].to_str().unwrap(), out.len().to_string());
}

#[tokio::test]
async fn ping_pong_is_blocked() {
    let fake = Fake::start(vec![json_reply(200, call_reply("run_tests", "{}"))]).await;
    let proxy = start_with(&fake, "block").await;
    let body = json!({"model": MODEL, "messages": ping_pong_history(20)}).to_string();
    let (h, out) = post_raw(&format!("{}/v1/chat/completions", proxy.url), &body).await;
    assert_eq!(h["x-deloop-history-loop-detector"], "ping_pong");
    assert_eq!(h["x-deloop-reply-loop"], "critical");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["deloop"]["tool_loop"]["detector"], "ping_pong");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
}

#[tokio::test]
async fn observe_changes_nothing_but_headers() {
    let reply = call_reply("read_file", "{\"path\": \"/etc/app.toml\"}");
    let fake = Fake::start(vec![json_reply(200, reply.clone())]).await;
    let proxy = start_with(&fake, "observe").await;
    let body = json!({"model": MODEL, "messages": repeated_history(25)}).to_string();
    let (h, out) = post_raw(&format!("{}/v1/chat/completions", proxy.url), &body).await;
    assert_eq!(fake.last().body, body.as_bytes(), "the request changed");
    assert_eq!(out, reply.to_string(), "the reply changed");
    assert_eq!(h["x-deloop-history-loop"], "critical");
    assert_eq!(h["x-deloop-reply-loop"], "critical");
    assert_eq!(h["x-deloop-loop-action"], "observed");
    let metrics = proxy.state.metrics().render();
    assert!(
        metrics.contains(
            r#"source="reply",level="critical",detector="generic_repeat",action="observed"} 1"#
        ),
        "{metrics}"
    );
}

/// A streamed reply of two calls at the reused index 0, the name resent in
/// every chunk, arguments in pieces.
fn streamed_calls(first_args: &[&str]) -> Vec<String> {
    let mut ev = vec![chat_delta(
        0,
        json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": "call_a",
            "type": "function", "function": {"name": "read_file", "arguments": ""}}]}),
        None,
    )];
    for p in first_args {
        ev.push(chat_delta(
            0,
            json!({"tool_calls": [{"index": 0,
                "function": {"name": "read_file", "arguments": p}}]}),
            None,
        ));
    }
    ev.push(chat_delta(
        0,
        json!({"tool_calls": [{"index": 0, "id": "call_b", "type": "function",
            "function": {"name": "list_dir", "arguments": "{\"path\":\"/etc\"}"}}]}),
        None,
    ));
    ev.push(chat_finish(0, "tool_calls"));
    ev.push(chat_usage(50, 12));
    ev.push(DONE.to_string());
    ev
}

#[tokio::test]
async fn streamed_calls_are_reassembled_across_a_reused_index_and_blocked() {
    let stream = streamed_calls(&["{\"path\"", ":\"/etc/", "app.toml\"}"]);
    // What the client of a passing stream reassembles is what was sent.
    let mut calls = OpenAiCalls::default();
    for (_, d) in events(&stream.concat()) {
        if let Ok(v) = serde_json::from_str::<Value>(&d) {
            if let Some(tc) = v.pointer("/choices/0/delta/tool_calls") {
                calls.push(tc);
            }
        }
    }
    let done = calls.finish();
    assert_eq!(done.len(), 2);
    assert_eq!(done[0].args, json!({"path": "/etc/app.toml"}));
    assert_eq!(done[1].name, "list_dir");

    let fake = Fake::start(vec![sse_reply(&stream)]).await;
    let proxy = start_with(&fake, "block").await;
    let url = format!("{}/v1/chat/completions", proxy.url);
    // A healthy history: the stream passes byte for byte.
    let body = json!({"model": MODEL, "stream": true, "messages": repeated_history(1)});
    let (_, out) = post_raw(&url, &body.to_string()).await;
    assert_eq!(out, stream.concat());
    // A looping one: the calls are replaced, the ending is well-formed.
    fake.always(sse_reply(&stream));
    let body = json!({"model": MODEL, "stream": true, "messages": repeated_history(25)});
    let (_, out) = post_raw(&url, &body.to_string()).await;
    let evs = events(&out);
    assert_eq!(evs.last().unwrap().1, "[DONE]", "{out}");
    let chunks: Vec<Value> = evs
        .iter()
        .filter(|(_, d)| d != "[DONE]")
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert!(
        chunks
            .iter()
            .all(|c| c.pointer("/choices/0/delta/tool_calls").is_none()),
        "{out}"
    );
    let finish: Vec<&Value> = chunks
        .iter()
        .filter(|c| !c["choices"][0]["finish_reason"].is_null())
        .filter(|c| c["choices"].as_array().is_some_and(|a| !a.is_empty()))
        .collect();
    assert_eq!(finish.len(), 1, "{out}");
    assert_eq!(finish[0]["choices"][0]["finish_reason"], "stop");
    assert_eq!(finish[0]["id"], CHAT_ID);
    assert_eq!(finish[0]["deloop"]["tool_loop"]["tool"], "read_file");
    assert!(chat_content(&out, 0, "content").contains("did not run the tool call `read_file`"));
    // The upstream's usage chunk still comes.
    assert!(chunks.iter().any(|c| c["usage"]["completion_tokens"] == 12));
    let metrics = proxy.state.metrics().render();
    assert!(
        metrics.contains(
            r#"source="reply",level="critical",detector="generic_repeat",action="blocked"} 1"#
        ),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_streamed_anthropic_tool_use_is_blocked() {
    let mut stream = vec![
        message_start(),
        block_start(0, "text"),
        text_delta(0, "Again."),
    ];
    stream.push(block_stop(0));
    stream.push(anthropic_event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 1, "content_block":
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}}),
    ));
    for p in ["{\"path\": \"/etc/", "app.toml\"}"] {
        stream.push(anthropic_event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": p}}),
        ));
    }
    stream.push(block_stop(1));
    stream.extend(message_end("tool_use", 30));
    let mut m = vec![json!({"role": "user", "content": "Find it."})];
    for i in 0..25 {
        m.push(json!({"role": "assistant", "content": [{"type": "tool_use",
            "id": format!("t{i}"), "name": "read_file", "input": {"path": "/etc/app.toml"}}]}));
        m.push(json!({"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": format!("t{i}"), "content": "no such file", "is_error": true}]}));
    }
    let fake = Fake::start(vec![sse_reply(&stream)]).await;
    let proxy = start_with(&fake, "block").await;
    let body = json!({"model": MODEL, "max_tokens": 100, "stream": true, "messages": m});
    let (_, out) = post_raw(&format!("{}/v1/messages", proxy.url), &body.to_string()).await;
    let evs = events(&out);
    let names: Vec<&str> = evs.iter().filter_map(|(e, _)| e.as_deref()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ],
        "{out}"
    );
    assert!(!out.contains("tool_use\",\"id"), "{out}");
    let delta: Value = serde_json::from_str(&evs[7].1).unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    assert_eq!(delta["usage"]["output_tokens"], 30);
    assert_eq!(delta["deloop"]["tool_loop"]["level"], "critical");
    let text: Value = serde_json::from_str(&evs[5].1).unwrap();
    assert_eq!(text["index"], 1);
    assert!(text["delta"]["text"]
        .as_str()
        .unwrap()
        .contains("`read_file`"));
}

#[tokio::test]
async fn off_looks_at_nothing() {
    let reply = call_reply("read_file", "{\"path\": \"/etc/app.toml\"}");
    let fake = Fake::start(vec![json_reply(200, reply.clone())]).await;
    let proxy = start_with(&fake, "off").await;
    let body = json!({"model": MODEL, "messages": repeated_history(25)}).to_string();
    let (h, out) = post_raw(&format!("{}/v1/chat/completions", proxy.url), &body).await;
    assert!(h.get("x-deloop-history-loop").is_none());
    assert_eq!(out, reply.to_string());
}

/// LiteLLM's Generic Guardrail API, the wire format only (LiteLLM itself
/// is not run here): the request LiteLLM's `GenericGuardrailAPIRequest`
/// serialises to, and the `{action, blocked_reason?, texts?}` it reads.
#[tokio::test]
async fn litellm_generic_guardrail_api_wire_format() {
    let fake = Fake::start(vec![]).await;
    let proxy = start_with(&fake, "block").await;
    let url = format!("{}/beta/litellm_basic_guardrail_api", proxy.url);
    let post = |body: Value| {
        let url = url.clone();
        async move {
            let res = client().post(&url).json(&body).send().await.unwrap();
            let status = res.status().as_u16();
            (status, res.json::<Value>().await.unwrap())
        }
    };
    let base = |input_type: &str, texts: Vec<String>| {
        json!({"texts": texts, "images": null, "tools": null,
            "structured_messages": null, "tool_calls": null,
            "request_data": {"user_api_key_hash": "h", "user_api_key_alias": null},
            "input_type": input_type, "litellm_call_id": "call-1", "litellm_trace_id": "trace-1",
            "additional_provider_specific_params": {}})
    };
    // A healthy response: NONE.
    let (status, v) = post(base("response", vec![healthy_text()])).await;
    assert_eq!((status, v), (200, json!({"action": "NONE"})));
    // A looping response text: clamped.
    let looping = format!("Intro sentence. {}", LOOP_UNIT.repeat(50));
    let (status, v) = post(base("response", vec![looping.clone()])).await;
    assert_eq!(status, 200);
    assert_eq!(v["action"], "GUARDRAIL_INTERVENED");
    let t = v["texts"][0].as_str().unwrap();
    assert!(
        t.starts_with("Intro sentence. ") && t.len() < looping.len() / 4,
        "{t}"
    );
    // A request whose history loops: warned (the note on the last text),
    // then blocked.
    let mut req = base("request", vec!["Find the config file.".into()]);
    req["structured_messages"] = json!(repeated_history(6));
    let (_, v) = post(req.clone()).await;
    assert_eq!(v["action"], "GUARDRAIL_INTERVENED");
    assert!(v["texts"][0].as_str().unwrap().contains("`read_file`"));
    req["structured_messages"] = json!(repeated_history(25));
    let (_, v) = post(req).await;
    assert_eq!(v["action"], "BLOCKED");
    assert!(v["blocked_reason"]
        .as_str()
        .unwrap()
        .contains("`read_file`"));
    // A response's repeated tool call, with the history: blocked.
    let mut req = base("response", vec![]);
    req["structured_messages"] = json!(repeated_history(25));
    req["tool_calls"] = json!([{"id": "call_x", "type": "function",
        "function": {"name": "read_file", "arguments": "{\"path\":\"/etc/app.toml\"}"}}]);
    let (_, v) = post(req).await;
    assert_eq!(v["action"], "BLOCKED");
    // Bad requests: 400 naming the problem, OpenAI's error shape.
    let (status, v) = post(json!({"texts": [], "input_type": "sideways"})).await;
    assert_eq!(status, 400);
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("input_type"));
    assert!(fake.seen().is_empty(), "nothing goes upstream");
    let metrics = proxy.state.metrics().render();
    assert!(
        metrics.contains(r#"route="/beta/litellm_basic_guardrail_api""#),
        "{metrics}"
    );
}

/// With deloop's auth on, the guardrail route takes deloop's key in
/// `x-deloop-key` or in `x-api-key` (where LiteLLM sends the guardrail's
/// configured `api_key`); on the other routes `x-api-key` belongs to the
/// upstream and is not read as deloop's key.
#[tokio::test]
async fn the_guardrail_route_takes_deloops_key_in_x_api_key() {
    let fake = Fake::start(vec![]).await;
    let proxy = start_proxy_with(
        settings(&fake.url),
        None,
        deloop_http::auth::ApiKeys::parse(Some("deloop-secret"), None),
    )
    .await;
    let body = json!({"texts": ["hi"], "input_type": "request", "request_data": {}});
    let url = format!("{}/beta/litellm_basic_guardrail_api", proxy.url);
    let status = |headers: &'static [(&'static str, &'static str)], url: String| {
        let body = body.clone();
        async move {
            let mut req = client().post(url).json(&body);
            for (k, v) in headers {
                req = req.header(*k, *v);
            }
            req.send().await.unwrap().status().as_u16()
        }
    };
    assert_eq!(status(&[], url.clone()).await, 401);
    let v: Value = client()
        .post(&url)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("x-api-key"),
        "{v}"
    );
    assert_eq!(status(&[("x-api-key", "wrong")], url.clone()).await, 403);
    assert_eq!(
        status(&[("x-api-key", "deloop-secret")], url.clone()).await,
        200
    );
    assert_eq!(
        status(&[("x-deloop-key", "deloop-secret")], url.clone()).await,
        200
    );
    let chat = format!("{}/v1/chat/completions", proxy.url);
    assert_eq!(status(&[("x-api-key", "deloop-secret")], chat).await, 401);
    assert!(fake.seen().is_empty());
}
