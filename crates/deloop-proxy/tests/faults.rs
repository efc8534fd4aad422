//! Issue 11, faults: the upstream drops mid-stream, the client leaves, the
//! upstream is slow or stalls, the upstream sends malformed SSE, and 100
//! streams at once keep memory bounded.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use deloop_http::auth::ApiKeys;
use futures_util::StreamExt;
use serde_json::{json, Value};

fn chat_req() -> Value {
    json!({"model": MODEL, "messages": [], "stream": true})
}

async fn post_text(url: &str, body: Value) -> (u16, String) {
    let res = client().post(url).json(&body).send().await.unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

fn last_error(body: &str) -> Value {
    events(body)
        .into_iter()
        .rev()
        .filter_map(|(_, d)| serde_json::from_str::<Value>(&d).ok())
        .find(|v| v.get("error").is_some())
        .unwrap_or_else(|| panic!("no error event in {body}"))
}

#[tokio::test]
async fn a_drop_mid_stream_ends_well_formed_with_an_error() {
    let head = [chat_role(0), chat_text(0, "Hello, "), chat_text(0, "world")];
    let a_head = [
        message_start(),
        block_start(0, "text"),
        text_delta(0, "Hello"),
    ];
    let fake = Fake::start(vec![
        Reply::Pieces {
            pieces: head.iter().map(|s| s.clone().into_bytes()).collect(),
            gap: Duration::from_millis(2),
            then: Then::Drop,
        },
        Reply::Pieces {
            pieces: a_head.iter().map(|s| s.clone().into_bytes()).collect(),
            gap: Duration::from_millis(2),
            then: Then::Drop,
        },
    ])
    .await;
    let proxy = start_proxy(&fake.url).await;
    let (status, body) = post_text(&format!("{}/v1/chat/completions", proxy.url), chat_req()).await;
    assert_eq!(status, 200);
    assert!(
        body.starts_with(&head.concat()),
        "what came is forwarded as it came"
    );
    let err = last_error(&body);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("mid-stream"),
        "{err}"
    );
    assert!(body.ends_with("data: [DONE]\n\n"));

    let (_, body) = post_text(
        &format!("{}/v1/messages", proxy.url),
        json!({"model": MODEL, "max_tokens": 10, "messages": [], "stream": true}),
    )
    .await;
    let ev = events(&body);
    let (name, data) = ev.last().unwrap();
    assert_eq!(name.as_deref(), Some("error"));
    let v: Value = serde_json::from_str(data).unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "api_error");
}

#[tokio::test]
async fn a_stream_closed_early_without_error_is_reported() {
    // The upstream closes cleanly, but before any choice finished.
    let fake = Fake::start(vec![sse_reply(&[chat_role(0), chat_text(0, "Hel")])]).await;
    let proxy = start_proxy(&fake.url).await;
    let (_, body) = post_text(&format!("{}/v1/chat/completions", proxy.url), chat_req()).await;
    let err = last_error(&body);
    assert_eq!(err["error"]["code"], "upstream_stream_truncated");
}

#[tokio::test]
async fn the_client_leaving_cancels_the_upstream() {
    let healthy = healthy_text();
    // A long healthy stream: the guard never cuts it, so only the client
    // leaving can stop it.
    let fake = Fake::start(vec![Reply::Loop {
        prefix: vec![chat_role(0)],
        repeat: pieces(&healthy, 13)
            .iter()
            .map(|p| chat_text(0, p))
            .collect(),
        max: 100_000,
        suffix: vec![],
        gap: Duration::from_millis(2),
    }])
    .await;
    let proxy = start_proxy(&fake.url).await;
    let res = client()
        .post(format!("{}/v1/chat/completions", proxy.url))
        .json(&chat_req())
        .send()
        .await
        .unwrap();
    let mut stream = res.bytes_stream();
    let mut got = 0;
    while got < 2000 {
        got += stream.next().await.unwrap().unwrap().len();
    }
    drop(stream);
    let probe = fake.probe();
    assert!(
        eventually(|| probe.dropped_early.load(Ordering::SeqCst) == 1).await,
        "the upstream never saw the proxy go away"
    );
    let sent = probe.sent.load(Ordering::SeqCst);
    assert!(sent < 100_000, "{sent}");
}

