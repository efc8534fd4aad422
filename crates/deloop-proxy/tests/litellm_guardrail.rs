//! deloop as the guardrail of LiteLLM's own proxy (PyPI `litellm[proxy]`,
//! pinned and installed by `bash scripts/setup-litellm.sh`), end to end on
//! 127.0.0.1: a fake OpenAI-compatible model server, deloop proxy (whose
//! `POST /beta/litellm_basic_guardrail_api` is the guardrail), and the real
//! `litellm --config config.yaml` process with a `generic_guardrail_api`
//! guardrail in `pre_call` and `post_call` mode pointing at deloop. Plain
//! HTTP clients talk to LiteLLM and check what arrives:
//!
//! * a looping answer comes back clamped, exactly as deloop clamps it;
//! * a healthy answer comes back byte for byte;
//! * a history whose tool call starts to repeat reaches the model with
//!   deloop's note on its last message;
//! * a history whose tool call loops (critical) is refused by LiteLLM with
//!   deloop's reason, and never reaches the model;
//! * a reply that repeats the call once too often is refused with deloop's
//!   reason: judged at `post_call` against the history of the same call's
//!   `pre_call` (LiteLLM sends no history with a response).
//!
//! The guardrail authenticates to deloop with LiteLLM's own `api_key`
//! setting (sent as `x-api-key`). LiteLLM's start-up (tens of seconds) is
//! waited for by polling its `/health/liveliness`; its processes are ended
//! when the test ends.
//!
//! The test finds LiteLLM in the cache of the setup script, or through
//! `DELOOP_LITELLM` (the path of a `litellm` program). Without it the suite
//! prints one line and passes; with `CI=true` (or `DELOOP_REQUIRE_REAL=1`)
//! it fails instead.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use common::histories::repeated_history;
use common::*;
use deloop_core::repetition::{clamp, ClampConfig};
use deloop_http::auth::ApiKeys;
use serde_json::{json, Value};

const LITELLM: &str = "1.106.12";
/// LiteLLM refuses to start without a master key (or with a weak one).
const MASTER_KEY: &str = "sk-deloop-test-7f3a9c2e41b84d0a9e6f5c1b2d3e4f50";
/// deloop's own key, which LiteLLM sends as the guardrail's `api_key`.
const DELOOP_KEY: &str = "deloop-guardrail-secret";
/// How long LiteLLM may take to start (it imports a large web stack; on a
/// loaded 2-core machine that took 50 s).
const STARTUP: Duration = Duration::from_secs(300);

fn litellm() -> PathBuf {
    if let Some(p) = std::env::var_os("DELOOP_LITELLM") {
        return PathBuf::from(p);
    }
    deloop_testdata::cache_dir().join(format!("litellm-{LITELLM}/bin/litellm"))
}

/// Present when the program is there with the pinned version's generic
/// guardrail beside it (a file check; importing LiteLLM takes long).
fn litellm_present(program: &Path) -> bool {
    let Some(bin) = program.parent() else {
        return false;
    };
    let python = bin.join("python");
    program.is_file()
        && Command::new(python)
            .args([
                "-c",
                "import sys; from importlib.metadata import distribution as d; \
                 m = d('litellm'); \
                 sys.exit(m.version != sys.argv[1] or not m.locate_file(\
                 'litellm/proxy/guardrails/guardrail_hooks/generic_guardrail_api/__init__.py'\
                 ).exists())",
                LITELLM,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

fn read_file_tool() -> Value {
    json!([{"type": "function", "function": {"name": "read_file",
        "description": "Reads a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"]}}}])
}

fn looping_answer() -> String {
    format!("Intro sentence. {}", LOOP_UNIT.repeat(60))
}

const FINAL_ANSWER: &str = "The file /etc/app.toml does not exist; I stopped looking.";

/// The fake model server: a looping answer when the last message asks for
/// one, the final answer after a tool result, a healthy answer otherwise.
/// Records every request body.
struct Model {
    url: String,
    seen: Arc<Mutex<Vec<Value>>>,
}

impl Model {
    async fn start() -> Model {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            .route("/v1/chat/completions", post(answer))
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Model { url, seen }
    }

    fn seen(&self) -> Vec<Value> {
        self.seen.lock().unwrap().clone()
    }
}

async fn answer(
    State(seen): State<Arc<Mutex<Vec<Value>>>>,
    Json(body): Json<Value>,
) -> Json<Value> {
    seen.lock().unwrap().push(body.clone());
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    let again = body["messages"][0]["content"]
        .as_str()
        .is_some_and(|c| c.contains("again"));
    if again && last["role"] == "tool" {
        // The agent's model asks for the same call once more.
        let mut reply = chat_completion(&[""]);
        reply["choices"][0]["message"] = json!({"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_next", "type": "function",
                "function": {"name": "read_file", "arguments": "{\"path\":\"/etc/app.toml\"}"}}]});
        reply["choices"][0]["finish_reason"] = json!("tool_calls");
        return Json(reply);
    }
    let content = if last["role"] == "tool" {
        FINAL_ANSWER.to_string()
    } else if last["content"]
        .as_str()
        .is_some_and(|c| c.contains("repeat yourself"))
    {
        looping_answer()
    } else {
        healthy_text()
    };
    Json(chat_completion(&[&content]))
}

