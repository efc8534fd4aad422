//! The web console in a real headless Chromium (Debian's `chromium`,
//! driven by `playwright-core` from npm; `scripts/setup-browser.sh`
//! installs both). The test starts `deloop serve` on 127.0.0.1 with an API
//! key, no LLM (extractive answers) and the proxy mounted in front of a
//! tiny local upstream whose streamed reply loops; `console/e2e.mjs` then
//! logs in, follows each link of the navigation bar, asks, clamps, checks
//! a transcript, and sends a looping stream through the proxy while Live is
//! open, until the cut appears with its unit highlighted; opens a session's
//! timeline; reads the data pages with scripts off; and pushes session
//! calls at Live as fast as it can for a few seconds, checking that the
//! feed stays live and the page keeps at most 500 rows (the rates are
//! printed, not asserted: `cargo test -p deloop --test console_browser --
//! --nocapture`).
//!
//! Skips with one line when chromium or playwright-core is absent; fails
//! instead when `CI=true`.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;

mod common;

const KEY: &str = "browser-suite-key";
const PLAYWRIGHT_VERSION: &str = "1.65.2";
const AXE_VERSION: &str = "4.14.1";

fn cache_dir() -> PathBuf {
    std::env::var_os("DELOOP_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|c| PathBuf::from(c).join("deloop")))
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/deloop")
        })
}

fn playwright_dir() -> PathBuf {
    cache_dir()
        .join(format!("playwright-core-{PLAYWRIGHT_VERSION}"))
        .join("node_modules/playwright-core")
}

fn axe_dir() -> PathBuf {
    cache_dir()
        .join(format!("axe-core-{AXE_VERSION}"))
        .join("node_modules/axe-core")
}

/// An upstream whose every chat completion streams a reply that loops:
/// an intro, then the same sentence again and again.
fn looping_upstream() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { continue };
            std::thread::spawn(move || {
                let mut raw = Vec::new();
                let mut buf = [0u8; 65536];
                loop {
                    let Ok(n) = s.read(&mut buf) else { return };
                    if n == 0 {
                        return;
                    }
                    raw.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&raw).to_string();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let len = head
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if body.len() >= len {
                            break;
                        }
                    }
                }
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
                );
                let mut pieces = vec!["The plan, step by step: ".to_string()];
                for _ in 0..200 {
                    pieces.push("we check the cache and then ".into());
                }
                for p in pieces {
                    let chunk = serde_json::json!({"id": "c1", "object": "chat.completion.chunk",
                        "created": 1, "model": "looper-1",
                        "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": null}]});
                    if write!(s, "data: {chunk}\n\n").is_err() {
                        return; // the proxy cut the stream and hung up
                    }
                    let _ = s.flush();
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                let _ = write!(s, "data: [DONE]\n\n");
            });
        }
    });
    url
}

#[test]
fn the_console_works_in_chromium() {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let chromium = PathBuf::from("/usr/bin/chromium");
    let playwright = playwright_dir();
    if !chromium.exists() || !playwright.join("package.json").exists() {
        let why = format!(
            "chromium ({}) or playwright-core ({}) is absent; run scripts/setup-browser.sh",
            chromium.display(),
            playwright.display()
        );
        assert!(!ci, "CI=true: {why}");
        println!("skipped: {why}");
        return;
    }
    let axe = axe_dir();
    let has_axe = axe.join("axe.min.js").exists();
    assert!(
        has_axe || !ci,
        "CI=true: axe-core ({}) is absent; run scripts/setup-browser.sh",
        axe.display()
    );
    let upstream = looping_upstream();
    let server = common::start(
        &[],
        &[
            ("DELOOP_API_KEYS", KEY),
            ("DELOOP_PROXY_UPSTREAM", upstream.as_str()),
        ],
    );
    let shots = tempfile::tempdir().unwrap();
    let shot_dir = std::env::var_os("DELOOP_CONSOLE_SHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| shots.path().to_path_buf());
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/console/e2e.mjs");
    let out = Command::new("node")
        .arg(&script)
        .env("DELOOP_URL", &server.url)
        .env("DELOOP_KEY", KEY)
        .env("PLAYWRIGHT_CORE", &playwright)
        .env("SHOT_DIR", &shot_dir)
        .env(
            "AXE_CORE",
            if has_axe { axe.as_path() } else { "".as_ref() },
        )
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the browser suite failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    print!("{stdout}");
    if has_axe {
        assert!(stdout.contains("ok axe"), "axe-core did not run\n{stdout}");
    }
    for step in [
        "login", "nav", "ask", "clamp", "check", "live", "sessions", "nojs", "load",
    ] {
        assert!(
            stdout.contains(&format!("ok {step}")),
            "{step} not reached\n{stdout}"
        );
    }
}
