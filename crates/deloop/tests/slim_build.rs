//! The `deloop` binary built without its default features (no local
//! embedders, no PostgreSQL, no Valkey/Redis): `cargo test -p deloop
//! --no-default-features --test slim_build`, which `scripts/test.sh` runs.
//! The guards and the lexical oracle work; what the build lacks is refused
//! with an error that names the cargo feature, never a panic or a file
//! named after a URL. In the default build this file compiles to nothing
//! (its features are on); `scripts/test.sh` runs it in the slim build.
#![cfg(not(any(feature = "local-embedders", feature = "postgres", feature = "redis")))]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn deloop(dir: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_deloop"))
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("HOME", dir)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run deloop");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn the_guards_run() {
    let tmp = tempfile::tempdir().unwrap();
    let wall = "la continuación de un proceso ".repeat(40);
    let out = deloop(tmp.path(), &["clamp", "--json"], &format!("Hola. {wall}"));
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["clamped"], true, "{v}");
}

/// The README's first command answers from the embedded docs, lexically,
/// and says why there are no vectors.
#[test]
fn ask_answers_lexically_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let out = deloop(
        tmp.path(),
        &[
            "ask",
            "--json",
            "--no-llm",
            "How do I stop a looping stream?",
        ],
        "",
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("`local-embedders`"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["retrieval"]["used"], "lexical", "{v}");
    assert!(!v["answer"].as_str().unwrap_or_default().is_empty(), "{v}");
}

#[test]
fn a_local_embedder_is_refused_naming_the_feature() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("docs")).unwrap();
    std::fs::write(tmp.path().join("docs/a.md"), "# A\n\nSome text.\n").unwrap();
    let out = deloop(
        tmp.path(),
        &["index", "--embedder", "minilm-onnx", "docs"],
        "",
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("`local-embedders`"));
    // `auto` indexes lexically, with a warning.
    let out = deloop(tmp.path(), &["index", "--json", "docs"], "");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("lexical search only"), "{err}");
}

#[test]
fn a_postgres_index_is_refused_naming_the_feature_without_the_password() {
    let tmp = tempfile::tempdir().unwrap();
    let out = deloop(
        tmp.path(),
        &[
            "search",
            "--db",
            "postgres://deloop:s3cret@127.0.0.1:1/deloop",
            "loops",
        ],
        "",
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("`postgres`"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
    assert!(std::fs::read_dir(tmp.path()).unwrap().next().is_none());
}

#[test]
fn a_shared_session_store_is_refused_naming_the_feature() {
    let tmp = tempfile::tempdir().unwrap();
    let out = deloop(
        tmp.path(),
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--session-store",
            "redis://127.0.0.1:1/0",
        ],
        "",
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("server.sessions.store"), "{err}");
    assert!(err.contains("`redis`"), "{err}");
}
