//! The llama-server helper against the real server and models (skipped with
//! one line when they are not installed; required under `CI=true` or
//! `DELOOP_REQUIRE_REAL=1`).

use deloop_testdata::llama::{self, Model, Options};
use serde_json::{json, Value};

/// The concatenated content of an OpenAI-style SSE body.
fn sse_text(body: &str, chat: bool) -> (String, Option<String>) {
    let mut text = String::new();
    let mut finish = None;
    for line in body.lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            break;
        }
        let ev: Value = serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}"));
        for choice in ev["choices"].as_array().into_iter().flatten() {
            let piece = if chat {
                &choice["delta"]["content"]
            } else {
                &choice["text"]
            };
            if let Some(p) = piece.as_str() {
                text.push_str(p);
            }
            if let Some(f) = choice["finish_reason"].as_str() {
                finish = Some(f.to_string());
            }
        }
    }
    (text, finish)
}

#[test]
fn smollm2_serves_chat_streamed_and_not_with_slots_and_metrics() {
    let suite = "llama_server::smollm2";
    let Some(mut server) = llama::start(Model::SmolLm2, suite) else {
        return;
    };
    assert!(server.base_url().starts_with("http://127.0.0.1:"));

    let (status, slots) = server.get("/slots").unwrap();
    assert_eq!(status, 200, "{slots}");
    let slots: Value = serde_json::from_str(&slots).unwrap();
    let slots = slots.as_array().expect("/slots is an array");
    assert_eq!(slots.len(), Options::default().slots as usize);
    assert!(slots.iter().all(|s| s["is_processing"] == json!(false)));

    let request = |stream: bool| {
        json!({
            "messages": [{"role": "user", "content": "Name three colours."}],
            "max_tokens": 48,
            "temperature": 0,
            "top_k": 1,
            "seed": 0,
            "stream": stream,
        })
        .to_string()
    };
    let (status, plain) = server
        .post_json("/v1/chat/completions", &request(false))
        .unwrap();
    assert_eq!(status, 200, "{plain}");
    let plain: Value = serde_json::from_str(&plain).unwrap();
    let plain_text = plain["choices"][0]["message"]["content"]
        .as_str()
        .expect("content")
        .to_string();
    assert!(!plain_text.is_empty());
    assert!(plain["usage"]["completion_tokens"].as_u64().unwrap() > 0);

    let (status, sse) = server
        .post_json("/v1/chat/completions", &request(true))
        .unwrap();
    assert_eq!(status, 200, "{sse}");
    let (streamed, finish) = sse_text(&sse, true);
    assert!(finish.is_some(), "no finish_reason in {sse}");
    assert_eq!(streamed, plain_text, "greedy streamed and plain differ");

    let (status, metrics) = server.get("/metrics").unwrap();
    assert_eq!(status, 200);
    assert!(
        metrics.contains("llamacpp:tokens_predicted_total"),
        "{metrics}"
    );

    // Dropping the handle kills the process: nothing answers on its port.
    let port = server.port();
    assert!(server.is_running());
    drop(server);
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn gemma3_continues_a_plain_completion() {
    let suite = "llama_server::gemma3";
    let options = Options {
        slots: 2,
        ctx_size: 2048,
        ..Options::default()
    };
    let Some(server) = llama::start_with(Model::Gemma3, &options, suite) else {
        return;
    };
    let body = json!({
        "prompt": "The capital of France is",
        "max_tokens": 8,
        "temperature": 0,
        "stream": true,
    })
    .to_string();
    let (status, sse) = server.post_json("/v1/completions", &body).unwrap();
    assert_eq!(status, 200, "{sse}");
    let (text, finish) = sse_text(&sse, false);
    assert!(!text.trim().is_empty(), "{sse}");
    assert!(finish.is_some());
    let (_, slots) = server.get("/slots").unwrap();
    let slots: Value = serde_json::from_str(&slots).unwrap();
    assert_eq!(slots.as_array().map(Vec::len), Some(2));
}
