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

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use common::histories::repeated_history;
use common::litellm::{self, LiteLlm, MASTER_KEY};
use common::*;
use deloop_core::repetition::{clamp, ClampConfig};
use deloop_http::auth::ApiKeys;
use serde_json::{json, Value};

/// deloop's own key, which LiteLLM sends as the guardrail's `api_key`.
const DELOOP_KEY: &str = "deloop-guardrail-secret";

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
    let Some(program) = litellm::find("litellm_guardrail") else {
        return;
    };
    let model = Model::start().await;
    let deloop = start_proxy_with(
        settings(&model.url),
        None,
        ApiKeys::parse(Some(DELOOP_KEY), None),
    )
    .await;
    let mut litellm = LiteLlm::start(
        &program,
        &litellm::model_yaml("fake", &format!("{}/v1", model.url)),
        &litellm::guardrail_yaml(
            &deloop.url,
            DELOOP_KEY,
            "deloop",
            "[pre_call, post_call]",
            true,
            &[],
        ),
    );
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
