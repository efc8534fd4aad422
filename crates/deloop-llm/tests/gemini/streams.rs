//! Streamed generations: chunks assembled, refusals, fallbacks, loop cuts,
//! dropped connections and bad events.

use crate::common::{assert_request_dropped, stream_guarded, Fake, Reply};
use crate::fixtures::*;
use deloop_llm::{CancellationToken, FinishReason, LlmClient, LlmError};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub(crate) fn chunk(text: &str, thought: bool, finish: Option<&str>) -> String {
    let mut c = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}]});
    if thought {
        c["candidates"][0]["content"]["parts"][0]["thought"] = json!(true);
    }
    if let Some(f) = finish {
        c["candidates"][0]["finishReason"] = json!(f);
        c["usageMetadata"] = json!({"promptTokenCount": 4, "candidatesTokenCount": 6});
    }
    c.to_string()
}

#[tokio::test]
async fn stream_assembles_sse_chunks_and_skips_thoughts() {
    let fake = Fake::start(vec![Reply::Sse(vec![
        chunk("thinking hard", true, None),
        chunk("{\"answer\": \"Hola", false, None),
        chunk(", mundo\"}", false, Some("STOP")),
    ])])
    .await;
    let c = LlmClient::Gemini(client(&fake));
    let (g, deltas) = stream_guarded(&c, &json_request()).await;
    assert_eq!(g.text, "{\"answer\": \"Hola, mundo\"}");
    assert_eq!(deltas, vec!["{\"answer\": \"Hola", ", mundo\"}"]);
    assert_eq!(g.finish, FinishReason::Stop);
    assert!(g.loop_cut.is_none());
    assert_eq!(g.saved_chars, 0);
    assert_eq!(g.usage.output_tokens, Some(6));
    let seen = fake.seen();
    assert_eq!(
        seen[0].path,
        format!("/v1beta/models/{MODEL}:streamGenerateContent")
    );
    assert_eq!(seen[0].query.as_deref(), Some("alt=sse"));
    assert_key_only_in_header(&fake);
}

#[tokio::test]
async fn stream_max_tokens_and_safety() {
    let fake = Fake::start(vec![
        Reply::Sse(vec![chunk(
            "{\"answer\": \"trunc",
            false,
            Some("MAX_TOKENS"),
        )]),
        Reply::Sse(vec![
            chunk("Some text", false, None),
            chunk("", false, Some("SAFETY")),
        ]),
        Reply::Sse(vec![
            json!({"promptFeedback": {"blockReason": "SAFETY"}}).to_string()
        ]),
    ])
    .await;
    let c = client(&fake);
    let cancel = CancellationToken::new();
    let g = c
        .generate_stream(&json_request(), &cancel, None, |_| {})
        .await
        .unwrap();
    assert!(g.truncated);
    assert_eq!(g.finish, FinishReason::MaxTokens);
    for _ in 0..2 {
        let err = c
            .generate_stream(&json_request(), &cancel, None, |_| {})
            .await
            .unwrap_err();
        assert!(
            matches!(&err, LlmError::Refused { reason } if reason == "SAFETY"),
            "{err:?}"
        );
    }
    assert_eq!(fake.hits(), 3);
}

#[tokio::test]
async fn stream_falls_back_for_gemma_too() {
    let fake = Fake::start(vec![
        invalid("JSON mode is not enabled for models/gemma-4-26b-a4b-it"),
        Reply::Sse(vec![chunk("{\"answer\":\"ok\"}", false, Some("STOP"))]),
    ])
    .await;
    let g = client(&fake)
        .generate_stream(&json_request(), &CancellationToken::new(), None, |_| {})
        .await
        .unwrap();
    assert_eq!(g.text, "{\"answer\":\"ok\"}");
    assert_eq!(g.attempts, 2);
}

