//! Issue 11 §2, whole replies: clamped per choice (per block), JSON
//! repaired and checked against the request's schema, all of it said in
//! `x-deloop-*` headers and the `deloop` object.

mod common;

use common::*;
use serde_json::{json, Value};

async fn post(url: &str, body: Value) -> (reqwest::header::HeaderMap, Value) {
    let res = client().post(url).json(&body).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let h = res.headers().clone();
    (h, res.json().await.unwrap())
}

#[tokio::test]
async fn each_choice_is_clamped_and_the_reply_says_so() {
    let looping = format!("Intro sentence. {}", LOOP_UNIT.repeat(50));
    let healthy = healthy_text();
    let mut reply = chat_completion(&[&looping, &healthy]);
    reply["choices"][1]["finish_reason"] = json!("stop");
    reply["choices"][0]["message"]["reasoning_content"] = json!(format!(
        "Thinking. {}",
        "I need to check this again. ".repeat(40)
    ));
    let fake = Fake::start(vec![json_reply(200, reply.clone())]).await;
    let proxy = start_proxy(&fake.url).await;
    let (h, v) = post(
        &format!("{}/v1/chat/completions", proxy.url),
        json!({"model": MODEL, "messages": [], "n": 2}),
    )
    .await;
    assert_eq!(h["x-deloop-cuts"], "2");
    let saved: usize = h["x-deloop-saved-chars"].to_str().unwrap().parse().unwrap();
    assert!(saved > 1000, "{saved}");
    let c0 = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(
        c0.starts_with("Intro sentence. ") && c0.ends_with(" […]"),
        "{c0}"
    );
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["choices"][1]["message"]["content"], healthy);
    assert_eq!(v["choices"][1]["finish_reason"], "stop");
    assert_eq!(v["usage"], reply["usage"], "usage untouched");
    let cuts = v["deloop"]["cuts"].as_array().unwrap();
    assert_eq!(cuts.len(), 2);
    assert!(cuts.iter().all(|c| c["index"] == 0));
    let channels: Vec<&str> = cuts
        .iter()
        .map(|c| c["channel"].as_str().unwrap())
        .collect();
    assert_eq!(channels, ["reasoning", "content"]);
    let sum: u64 = cuts
        .iter()
        .map(|c| c["saved_chars"].as_u64().unwrap())
        .sum();
    assert_eq!(sum as usize, saved);
}

#[tokio::test]
async fn anthropic_blocks_are_clamped() {
    let looping = format!("Intro sentence. {}", LOOP_UNIT.repeat(50));
    let reply = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": MODEL,
        "content": [
            {"type": "thinking", "thinking": "Short thought.", "signature": "sig"},
            {"type": "text", "text": looping},
            {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
        ],
        "stop_reason": "max_tokens", "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 500},
    });
    let fake = Fake::start(vec![json_reply(200, reply.clone())]).await;
    let proxy = start_proxy(&fake.url).await;
    let (h, v) = post(
        &format!("{}/v1/messages", proxy.url),
        json!({"model": MODEL, "max_tokens": 500, "messages": []}),
    )
    .await;
    assert_eq!(h["x-deloop-cuts"], "1");
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(v["content"][0], reply["content"][0]);
    assert_eq!(v["content"][2], reply["content"][2]);
    assert!(v["content"][1]["text"].as_str().unwrap().ends_with(" […]"));
    assert_eq!(v["deloop"]["cuts"][0]["block"], 1);
}

#[tokio::test]
async fn json_replies_are_repaired_and_checked() {
    let schema = json!({"type": "object", "required": ["city", "population"],
        "properties": {"city": {"type": "string"}, "population": {"type": "integer"}}});
    let req = |format: Value| json!({"model": MODEL, "messages": [], "response_format": format});
    let fake = Fake::start(vec![
        // Broken but repairable, and valid against the schema once repaired.
        json_reply(
            200,
            chat_completion(&["```json\n{'city': 'Paris', population: 2100000,}\n```"]),
        ),
        // Valid JSON, but not what the schema asks.
        json_reply(
            200,
            chat_completion(&[r#"{"city": "Paris", "population": "many"}"#]),
        ),
        // Not JSON at all.
        json_reply(200, chat_completion(&["I am sorry, I cannot answer."])),
        // Valid JSON and valid against the schema: untouched bytes.
        json_reply(
            200,
            chat_completion(&[r#"{"city": "Lyon", "population": 500000}"#]),
        ),
        // A loop inside the JSON: cut without a marker, then closed.
        json_reply(
            200,
            chat_completion(&[&format!(
                r#"{{"city": "Paris", "notes": ["{}"#,
                "more and more notes, ".repeat(60)
            )]),
        ),
    ])
    .await;
    let proxy = start_proxy(&fake.url).await;
    let url = format!("{}/v1/chat/completions", proxy.url);
    let schema_format =
        json!({"type": "json_schema", "json_schema": {"name": "c", "schema": schema}});

    let (h, v) = post(&url, req(schema_format.clone())).await;
    assert_eq!(h["x-deloop-json"], "repaired");
    assert_eq!(h["x-deloop-json-schema"], "valid");
    assert_eq!(
        v["choices"][0]["message"]["content"],
        r#"{"city":"Paris","population":2100000}"#
    );
    assert!(!v["deloop"]["json"][0]["repairs"]
        .as_array()
        .unwrap()
        .is_empty());

    let (h, v) = post(&url, req(schema_format.clone())).await;
    assert_eq!(h["x-deloop-json"], "valid");
    assert_eq!(h["x-deloop-json-schema"], "invalid");
    let errors = v["deloop"]["json"][0]["schema_errors"].as_array().unwrap();
    assert!(
        errors[0].as_str().unwrap().starts_with("/population"),
        "{errors:?}"
    );

    let (h, v) = post(&url, req(json!({"type": "json_object"}))).await;
    assert_eq!(h["x-deloop-json"], "invalid");
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "I am sorry, I cannot answer."
    );
    assert_eq!(v["deloop"]["json"][0]["valid"], false);

    let res = client()
        .post(&url)
        .json(&req(schema_format))
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["x-deloop-json"], "valid");
    assert_eq!(res.headers()["x-deloop-json-schema"], "valid");
    let raw = res.bytes().await.unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&raw).unwrap(),
        chat_completion(&[r#"{"city": "Lyon", "population": 500000}"#]),
        "nothing to say: no deloop object"
    );

    let (h, v) = post(&url, req(json!({"type": "json_object"}))).await;
    assert_eq!(h["x-deloop-cuts"], "1");
    assert_eq!(h["x-deloop-json"], "repaired");
    let content = v["choices"][0]["message"]["content"].as_str().unwrap();
    let doc: Value = serde_json::from_str(content).unwrap();
    assert_eq!(doc["city"], "Paris");
    assert!(!content.contains('…'), "{content}");
}

#[tokio::test]
async fn replies_that_are_not_chat_objects_pass() {
    let fake = Fake::start(vec![
        json_reply(200, json!({"weird": true})),
        Reply::Raw {
            status: 200,
            headers: vec![("content-type", "application/json".into())],
            body: b"not json at all".to_vec(),
        },
    ])
    .await;
    let proxy = start_proxy(&fake.url).await;
    let url = format!("{}/v1/chat/completions", proxy.url);
    let (_, v) = post(&url, json!({})).await;
    assert_eq!(v, json!({"weird": true}));
    let res = client().post(&url).body("{}").send().await.unwrap();
    assert_eq!(res.text().await.unwrap(), "not json at all");
}
