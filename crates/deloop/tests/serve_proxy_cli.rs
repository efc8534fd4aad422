//! The guarding proxy inside `deloop serve` (issue 11): the binary started
//! with an upstream configured, in front of a tiny upstream on 127.0.0.1
//! that records what it receives. deloop's own routes keep precedence and
//! their bearer auth; proxied paths take deloop's key in `x-deloop-key`
//! (stripped before forwarding) and leave `Authorization` to the upstream;
//! the tool-loop check runs there and is counted in the shared metrics.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

mod common;

use common::Server;

fn start(env: &[(&str, &str)]) -> Server {
    common::start(&[], env)
}

/// What the upstream received: (request head, body).
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// An upstream answering every request with a chat completion that asks
/// for `read_file {"path": "/etc/app.toml"}`.
fn upstream() -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { continue };
            let log = log.clone();
            std::thread::spawn(move || {
                let mut raw = Vec::new();
                let mut buf = [0u8; 65536];
                // Read the head, then Content-Length bytes of body.
                let (head, body) = loop {
                    let Ok(n) = s.read(&mut buf) else { return };
                    if n == 0 {
                        return;
                    }
                    raw.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&raw).to_string();
                    let Some((head, body)) = text.split_once("\r\n\r\n") else {
                        continue;
                    };
                    let len = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if body.len() >= len {
                        break (head.to_string(), body.to_string());
                    }
                };
                log.lock().unwrap().push((head, body));
                let reply = json!({"id": "chatcmpl-1", "object": "chat.completion",
                    "created": 1, "model": "m",
                    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                        "role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_new", "type": "function", "function": {
                            "name": "read_file",
                            "arguments": "{\"path\": \"/etc/app.toml\"}"}}]}}]})
                .to_string();
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                    reply.len()
                );
            });
        }
    });
    (url, seen)
}

/// A blocking request; (status, lower-cased head, body).
fn request(method: &str, url: &str, headers: &[(&str, &str)], body: &str) -> (u16, String, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut s = std::net::TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut head = format!(
        "{method} /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head += &format!("{k}: {v}\r\n");
    }
    write!(s, "{head}\r\n{body}").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap();
    let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut s = rest;
        while let Some((size, r)) = s.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            out.push_str(&r[..n]);
            s = &r[n + 2..];
        }
        out
    } else {
        rest.to_string()
    };
    (status, head.to_ascii_lowercase(), body)
}

fn looping_history(n: usize) -> Vec<Value> {
    let mut m = vec![json!({"role": "user", "content": "Find the config."})];
    for i in 0..n {
        m.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("c{i}"), "type": "function",
             "function": {"name": "read_file", "arguments": "{\"path\":\"/etc/app.toml\"}"}}]}));
        m.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": "no such file"}));
    }
    m
}

#[test]
fn serve_mounts_the_proxy_behind_its_own_routes() {
    let (up, seen) = upstream();
    let server = start(&[
        ("DELOOP_PROXY_UPSTREAM", &format!("{up}/v1")),
        ("DELOOP_API_KEYS", "deloop-key-1"),
    ]);
    // deloop's own route: answered by deloop, bearer auth, never forwarded.
    let clamp = json!({"text": "hello"}).to_string();
    let (status, _, _) = request("POST", &format!("{}/v1/clamp", server.url), &[], &clamp);
    assert_eq!(status, 401);
    let (status, _, body) = request(
        "POST",
        &format!("{}/v1/clamp", server.url),
        &[("Authorization", "Bearer deloop-key-1")],
        &clamp,
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        seen.lock().unwrap().is_empty(),
        "deloop's route was forwarded"
    );

    // A proxied path without deloop's key: the proxy's own 401, in
    // OpenAI's error shape, nothing forwarded.
    let chat = json!({"model": "m", "messages": looping_history(1)}).to_string();
    let url = format!("{}/v1/chat/completions", server.url);
    let (status, _, body) = request(
        "POST",
        &url,
        &[("Authorization", "Bearer upstream-key")],
        &chat,
    );
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("x-deloop-key"), "{body}");
    assert!(seen.lock().unwrap().is_empty());

    // With it: forwarded, the client's Authorization kept for the
    // upstream, deloop's key stripped, the body byte for byte.
    let (status, head, body) = request(
        "POST",
        &url,
        &[
            ("Authorization", "Bearer upstream-key"),
            ("x-deloop-key", "deloop-key-1"),
        ],
        &chat,
    );
    assert_eq!(status, 200, "{body}");
    assert!(head.contains("x-deloop-request-id"), "{head}");
    let (up_head, up_body) = seen.lock().unwrap().last().cloned().unwrap();
    let up_head = up_head.to_ascii_lowercase();
    assert!(
        up_head.contains("authorization: bearer upstream-key"),
        "{up_head}"
    );
    assert!(!up_head.contains("x-deloop-key"), "{up_head}");
    assert!(!up_head.contains("deloop-key-1"), "{up_head}");
    assert_eq!(up_body, chat);

    // A looping history: the reply's repeated call is blocked (the
    // default action), and the shared /metrics counts it.
    let chat = json!({"model": "m", "messages": looping_history(25)}).to_string();
    let (status, head, body) = request("POST", &url, &[("x-deloop-key", "deloop-key-1")], &chat);
    assert_eq!(status, 200, "{body}");
    assert!(head.contains("x-deloop-reply-loop: critical"), "{head}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert!(v["choices"][0]["message"].get("tool_calls").is_none());
    let (status, _, metrics) = request(
        "GET",
        &format!("{}/metrics", server.url),
        &[("Authorization", "Bearer deloop-key-1")],
        "",
    );
    assert_eq!(status, 200);
    assert!(
        metrics.contains("deloop_proxy_tool_loops_total{source=\"reply\",level=\"critical\""),
        "{metrics}"
    );
}

#[test]
fn without_an_upstream_serve_proxies_nothing() {
    let server = start(&[]);
    let (status, _, _) = request(
        "POST",
        &format!("{}/v1/chat/completions", server.url),
        &[],
        "{}",
    );
    assert_eq!(status, 404);
}

#[test]
fn a_bad_proxy_key_fails_serve_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_deloop"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(dir.path())
        .env_remove("DELOOP_CONFIG")
        .env("DELOOP_PROXY_UPSTREAM", "http://127.0.0.1:9")
        .env("DELOOP_PROXY_TOOL_LOOPS", "kill")
        .env("DELOOP_EMBEDDER", "none")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("proxy.tool_loops"), "{err}");
}
