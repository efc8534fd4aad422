//! The Gemma capability fallbacks (JSON mode, developer instruction),
//! remembered per model.

use crate::common::{Fake, Reply};
use crate::fixtures::*;
use deloop_llm::{CancellationToken, LlmError};

#[tokio::test]
async fn gemma_json_mode_fallback_is_remembered() {
    let fake = Fake::start(vec![
        invalid("Json mode is not enabled for models/gemma-4-26b-a4b-it"),
        Reply::Json(200, answer(r#"{"answer":"uno"}"#, "STOP")),
        Reply::Json(200, answer(r#"{"answer":"dos"}"#, "STOP")),
    ])
    .await;
    let c = client(&fake);
    let req = json_request();
    let g = c.generate(&req, &CancellationToken::new()).await.unwrap();
    assert_eq!(g.text, r#"{"answer":"uno"}"#);
    assert_eq!(g.attempts, 2);
    let seen = fake.seen();
    assert_eq!(
        seen[0].body["generationConfig"]["responseMimeType"],
        "application/json"
    );
    let retry = &seen[1].body;
    assert!(retry["generationConfig"].get("responseMimeType").is_none());
    assert!(retry["generationConfig"].get("responseSchema").is_none());
    assert_eq!(
        retry["generationConfig"]["topK"], 64,
        "other settings are kept"
    );
    let prompt = retry["contents"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(
        prompt.starts_with("¿Qué es la auditoría suprema?"),
        "{prompt}"
    );
    assert!(
        prompt.contains("JSON") && prompt.contains("\"required\""),
        "{prompt}"
    );
    assert!(
        retry.get("systemInstruction").is_some(),
        "system instruction still supported"
    );
    // Second call goes straight to the fallback.
    let g2 = c.generate(&req, &CancellationToken::new()).await.unwrap();
    assert_eq!(g2.attempts, 1);
    assert_eq!(fake.hits(), 3);
    assert!(fake.seen()[2].body["generationConfig"]
        .get("responseMimeType")
        .is_none());
}

#[tokio::test]
async fn gemma_developer_instruction_fallback_is_remembered() {
    let fake = Fake::start(vec![
        invalid("Developer instruction is not enabled for models/gemma-4-26b-a4b-it"),
        ok(),
        ok(),
    ])
    .await;
    let c = client(&fake);
    let req = json_request();
    let g = c.generate(&req, &CancellationToken::new()).await.unwrap();
    assert_eq!(g.attempts, 2);
    let retry = &fake.seen()[1].body;
    assert!(retry.get("systemInstruction").is_none());
    let prompt = retry["contents"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(
        prompt.starts_with("Responde en JSON con la clave answer.\n\n¿Qué es"),
        "{prompt}"
    );
    assert_eq!(
        retry["generationConfig"]["responseMimeType"], "application/json",
        "JSON mode kept"
    );
    let g2 = c.generate(&req, &CancellationToken::new()).await.unwrap();
    assert_eq!(g2.attempts, 1);
    assert!(fake.seen()[2].body.get("systemInstruction").is_none());
}

#[tokio::test]
async fn both_gemma_fallbacks_in_a_row() {
    let fake = Fake::start(vec![
        invalid("Developer instruction is not enabled for models/gemma-x"),
        invalid("JSON mode is not enabled for models/gemma-x"),
        ok(),
        // A repeated capability error is not retried a second time.
        invalid("JSON mode is not enabled for models/gemma-x"),
    ])
    .await;
    let c = client(&fake);
    let g = generate(&c).await.unwrap();
    assert_eq!(g.attempts, 3);
    let last = &fake.seen()[2].body;
    assert!(last.get("systemInstruction").is_none());
    assert!(last["generationConfig"].get("responseMimeType").is_none());
    let err = generate(&c).await.unwrap_err();
    assert!(matches!(err, LlmError::Http { status: 400, .. }));
    assert_eq!(fake.hits(), 4);
}
