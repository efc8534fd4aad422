//! Starts the `deloop serve` binary for the end-to-end tests.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

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
