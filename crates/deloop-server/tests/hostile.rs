//! Hostile clients against a real `deloop serve` on 127.0.0.1: made-up
//! methods on `/mcp`, bad asks in SSE mode. Raw sockets where an HTTP
//! client library would refuse to send the request.

mod common;

use std::net::SocketAddr;

use common::{client, start, state_with, TestServer};
use deloop_config::Config;
use deloop_core::loops::Profile;
use deloop_oracle::Oracle;
use deloop_server::auth::ApiKeys;
use deloop_server::ServerSettings;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn addr(server: &TestServer) -> SocketAddr {
    server.url.trim_start_matches("http://").parse().unwrap()
}

/// Sends `head` (without its final blank line, added after
/// `connection: close`) and reads the whole answer.
async fn raw(addr: SocketAddr, head: &str) -> String {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("{head}\r\nhost: localhost\r\nconnection: close\r\n\r\n");
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tcp.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// With a key, made-up methods on `/mcp` all share the method label
/// `other`: the metrics exposition does not grow with them.
#[tokio::test]
async fn made_up_methods_on_mcp_cannot_grow_the_metrics() {
    let state = state_with(
        ServerSettings::default(),
        Profile::Default,
        ApiKeys::parse(Some("k1"), None),
    );
    let server = start(state).await;
    let a = addr(&server);
    for i in 0..200 {
        let answer = raw(
            a,
            &format!("Q{i}Z /mcp HTTP/1.1\r\nauthorization: Bearer k1"),
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 "), "{answer}");
    }
    let text = server.state.metrics().render();
    assert!(!text.contains("Q1Z"), "a made-up method is a label");
    assert!(text.contains(r#"route="/mcp",method="other""#), "{text}");
    assert!(text.len() < 16 * 1024, "{} bytes of metrics", text.len());
}

/// A bad `k` or an empty question in SSE mode is a 400 problem answer
/// before any stream starts, as in JSON mode, never a 200 followed by an
/// `error` event.
#[tokio::test]
async fn bad_asks_in_sse_mode_are_400_before_the_stream() {
    let lib = common::library(&[("loops.md", "# Loops\n\nCut the stream when it loops.\n")]);
    let state = state_with(
        ServerSettings::default(),
        Profile::Default,
        ApiKeys::default(),
    )
    .serving_oracle();
    assert!(state.set_oracle(Oracle::open(&Config::default(), Some(&lib.db)).unwrap()));
    let server = start(state).await;
    let url = format!("{}/api/oracle", server.url);
    for (body, want) in [
        (json!({"question": "How?", "k": 0, "stream": true}), "k"),
        (json!({"question": "How?", "k": 10_000}), "k"),
        (json!({"question": "   ", "stream": true}), "empty"),
    ] {
        let res = client()
            .post(&url)
            .header("accept", "text/event-stream")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 400, "{body}");
        assert_eq!(
            res.headers()["content-type"],
            "application/problem+json",
            "{body}"
        );
        let problem: Value = res.json().await.unwrap();
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains(want), "{body}: {detail}");
    }
}

/// A body that trickles in loses its concurrency permit at the body
/// deadline (408 naming the setting), and the next client is served
/// instead of shed.
#[tokio::test]
async fn a_trickling_body_is_cut_at_the_body_deadline() {
    let mut settings = ServerSettings {
        concurrency_limit: 1,
        ..ServerSettings::default()
    };
    settings.connections.body_read_timeout_secs = 1;
    let server = start(state_with(settings, Profile::Default, ApiKeys::default())).await;
    let a = addr(&server);
    let mut slow = tokio::net::TcpStream::connect(a).await.unwrap();
    slow.write_all(
        b"POST /v1/clamp HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
          content-length: 100000\r\n\r\n{\"text\": \"",
    )
    .await
    .unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        slow.read_to_end(&mut answer),
    )
    .await;
    assert!(read.is_ok(), "the slow body was never cut");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body_read_timeout_secs"), "{answer}");
    let res = client()
        .post(format!("{}/v1/clamp", server.url))
        .json(&json!({"text": "fine"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}

/// Half-open sockets are closed at the header deadline, and at the
/// connection cap `/healthz` stays reachable without a key.
#[tokio::test]
async fn half_open_sockets_cannot_lock_out_healthz() {
    let mut settings = ServerSettings::default();
    settings.connections.header_read_timeout_secs = 1;
    settings.connections.max_connections = 16;
    let server = start(state_with(
        settings,
        Profile::Default,
        ApiKeys::parse(Some("k1"), None),
    ))
    .await;
    let a = addr(&server);
    let mut half = Vec::new();
    for _ in 0..40 {
        let mut tcp = tokio::net::TcpStream::connect(a).await.unwrap();
        tcp.write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n")
            .await
            .unwrap();
        half.push(tcp);
    }
    let answer = raw(a, "GET /healthz HTTP/1.1").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    for (i, tcp) in half.iter_mut().enumerate() {
        let mut buf = [0u8; 256];
        let closed = tokio::time::timeout(std::time::Duration::from_secs(60), async {
            loop {
                match tcp.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => continue,
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "half-open socket {i} is still open");
    }
}
