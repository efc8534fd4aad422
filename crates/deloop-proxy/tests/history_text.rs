//! Issue 22 §4, looped assistant text sent back as history, end to end
//! over real HTTP on 127.0.0.1: an auto-continued OpenAI answer and its
//! echoed reasoning, and an Anthropic prefill, are clamped before they
//! reach the upstream (`proxy.history_loops = "clamp"`, the default);
//! `pass` forwards them byte for byte and says so; `reject` answers 400
//! naming the message; a healthy history is never touched.

mod common;

use common::*;
use serde_json::{json, Value};

fn looped() -> String {
    format!(
        "Step one is to read the file. {}",
        "la continuación de un proceso de automatización ".repeat(80)
    )
}

async fn start_with(fake: &Fake, action: &str) -> Proxy {
    let mut s = settings(&fake.url);
    s.history_loops = action.into();
    start_proxy_with(s, None, Default::default()).await
}

async fn post(url: &str, body: &Value) -> reqwest::Response {
    client()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

fn continuation() -> Value {
    json!({"model": MODEL, "messages": [
        {"role": "user", "content": "Explain the pipeline."},
        {"role": "assistant", "content": looped(), "reasoning_content": looped()},
        {"role": "user", "content": "continue"},
    ]})
}

#[tokio::test]
async fn an_auto_continued_openai_answer_is_clamped_before_the_upstream() {
    let fake = Fake::start(vec![json_reply(200, chat_completion(&["ok"]))]).await;
    let proxy = start_with(&fake, "clamp").await;
    let res = post(
        &format!("{}/v1/chat/completions", proxy.url),
        &continuation(),
    )
    .await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["x-deloop-history-loops"], "clamped");
    assert_eq!(
        res.headers()["x-deloop-history-loops-at"],
        "messages[1].content, messages[1].reasoning_content"
    );
    let seen = fake.last().json();
    for field in ["content", "reasoning_content"] {
        let text = seen["messages"][1][field].as_str().unwrap();
        assert!(text.starts_with("Step one is to read the file."), "{text}");
        assert!(text.len() < 400, "{field} still loops: {text}");
    }
    assert_eq!(seen["messages"][0]["content"], "Explain the pipeline.");
    assert_eq!(seen["messages"][2]["content"], "continue");
    assert_eq!(seen["model"], MODEL);
}

#[tokio::test]
async fn an_anthropic_prefill_that_loops_is_clamped_in_a_stream() {
    let fake = Fake::start(vec![sse_reply(&messages_stream(&["Done."]))]).await;
    let proxy = start_with(&fake, "clamp").await;
    let body = json!({"model": MODEL, "max_tokens": 100, "stream": true, "messages": [
        {"role": "user", "content": "Write the plan."},
        {"role": "assistant", "content": [{"type": "text", "text": looped()}]},
    ]});
    let res = post(&format!("{}/v1/messages", proxy.url), &body).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["x-deloop-history-loops"], "clamped");
    assert!(res.text().await.unwrap().contains("Done."));
    let seen = fake.last().json();
    let text = seen["messages"][1]["content"][0]["text"].as_str().unwrap();
    assert!(text.len() < 400, "{text}");
}

#[tokio::test]
async fn pass_forwards_byte_for_byte_and_reject_names_the_message() {
    let fake = Fake::start(vec![json_reply(200, chat_completion(&["ok"]))]).await;
    let proxy = start_with(&fake, "pass").await;
    let body = continuation();
    let res = post(&format!("{}/v1/chat/completions", proxy.url), &body).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["x-deloop-history-loops"], "passed");
    assert_eq!(fake.last().body, body.to_string().as_bytes());

    let fake = Fake::start(vec![]).await;
    let proxy = start_with(&fake, "reject").await;
    let res = post(&format!("{}/v1/chat/completions", proxy.url), &body).await;
    assert_eq!(res.status(), 400);
    let v: Value = res.json().await.unwrap();
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("messages[1].content ("), "{msg}");
    assert!(msg.contains("proxy.history_loops"), "{msg}");
    assert!(
        fake.seen().is_empty(),
        "a rejected request reached the upstream"
    );
}

#[tokio::test]
async fn a_healthy_history_is_forwarded_untouched_without_headers() {
    let fake = Fake::start(vec![json_reply(200, chat_completion(&["ok"]))]).await;
    let proxy = start_with(&fake, "clamp").await;
    let body = json!({"model": MODEL, "messages": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": healthy_text()},
        {"role": "user", "content": "continue"},
    ]});
    let res = post(&format!("{}/v1/chat/completions", proxy.url), &body).await;
    assert_eq!(res.status(), 200);
    assert!(res.headers().get("x-deloop-history-loops").is_none());
    assert_eq!(fake.last().body, body.to_string().as_bytes());
}
