//! Whole replies: the answer, its request's shape, thoughts left out,
//! truncation, history.

use crate::common::{Fake, Reply, BROKEN_INNER_QUOTE, BROKEN_TRAILING_GARBAGE};
use crate::fixtures::*;
use deloop_llm::{CancellationToken, FinishReason, Role, Turn};
use serde_json::{json, Value};

#[tokio::test]
async fn valid_json_answer_and_request_shape() {
    let fake = Fake::start(vec![Reply::Json(
        200,
        answer(r#"{"answer":"Hola"}"#, "STOP"),
    )])
    .await;
    let g = generate(&client(&fake)).await.unwrap();
    assert_eq!(g.text, r#"{"answer":"Hola"}"#);
    assert_eq!(g.finish, FinishReason::Stop);
    assert!(!g.truncated);
    assert_eq!(g.attempts, 1);
    assert_eq!(g.model, MODEL);
    assert_eq!(g.usage.prompt_tokens, Some(12));
    assert_eq!(g.usage.output_tokens, Some(7));
    let seen = fake.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].path,
        format!("/v1beta/models/{MODEL}:generateContent")
    );
    let b = &seen[0].body;
    assert_eq!(
        b["systemInstruction"]["parts"][0]["text"],
        "Responde en JSON con la clave answer."
    );
    assert_eq!(b["contents"][0]["role"], "user");
    assert_eq!(
        b["contents"][0]["parts"][0]["text"],
        "¿Qué es la auditoría suprema?"
    );
    let gc = &b["generationConfig"];
    assert_eq!(gc["responseMimeType"], "application/json");
    assert_eq!(gc["responseSchema"]["required"][0], "answer");
    assert_eq!(gc["topK"], 64);
    assert_eq!(gc["maxOutputTokens"], 512);
    assert!((gc["temperature"].as_f64().unwrap() - 0.2).abs() < 1e-6);
    assert_key_only_in_header(&fake);
}

#[tokio::test]
async fn seed_broken_json_replies_come_back_verbatim_for_rescue() {
    let fake = Fake::start(vec![
        Reply::Json(200, answer(BROKEN_INNER_QUOTE, "STOP")),
        Reply::Json(200, answer(BROKEN_TRAILING_GARBAGE, "STOP")),
    ])
    .await;
    let c = client(&fake);
    let cancel = CancellationToken::new();
    let a = c.generate(&json_request(), &cancel).await.unwrap();
    assert_eq!(a.text, BROKEN_INNER_QUOTE);
    let b = c.generate(&json_request(), &cancel).await.unwrap();
    assert_eq!(b.text, BROKEN_TRAILING_GARBAGE);
    assert!(serde_json::from_str::<Value>(&a.text).is_err());
    // End to end with deloop-core's rescue, as the oracle does.
    let rescued = |t: &str| deloop_core::rescue::rescue(t, "answer").map(|r| r.value);
    assert_eq!(
        rescued(&a.text).unwrap(),
        json!("**Auditoría Suprema** \"la revisión final\" y más texto")
    );
    assert_eq!(rescued(&b.text).unwrap(), json!("Respuesta válida"));
}

#[tokio::test]
async fn thought_parts_are_not_part_of_the_answer() {
    let reply = json!({"candidates": [{"content": {"role": "model", "parts": [
        {"text": "Let me reason about the user... scratchpad", "thought": true},
        {"text": "{\"answer\":"},
        {"text": "\"ok\"}"}
    ]}, "finishReason": "STOP"}]});
    let fake = Fake::start(vec![Reply::Json(200, reply)]).await;
    let g = generate(&client(&fake)).await.unwrap();
    assert_eq!(g.text, r#"{"answer":"ok"}"#);
}

#[tokio::test]
async fn max_tokens_returns_the_truncated_text() {
    let fake = Fake::start(vec![Reply::Json(
        200,
        answer(r#"{"answer":"la revisión fi"#, "MAX_TOKENS"),
    )])
    .await;
    let g = generate(&client(&fake)).await.unwrap();
    assert_eq!(g.finish, FinishReason::MaxTokens);
    assert!(g.truncated);
    assert_eq!(g.text, r#"{"answer":"la revisión fi"#);
    let rescued = deloop_core::rescue::rescue(&g.text, "answer").unwrap();
    assert_eq!(rescued.value, json!("la revisión fi"));
    assert_eq!(fake.hits(), 1);
}

#[tokio::test]
async fn history_turns_come_before_the_prompt_with_gemini_roles() {
    let fake = Fake::start(vec![Reply::Json(200, answer(r#"{"answer":"sí"}"#, "STOP"))]).await;
    let mut req = json_request();
    req.history = vec![
        Turn {
            role: Role::User,
            content: "¿Qué es un bucle?".into(),
        },
        Turn {
            role: Role::Assistant,
            content: "Una unidad repetida.".into(),
        },
    ];
    client(&fake)
        .generate(&req, &CancellationToken::new())
        .await
        .unwrap();
    let contents = fake.seen()[0].body["contents"].clone();
    assert_eq!(
        contents,
        json!([
            {"role": "user", "parts": [{"text": "¿Qué es un bucle?"}]},
            {"role": "model", "parts": [{"text": "Una unidad repetida."}]},
            {"role": "user", "parts": [{"text": "¿Qué es la auditoría suprema?"}]},
        ])
    );
}
