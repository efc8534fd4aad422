//! Fixtures: the library, the fake LLM's replies, servers over it and readers
//! of their SSE answers.

use crate::common;
use crate::common::{client, start, state_with, Library, TestServer};
use crate::llm::{fast_retry, Fake, Reply};
use deloop_config::Config;
use deloop_core::loops::Profile;
use deloop_oracle::Oracle;
use deloop_server::auth::ApiKeys;
use deloop_server::ServerSettings;
use serde_json::{json, Value};

pub(crate) const LOOPS_MD: &str =
    "# Loops\n\nWhen a stream loops, the watcher cuts it and the request is \
cancelled.\nCancel the stream as soon as the watcher fires.\n\n## Bucles\n\nCuando el stream \
entra en bucle, el vigilante lo corta y se cancela la petición.\n";
pub(crate) const RESCUE_MD: &str =
    "# Rescue\n\nThe JSON rescue recovers the answer from broken model output.\n";
pub(crate) const QUESTION: &str = "How do I stop a looping stream?";

pub(crate) fn library() -> Library {
    common::library(&[("loops.md", LOOPS_MD), ("rescue.md", RESCUE_MD)])
}

pub(crate) fn openai_config(fake: &Fake) -> Config {
    let mut c = Config::default();
    c.llm.provider = Some(deloop_llm::Provider::Openai);
    c.llm.openai_base_url = Some(format!("{}/v1", fake.url));
    c.llm.model = Some("test-model".into());
    c.llm.retry = fast_retry(1);
    c
}

pub(crate) fn chunk(text: &str) -> String {
    json!({"id": "c1", "object": "chat.completion.chunk",
           "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
    .to_string()
}

pub(crate) fn last_chunk() -> String {
    json!({"id": "c1", "object": "chat.completion.chunk",
           "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    .to_string()
}

/// A healthy streamed reply (citing nothing retrieved).
pub(crate) fn healthy_stream() -> Reply {
    healthy_stream_citing("loops.md")
}

/// A healthy streamed reply citing lines 1-4 of `source`.
pub(crate) fn healthy_stream_citing(source: &str) -> Reply {
    let citations = json!([{"source": source, "start_line": 1, "end_line": 4}]);
    Reply::Sse(vec![
        chunk("{\"answer\": \"Cancel the stream when the watcher fires.\", "),
        chunk(&format!("\"citations\": {citations}}}")),
        last_chunk(),
    ])
}

/// A stream that loops for `max` chunks unless cancelled.
pub(crate) fn looping_stream(max: usize) -> Reply {
    Reply::LoopSse {
        prefix: vec![chunk(
            "{\"answer\": \"The watcher stops a looping stream and cancels the request. ",
        )],
        repeat: chunk("la continuación de un proceso "),
        max,
    }
}

/// A stream of the same few words for `max` chunks unless cancelled.
pub(crate) fn endless_words(max: usize) -> Reply {
    Reply::LoopSse {
        prefix: vec![chunk("{\"answer\": \"Words ")],
        repeat: chunk("and more words "),
        max,
    }
}

/// Turns the loop guard off: only the client, a deadline or a limit can
/// then end an endless stream.
pub(crate) fn without_loop_guard(config: &mut Config) {
    config.guards.clamp.words.enabled = false;
    config.guards.clamp.substring.enabled = false;
    config.guards.clamp.near.enabled = false;
}

/// A server whose oracle answers from `lib` with `config`.
pub(crate) async fn serve(config: &Config, lib: &Library) -> TestServer {
    serve_with(config, lib, ServerSettings::default()).await
}

pub(crate) async fn serve_with(
    config: &Config,
    lib: &Library,
    settings: ServerSettings,
) -> TestServer {
    let state = state_with(settings, Profile::Default, ApiKeys::default()).serving_oracle();
    let oracle = Oracle::open(config, Some(&lib.db)).unwrap();
    assert!(state.set_oracle(oracle));
    start(state).await
}

pub(crate) async fn post_json(url: &str, body: Value) -> (u16, Value) {
    let res = client().post(url).json(&body).send().await.unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    let value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    (status, value)
}

/// One parsed server-sent event.
#[derive(Debug)]
pub(crate) struct Sse {
    pub(crate) event: String,
    pub(crate) data: Value,
}

/// Reads every event of an SSE response to its end.
pub(crate) async fn read_events(res: reqwest::Response) -> Vec<Sse> {
    let text = res.text().await.unwrap();
    parse_events(&text)
}

pub(crate) fn parse_events(text: &str) -> Vec<Sse> {
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let mut event = String::new();
        let mut data = String::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                event = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
            }
        }
        if !event.is_empty() {
            let data = serde_json::from_str(&data).unwrap_or_else(|e| {
                panic!("event {event}: data is not one JSON object ({e}): {data}")
            });
            out.push(Sse { event, data });
        }
    }
    out
}

/// Event names with runs of deltas collapsed into `delta*`.
pub(crate) fn names(events: &[Sse]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in events {
        let name = if e.event == "delta" {
            "delta*".to_string()
        } else {
            e.event.clone()
        };
        if !(name == "delta*" && out.last().map(String::as_str) == Some("delta*")) {
            out.push(name);
        }
    }
    out
}

pub(crate) async fn ask_sse(url: &str, body: Value) -> reqwest::Response {
    let res = client()
        .post(url)
        .header("accept", "text/event-stream")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    res
}
