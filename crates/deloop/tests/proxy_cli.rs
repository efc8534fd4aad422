//! `deloop proxy` end to end: the binary started by the test in front of a
//! tiny upstream on 127.0.0.1 that streams a loop; startup failures and
//! their exit codes; graceful shutdown on SIGTERM; and the binary in front
//! of a real llama-server serving SmolLM2-135M (skipped with one line when
//! llama-server or the model is missing, a failure with `CI=true`).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

struct Proxy {
    child: Child,
    url: String,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(upstream: &str, env: &[(&str, &str)]) -> Proxy {
    let tmp = std::env::temp_dir();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_deloop"));
    cmd.args(["proxy", "--upstream", upstream, "--listen", "127.0.0.1:0"])
        .current_dir(&tmp)
        .env_remove("DELOOP_CONFIG")
        .env_remove("DELOOP_API_KEYS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn deloop proxy");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("deloop proxy exited before listening")
            .unwrap();
        if let Some(rest) = line.strip_prefix("deloop: proxying ") {
            break rest.split(" -> ").next().unwrap().trim().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    Proxy { child, url }
}

/// Chunks of the loop the upstream sends before it holds the connection
/// open: the guard cuts well before.
const HELD_CHUNKS: usize = 300;

/// An upstream answering every request with a looping chat stream of
/// [`HELD_CHUNKS`] chunks, then holding the connection open without an end
/// until its client closes it. Returns its URL and a counter of the
/// connections it saw closed by the client before the stream's end.
fn looping_upstream() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let closed = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = closed.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { continue };
            let counter = counter.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                let _ = s.read(&mut buf);
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
                let mut body = String::from(head);
                for i in 0..HELD_CHUNKS {
                    let text = if i == 0 {
                        "Intro sentence. "
                    } else {
                        "and the same words come back again "
                    };
                    let chunk = serde_json::json!({
                        "id": "c1", "object": "chat.completion.chunk", "created": 1,
                        "model": "m",
                        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}],
                    });
                    body.push_str(&format!("data: {chunk}\n\n"));
                }
                // A write error is the client closing early too.
                let _ = s.write_all(body.as_bytes());
                // Held open: the stream has no end, so the next read
                // returns only when the client closes the connection.
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => continue,
                    }
                }
                counter.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    (url, closed)
}

fn post(url: &str, body: &str) -> String {
    post_with(url, "", body)
}

/// [`post`] with extra header lines (each ending in `\r\n`).
fn post_with(url: &str, headers: &str, body: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut s = std::net::TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "POST /{path} HTTP/1.1\r\nHost: {host}\r\n{headers}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    String::from_utf8_lossy(&raw).to_string()
}

