//! The MCP server driven by a real MCP client that nobody here wrote: the
//! official Python SDK (PyPI `mcp`, installed by
//! `bash scripts/setup-mcp-client.sh`), over streamable HTTP (`/mcp` on a
//! server started on 127.0.0.1:0, with auth on) and over stdio (the SDK
//! spawns `deloop-mcp-stdio`). `tests/mcp_client.py` runs the scenario in
//! both protocol negotiations the SDK offers (2026-07-28 discover and the
//! legacy initialize handshake) and checks what it can alone; this test
//! then checks that every answer equals the HTTP API's for the same input.
//!
//! Without python3 or the SDK the suite prints one line and passes; with
//! `CI=true` (or `DELOOP_REQUIRE_REAL=1`) it fails instead.

mod common;

use std::path::PathBuf;
use std::process::Stdio;

use deloop_core::loops::Profile;
use deloop_server::auth::ApiKeys;
use deloop_server::ServerSettings;
use serde_json::{json, Value};

const SDK_VERSION: &str = "2.3.0";
const KEY: &str = "mcp-test-key";

/// The interpreter with the SDK: `DELOOP_MCP_PYTHON`, else the venv that
/// scripts/setup-mcp-client.sh makes.
fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("DELOOP_MCP_PYTHON") {
        return PathBuf::from(p);
    }
    deloop_testdata::cache_dir().join(format!("mcp-client-{SDK_VERSION}/bin/python"))
}