#[tokio::test]
async fn a_slow_upstream_hits_the_timeouts() {
    let fake = Fake::start(vec![
        // No response head in time.
        Reply::Slow(
            Duration::from_secs(30),
            Box::new(json_reply(200, json!({}))),
        ),
        // A head, some events, then silence.
        Reply::Pieces {
            pieces: vec![chat_role(0).into_bytes(), chat_text(0, "Hi").into_bytes()],
            gap: Duration::ZERO,
            then: Then::Stall,
        },
        Reply::Slow(
            Duration::from_secs(30),
            Box::new(json_reply(200, json!({}))),
        ),
    ])
    .await;
    let mut s = settings(&fake.url);
    s.idle_timeout_secs = 1;
    let proxy = start_proxy_with(s, None, ApiKeys::default()).await;
    let url = format!("{}/v1/chat/completions", proxy.url);
    let res = client().post(&url).json(&chat_req()).send().await.unwrap();
    assert_eq!(res.status(), 504);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["error"]["code"], "upstream_timeout");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("idle_timeout_secs"));
    let (status, body) = post_text(&url, chat_req()).await;
    assert_eq!(status, 200);
    let err = last_error(&body);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sent nothing for 1 s"),
        "{err}"
    );
    assert!(body.ends_with("data: [DONE]\n\n"));
    // Pass-through paths time out too.
    let res = client()
        .get(format!("{}/v1/models", proxy.url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 504);
}

#[tokio::test]
async fn malformed_sse_is_a_clear_error_not_a_panic() {
    let huge = format!("data: {{\"x\": \"{}\"}}\n\n", "a".repeat(3 << 20));
    let fake = Fake::start(vec![
        sse_reply(&[chat_role(0), "data: {not json\n\n".into()]),
        sse_reply(&[chat_role(0), huge]),
        sse_reply(&[
            message_start(),
            "event: content_block_delta\ndata: [1, 2]\n\n".into(),
        ]),
        Reply::Pieces {
            pieces: vec![b"data: \xff\xfe{\n\n".to_vec()],
            gap: Duration::ZERO,
            then: Then::End,
        },
    ])
    .await;
    let proxy = start_proxy(&fake.url).await;
    let url = format!("{}/v1/chat/completions", proxy.url);
    let (_, body) = post_text(&url, chat_req()).await;
    let err = last_error(&body);
    assert_eq!(err["error"]["code"], "upstream_malformed_stream");
    assert!(err["error"]["message"]
        .as_str()
        .unwrap()
        .contains("{not json"));
    let (_, body) = post_text(&url, chat_req()).await;
    let err = last_error(&body);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_event_bytes"),
        "{err}"
    );
    let (_, body) = post_text(
        &format!("{}/v1/messages", proxy.url),
        json!({"model": MODEL, "max_tokens": 10, "messages": [], "stream": true}),
    )
    .await;
    let ev = events(&body);
    assert_eq!(ev.last().unwrap().0.as_deref(), Some("error"));
    let (_, body) = post_text(&url, chat_req()).await;
    assert!(last_error(&body)["error"]["message"].is_string());
}

/// Resident set size of this process, in bytes (Linux).
fn rss() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_streams_at_once_keep_memory_bounded() {
    // Each stream loops forever (until cut) or is healthy and long; the
    // proxy holds a bounded window per stream, not the stream.
    let fake = Fake::start(vec![]).await;
    fake.always(Reply::Loop {
        prefix: vec![chat_role(0), chat_text(0, "Intro sentence. ")],
        repeat: vec![chat_text(0, LOOP_UNIT)],
        max: 1_000_000,
        suffix: vec![],
        gap: Duration::from_micros(200),
    });
    let proxy = start_proxy(&fake.url).await;
    let url = format!("{}/v1/chat/completions", proxy.url);
    let c = client();
    let round = || {
        let c = c.clone();
        let url = url.clone();
        async move {
            let tasks: Vec<_> = (0..100)
                .map(|_| {
                    let c = c.clone();
                    let url = url.clone();
                    tokio::spawn(async move {
                        let res = c.post(&url).json(&chat_req()).send().await.unwrap();
                        assert_eq!(res.status(), 200);
                        res.text().await.unwrap()
                    })
                })
                .collect();
            for t in tasks {
                let body = t.await.unwrap();
                assert!(body.ends_with("data: [DONE]\n\n"));
                assert!(body.contains("\"deloop\":{"));
            }
        }
    };
    let before = rss();
    round().await;
    let after_one = rss();
    round().await;
    let after_two = rss();
    let probe = fake.probe();
    assert!(eventually(|| probe.dropped_early.load(Ordering::SeqCst) == 200).await);
    assert_eq!(probe.completed.load(Ordering::SeqCst), 0);
    if let (Some(b), Some(a1), Some(a2)) = (before, after_one, after_two) {
        eprintln!(
            "rss: before {} MB, after 100 streams {} MB, after 200 {} MB",
            b >> 20,
            a1 >> 20,
            a2 >> 20
        );
        // The test process holds the fake, the proxy and the clients.
        assert!(
            a1.saturating_sub(b) < 256 << 20,
            "100 streams took {} MB",
            (a1 - b) >> 20
        );
        assert!(
            a2.saturating_sub(a1) < 64 << 20,
            "a second round grew memory by {} MB",
            (a2 - a1) >> 20
        );
    }
}
