//! `deloop mcp` itself, driven by the official MCP Python SDK (PyPI `mcp`,
//! installed by `bash scripts/setup-mcp-client.sh`) over stdio: the guard
//! tools are listed, and `search` and `ask` answer from deloop's embedded
//! documentation. An MCP client starts the server in any directory, so the
//! default index must be built in the user's cache, never in the client's
//! working directory.
//!
//! Without python3 or the SDK the suite prints one line and passes; with
//! `CI=true` (or `DELOOP_REQUIRE_REAL=1`) it fails instead.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

const SDK_VERSION: &str = "2.3.0";

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("DELOOP_MCP_PYTHON") {
        return PathBuf::from(p);
    }
    deloop_testdata::cache_dir().join(format!("mcp-client-{SDK_VERSION}/bin/python"))
}

fn sdk_present(python: &PathBuf) -> bool {
    Command::new(python)
        .args(["-c", "import mcp.client.stdio"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn the_sdk_asks_and_searches_and_the_index_stays_out_of_the_clients_directory() {
    let python = python();
    if !deloop_testdata::real_component(
        sdk_present(&python),
        "mcp_cli",
        "bash scripts/setup-mcp-client.sh",
    ) {
        return;
    }
    let client_dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let out = Command::new(&python)
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_cli.py"))
        .arg(env!("CARGO_BIN_EXE_deloop"))
        .current_dir(client_dir.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", cache.path())
        .env("XDG_CACHE_HOME", cache.path())
        .env("DELOOP_EMBEDDER", "none")
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "mcp_cli.py failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let report: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\nstderr: {stderr}"));

    let hits = report["search"]["hits"].as_array().expect("search hits");
    assert!(!hits.is_empty(), "{report}");
    let answer = report["ask"]["answer"].as_str().expect("ask answer");
    assert!(
        answer.starts_with("No LLM configured: here are the most relevant passages."),
        "{answer}"
    );
    assert!(
        !report["ask"]["citations"].as_array().unwrap().is_empty(),
        "{report}"
    );

    // Nothing in the client's directory; the index is in the cache.
    let left: Vec<_> = std::fs::read_dir(client_dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        left.is_empty(),
        "deloop mcp wrote {left:?} into the client's directory"
    );
    let index = cache.path().join("deloop/mcp/index.db");
    assert!(index.is_file(), "no index at {}", index.display());
    let building: Vec<_> = std::fs::read_dir(cache.path().join("deloop/mcp"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".building-"))
        .collect();
    assert!(building.is_empty(), "{building:?}");
}

/// Without HOME or XDG_CACHE_HOME (no cache directory), `deloop mcp` still
/// builds its default index outside the client's directory (in the
/// temporary directory), also when the session ends at once.
#[test]
fn mcp_without_a_cache_directory_builds_nothing_in_the_client_directory() {
    let client_dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_deloop"))
        .arg("mcp")
        .current_dir(client_dir.path())
        .env_clear()
        .env("TMPDIR", tmp.path())
        .env("DELOOP_EMBEDDER", "none")
        .stdin(Stdio::null())
        .output()
        .expect("deloop mcp runs");
    // The client closed before `initialize`: deloop says so and exits; the
    // default index it opened meanwhile is in the temporary directory.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("connection closed"), "{err}");
    let left: Vec<_> = std::fs::read_dir(client_dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(!tmp.path().join(".deloop").exists(), "{err}");
}
