//! The proxy driven by real clients that nobody here wrote: the official
//! OpenAI and Anthropic Python SDKs (PyPI `openai` and `anthropic`, pinned
//! and installed by `bash scripts/setup-proxy-clients.sh`), in front of the
//! fake upstream. `tests/sdk_client.py` runs the scenarios in order; this
//! test scripts the upstream in the same order and judges what each SDK
//! returned or raised: healthy streams arrive intact, looping streams and
//! replies are cut and still parse (helpers included), errors raise the
//! SDK's own exceptions.
//!
//! Without python3 or the SDKs the suite prints one line and passes; with
//! `CI=true` (or `DELOOP_REQUIRE_REAL=1`) it fails instead.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};

fn looping_chat() -> Reply {
    Reply::Loop {
        prefix: vec![chat_role(0), chat_text(0, "Intro sentence. ")],
        repeat: vec![chat_text(0, LOOP_UNIT)],
        max: 3000,
        suffix: vec![chat_finish(0, "length"), DONE.into()],
        gap: Duration::from_millis(1),
    }
}

fn looping_messages() -> Reply {
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
    }
}

fn tool_call_stream() -> Vec<String> {
    let tc = |v: Value| chat_delta(0, json!({"tool_calls": [v]}), None);
    vec![
        chat_delta(0, json!({"role": "assistant", "content": null}), None),
        tc(json!({"index": 0, "id": "call_1", "type": "function",
                  "function": {"name": "get_weather", "arguments": ""}})),
        tc(json!({"index": 0, "function": {"arguments": "{\"ci"}})),
        tc(json!({"index": 0, "function": {"arguments": "ty\": \"Par"}})),
        tc(json!({"index": 0, "function": {"arguments": "is\"}"}})),
        chat_finish(0, "tool_calls"),
        DONE.into(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_sdks_through_the_proxy() {
    let python = sdk::python();
    if !deloop_testdata::real_component(
        sdk::present(&python),
        "sdk_clients (openai and anthropic Python SDKs)",
        "bash scripts/setup-proxy-clients.sh",
    ) {
        return;
    }
    let healthy = healthy_text();
    let healthy_pieces = pieces(&healthy, 9);
    let healthy_refs: Vec<&str> = healthy_pieces.iter().map(String::as_str).collect();
    let looping = format!("Intro sentence. {}", LOOP_UNIT.repeat(60));
    let fake = Fake::start(vec![
        sse_reply(&chat_stream(&healthy_refs)),
        looping_chat(),
        looping_chat(),
        sse_reply(&tool_call_stream()),
        json_reply(200, chat_completion(&[&looping])),
        json_reply(
            200,
            chat_completion(&["```json\n{'city': 'Paris', 'n': 2,}\n```"]),
        ),
        Reply::Pieces {
            pieces: vec![
                chat_role(0).into_bytes(),
                chat_text(0, "Hello").into_bytes(),
            ],
            gap: Duration::from_millis(5),
            then: Then::Drop,
        },
        Reply::Raw {
            status: 429,
            headers: vec![
                ("content-type", "application/json".into()),
                ("retry-after", "3".into()),
            ],
            body: json!({"error": {"message": "slow down", "type": "rate_limit", "code": null}})
                .to_string()
                .into_bytes(),
        },
        sse_reply(&messages_stream(&healthy_refs)),
        looping_messages(),
        looping_messages(),
        json_reply(
            200,
            json!({"id": "msg_1", "type": "message", "role": "assistant", "model": MODEL,
                   "content": [{"type": "text", "text": looping}],
                   "stop_reason": "max_tokens", "stop_sequence": null,
                   "usage": {"input_tokens": 5, "output_tokens": 900}}),
        ),
        Reply::Pieces {
            pieces: vec![
                message_start().into_bytes(),
                block_start(0, "text").into_bytes(),
                text_delta(0, "Hello").into_bytes(),
            ],
            gap: Duration::from_millis(5),
            then: Then::Drop,
        },
        json_reply(200, chat_completion(&["Continuing."])),
        json_reply(
            200,
            json!({"id": "msg_2", "type": "message", "role": "assistant", "model": MODEL,
                   "content": [{"type": "text", "text": " and done."}],
                   "stop_reason": "end_turn", "stop_sequence": null,
                   "usage": {"input_tokens": 5, "output_tokens": 3}}),
        ),
    ])
    .await;
    let proxy = start_proxy(&fake.url).await;
    let results = sdk::run(
        &python,
        "sdk_client.py",
        &[proxy.url.to_string()],
        Duration::from_secs(300),
    )
    .await;
    let get = |name: &str| results.get(name);

    let r = get("openai_healthy_stream");
    assert_eq!(r["text"], healthy.as_str());
    assert_eq!(r["finish_reason"], "stop");

    let r = get("openai_looping_stream_with_usage");
    let text = r["text"].as_str().unwrap();
    assert!(
        text.starts_with("Intro sentence. ") && text.ends_with(" […]"),
        "{r}"
    );
    assert!(text.len() < 20 * LOOP_UNIT.len(), "{r}");
    assert_eq!(r["finish_reason"], "stop");
    assert!(r["deloop"]["saved_chars"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["usage_chunks"], 1, "{r}");
    assert!(r["usage"].is_null(), "no counts invented: {r}");

    let r = get("openai_stream_helper");
    assert!(r["text"].as_str().unwrap().ends_with(" […]"), "{r}");
    assert_eq!(r["finish_reason"], "stop");
    assert_eq!(r["id"], CHAT_ID);

    let r = get("openai_tool_calls_stream");
    assert_eq!(
        r["tool_calls"],
        json!([{"id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}])
    );
    assert_eq!(r["finish_reason"], "tool_calls");

    let r = get("openai_looping_reply");
    assert!(r["text"].as_str().unwrap().ends_with(" […]"), "{r}");
    assert_eq!(r["finish_reason"], "stop");
    assert_eq!(r["x_deloop_cuts"], "1");
    assert_eq!(r["deloop"]["cuts"][0]["index"], 0);

    let r = get("openai_json_reply");
    assert_eq!(r["value"], json!({"city": "Paris", "n": 2}));

    let r = get("openai_drop_mid_stream");
    assert_eq!(r["text"], "Hello");
    assert_eq!(r["raised"], "APIError", "{r}");
    assert!(r["message"].as_str().unwrap().contains("mid-stream"), "{r}");

    let r = get("openai_rate_limited");
    assert_eq!(r["raised"], "RateLimitError");
    assert_eq!(r["retry_after"], "3");

    let r = get("anthropic_healthy_stream");
    assert_eq!(r["text"], healthy.as_str());
    assert_eq!(r["final_text"], healthy.as_str());
    assert_eq!(r["stop_reason"], "end_turn");

    let r = get("anthropic_looping_stream");
    let text = r["text"].as_str().unwrap();
    assert!(
        text.starts_with("Intro sentence. ") && text.ends_with(" […]"),
        "{r}"
    );
    assert_eq!(r["final_text"], r["text"]);
    assert_eq!(r["stop_reason"], "end_turn");
    assert_eq!(r["output_tokens"], 1, "the upstream's last count: {r}");

    let r = get("anthropic_looping_events");
    assert_eq!(
        r["events"],
        json!(["content_block_stop", "message_delta", "message_stop"])
    );
    assert_eq!(r["deloop"]["channel"], "content");

    let r = get("anthropic_looping_reply");
    assert!(r["text"].as_str().unwrap().ends_with(" […]"), "{r}");
    assert_eq!(r["stop_reason"], "end_turn");
    assert_eq!(r["deloop"]["cuts"][0]["block"], 0);

    let r = get("anthropic_drop_mid_stream");
    assert!(r["raised"].is_string(), "{r}");
    assert!(r["message"].as_str().unwrap().contains("mid-stream"), "{r}");

    // Looped history (issue 22 §4): the SDK's auto-continue request reaches
    // the upstream with the assistant's wall clamped, and the SDK reads the
    // proxy's headers from the raw response.
    let r = get("openai_looped_history");
    assert_eq!(r["text"], "Continuing.", "{r}");
    assert_eq!(r["history_loops"], "clamped", "{r}");
    assert_eq!(r["history_loops_at"], "messages[1].content", "{r}");
    let r = get("anthropic_looped_prefill");
    assert_eq!(r["text"], " and done.", "{r}");
    assert_eq!(r["history_loops"], "clamped", "{r}");
    assert_eq!(r["history_loops_at"], "messages[1].content[0].text", "{r}");
    let seen = fake.seen();
    let [.., chat, messages] = seen.as_slice() else {
        panic!("the upstream saw {} requests", seen.len());
    };
    assert!(chat.path.ends_with("/chat/completions"), "{}", chat.path);
    let forwarded = chat.json()["messages"][1]["content"].clone();
    let forwarded = forwarded
        .as_str()
        .expect("assistant content forwarded as a string");
    assert!(
        forwarded.starts_with("Intro sentence. ") && forwarded.ends_with(" […]"),
        "{forwarded}"
    );
    assert!(
        forwarded.len() < looping.len() / 4,
        "{} of {} bytes",
        forwarded.len(),
        looping.len()
    );
    assert_eq!(chat.json()["messages"][2]["content"], "continue");
    assert!(messages.path.ends_with("/messages"), "{}", messages.path);
    let prefill = messages.json()["messages"][1]["content"][0]["text"].clone();
    let prefill = prefill.as_str().expect("prefill forwarded");
    assert!(
        prefill.starts_with("Intro sentence. ") && prefill.ends_with(" […]"),
        "{prefill}"
    );
    assert!(
        prefill.len() < looping.len() / 4,
        "{} of {} bytes",
        prefill.len(),
        looping.len()
    );
}
