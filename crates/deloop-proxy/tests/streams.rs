//! Issue 11 §2: cutting looping streams, OpenAI and Anthropic, over real
//! TCP against a fake upstream that notices when it is dropped.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use deloop_core::repetition::{clamp, ClampConfig};
use serde_json::{json, Value};

async fn post(url: &str, body: Value, headers: &[(&str, &str)]) -> (u16, String) {
    let mut rb = client().post(url).json(&body);
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    let res = rb.send().await.unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

fn chat_req(extra: Value) -> Value {
    let mut v =
        json!({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": true});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

/// Repeats of the loop a held stream sends: the guard cuts well before.
const HELD_REPEATS: usize = 150;

/// A looping chat stream of [`HELD_REPEATS`] repeats, then held open
/// until the proxy drops it.
fn held_looping_chat() -> Reply {
    let mut events = vec![chat_role(0), chat_text(0, "Intro sentence. ")];
    events.extend((0..HELD_REPEATS).map(|_| chat_text(0, LOOP_UNIT)));
    Reply::Held(events)
}

/// A looping chat stream: `max` repeats at most, 2 ms apart.
fn looping_chat(max: usize) -> Reply {
    Reply::Loop {
        prefix: vec![chat_role(0), chat_text(0, "Intro sentence. ")],
        repeat: vec![chat_text(0, LOOP_UNIT)],
        max,
        suffix: vec![chat_finish(0, "length"), DONE.into()],
        gap: Duration::from_millis(2),
    }
}

fn data_objects(body: &str) -> Vec<Value> {
    events(body)
        .into_iter()
        .filter(|(_, d)| d != "[DONE]")
        .map(|(_, d)| serde_json::from_str(&d).unwrap())
        .collect()
}

#[tokio::test]
async fn healthy_streams_pass_byte_for_byte_whatever_the_split() {
    let text = format!("{} Añadir ñandú 🦀 über — fin.", healthy_text());
    let events = chat_stream(
        &pieces(&text, 7)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let whole = events.concat().into_bytes();
    // Split the bytes anywhere, inside events, lines and UTF-8 sequences.
    let split: Vec<Vec<u8>> = whole.chunks(5).map(<[u8]>::to_vec).collect();
    let a_events = messages_stream(
        &pieces(&text, 11)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let a_whole = a_events.concat().into_bytes();
    let fake = Fake::start(vec![
        Reply::Pieces {
            pieces: split,
            gap: Duration::from_millis(1),
            then: Then::End,
        },
        Reply::Pieces {
            pieces: a_whole.chunks(3).map(<[u8]>::to_vec).collect(),
            gap: Duration::ZERO,
            then: Then::End,
        },
    ])
    .await;
    let proxy = start_proxy(&fake.url).await;
    let (status, body) = post(
        &format!("{}/v1/chat/completions", proxy.url),
        chat_req(json!({})),
        &[],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body.as_bytes(), &whole[..]);
    let (status, body) = post(
        &format!("{}/v1/messages", proxy.url),
        json!({"model": MODEL, "max_tokens": 100, "messages": [], "stream": true}),
        &[],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body.as_bytes(), &a_whole[..]);
}

#[tokio::test]
async fn a_looping_chat_stream_is_cut_and_the_upstream_dropped() {
    let fake = Fake::start(vec![held_looping_chat()]).await;
    let proxy = start_proxy(&fake.url).await;
    let res = client()
        .post(format!("{}/v1/chat/completions", proxy.url))
        .json(&chat_req(json!({})))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    assert_eq!(res.headers()["x-request-id"], "upstream-req-1");
    let body = res.text().await.unwrap();
    let probe = fake.probe();
    assert!(
        eventually(|| probe.dropped_early.load(Ordering::SeqCst) == 1).await,
        "the upstream never saw the proxy go away"
    );
    // The fake holds its stream open after its last event, so only the
    // proxy dropping it can end it: the upstream saw the close, and before
    // the stream's end, whatever the machine's speed.
    assert!(probe.sent.load(Ordering::SeqCst) <= 2 + HELD_REPEATS);
    assert_eq!(probe.completed.load(Ordering::SeqCst), 0);
    assert!(body.ends_with("data: [DONE]\n\n"));
    let objs = data_objects(&body);
    let last = objs.last().unwrap();
    assert_eq!(last["id"], CHAT_ID);
    assert_eq!(last["model"], MODEL);
    assert_eq!(last["created"], CREATED);
    assert_eq!(last["object"], "chat.completion.chunk");
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert_eq!(last["choices"][0]["index"], 0);
    let d = &last["deloop"];
    assert!(d["detector"].is_string(), "{d}");
    assert_eq!(d["channel"], "content");
    assert!(d["saved_chars"].as_u64().unwrap() > 0);
    // The client's text ends within the watcher's bound of the loop's start.
    let content = chat_content(&body, 0, "content");
    let start = d["start"].as_u64().unwrap() as usize;
    assert!(start >= "Intro sentence. ".len() - 1, "{start}");
    assert!(content.ends_with(" […]"), "{content}");
    assert!(
        content.len() < start + 10 * LOOP_UNIT.len(),
        "{} vs {start}",
        content.len()
    );
    // No finish_reason other than the proxy's.
    let finishes: Vec<&Value> = objs
        .iter()
        .filter_map(|o| o["choices"].get(0))
        .map(|c| &c["finish_reason"])
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finishes, vec![&json!("stop")]);
    let metrics = proxy.state.metrics().render();
    assert!(
        metrics.contains("deloop_loops_cut_total{source=\"proxy\""),
        "{metrics}"
    );
}

#[tokio::test]
async fn usage_is_reported_honestly() {
    // Without upstream counts: null. With counts in every chunk (as some
    // servers send): the last ones seen.
    let with_usage = |text: &str, n: u64| {
        let v = json!({
            "id": CHAT_ID, "object": "chat.completion.chunk", "created": CREATED, "model": MODEL,
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}],
            "usage": {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": 3 + n},
        });
        format!("data: {v}\n\n")
    };
    let fake = Fake::start(vec![
        looping_chat(2000),
        Reply::Pieces {
            pieces: (0..200)
                .map(|i| with_usage(LOOP_UNIT, 9 * i + 9).into_bytes())
                .collect(),
            gap: Duration::from_millis(1),
            then: Then::End,
        },
    ])
    .await;
    let proxy = start_proxy(&fake.url).await;
    let req = chat_req(json!({"stream_options": {"include_usage": true}}));
    let url = format!("{}/v1/chat/completions", proxy.url);
    let (_, body) = post(&url, req.clone(), &[]).await;
    let objs = data_objects(&body);
    let usage_chunk = objs.last().unwrap();
    assert_eq!(usage_chunk["choices"], json!([]));
    assert!(usage_chunk["usage"].is_null(), "{usage_chunk}");
    assert!(usage_chunk.get("usage").is_some());
    let (_, body) = post(&url, req, &[]).await;
    let objs = data_objects(&body);
    let usage = &objs.last().unwrap()["usage"];
    let cut_at = objs.len() as u64; // chunks received, roughly
    assert!(usage["completion_tokens"].as_u64().unwrap() > 0, "{usage}");
    assert!(usage["completion_tokens"].as_u64().unwrap() <= 9 * (cut_at + 2));
}

#[tokio::test]
async fn n_choices_are_watched_apart() {
    // Choice 0 loops; choice 1 is healthy and finishes. Interleaved.
    let healthy = pieces(&healthy_text(), 20);
    let mut ev = vec![chat_role(0), chat_role(1)];
    for i in 0..200 {
        ev.push(chat_text(0, LOOP_UNIT));
        if let Some(p) = healthy.get(i) {
            ev.push(chat_text(1, p));
        } else if i == healthy.len() {
            ev.push(chat_finish(1, "stop"));
        }
    }
    ev.push(chat_finish(0, "length"));
    ev.push(DONE.into());
    let fake = Fake::start(vec![Reply::Pieces {
        pieces: ev.into_iter().map(String::into_bytes).collect(),
        gap: Duration::from_millis(1),
        then: Then::End,
    }])
    .await;
    let proxy = start_proxy(&fake.url).await;
    let (_, body) = post(
        &format!("{}/v1/chat/completions", proxy.url),
        chat_req(json!({"n": 2})),
        &[],
    )
    .await;
    assert_eq!(chat_content(&body, 1, "content"), healthy_text());
    let zero = chat_content(&body, 0, "content");
    assert!(
        zero.len() < 20 * LOOP_UNIT.len() && zero.ends_with(" […]"),
        "{zero}"
    );
    let objs = data_objects(&body);
    let finish = |i: u64| -> Vec<Value> {
        objs.iter()
            .flat_map(|o| o["choices"].as_array().cloned().unwrap_or_default())
            .filter(|c| c["index"] == i && !c["finish_reason"].is_null())
            .map(|c| c["finish_reason"].clone())
            .collect()
    };
    assert_eq!(finish(0), vec![json!("stop")]);
    assert_eq!(finish(1), vec![json!("stop")]);
    assert!(body.ends_with("data: [DONE]\n\n"));
}

#[tokio::test]
async fn reasoning_loops_are_cut() {
    let reasoning = |t: &str| chat_delta(0, json!({"reasoning_content": t}), None);
    let fake = Fake::start(vec![Reply::Loop {
        prefix: vec![chat_role(0), reasoning("Let me think. ")],
        repeat: vec![reasoning("Wait, let me reconsider the whole problem. ")],
        max: 2000,
        suffix: vec![],
        gap: Duration::from_millis(1),
    }])
    .await;
    let proxy = start_proxy(&fake.url).await;
    let (_, body) = post(
        &format!("{}/v1/chat/completions", proxy.url),
        chat_req(json!({})),
        &[],
    )
    .await;
    let objs = data_objects(&body);
    let last = objs.last().unwrap();
    assert_eq!(last["deloop"]["channel"], "reasoning");
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert!(chat_content(&body, 0, "reasoning_content").ends_with(" […]"));
    let probe = fake.probe();
    assert!(eventually(|| probe.dropped_early.load(Ordering::SeqCst) == 1).await);
}

#[tokio::test]
async fn exact_mode_forwards_no_loop_byte() {
    let fake = Fake::start(vec![looping_chat(3000), looping_chat(3000)]).await;
    let proxy = start_proxy(&fake.url).await;
    let url = format!("{}/v1/chat/completions", proxy.url);
    let (_, body) = post(&url, chat_req(json!({})), &[("x-deloop-exact", "1")]).await;
    assert!(fake.seen()[0].headers.get("x-deloop-exact").is_none());
    let content = chat_content(&body, 0, "content");
    // Exact: what reached the client is the batch guard's output on the
    // received prefix, so it is cut where the batch guard cuts.
    let received = format!("Intro sentence. {}", LOOP_UNIT.repeat(200));
    let batch = clamp(&received, &ClampConfig::default());
    assert_eq!(content, batch.text, "exact stream = batch clamp");
    // Default mode forwards more of the loop before the cut is seen.
    let (_, body) = post(&url, chat_req(json!({})), &[]).await;
    let loose = chat_content(&body, 0, "content");
    assert!(loose.len() >= content.len());
}

#[tokio::test]
async fn legacy_completions_are_cut_too() {
    let chunk = |t: &str, finish: Option<&str>| {
        let v = json!({"id": "cmpl-1", "object": "text_completion", "created": CREATED,
            "model": MODEL, "choices": [{"text": t, "index": 0, "logprobs": null, "finish_reason": finish}]});
        format!("data: {v}\n\n")
    };
    let fake = Fake::start(vec![Reply::Loop {
        prefix: vec![chunk("Once upon a time ", None)],
        repeat: vec![chunk(LOOP_UNIT, None)],
        max: 2000,
        suffix: vec![chunk("", Some("length")), DONE.into()],
        gap: Duration::from_millis(1),
    }])
    .await;
    let proxy = start_proxy(&fake.url).await;
    let (_, body) = post(
        &format!("{}/v1/completions", proxy.url),
        json!({"model": MODEL, "prompt": "x", "stream": true}),
        &[],
    )
    .await;
    let objs = data_objects(&body);
    let last = objs.last().unwrap();
    assert_eq!(last["object"], "text_completion");
    assert_eq!(last["id"], "cmpl-1");
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert_eq!(last["choices"][0]["text"], "");
    let text: String = objs
        .iter()
        .filter_map(|o| o["choices"][0]["text"].as_str().map(String::from))
        .collect();
    assert!(
        text.starts_with("Once upon a time ") && text.ends_with(" […]"),
        "{text}"
    );
}

#[tokio::test]
async fn a_cut_json_stream_stays_a_json_document() {
    let item = r#"{"name": "anise", "qty": 1}, "#;
    let fake = Fake::start(vec![Reply::Loop {
        prefix: vec![chat_role(0), chat_text(0, r#"{"items": ["#)],
        repeat: vec![chat_text(0, item)],
        max: 2000,
        suffix: vec![],
        gap: Duration::from_millis(1),
    }])
    .await;
    let proxy = start_proxy(&fake.url).await;
    let req = chat_req(
        json!({"response_format": {"type": "json_schema", "json_schema": {
        "name": "list", "schema": {"type": "object", "required": ["items"],
            "properties": {"items": {"type": "array", "maxItems": 3}}}}}}),
    );
    let (_, body) = post(&format!("{}/v1/chat/completions", proxy.url), req, &[]).await;
    let content = chat_content(&body, 0, "content");
    let doc: Value = serde_json::from_str(&content).unwrap_or_else(|e| panic!("{e}: {content}"));
    assert!(doc["items"].as_array().unwrap().len() > 1);
    let objs = data_objects(&body);
    let d = &objs.last().unwrap()["deloop"];
    assert_eq!(d["json"]["valid"], true, "{d}");
    // The schema caps the list at 3 items: reported, not hidden.
    assert_eq!(d["json"]["schema_valid"], false, "{d}");
}

#[tokio::test]
async fn a_healthy_json_stream_gets_its_report() {
    let events = vec![
        chat_role(0),
        chat_text(0, r#"{"answer": "#),
        chat_text(0, r#""forty-two"}"#),
        chat_finish(0, "stop"),
        DONE.into(),
    ];
    let fake = Fake::start(vec![sse_reply(&events)]).await;
    let proxy = start_proxy(&fake.url).await;
    let req = chat_req(json!({"response_format": {"type": "json_object"}}));
    let (_, body) = post(&format!("{}/v1/chat/completions", proxy.url), req, &[]).await;
    let objs = data_objects(&body);
    let finish = objs
        .iter()
        .find(|o| o["choices"][0]["finish_reason"] == "stop")
        .unwrap();
    assert_eq!(finish["deloop"]["json"]["valid"], true);
    assert_eq!(
        chat_content(&body, 0, "content"),
        r#"{"answer": "forty-two"}"#
    );
}

fn anthropic_req() -> Value {
    json!({"model": MODEL, "max_tokens": 1000, "messages": [{"role": "user", "content": "hi"}], "stream": true})
}

#[tokio::test]
async fn a_looping_messages_stream_ends_well_formed() {
    let mut held = vec![
        message_start(),
        block_start(0, "text"),
        text_delta(0, "Intro sentence. "),
    ];
    held.extend((0..HELD_REPEATS).map(|_| text_delta(0, LOOP_UNIT)));
    let fake = Fake::start(vec![Reply::Held(held)]).await;
    let proxy = start_proxy(&fake.url).await;
    let (status, body) = post(&format!("{}/v1/messages", proxy.url), anthropic_req(), &[]).await;
    assert_eq!(status, 200);
    let ev = events(&body);
    let names: Vec<&str> = ev.iter().map(|(e, _)| e.as_deref().unwrap_or("")).collect();
    let n = names.len();
    assert_eq!(
        &names[n - 3..],
        &["content_block_stop", "message_delta", "message_stop"],
        "{names:?}"
    );
    let delta: Value = serde_json::from_str(&ev[n - 2].1).unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    assert_eq!(
        delta["usage"]["output_tokens"], 1,
        "the upstream's last count"
    );
    assert_eq!(delta["deloop"]["channel"], "content");
    assert!(delta["deloop"]["saved_chars"].as_u64().unwrap() > 0);
    let stop: Value = serde_json::from_str(&ev[n - 3].1).unwrap();
    assert_eq!(stop["index"], 0);
    let text: String = ev
        .iter()
        .filter_map(|(_, d)| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| v["delta"]["text"].as_str().map(String::from))
        .collect();
    assert!(
        text.starts_with("Intro sentence. ") && text.ends_with(" […]"),
        "{text}"
    );
    let probe = fake.probe();
    // Held open after its last event: only the proxy could end it.
    assert!(eventually(|| probe.dropped_early.load(Ordering::SeqCst) == 1).await);
    assert_eq!(probe.completed.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn anthropic_thinking_loops_are_cut_and_exact_mode_holds_back() {
    let fake = Fake::start(vec![
        Reply::Loop {
            prefix: vec![message_start(), block_start(0, "thinking")],
            repeat: vec![thinking_delta(0, "Hmm, maybe I should check again. ")],
            max: 3000,
            suffix: vec![],
            gap: Duration::from_millis(1),
        },
        Reply::Loop {
            prefix: vec![
                message_start(),
                block_start(0, "text"),
                text_delta(0, "Intro sentence. "),
            ],
            repeat: vec![text_delta(0, LOOP_UNIT)],
            max: 3000,
            suffix: vec![],
            gap: Duration::from_millis(1),
        },
    ])
    .await;
    let proxy = start_proxy(&fake.url).await;
    let url = format!("{}/v1/messages", proxy.url);
    let (_, body) = post(&url, anthropic_req(), &[]).await;
    let ev = events(&body);
    let delta: Value = serde_json::from_str(&ev[ev.len() - 2].1).unwrap();
    assert_eq!(delta["deloop"]["channel"], "reasoning");
    let (_, body) = post(&url, anthropic_req(), &[("x-deloop-exact", "true")]).await;
    let text: String = events(&body)
        .iter()
        .filter_map(|(_, d)| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| v["delta"]["text"].as_str().map(String::from))
        .collect();
    let received = format!("Intro sentence. {}", LOOP_UNIT.repeat(200));
    assert_eq!(text, clamp(&received, &ClampConfig::default()).text);
}

#[tokio::test]
async fn the_end_reasons_are_configurable() {
    let fake = Fake::start(vec![
        looping_chat(2000),
        Reply::Loop {
            prefix: vec![message_start(), block_start(0, "text")],
            repeat: vec![text_delta(0, LOOP_UNIT)],
            max: 2000,
            suffix: vec![],
            gap: Duration::from_millis(1),
        },
    ])
    .await;
    let mut s = settings(&fake.url);
    s.finish_reason = "length".into();
    s.stop_reason = "max_tokens".into();
    let proxy = start_proxy_with(s, None, Default::default()).await;
    let (_, body) = post(
        &format!("{}/v1/chat/completions", proxy.url),
        chat_req(json!({})),
        &[],
    )
    .await;
    let objs = data_objects(&body);
    assert_eq!(
        objs.last().unwrap()["choices"][0]["finish_reason"],
        "length"
    );
    let (_, body) = post(&format!("{}/v1/messages", proxy.url), anthropic_req(), &[]).await;
    let ev = events(&body);
    let delta: Value = serde_json::from_str(&ev[ev.len() - 2].1).unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "max_tokens");
}
