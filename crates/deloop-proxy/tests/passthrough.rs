//! Issue 11 §1: a client cannot tell the proxy from the upstream. Real
//! TCP, a fake upstream, the proxy in front of it.

mod common;

use std::io::Write;

use common::*;
use deloop_http::auth::ApiKeys;
use serde_json::{json, Value};

#[tokio::test]
async fn unchanged_reply_and_request_pass_byte_for_byte() {
    let reply = chat_completion(&["A short, healthy answer."]);
    let reply_bytes = serde_json::to_vec_pretty(&reply).unwrap();
    let fake = Fake::start(vec![Reply::Raw {
        status: 200,
        headers: vec![
            ("content-type", "application/json".into()),
            ("x-request-id", "up-42".into()),
            ("x-custom-upstream", "yes".into()),
        ],
        body: reply_bytes.clone(),
    }])
    .await;
    // A trailing /v1 on the upstream is accepted.
    let proxy = start_proxy(&format!("{}/v1/", fake.url)).await;
    // Unknown and server-specific fields, odd spacing: the bytes must arrive as sent.
    let body = br#"{"model":"m",  "messages":[{"role":"user","content":"hi"}], "cache_prompt": true, "x_unknown": {"a": [1,2]}}"#;
    let res = client()
        .post(format!("{}/v1/chat/completions?api-version=1", proxy.url))
        .header("content-type", "application/json")
        .header("authorization", "Bearer client-key")
        .header("x-api-key", "anthropic-style")
        .header("x-request-id", "client-7")
        .header("x-deloop-exact", "1")
        .body(&body[..])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let h = res.headers().clone();
    assert_eq!(h["x-request-id"], "up-42");
    assert_eq!(h["x-custom-upstream"], "yes");
    assert!(h.contains_key("x-deloop-request-id"));
    assert!(!h.contains_key("x-deloop-cuts"));
    assert_eq!(res.bytes().await.unwrap(), reply_bytes);
    let seen = fake.last();
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.path, "/v1/chat/completions");
    assert_eq!(seen.query.as_deref(), Some("api-version=1"));
    assert_eq!(&seen.body[..], &body[..]);
    assert_eq!(seen.headers["authorization"], "Bearer client-key");
    assert_eq!(seen.headers["x-api-key"], "anthropic-style");
    assert_eq!(seen.headers["x-request-id"], "client-7");
    assert_eq!(seen.headers["accept-encoding"], "identity");
    assert!(seen
        .headers
        .keys()
        .all(|k| !k.as_str().starts_with("x-deloop-")));
}