fn sdk_present(python: &PathBuf) -> bool {
    std::process::Command::new(python)
        .args(["-c", "import mcp.client.stdio, mcp.client.streamable_http"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn client_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py")
}

/// Runs the client script; its JSON lines, one per protocol mode.
async fn run_client(
    python: &PathBuf,
    transport: &str,
    target: &str,
    key: Option<&str>,
) -> Vec<Value> {
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg(client_script()).arg(transport).arg(target);
    if let Some(k) = key {
        cmd.env("DELOOP_MCP_KEY", k);
    }
    cmd.kill_on_drop(true);
    let out = tokio::time::timeout(std::time::Duration::from_secs(300), cmd.output())
        .await
        .expect("the MCP client finishes")
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "mcp_client.py {transport} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let reports: Vec<Value> = stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let modes: Vec<&str> = reports.iter().filter_map(|r| r["mode"].as_str()).collect();
    assert_eq!(
        modes,
        ["auto", "legacy"],
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    reports
}

async fn post(c: &reqwest::Client, url: &str, key: Option<&str>, body: Value) -> Value {
    let mut req = c.post(url).json(&body);
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let res = req.send().await.unwrap();
    assert!(res.status().is_success(), "{url}: {}", res.status());
    res.json().await.unwrap()
}

/// Every answer the client got equals the HTTP API's for the same input.
async fn same_as_http(report: &Value, base: &str, key: Option<&str>) {
    let c = common::client();
    let mode = report["mode"].as_str().unwrap();
    assert_eq!(
        report["tools"],
        json!([
            "check_tool_call",
            "check_transcript",
            "clamp_text",
            "forget_session",
            "record_tool_result",
            "repair_json",
            "rescue_json"
        ]),
        "{mode}: no ask/search without an oracle"
    );
    let clamp = post(
        &c,
        &format!("{base}/v1/clamp"),
        key,
        json!({"text": report["clamp_input"]}),
    )
    .await;
    assert_eq!(
        report["clamp"], clamp,
        "{mode}: clamp_text = POST /v1/clamp"
    );

    // The same 21 calls and results through the session API.
    let session = format!("http-{mode}");
    for (i, got) in report["verdicts"].as_array().unwrap().iter().enumerate() {
        let id = format!("c{i}");
        let want = post(
            &c,
            &format!("{base}/v1/sessions/{session}/calls"),
            key,
            json!({"tool": "read", "args": {"path": "/etc/hosts"}, "id": id, "run": "r1"}),
        )
        .await;
        assert_eq!(*got, want, "{mode}: check_tool_call #{i} = POST .../calls");
        post(
            &c,
            &format!("{base}/v1/sessions/{session}/results"),
            key,
            json!({"id": id, "run": "r1", "result": "127.0.0.1 localhost"}),
        )
        .await;
    }
    assert_eq!(report["verdicts"][20]["level"], "critical", "{mode}");

    // check_transcript = the NDJSON lines of POST /v1/check.
    let mut req = c
        .post(format!("{base}/v1/check"))
        .body(report["transcript_input"].as_str().unwrap().to_string());
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let text = req.send().await.unwrap().text().await.unwrap();
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary = lines.pop().unwrap();
    assert_eq!(
        report["transcript"],
        json!({"verdicts": lines, "summary": summary["summary"]}),
        "{mode}: check_transcript = POST /v1/check"
    );
    assert_eq!(
        report["result"]["index"], 21,
        "{mode}: result by tool and args"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_streamable_http() {
    let python = python();
    if !deloop_testdata::real_component(
        sdk_present(&python),
        "mcp_clients (streamable HTTP)",
        "bash scripts/setup-mcp-client.sh",
    ) {
        return;
    }
    let server = common::start(common::state_with(
        ServerSettings::default(),
        Profile::Default,
        ApiKeys::parse(Some(KEY), None),
    ))
    .await;
    let mcp_url = format!("{}/mcp", server.url);

    // /mcp sits behind the same auth as the rest of the API.
    let c = common::client();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let res = c.post(&mcp_url).json(&init).send().await.unwrap();
    assert_eq!(res.status(), 401, "no key");
    let res = c
        .post(&mcp_url)
        .bearer_auth("wrong")
        .json(&init)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403, "wrong key");
    // A foreign Host is refused (DNS-rebinding protection).
    let res = c
        .post(&mcp_url)
        .bearer_auth(KEY)
        .header("host", "attacker.example")
        .header("accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403, "foreign Host");
    let problem: Value = res.json().await.unwrap();
    assert!(
        problem["detail"].as_str().unwrap().contains("Host"),
        "{problem}"
    );

    let reports = run_client(&python, "http", &mcp_url, Some(KEY)).await;
    assert_eq!(reports[0]["protocol"], "2026-07-28");
    for r in &reports {
        same_as_http(r, &server.url, Some(KEY)).await;
    }
    // The MCP requests were counted like any route.
    let metrics = common::metrics_text(&server.url, Some(KEY)).await;
    assert!(metrics.contains("/mcp"), "no /mcp in the metrics");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_stdio() {
    let python = python();
    if !deloop_testdata::real_component(
        sdk_present(&python),
        "mcp_clients (stdio)",
        "bash scripts/setup-mcp-client.sh",
    ) {
        return;
    }
    let reports = run_client(
        &python,
        "stdio",
        env!("CARGO_BIN_EXE_deloop-mcp-stdio"),
        None,
    )
    .await;
    assert_eq!(reports[0]["protocol"], "2026-07-28");
    // deloop-mcp-stdio runs the default settings: compare with a default
    // HTTP server.
    let server = common::start_default().await;
    for r in &reports {
        same_as_http(r, &server.url, None).await;
    }
}

/// Hostile HTTP input on `/mcp` gets a 4xx problem+json answer, never a
/// 5xx (no client needed).
#[tokio::test]
async fn mcp_endpoint_refuses_bad_http_input() {
    let settings = ServerSettings {
        max_body_bytes: 1 << 16,
        ..ServerSettings::default()
    };
    let server = common::start(common::state_with(
        settings,
        Profile::Default,
        ApiKeys::default(),
    ))
    .await;
    let url = format!("{}/mcp", server.url);
    let c = common::client();
    let accept = "application/json, text/event-stream";
    let send = |body: Vec<u8>, content_type: &'static str| {
        c.post(&url)
            .header("accept", accept)
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let big = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "clamp_text", "arguments": {"text": "a".repeat(1 << 17)}}}))
    .unwrap();
    let cases: Vec<(&str, Vec<u8>, &'static str)> = vec![
        ("over the body limit", big, "application/json"),
        (
            "malformed JSON",
            b"{\"jsonrpc\": \"2.0\", \"id\": 1,".to_vec(),
            "application/json",
        ),
        ("not JSON-RPC", b"[1, 2, 3]".to_vec(), "application/json"),
        ("invalid UTF-8", vec![0xff, 0xfe, b'{'], "application/json"),
        ("empty", Vec::new(), "application/json"),
        ("wrong content type", b"hello".to_vec(), "text/plain"),
    ];
    for (what, body, ct) in cases {
        let res = send(body, ct).await.unwrap();
        let status = res.status();
        let text = res.text().await.unwrap_or_default();
        let want = match what {
            "over the body limit" => 413,
            "wrong content type" => 415,
            _ => 400,
        };
        assert_eq!(status, want, "{what}: {text}");
        let problem: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: {e}: {text}"));
        assert_eq!(problem["status"], want, "{what}: {text}");
        assert!(!problem["detail"].as_str().unwrap().is_empty(), "{what}");
    }
    // The server still answers.
    let res = c
        .post(&url)
        .header("accept", accept)
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}
