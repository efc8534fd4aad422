//! Hostile clients against a real proxy on 127.0.0.1: made-up methods,
//! paths that try to leave the upstream's base path, `CONNECT` and
//! `OPTIONS *`. Raw sockets, since an HTTP client library would refuse
//! (or normalise) most of these requests before they leave.

mod common;

use std::net::SocketAddr;

use common::*;
use deloop_http::auth::ApiKeys;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn addr(proxy: &Proxy) -> SocketAddr {
    proxy.url.trim_start_matches("http://").parse().unwrap()
}

/// Sends `head` (a request head without its final blank line, which is
/// added with `connection: close`) and reads the whole answer.
async fn raw(addr: SocketAddr, head: &str) -> String {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("{head}\r\nhost: x\r\nconnection: close\r\n\r\n");
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tcp.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn status(answer: &str) -> u16 {
    answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {answer:?}"))
}

/// Made-up methods without a key leave no trace in the metrics, and with
/// a key they all share the label `other`: the exposition stays small.
#[tokio::test]
async fn made_up_methods_cannot_grow_the_metrics() {
    let fake = Fake::start(vec![]).await;
    fake.always(json_reply(200, json!({"ok": true})));
    let proxy = start_proxy_with(
        settings(&fake.url),
        None,
        ApiKeys::parse(Some("deloop-key"), None),
    )
    .await;
    let a = addr(&proxy);
    for i in 0..200 {
        let answer = raw(a, &format!("M{i}X /v1/models HTTP/1.1")).await;
        assert_eq!(status(&answer), 401, "{answer}");
        let answer = raw(
            a,
            &format!("K{i}Y /v1/models HTTP/1.1\r\nx-deloop-key: deloop-key"),
        )
        .await;
        assert_eq!(status(&answer), 200, "{answer}");
    }
    let text = proxy.state.metrics().render();
    assert!(
        !text.contains("M1X"),
        "an unauthenticated method is a label"
    );
    assert!(!text.contains("K1Y"), "a made-up method is a label");
    assert!(
        text.contains(r#"route="proxied",method="other",status="200"} 200"#),
        "{text}"
    );
    assert!(text.len() < 16 * 1024, "{} bytes of metrics", text.len());
}

/// A configured base path is a boundary: `..`, its percent-encoded forms,
/// encoded slashes and backslashes are refused with 400, and the upstream
/// sees none of them.
#[tokio::test]
async fn paths_cannot_leave_the_upstream_base_path() {
    let fake = Fake::start(vec![]).await;
    fake.always(json_reply(200, json!({"ok": true})));
    let proxy = start_proxy(&format!("{}/tenant-a", fake.url)).await;
    let a = addr(&proxy);
    for path in [
        "/../admin",
        "/v1/../../admin",
        "/v1/%2e%2e/%2E%2E/admin",
        "/v1/.%2e/admin",
        "/v1/%2e./tenant-b/x",
        "/v1/..%2f..%2fadmin",
        "/v1%2F..%2F..%2Fadmin",
        "/v1/..%5cadmin",
        "/v1/..\\admin",
        "/v1/./models",
        "/v1/%2e/models",
        "/v1/models/%00",
    ] {
        let answer = raw(a, &format!("GET {path} HTTP/1.1")).await;
        assert_eq!(status(&answer), 400, "{path}: {answer}");
        assert!(answer.contains("path"), "{path}: {answer}");
    }
    assert!(fake.seen().is_empty(), "{:?}", fake.seen());
    // Ordinary paths (dots inside names, encoded spaces) still pass.
    for path in [
        "/v1/models/llama-3.1.gguf",
        "/v1/files/a%20b",
        "/v1/models?x=../y",
    ] {
        let answer = raw(a, &format!("GET {path} HTTP/1.1")).await;
        assert_eq!(status(&answer), 200, "{path}: {answer}");
    }
    let seen: Vec<String> = fake.seen().iter().map(|s| s.path.clone()).collect();
    assert_eq!(
        seen,
        [
            "/tenant-a/v1/models/llama-3.1.gguf",
            "/tenant-a/v1/files/a%20b",
            "/tenant-a/v1/models"
        ]
    );
}

/// `CONNECT` is not forwarded (405) and `OPTIONS *` is answered 400, not
/// a 502 from an upstream that never saw it.
#[tokio::test]
async fn connect_and_options_star_are_refused() {
    let fake = Fake::start(vec![]).await;
    fake.always(json_reply(200, json!({"ok": true})));
    let proxy = start_proxy(&fake.url).await;
    let a = addr(&proxy);
    let answer = raw(a, "CONNECT example.com:443 HTTP/1.1").await;
    assert_eq!(status(&answer), 405, "{answer}");
    assert!(answer.contains("CONNECT"), "{answer}");
    let answer = raw(a, "OPTIONS * HTTP/1.1").await;
    assert_eq!(status(&answer), 400, "{answer}");
    assert!(answer.contains("OPTIONS *"), "{answer}");
    assert!(fake.seen().is_empty(), "{:?}", fake.seen());
    // An ordinary OPTIONS still passes through.
    let answer = raw(a, "OPTIONS /v1/models HTTP/1.1").await;
    assert_eq!(status(&answer), 200, "{answer}");
}

/// Slowloris: sockets that never finish their request head, or never send
/// a byte, are closed by the proxy with its default settings (a header
/// deadline), instead of being held open for ever. The deadline given
/// here is only a generous bound for the test itself.
#[tokio::test]
async fn half_open_sockets_are_closed() {
    let fake = Fake::start(vec![]).await;
    let proxy = start_proxy(&fake.url).await;
    let a = addr(&proxy);
    let mut sockets = Vec::new();
    for i in 0..40 {
        let mut tcp = tokio::net::TcpStream::connect(a).await.unwrap();
        if i % 2 == 0 {
            tcp.write_all(b"GET /v1/models HTTP/1.1\r\nhost: x\r\nx-slow: ")
                .await
                .unwrap();
        }
        sockets.push(tcp);
    }
    for (i, mut tcp) in sockets.into_iter().enumerate() {
        let mut buf = [0u8; 256];
        let closed = tokio::time::timeout(std::time::Duration::from_secs(120), async {
            loop {
                match tcp.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => continue,
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "socket {i} is still open");
    }
    assert!(fake.seen().is_empty());
}

/// At `proxy.connections.max_connections`, half-open sockets cannot lock
/// out the health probe: the oldest is closed to make room.
#[tokio::test]
async fn at_the_connection_cap_healthz_stays_reachable() {
    let fake = Fake::start(vec![]).await;
    let mut s = settings(&fake.url);
    s.connections.max_connections = 16;
    s.connections.header_read_timeout_secs = 300;
    let proxy = start_proxy_with(s, None, ApiKeys::default()).await;
    let a = addr(&proxy);
    let mut half = Vec::new();
    for _ in 0..40 {
        let mut tcp = tokio::net::TcpStream::connect(a).await.unwrap();
        tcp.write_all(b"GET /v1/models HTTP/1.1\r\nhost: x\r\n")
            .await
            .unwrap();
        half.push(tcp);
    }
    for _ in 0..5 {
        let answer = raw(a, "GET /deloop/healthz HTTP/1.1").await;
        assert_eq!(status(&answer), 200, "{answer}");
    }
    assert!(fake.seen().is_empty());
}

/// A body that trickles in loses its concurrency permit at the body
/// deadline (408), and the next client is served instead of shed.
#[tokio::test]
async fn a_trickling_body_is_cut_at_the_body_deadline() {
    let fake = Fake::start(vec![]).await;
    fake.always(json_reply(200, json!({"ok": true})));
    let mut s = settings(&fake.url);
    s.concurrency_limit = 1;
    s.connections.body_read_timeout_secs = 1;
    let proxy = start_proxy_with(s, None, ApiKeys::default()).await;
    let a = addr(&proxy);
    for path in ["/v1/chat/completions", "/v1/embeddings"] {
        let mut slow = tokio::net::TcpStream::connect(a).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
             content-length: 100000\r\n\r\n{{\"model\": \"m\", "
        );
        slow.write_all(head.as_bytes()).await.unwrap();
        // The slow body holds the only permit until its deadline, then
        // gets 408; no more of it is ever sent.
        let mut answer = Vec::new();
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(60),
            slow.read_to_end(&mut answer),
        )
        .await;
        assert!(read.is_ok(), "{path}: the slow body was never cut");
        let answer = String::from_utf8_lossy(&answer);
        assert_eq!(status(&answer), 408, "{path}: {answer}");
        assert!(
            answer.contains("body_read_timeout_secs"),
            "{path}: {answer}"
        );
        // The permit is free again.
        let answer = raw(a, "GET /v1/models HTTP/1.1").await;
        assert_eq!(status(&answer), 200, "{answer}");
    }
}

/// A chat request over `proxy.max_history_bytes` is refused with a clear
/// 413 naming the setting, before anything is parsed or sent upstream.
#[tokio::test]
async fn a_history_over_its_byte_cap_is_refused() {
    let fake = Fake::start(vec![]).await;
    fake.always(json_reply(200, json!({"ok": true})));
    let mut s = settings(&fake.url);
    s.max_history_bytes = 64 << 10;
    let proxy = start_proxy_with(s, None, ApiKeys::default()).await;
    let big = "x".repeat(100 << 10);
    let res = client()
        .post(format!("{}/v1/chat/completions", proxy.url))
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": big}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);
    let text = res.text().await.unwrap();
    assert!(text.contains("proxy.max_history_bytes"), "{text}");
    assert!(text.contains("history_too_large"), "{text}");
    assert!(fake.seen().is_empty());
}