#[tokio::test]
async fn looping_stream_is_cut_and_the_request_dropped() {
    let max = 5000;
    let fake = Fake::start(vec![Reply::LoopSse {
        prefix: vec![chunk(
            "{\"answer\": \"La auditoría suprema es la revisión final del proyecto. ",
            false,
            None,
        )],
        repeat: chunk("y la revisión vuelve a empezar otra vez ", false, None),
        max,
    }])
    .await;
    let mut req = json_request();
    req.timeout = Duration::from_secs(60);
    let (g, deltas) = stream_guarded(&LlmClient::Gemini(client(&fake)), &req).await;
    let streamed = deltas.concat();
    assert_eq!(g.finish, FinishReason::LoopCut);
    assert!(g.truncated);
    let report = g.loop_cut.as_ref().expect("the loop guard fired");
    assert!(g.saved_chars > 0, "{g:?}");
    assert!(g
        .text
        .starts_with("{\"answer\": \"La auditoría suprema es la revisión final del proyecto."));
    assert!(
        g.text.matches("vuelve a empezar").count() < 10,
        "{}",
        g.text
    );
    // The cut lies within what was received; the forwarded deltas stop at
    // the delta on which the guard fired.
    let kept = &g.text[..report.keep_bytes.min(g.text.len())];
    assert!(
        streamed.starts_with(kept) || kept.starts_with(&streamed),
        "streamed {streamed:?} vs kept {kept:?}"
    );
    assert!(
        streamed.matches("vuelve a empezar").count() < 50,
        "{streamed}"
    );
    eprintln!(
        "loop cut: kept {} bytes, saved_chars {}, streamed {} bytes",
        report.keep_bytes,
        g.saved_chars,
        streamed.len()
    );
    assert_request_dropped(&fake, max).await;
}

#[tokio::test]
async fn cancelling_mid_stream_drops_the_request() {
    let max = 5000;
    let fake = Fake::start(vec![Reply::LoopSse {
        prefix: vec![],
        repeat: chunk("tick ", false, None),
        max,
    }])
    .await;
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let mut n = 0;
    let err = client(&fake)
        .generate_stream(&json_request(), &cancel, None, |_| {
            n += 1;
            if n == 3 {
                trigger.cancel();
            }
        })
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Cancelled), "{err:?}");
    assert_request_dropped(&fake, max).await;
}

#[tokio::test]
async fn dropped_connections_are_retried_then_reported() {
    // A server that accepts every connection and closes it at once.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                break;
            };
            counter.fetch_add(1, Ordering::SeqCst);
            drop(sock);
        }
    });
    let c = client_at(&format!("http://127.0.0.1:{port}"), 3);
    let err = generate(&c).await.unwrap_err();
    assert!(matches!(err, LlmError::Transport(_)), "{err:?}");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        3,
        "one connection per attempt"
    );
}

#[tokio::test]
async fn an_error_event_mid_stream_is_reported() {
    let fake = Fake::start(vec![Reply::Sse(vec![
        chunk("{\"answer\": \"part", false, None),
        error(503, "UNAVAILABLE", "The model is overloaded.").to_string(),
    ])])
    .await;
    let mut got = String::new();
    let err = client(&fake)
        .generate_stream(&json_request(), &CancellationToken::new(), None, |d| {
            got.push_str(d)
        })
        .await
        .unwrap_err();
    match err {
        LlmError::Http { status, message } => {
            assert_eq!(status, 503);
            assert!(message.contains("overloaded"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(got, "{\"answer\": \"part");
    assert_eq!(
        fake.hits(),
        1,
        "a stream that already produced output is not retried"
    );
}

#[tokio::test]
async fn a_non_json_stream_event_is_a_decode_error() {
    let fake = Fake::start(vec![Reply::Sse(vec!["<html>proxy error</html>".into()])]).await;
    let err = client(&fake)
        .generate_stream(&json_request(), &CancellationToken::new(), None, |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LlmError::Decode(m) if m.contains("proxy error")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_non_json_success_body_is_a_decode_error_without_retry() {
    let fake = Fake::start(vec![
        Reply::Text(200, "<html>captive portal</html>".into()),
        ok(),
    ])
    .await;
    let err = generate(&client(&fake)).await.unwrap_err();
    assert!(
        matches!(&err, LlmError::Decode(m) if m.contains("captive portal")),
        "{err:?}"
    );
    assert_eq!(fake.hits(), 1);
}