#[tokio::test]
async fn other_paths_and_methods_pass_untouched() {
    let models = json!({"object": "list", "data": [{"id": "m", "object": "model"}]});
    let fake = Fake::start(vec![
        json_reply(200, models.clone()),
        Reply::Raw {
            status: 204,
            headers: vec![],
            body: vec![],
        },
        Reply::Raw {
            status: 201,
            headers: vec![("content-type", "application/octet-stream".into())],
            body: vec![0, 159, 146, 150, 255],
        },
        json_reply(200, json!({"object": "list", "data": []})),
    ])
    .await;
    let proxy = start_proxy(&fake.url).await;
    let c = client();
    let res = c
        .get(format!("{}/v1/models?limit=2&order=desc", proxy.url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<Value>().await.unwrap(), models);
    let s = fake.last();
    assert_eq!((s.method.as_str(), s.path.as_str()), ("GET", "/v1/models"));
    assert_eq!(s.query.as_deref(), Some("limit=2&order=desc"));
    assert!(s.body.is_empty());
    assert!(
        !s.headers.contains_key("transfer-encoding"),
        "no body invented"
    );

    let res = c
        .delete(format!("{}/v1/files/file-1", proxy.url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    assert_eq!(fake.last().method, "DELETE");

    let upload = vec![7u8; 100_000];
    let res = c
        .put(format!("{}/custom/upload", proxy.url))
        .header("accept-encoding", "br")
        .body(upload.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    assert_eq!(
        res.bytes().await.unwrap().to_vec(),
        vec![0, 159, 146, 150, 255]
    );
    let s = fake.last();
    assert_eq!(s.body.to_vec(), upload);
    assert_eq!(
        s.headers["accept-encoding"], "br",
        "pass-through keeps the client's encodings"
    );

    // GET on a guarded path (OpenAI's list of stored completions) passes too.
    let res = c
        .get(format!("{}/v1/chat/completions?limit=1", proxy.url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(fake.last().method, "GET");
}

#[tokio::test]
async fn upstream_errors_pass_through_with_retry_after() {
    let err = json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit"}});
    let fake = Fake::start(vec![
        Reply::Raw {
            status: 429,
            headers: vec![
                ("content-type", "application/json".into()),
                ("retry-after", "7".into()),
                ("x-request-id", "up-429".into()),
            ],
            body: err.to_string().into_bytes(),
        },
        Reply::Raw {
            status: 500,
            headers: vec![("content-type", "text/plain".into())],
            body: b"upstream exploded".to_vec(),
        },
    ])
    .await;
    let proxy = start_proxy(&fake.url).await;
    let c = client();
    let res = c
        .post(format!("{}/v1/chat/completions", proxy.url))
        .body(r#"{"model":"m","messages":[],"stream":true}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 429);
    assert_eq!(res.headers()["retry-after"], "7");
    assert_eq!(res.headers()["x-request-id"], "up-429");
    assert_eq!(res.json::<Value>().await.unwrap(), err);
    let res = c
        .post(format!("{}/v1/messages", proxy.url))
        .body(r#"{"model":"m","messages":[]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 500);
    assert_eq!(res.text().await.unwrap(), "upstream exploded");
}

#[tokio::test]
async fn upstream_down_is_a_502_in_the_apis_shape() {
    // A port that was free a moment ago: nothing listens there.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let proxy = start_proxy(&format!("http://127.0.0.1:{port}")).await;
    let c = client();
    let res = c
        .post(format!("{}/v1/chat/completions", proxy.url))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 502);
    assert!(res.headers().contains_key("x-deloop-request-id"));
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["error"]["code"], "upstream_unreachable");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains(&format!("127.0.0.1:{port}")), "{msg}");
    let res = c
        .post(format!("{}/v1/messages", proxy.url))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 502);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "api_error");
    let res = c
        .get(format!("{}/v1/models", proxy.url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 502);
}

#[tokio::test]
async fn deloops_own_key_is_checked_and_stripped() {
    let fake = Fake::start(vec![json_reply(200, chat_completion(&["ok"]))]).await;
    let proxy = start_proxy_with(
        settings(&fake.url),
        Some("upstream-secret"),
        ApiKeys::parse(Some("deloop-secret"), None),
    )
    .await;
    let c = client();
    let url = format!("{}/v1/chat/completions", proxy.url);
    let res = c.post(&url).body("{}").send().await.unwrap();
    assert_eq!(res.status(), 401);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["error"]["code"], "deloop_key_missing");
    let res = c
        .post(format!("{}/v1/messages", proxy.url))
        .header("x-deloop-key", "wrong")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["error"]["type"], "permission_error");
    // The probe stays open.
    let res = c
        .get(format!("{}/deloop/healthz", proxy.url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let res = c
        .post(&url)
        .header("x-deloop-key", "deloop-secret")
        .header("authorization", "Bearer sdk-placeholder")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let seen = fake.last();
    assert!(!seen.headers.contains_key("x-deloop-key"));
    // The configured upstream key replaces the client's placeholder.
    assert_eq!(seen.headers["authorization"], "Bearer upstream-secret");
    let metrics = c
        .get(format!("{}/deloop/metrics", proxy.url))
        .header("x-deloop-key", "deloop-secret")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("route=\"/v1/chat/completions\""),
        "{metrics}"
    );
    assert!(!metrics.contains("secret"));
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

#[tokio::test]
async fn compressed_upstream_bodies_are_decoded_before_the_guard() {
    let looping = format!("Intro. {}", LOOP_UNIT.repeat(60));
    let reply = chat_completion(&[&looping]);
    let zipped = gzip(reply.to_string().as_bytes());
    let models = gzip(br#"{"data":[]}"#);
    let fake = Fake::start(vec![
        // Compressed although the proxy asked for identity.
        Reply::Raw {
            status: 200,
            headers: vec![
                ("content-type", "application/json".into()),
                ("content-encoding", "gzip".into()),
            ],
            body: zipped,
        },
        // A pass-through path: the compressed bytes go to the client as they are.
        Reply::Raw {
            status: 200,
            headers: vec![
                ("content-type", "application/json".into()),
                ("content-encoding", "gzip".into()),
            ],
            body: models.clone(),
        },
        Reply::Raw {
            status: 200,
            headers: vec![
                ("content-type", "application/json".into()),
                ("content-encoding", "br".into()),
            ],
            body: b"\x0b\x02\x80{}\x03".to_vec(),
        },
    ])
    .await;
    let proxy = start_proxy(&fake.url).await;
    let c = client();
    let res = c
        .post(format!("{}/v1/chat/completions", proxy.url))
        .body(r#"{"model":"m","messages":[]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(!res.headers().contains_key("content-encoding"));
    assert_eq!(res.headers()["x-deloop-cuts"], "1");
    let v: Value = res.json().await.unwrap();
    let content = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(content.len() < looping.len() / 2, "{content}");
    let res = c
        .get(format!("{}/v1/models", proxy.url))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["content-encoding"], "gzip");
    assert_eq!(res.bytes().await.unwrap().to_vec(), models);
    // An encoding the proxy cannot read is a clear error, not an unguarded pass.
    let res = c
        .post(format!("{}/v1/chat/completions", proxy.url))
        .body(r#"{"model":"m","messages":[]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 502);
    let v: Value = res.json().await.unwrap();
    assert!(
        v["error"]["message"].as_str().unwrap().contains("br"),
        "{v}"
    );
}

#[tokio::test]
async fn responses_api_passes_unguarded() {
    let looping: Vec<String> = std::iter::once(format!(
        "event: response.created\ndata: {}\n\n",
        json!({"type": "response.created"})
    ))
    .chain((0..60).map(|_| {
        format!(
            "event: response.output_text.delta\ndata: {}\n\n",
            json!({"type": "response.output_text.delta", "delta": LOOP_UNIT})
        )
    }))
    .collect();
    let fake = Fake::start(vec![sse_reply(&looping)]).await;
    let proxy = start_proxy(&fake.url).await;
    let body = client()
        .post(format!("{}/v1/responses", proxy.url))
        .body(r#"{"model":"m","input":"hi","stream":true}"#)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(body, looping.concat());
}

#[tokio::test]
async fn oversized_requests_get_413_in_the_apis_shape() {
    let fake = Fake::start(vec![]).await;
    let mut s = settings(&fake.url);
    s.max_body_bytes = 1000;
    let proxy = start_proxy_with(s, None, ApiKeys::default()).await;
    let c = client();
    let res = c
        .post(format!("{}/v1/messages", proxy.url))
        .body(vec![b' '; 5000])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["error"]["type"], "request_too_large");
    let res = c
        .post(format!("{}/v1/embeddings", proxy.url))
        .body(vec![b' '; 5000])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);
    assert!(fake.seen().is_empty());
}