/// The running `litellm` process (and anything it started, in its process
/// group), ended on drop; its working folder removed.
struct LiteLlm {
    url: String,
    child: Child,
    dir: PathBuf,
}

impl LiteLlm {
    fn start(program: &Path, model: &str, deloop: &str) -> LiteLlm {
        let dir = std::env::temp_dir().join(format!("deloop-litellm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = format!(
            "model_list:\n\
             \x20 - model_name: fake\n\
             \x20   litellm_params:\n\
             \x20     model: openai/{MODEL}\n\
             \x20     api_base: {model}/v1\n\
             \x20     api_key: sk-upstream-unused\n\
             guardrails:\n\
             \x20 - guardrail_name: deloop\n\
             \x20   litellm_params:\n\
             \x20     guardrail: generic_guardrail_api\n\
             \x20     mode: [pre_call, post_call]\n\
             \x20     api_base: {deloop}\n\
             \x20     api_key: {DELOOP_KEY}\n\
             \x20     default_on: true\n\
             litellm_settings:\n\
             \x20 telemetry: false\n\
             general_settings:\n\
             \x20 master_key: {MASTER_KEY}\n"
        );
        std::fs::write(dir.join("config.yaml"), config).unwrap();
        // A free port: taken from the OS, then released for LiteLLM.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::File::create(dir.join("litellm.log")).unwrap();
        let mut cmd = Command::new(program);
        cmd.current_dir(&dir)
            .args(["--config", "config.yaml", "--host", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            // No network: the bundled model cost map, no telemetry, and
            // nothing through a proxy.
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            .env("LITELLM_TELEMETRY", "False")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env("no_proxy", "127.0.0.1,localhost")
            .env_remove("HTTP_PROXY")
            .env_remove("HTTPS_PROXY")
            .env_remove("http_proxy")
            .env_remove("https_proxy")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        let child = cmd.spawn().expect("litellm starts");
        LiteLlm {
            url: format!("http://127.0.0.1:{port}"),
            child,
            dir,
        }
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("litellm.log")).unwrap_or_default();
        let start = log.len().saturating_sub(4000);
        let start = (start..log.len())
            .find(|&i| log.is_char_boundary(i))
            .unwrap_or(log.len());
        log[start..].to_string()
    }

    /// Polls `/health/liveliness` until LiteLLM answers, it exits, or
    /// [`STARTUP`] passes.
    async fn wait_ready(&mut self) {
        let c = client();
        let url = format!("{}/health/liveliness", self.url);
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "litellm exited ({status}) while starting:\n{}",
                    self.log_tail()
                );
            }
            let ok = c
                .get(&url)
                .timeout(Duration::from_secs(5))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ok {
                return;
            }
            if started.elapsed() > STARTUP {
                panic!(
                    "litellm did not answer {url} within {STARTUP:?}:\n{}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

impl Drop for LiteLlm {
    fn drop(&mut self) {
        // The process group this test started (LiteLLM may run workers).
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One chat request to LiteLLM: (status, body).
async fn chat(litellm: &LiteLlm, messages: Value, tools: Option<Value>) -> (u16, Value) {
    let mut body = json!({"model": "fake", "messages": messages});
    if let Some(t) = tools {
        body["tools"] = t;
    }
    let res = client()
        .post(format!("{}/v1/chat/completions", litellm.url))
        .bearer_auth(MASTER_KEY)
        .timeout(Duration::from_secs(120))
        .json(&body)
        .send()
        .await
        .expect("litellm answers");
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or_else(|_| json!({"raw": text}));
    (status, v)
}

fn content(v: &Value) -> &str {
    v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("no content in {v}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn litellm_proxy_with_deloop_as_its_guardrail() {
    let program = litellm();
    if !deloop_testdata::real_component(
        litellm_present(&program),
        &format!("litellm_guardrail (LiteLLM {LITELLM} proxy)"),
        "bash scripts/setup-litellm.sh",
    ) {
        return;
    }
    let model = Model::start().await;
    let deloop = start_proxy_with(
        settings(&model.url),
        None,
        ApiKeys::parse(Some(DELOOP_KEY), None),
    )
    .await;
    let mut litellm = LiteLlm::start(&program, &model.url, &deloop.url);
    litellm.wait_ready().await;
    let say = |s: &str| json!([{"role": "user", "content": s}]);

    // A healthy answer: byte for byte.
    let (status, v) = chat(&litellm, say("Tell me about rivers."), None).await;
    assert_eq!(status, 200, "{v}\n{}", litellm.log_tail());
    assert_eq!(content(&v), healthy_text());

    // A looping answer: clamped by deloop (post_call, GUARDRAIL_INTERVENED),
    // exactly as deloop's clamp cuts it.
    let (status, v) = chat(&litellm, say("Please repeat yourself."), None).await;
    assert_eq!(status, 200, "{v}\n{}", litellm.log_tail());
    let looping = looping_answer();
    let clamped = clamp(&looping, &ClampConfig::default());
    assert!(clamped.report().is_some(), "the fake answer loops");
    assert_eq!(content(&v), clamped.text);
    assert!(clamped.text.len() < looping.len() / 4);
    assert!(clamped.text.starts_with("Intro sentence. "));

    // A tool call starting to repeat (warning): deloop's note is appended to
    // the last text of the request (pre_call), which LiteLLM writes back
    // into the last message before calling the model.
    let before = model.seen().len();
    let (status, v) = chat(&litellm, json!(repeated_history(6)), Some(read_file_tool())).await;
    assert_eq!(status, 200, "{v}\n{}", litellm.log_tail());
    assert_eq!(content(&v), FINAL_ANSWER);
    let seen = model.seen();
    assert_eq!(seen.len(), before + 1);
    let sent = seen.last().unwrap()["messages"].as_array().unwrap().clone();
    assert_eq!(sent.len(), 13);
    let last = sent.last().unwrap()["content"].as_str().unwrap();
    assert!(
        last.starts_with("error: no such file\n\n[deloop loop guard]")
            && last.contains("`read_file`"),
        "{last}"
    );
    assert_eq!(sent[1]["tool_calls"][0]["function"]["name"], "read_file");

    // A looping tool call (critical): LiteLLM refuses the request with
    // deloop's reason, and the model never sees it.
    let before = model.seen().len();
    let history = json!(repeated_history(25));
    let direct = client()
        .post(format!("{}/beta/litellm_basic_guardrail_api", deloop.url))
        .header("x-deloop-key", DELOOP_KEY)
        .json(
            &json!({"texts": [], "input_type": "request", "request_data": {},
            "structured_messages": history}),
        )
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(direct["action"], "BLOCKED");
    let reason = direct["blocked_reason"].as_str().unwrap().to_string();
    assert!(reason.contains("`read_file`"), "{reason}");
    let (status, v) = chat(&litellm, history, Some(read_file_tool())).await;
    assert_eq!(status, 400, "{v}\n{}", litellm.log_tail());
    // LiteLLM masks what looks like a path or a host in error messages
    // ("REDACTED"): the call's arguments aside, the reason arrives whole.
    let message = v["error"]["message"].as_str().unwrap_or_default();
    let args = r#"{"path":"/etc/app.toml"}"#;
    let (head, tail) = reason
        .split_once(args)
        .expect("the reason quotes the arguments");
    assert!(
        head.contains("`read_file`") && tail.contains("CRITICAL"),
        "{reason}"
    );
    assert!(
        message.starts_with(head) && message.ends_with(tail),
        "{v}\nreason: {reason}"
    );
    assert_eq!(model.seen().len(), before, "a blocked request is not sent");

    // A history one round short of critical, and the model asks for the
    // same call again: the request is warned (pre_call), the reply's call
    // is judged against that history, which LiteLLM does not send with the
    // response, by its call id (post_call), and blocked before the agent
    // can run it.
    let before = model.seen().len();
    let mut history = repeated_history(8);
    history[0]["content"] = json!("Find the config file again.");
    let (status, v) = chat(&litellm, json!(history), Some(read_file_tool())).await;
    assert_eq!(
        model.seen().len(),
        before + 1,
        "the warned request was sent"
    );
    assert_eq!(status, 400, "{v}\n{}", litellm.log_tail());
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("[deloop loop guard] I did not run the tool call `read_file`")
            && message.contains("The turn ends here"),
        "{v}"
    );
    let metrics = deloop.state.metrics().render();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("deloop_proxy_tool_loops")
                && l.contains(r#"source="reply""#)
                && l.contains(r#"action="blocked""#)),
        "the reply's block is counted: {metrics}"
    );

    // Every model request went through deloop's guardrail (pre and post).
    let metrics = deloop.state.metrics().render();
    assert!(
        metrics.contains(r#"route="/beta/litellm_basic_guardrail_api""#),
        "{metrics}"
    );
}
