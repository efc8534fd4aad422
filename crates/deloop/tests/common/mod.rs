//! Starts the `deloop serve` binary for the end-to-end tests, and talks
//! HTTP to it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// A running `deloop serve`, killed when dropped.
pub struct Server {
    pub child: Child,
    pub url: String,
    /// The server's working folder (its default index lives there).
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `deloop serve --listen 127.0.0.1:0 ARGS` in a fresh folder, with
/// deloop's own environment variables cleared and then `env` set, and waits
/// for its "listening on" line.
pub fn start(args: &[&str], env: &[(&str, &str)]) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_deloop"));
    cmd.arg("serve")
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .current_dir(dir.path())
        .env_remove("DELOOP_CONFIG")
        .env_remove("DELOOP_API_KEYS")
        .env_remove("DELOOP_DB")
        .env_remove("DELOOP_PROXY_UPSTREAM")
        .env_remove("DELOOP_PROXY_TOOL_LOOPS")
        .env_remove("GEMINI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("DELOOP_LLM_PROVIDER")
        // The default index is built from the embedded docs without
        // vectors: fast, and enough for lexical answers.
        .env("DELOOP_EMBEDDER", "none")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn deloop serve");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("deloop serve exited before listening")
            .unwrap();
        if let Some(u) = line.strip_prefix("deloop: listening on ") {
            break u.trim().to_string();
        }
    };
    // Keep draining stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Server {
        child,
        url,
        _dir: dir,
    }
}

/// Tries `f` up to `tries` times, 100 ms apart, until it says yes.
pub fn eventually(tries: usize, mut f: impl FnMut() -> bool) -> bool {
    for _ in 0..tries {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// A blocking POST with a JSON body (std only: the CLI crate's tests need no HTTP client).
pub fn post(url: &str, body: &Value) -> (u16, Value) {
    let (status, text) = http(
        "POST",
        url,
        Some(&serde_json::to_vec(body).unwrap()),
        "application/json",
    );
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

pub fn http(method: &str, url: &str, body: Option<&[u8]>, content_type: &str) -> (u16, String) {
    let (status, _, body) = http_with_head(method, url, body, content_type);
    (status, body)
}

/// [`http`], also answering the response head, lower-cased (for headers).
pub fn http_with_head(
    method: &str,
    url: &str,
    body: Option<&[u8]>,
    content_type: &str,
) -> (u16, String, String) {
    use std::io::Read;
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap_or((rest, "/".into()));
    let mut s = std::net::TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let body = body.unwrap_or(b"");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap();
    let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    (status, head.to_ascii_lowercase(), body)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}