#[test]
fn the_proxy_cuts_a_looping_stream_and_exits_0_on_sigterm() {
    let (upstream, closed) = looping_upstream();
    let mut proxy = start(&format!("{upstream}/v1"), &[]);
    let raw = post(
        &format!("{}/v1/chat/completions", proxy.url),
        r#"{"model":"m","messages":[],"stream":true}"#,
    );
    assert!(raw.starts_with("HTTP/1.1 200"), "{raw}");
    assert!(raw.contains("x-deloop-request-id"), "{raw}");
    assert!(raw.contains(r#""finish_reason":"stop""#), "{raw}");
    assert!(raw.contains(r#""deloop":{"#), "{raw}");
    assert!(raw.contains("data: [DONE]"), "{raw}");
    // The upstream held its stream open: it ends only when the proxy
    // drops the upstream connection at the cut (60 s is a generous bound
    // for the test, not a speed the proxy must meet).
    let dropped = (0..600).any(|_| {
        if closed.load(std::sync::atomic::Ordering::SeqCst) == 1 {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
        false
    });
    assert!(dropped, "the upstream never saw the proxy close its stream");
    #[cfg(unix)]
    {
        let pid = proxy.child.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        assert_eq!(proxy.child.wait().unwrap().code(), Some(0));
    }
}

/// `[proxy]` has its own key file: deloop's key is required in
/// `x-deloop-key`, and the file's keys are accepted.
#[test]
fn the_proxy_reads_its_own_key_file() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("proxy-keys");
    std::fs::write(&keys, "# the proxy's clients\nproxy-key\n").unwrap();
    let (upstream, _sent) = looping_upstream();
    let proxy = start(
        &upstream,
        &[("DELOOP_PROXY_API_KEYS_FILE", keys.to_str().unwrap())],
    );
    let url = format!("{}/v1/chat/completions", proxy.url);
    let body = r#"{"model":"m","messages":[],"stream":true}"#;
    let raw = post(&url, body);
    assert!(raw.starts_with("HTTP/1.1 401"), "{raw}");
    let raw = post_with(&url, "x-deloop-key: wrong\r\n", body);
    assert!(raw.starts_with("HTTP/1.1 403"), "{raw}");
    let raw = post_with(&url, "x-deloop-key: proxy-key\r\n", body);
    assert!(raw.starts_with("HTTP/1.1 200"), "{raw}");
    assert!(raw.contains("data: [DONE]"), "{raw}");
}

#[test]
fn startup_failures_use_the_exit_code_table() {
    let clean = tempfile::tempdir().unwrap();
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_deloop"));
        cmd.arg("proxy")
            .args(args)
            .current_dir(clean.path())
            .env_remove("DELOOP_CONFIG")
            .env_remove("DELOOP_PROXY_UPSTREAM");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    // No upstream: exit 2, saying how to give one.
    let (code, err) = run(&[], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--upstream"), "{err}");
    // A bad value: exit 2, naming the key.
    let (code, err) = run(
        &["--upstream", "http://127.0.0.1:9"],
        &[("DELOOP_PROXY_FINISH_REASON", "loop")],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("proxy.finish_reason"), "{err}");
    let (code, err) = run(&["--upstream", "127.0.0.1:9"], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("proxy.upstream"), "{err}");
    // The proxy's own loop guard settings, checked at startup.
    let (code, err) = run(
        &["--upstream", "http://127.0.0.1:9"],
        &[("DELOOP_PROXY_LOOP_PROFILE", "lenient")],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("proxy.loop_profile"), "{err}");
    let (code, err) = run(
        &["--upstream", "http://127.0.0.1:9"],
        &[("DELOOP_PROXY_LOOP_CONFIG", "/nonexistent/loops.json5")],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("proxy.loop_config"), "{err}");
    // A key file set for the server only would leave the proxy open: exit
    // 2, naming the proxy's key.
    let cfg = clean.path().join("server-keys.toml");
    std::fs::write(&cfg, "[server]\napi_keys_file = \"keys\"\n").unwrap();
    let (code, err) = run(
        &[
            "--upstream",
            "http://127.0.0.1:9",
            "--config",
            cfg.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("proxy.api_keys_file"), "{err}");
    // The port in use: exit 1 with advice.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (code, err) = run(
        &["--upstream", "http://127.0.0.1:9", "--listen", &addr],
        &[],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--listen"), "{err}");
}

/// The recorded prompt of `testdata/real-model` whose greedy SmolLM2
/// generation loops soonest ("La Casa de la Casa …"), and that generation.
fn recorded_loop(id: &str) -> (String, String) {
    let rows = |name: &str| -> Vec<serde_json::Value> {
        let path = deloop_testdata::workspace_root()
            .join("testdata/real-model")
            .join(name);
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let generation = rows("generations.jsonl")
        .into_iter()
        .find(|r| r["id"] == id)
        .unwrap();
    let prompt = rows("prompts.jsonl")
        .into_iter()
        .find(|p| p["id"] == generation["prompt_id"])
        .unwrap();
    (
        prompt["prompt"].as_str().unwrap().to_string(),
        generation["text"].as_str().unwrap().to_string(),
    )
}

/// A counter of llama-server's `/metrics` (`llamacpp:NAME`).
fn llama_counter(server: &deloop_testdata::llama::LlamaServer, name: &str) -> f64 {
    let (status, metrics) = server.get("/metrics").unwrap();
    assert_eq!(status, 200, "{metrics}");
    let key = format!("llamacpp:{name} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&key))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /metrics"))
}

/// The `deloop proxy` binary in front of a real llama-server (issue 24 §3;
/// the in-process proxy's suite is `deloop-proxy/tests/real_server.rs`):
/// SmolLM2-135M's greedy loop is cut, the client gets what the model wrote
/// up to the cut, the guard's marker and a well-formed ending, and
/// llama-server stops generating before `max_tokens` because the proxy
/// closed its stream.
#[test]
fn the_proxy_binary_cuts_llama_servers_loop_and_the_server_stops() {
    use deloop_testdata::llama::{self, Model, Options};
    const MAX_TOKENS: u64 = 400;
    let options = Options {
        ctx_size: 2048,
        slots: 1,
        threads: Some(1),
        extra_args: Vec::new(),
    };
    let Some(server) = llama::start_with(Model::SmolLm2, &options, "deloop proxy_cli real server")
    else {
        return;
    };
    let (prompt, recorded) = recorded_loop("smollm2/es-json-02");
    let proxy = start(&format!("{}/v1", server.base_url()), &[]);
    let body = serde_json::json!({
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": MAX_TOKENS, "temperature": 0, "top_k": 1, "seed": 0,
        "cache_prompt": false, "stream": true,
    });
    let before = llama_counter(&server, "tokens_predicted_total");
    let (status, head, sse) = common::http_with_head(
        "POST",
        &format!("{}/v1/chat/completions", proxy.url),
        Some(body.to_string().as_bytes()),
        "application/json",
    );
    assert_eq!(status, 200, "{head}{sse}");
    assert!(head.contains("x-deloop-request-id"), "{head}");
    // The text of the stream: what the model wrote, then the marker.
    let mut text = String::new();
    let mut last = serde_json::Value::Null;
    for data in sse.lines().filter_map(|l| l.strip_prefix("data: ")) {
        if data == "[DONE]" {
            continue;
        }
        let event: serde_json::Value =
            serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}"));
        if let Some(piece) = event["choices"][0]["delta"]["content"].as_str() {
            text.push_str(piece);
        }
        last = event;
    }
    assert!(sse.contains("data: [DONE]"), "{sse}");
    assert!(last["choices"][0]["finish_reason"].is_string(), "{last}");
    assert!(last["deloop"].is_object(), "{last}");
    let marker = deloop_core::repetition::ClampConfig::default().words.marker;
    let kept = text
        .strip_suffix(marker.as_str())
        .or_else(|| text.strip_suffix(marker.trim_start()))
        .unwrap_or_else(|| panic!("no marker at the end: {text:?}"));
    assert!(
        recorded.starts_with(kept) && kept.len() < recorded.len() / 2,
        "not a prefix of the recorded loop, or not cut: {kept:?}"
    );
    // llama-server ends the generation when it sees the closed stream; the
    // recorded generation runs to max_tokens, so fewer means it stopped at
    // the cut (the deadline only bounds a failure).
    let idle = (0..1200).any(|_| {
        let (_, slots) = server.get("/slots").unwrap();
        let slots: serde_json::Value = serde_json::from_str(&slots).unwrap();
        let busy = slots
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s["is_processing"] == true));
        if !busy {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
        false
    });
    assert!(idle, "llama-server still generating 120 s after the cut");
    let predicted = llama_counter(&server, "tokens_predicted_total") - before;
    assert!(
        predicted >= 1.0 && predicted < MAX_TOKENS as f64,
        "llama-server predicted {predicted} of max_tokens {MAX_TOKENS}: it did not stop at the cut"
    );
}
