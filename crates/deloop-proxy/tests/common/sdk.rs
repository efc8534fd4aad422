//! The official `openai` and `anthropic` Python SDKs of
//! `scripts/setup-proxy-clients.sh` as clients: where their venv is, whether
//! it is there, and running one of the test scripts that print one JSON line
//! per scenario.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

/// The SDK versions the setup script pins.
pub const OPENAI: &str = "3.57.0";
pub const ANTHROPIC: &str = "2.15.0";

/// The venv's Python (`DELOOP_PROXY_PYTHON` overrides it).
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("DELOOP_PROXY_PYTHON") {
        return PathBuf::from(p);
    }
    deloop_testdata::cache_dir().join(format!(
        "proxy-clients-openai{OPENAI}-anthropic{ANTHROPIC}/bin/python"
    ))
}

/// Whether `python` imports both SDKs.
pub fn present(python: &PathBuf) -> bool {
    std::process::Command::new(python)
        .args(["-c", "import openai, anthropic"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What a script printed: one JSON object per scenario.
pub struct Results {
    results: Vec<Value>,
    stdout: String,
    stderr: String,
}

impl Results {
    /// The result of scenario `name`, which must not report anything
    /// `unexpected`.
    pub fn get(&self, name: &str) -> &Value {
        let r = self
            .results
            .iter()
            .find(|r| r["scenario"] == name)
            .unwrap_or_else(|| panic!("no result for {name}:\n{}\n{}", self.stdout, self.stderr));
        assert!(r.get("unexpected").is_none(), "{name}: {r}");
        r
    }
}

/// Runs `tests/<script>` with `python` and `args` (no API keys from the
/// environment, loopback never proxied) and reads its JSON lines; the
/// script must exit 0 within `timeout`.
pub async fn run(python: &PathBuf, script: &str, args: &[String], timeout: Duration) -> Results {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(script);
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg(&script)
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .kill_on_drop(true);
    let out = tokio::time::timeout(timeout, cmd.output())
        .await
        .expect("the SDK script finishes")
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    eprintln!("{stdout}");
    let results = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    Results {
        results,
        stdout,
        stderr,
    }
}
