//! The test environment: a temp dir indexed by `deloop index`, and `deloop ask`
//! run against it.

use crate::fake_llm::*;
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_deloop");

// ------------------------------------------------------------------- set-up

pub(crate) struct Env {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) db: PathBuf,
    pub(crate) loops_md: String,
}

pub(crate) const LOOPS_MD: &str =
    "# Loops\n\nWhen a stream loops, the watcher cuts it and the request is cancelled.\n\
Cancel the stream as soon as the watcher fires.\n\n## Bucles\n\nCuando el stream entra en bucle, \
el vigilante lo corta y se cancela la petición.\n";
pub(crate) const RESCUE_MD: &str =
    "# Rescue\n\nThe JSON rescue recovers the answer from broken model output.\n";

/// A temp dir (also the working directory of the binary) with two docs
/// indexed lexically into `index.db` by the real `deloop index`.
pub(crate) fn setup(config: &str) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("loops.md"), LOOPS_MD).unwrap();
    std::fs::write(docs.join("rescue.md"), RESCUE_MD).unwrap();
    std::fs::write(dir.path().join("deloop.toml"), config).unwrap();
    let db = dir.path().join("index.db");
    let out = Command::new(BIN)
        .env_clear()
        .current_dir(dir.path())
        .args(["index", "--embedder", "none", "--quiet", "--db"])
        .arg(&db)
        .arg(&docs)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "index failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let loops_md = std::fs::canonicalize(docs.join("loops.md"))
        .unwrap()
        .to_string_lossy()
        .into_owned();
    Env { dir, db, loops_md }
}

pub(crate) const FAST: &str =
    "[llm.retry]\nmax_attempts = 1\n[oracle]\nhyde_timeout_secs = 1\ntimeout_secs = 20\n";

pub(crate) enum Provider<'a> {
    None,
    Gemini(&'a Fake),
    OpenAi(&'a Fake),
}

pub(crate) fn ask(env: &Env, provider: Provider, args: &[&str]) -> (Output, Value) {
    let mut cmd = Command::new(BIN);
    cmd.env_clear().current_dir(env.dir.path());
    match provider {
        Provider::None => {}
        Provider::Gemini(f) => {
            cmd.env("GEMINI_API_KEY", "test-key-never-printed")
                .env("GEMINI_BASE_URL", format!("{}/v1beta", f.url));
        }
        Provider::OpenAi(f) => {
            cmd.env("OPENAI_BASE_URL", format!("{}/v1", f.url))
                .env("OPENAI_API_KEY", "test-key-never-printed")
                .env("DELOOP_MODEL", "fake-model");
        }
    }
    let out = cmd
        .arg("ask")
        .arg("--db")
        .arg(&env.db)
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stdout.contains("test-key-never-printed") && !stderr.contains("test-key-never-printed")
    );
    let v: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\nstderr: {stderr}"));
    (out, v)
}

pub(crate) fn code(out: &Output) -> i32 {
    out.status.code().unwrap()
}

// -------------------------------------------------------------------- tests
