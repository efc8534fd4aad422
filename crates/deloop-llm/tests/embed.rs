//! The remote embedding clients against fake servers.

mod common;

use common::{fast_retry, Fake, Reply};
use deloop_llm::{ApiKey, EmbeddingClient, LlmConfig, LlmError};
use serde_json::json;

const KEY: &str = "AIza-embed-FAKE";

fn texts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("text {i}")).collect()
}

#[tokio::test]
async fn gemini_single_text_uses_embed_content() {
    let fake = Fake::start(vec![Reply::Json(
        200,
        json!({"embedding": {"values": [0.1, -0.2, 0.3]}}),
    )])
    .await;
    let c = EmbeddingClient::gemini(
        ApiKey::new(KEY),
        "gemini-embedding-001",
        Some(&format!("{}/v1beta", fake.url)),
    )
    .unwrap();
    let v = c.embed(&texts(1)).await.unwrap();
    assert_eq!(v, vec![vec![0.1f32, -0.2, 0.3]]);
    let s = &fake.seen()[0];
    assert_eq!(s.path, "/v1beta/models/gemini-embedding-001:embedContent");
    assert_eq!(s.body["content"]["parts"][0]["text"], "text 0");
    assert_eq!(s.headers.get("x-goog-api-key").unwrap(), KEY);
    assert!(s.query.is_none());
    assert_eq!(c.id(), "gemini:gemini-embedding-001");
}

#[tokio::test]
async fn gemini_batches_use_batch_embed_contents() {
    let reply = |n: usize| {
        Reply::Json(
            200,
            json!({"embeddings": (0..n).map(|i| json!({"values": [i as f32, 1.0]})).collect::<Vec<_>>()}),
        )
    };
    let fake = Fake::start(vec![
        reply(2),
        reply(2),
        Reply::Json(200, json!({"embedding": {"values": [9.0, 9.0]}})),
    ])
    .await;
    let c = EmbeddingClient::gemini(
        ApiKey::new(KEY),
        "models/text-embedding-004",
        Some(&format!("{}/v1beta", fake.url)),
    )
    .unwrap()
    .batch_size(2);
    let v = c.embed(&texts(5)).await.unwrap();
    assert_eq!(v.len(), 5);
    assert_eq!(v[4], vec![9.0, 9.0]);
    let seen = fake.seen();
    assert_eq!(seen.len(), 3);
    assert_eq!(
        seen[0].path,
        "/v1beta/models/text-embedding-004:batchEmbedContents"
    );
    let reqs = seen[1].body["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0]["model"], "models/text-embedding-004");
    assert_eq!(reqs[1]["content"]["parts"][0]["text"], "text 3");
    assert_eq!(
        seen[2].path,
        "/v1beta/models/text-embedding-004:embedContent"
    );
}

#[tokio::test]
async fn openai_embeddings_are_ordered_by_index() {
    let fake = Fake::start(vec![Reply::Json(
        200,
        json!({"object": "list", "model": "nomic-embed-text",
        "data": [
            {"object": "embedding", "index": 2, "embedding": [2.0]},
            {"object": "embedding", "index": 0, "embedding": [0.0]},
            {"object": "embedding", "index": 1, "embedding": [1.0]}
        ],
        "usage": {"prompt_tokens": 6, "total_tokens": 6}}),
    )])
    .await;
    let c = EmbeddingClient::openai(
        &format!("{}/v1", fake.url),
        Some(ApiKey::new("sk-x")),
        "nomic-embed-text",
    )
    .unwrap();
    let v = c.embed(&texts(3)).await.unwrap();
    assert_eq!(v, vec![vec![0.0], vec![1.0], vec![2.0]]);
    let s = &fake.seen()[0];
    assert_eq!(s.path, "/v1/embeddings");
    assert_eq!(
        s.body,
        json!({"model": "nomic-embed-text", "input": ["text 0", "text 1", "text 2"]})
    );
    assert_eq!(s.headers.get("authorization").unwrap(), "Bearer sk-x");
}

#[tokio::test]
async fn wrong_counts_and_bad_values_are_decode_errors() {
    let fake = Fake::start(vec![
        Reply::Json(200, json!({"data": [{"index": 0, "embedding": [1.0]}]})),
        Reply::Json(
            200,
            json!({"data": [{"index": 0, "embedding": ["x"]}, {"index": 1, "embedding": [1.0]}]}),
        ),
        Reply::Json(
            200,
            json!({"data": [{"index": 5, "embedding": [1.0]}, {"index": 1, "embedding": [1.0]}]}),
        ),
        Reply::Text(200, "not json".into()),
    ])
    .await;
    let c = EmbeddingClient::openai(&format!("{}/v1", fake.url), None, "m").unwrap();
    for _ in 0..4 {
        let err = c.embed(&texts(2)).await.unwrap_err();
        assert!(matches!(err, LlmError::Decode(_)), "{err:?}");
    }
}

#[tokio::test]
async fn embeddings_retry_like_generation() {
    let fake = Fake::start(vec![
        Reply::Json(
            503,
            json!({"error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}}),
        ),
        Reply::Json(200, json!({"embedding": {"values": [1.0]}})),
        Reply::Json(
            403,
            json!({"error": {"code": 403, "message": "denied", "status": "PERMISSION_DENIED"}}),
        ),
        Reply::Json(200, json!({"embedding": {"values": [1.0]}})),
    ])
    .await;
    let c = EmbeddingClient::gemini(
        ApiKey::new(KEY),
        "gemini-embedding-001",
        Some(&format!("{}/v1beta", fake.url)),
    )
    .unwrap()
    .retry_policy(fast_retry(3));
    assert_eq!(c.embed(&texts(1)).await.unwrap(), vec![vec![1.0]]);
    assert_eq!(fake.hits(), 2);
    let err = c.embed(&texts(1)).await.unwrap_err();
    assert!(matches!(err, LlmError::Http { status: 403, .. }));
    assert_eq!(fake.hits(), 3);
}

#[tokio::test]
async fn empty_input_makes_no_request_and_config_selects_provider() {
    let fake = Fake::start(vec![]).await;
    let env = std::collections::HashMap::from([
        ("GEMINI_API_KEY".to_string(), KEY.to_string()),
        (
            "GEMINI_BASE_URL".to_string(),
            format!("{}/v1beta", fake.url),
        ),
    ]);
    let c = EmbeddingClient::from_config(&LlmConfig::from_env_map(&env).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(c.id(), "gemini:gemini-embedding-001");
    assert!(c.embed(&[]).await.unwrap().is_empty());
    assert_eq!(fake.hits(), 0);
    assert!(EmbeddingClient::from_config(&LlmConfig::default())
        .unwrap()
        .is_none());
}
