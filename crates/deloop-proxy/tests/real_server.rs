//! `deloop proxy` in front of a real llama.cpp `llama-server` serving real
//! small models (issue 11 §4): SmolLM2-135M-Instruct through
//! `/v1/chat/completions` and Gemma 3 270M (a base model without a chat
//! template) through `/v1/completions`, greedy decoding, as the recorded set
//! `testdata/real-model` was made.
//!
//! - A stream that really loops is cut: the client's text is what the model
//!   wrote (a prefix of the recorded generation), it keeps what precedes the
//!   hand-labelled onset and ends within the bound of `repetition_real_model`
//!   (onset + 3 units + 200 characters), and the ending is well-formed (the
//!   last chunk has `finish_reason` and the `deloop` object, then `[DONE]`).
//! - llama-server stops generating after the cut: its `/slots` shows the slot
//!   idle and its `/metrics` token counters stop before `max_tokens`.
//! - Healthy answers pass through byte for byte: the proxied events and
//!   replies equal the same request sent straight to llama-server, up to
//!   the fields llama-server makes new on every request (`id`, `created`,
//!   `timings`).
//! - Tools and a tool-call history pass through: the same replies direct
//!   and proxied, and the same prompt rendered from them.
//! - The same loop through Anthropic's Messages API (`/v1/messages`, which
//!   llama-server serves too) is cut with the Anthropic ending.
//! - The official OpenAI and Anthropic Python SDKs parse the cut streams
//!   (and their accumulating helpers rebuild them) without error.
//!
//! The prompts are those of the recorded set whose greedy generations loop
//! earliest (the watcher cuts after about 20 to 35 tokens), so the suite is
//! cheap: about a minute with one thread on a loaded 2-core machine.
//! Without llama-server and the models each test prints one line and
//! passes; with `CI=true` or `DELOOP_REQUIRE_REAL=1` it fails instead. One
//! llama-server runs at a time (the tests take a lock), and each is killed
//! when its test ends.

mod common;

use std::time::{Duration, Instant};

use common::*;
use deloop_testdata::llama::{self, LlamaServer, Model, Options};
use serde_json::{json, Value};
use tokio::sync::{Mutex, MutexGuard};

/// The loop that SmolLM2 falls into soonest in the recorded set ("La Casa
/// de la Casa de la Casa …"; the watcher cuts after about 33 tokens).
const SMOLLM2_LOOP: &str = "smollm2/es-json-02";
/// Gemma 3's early loop ("Hola, hola, hola, …", cut after about 21 tokens).
const GEMMA3_LOOP: &str = "gemma3/es-count-02";
/// Healthy SmolLM2 answers of the recorded set (a short list; code).
const SMOLLM2_HEALTHY: [&str; 2] = ["smollm2/en-list-02", "smollm2/es-code-01"];
/// `max_tokens` of the looping requests, as recorded: a proxy that did not
/// stop the server would let it run to these.
const SMOLLM2_MAX_TOKENS: u64 = 400;
const GEMMA3_MAX_TOKENS: u64 = 256;
/// How long the server may take to go idle after a cut (generous: a
/// loaded machine; nothing is timed, this only bounds a failure).
const IDLE_DEADLINE: Duration = Duration::from_secs(120);

/// One llama-server at a time: the machine has two cores, and the tests of
/// this file run on parallel threads.
async fn one_server_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::const_new(());
    LOCK.lock().await
}

/// The server as the set was recorded: one slot, a 2048-token context, one
/// thread (greedy decoding then gives the recorded texts byte for byte).
fn start(model: Model, suite: &str, extra_args: &[&str]) -> Option<LlamaServer> {
    let options = Options {
        ctx_size: 2048,
        slots: 1,
        threads: Some(1),
        extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
    };
    llama::start_with(model, &options, suite)
}

// --- The recorded set ----------------------------------------------------

fn jsonl(name: &str) -> Vec<Value> {
    let path = deloop_testdata::workspace_root()
        .join("testdata/real-model")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// One recorded generation with its prompt and hand label.
struct Recorded {
    prompt: String,
    text: String,
    label: String,
    /// Characters before the loop (loops only).
    onset: usize,
    /// Characters of the loop's unit (loops only).
    unit_chars: usize,
}

fn recorded(id: &str) -> Recorded {
    let find = |rows: Vec<Value>| {
        rows.into_iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("{id} is not in testdata/real-model"))
    };
    let generation = find(jsonl("generations.jsonl"));
    let label = find(jsonl("labels.jsonl"));
    let prompt_id = generation["prompt_id"].as_str().unwrap();
    let prompt = jsonl("prompts.jsonl")
        .into_iter()
        .find(|p| p["id"] == prompt_id)
        .unwrap();
    Recorded {
        prompt: prompt["prompt"].as_str().unwrap().to_string(),
        text: generation["text"].as_str().unwrap().to_string(),
        label: label["label"].as_str().unwrap().to_string(),
        onset: label["onset"].as_u64().unwrap_or(0) as usize,
        unit_chars: label["unit"].as_str().map_or(0, |u| u.chars().count()),
    }
}

/// A greedy request as the set was recorded (`cache_prompt` is llama.cpp's
/// own field: the proxy must pass it through).
fn chat_body(prompt: &str, max_tokens: u64, stream: bool) -> Value {
    json!({
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens, "temperature": 0, "top_k": 1, "seed": 0,
        "cache_prompt": false, "stream": stream,
    })
}

/// Gemma 3 is a base model without a chat template: the prompt is framed as
/// a document, as `scripts/real-model-measure.py` does.
fn completion_body(prompt: &str, max_tokens: u64, stream: bool) -> Value {
    json!({
        "prompt": format!("Question: {prompt}\nAnswer:"),
        "max_tokens": max_tokens, "temperature": 0, "top_k": 1, "seed": 0,
        "cache_prompt": false, "stream": stream,
    })
}

// --- HTTP ----------------------------------------------------------------

async fn post(base: &str, path: &str, body: &Value) -> (u16, reqwest::header::HeaderMap, String) {
    let r = client()
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .timeout(Duration::from_secs(600))
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {base}{path}: {e}"));
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, headers, r.text().await.unwrap())
}

/// `GET path` of the server, off the async workers (a blocking client).
async fn server_get(server: &LlamaServer, path: &str) -> String {
    let (status, body) = tokio::task::block_in_place(|| server.get(path))
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

/// A counter of llama-server's `/metrics` (`llamacpp:NAME`).
async fn counter(server: &LlamaServer, name: &str) -> f64 {
    let metrics = server_get(server, "/metrics").await;
    let key = format!("llamacpp:{name} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&key))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /metrics:\n{metrics}"))
}

/// Polls `/slots` until no slot is processing; panics past the deadline.
async fn wait_idle(server: &LlamaServer) {
    let deadline = Instant::now() + IDLE_DEADLINE;
    loop {
        let slots: Value = serde_json::from_str(&server_get(server, "/slots").await).unwrap();
        let busy = slots
            .as_array()
            .expect("/slots is an array")
            .iter()
            .any(|s| s["is_processing"] == json!(true));
        if !busy {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "llama-server still generating {} s after the cut: {slots}",
            IDLE_DEADLINE.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// --- Judging streams -----------------------------------------------------

/// The data events of an SSE body as JSON, and whether `[DONE]` ended it.
fn data_events(body: &str) -> (Vec<Value>, bool) {
    let all = events(body);
    let done = all.last().is_some_and(|(_, d)| d == "[DONE]");
    let values = all
        .iter()
        .filter(|(_, d)| d != "[DONE]")
        .map(|(_, d)| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}")))
        .collect();
    (values, done)
}

/// The text of choice 0 of a chat (`delta.content`) or completion (`text`)
/// stream, and the number of events that carried some.
fn stream_text(events: &[Value], chat: bool) -> (String, usize) {
    let mut text = String::new();
    let mut pieces = 0;
    for ev in events {
        for c in ev["choices"].as_array().into_iter().flatten() {
            let piece = if chat {
                &c["delta"]["content"]
            } else {
                &c["text"]
            };
            if let Some(p) = piece.as_str().filter(|p| !p.is_empty()) {
                text.push_str(p);
                pieces += 1;
            }
        }
    }
    (text, pieces)
}

/// Checks a cut text against the recorded generation: what the model wrote
/// (a prefix of the recorded text) plus the guard's marker, keeping what
/// precedes the onset and ending within `onset + 3 units + 200` characters
/// (the bound of `deloop-core/tests/repetition_real_model.rs`).
fn assert_cut_within_bound(id: &str, got: &str, rec: &Recorded) {
    assert_eq!(rec.label, "loop", "{id} is not a labelled loop");
    let marker = deloop_core::repetition::ClampConfig::default().words.marker;
    // The marker loses its space where the kept text ends a line.
    let kept = got
        .strip_suffix(marker.as_str())
        .or_else(|| got.strip_suffix(marker.trim_start()))
        .unwrap_or_else(|| panic!("{id}: the cut text does not end with {marker:?}: {got:?}"));
    assert!(
        rec.text.starts_with(kept),
        "{id}: the proxied text is not what llama-server generated when the set was recorded \
         (greedy decoding on this build is deterministic; has the server or model changed?)\n\
         proxied:  {kept:?}\nrecorded: {:?}",
        rec.text
    );
    let before: String = rec.text.chars().take(rec.onset).collect();
    assert!(
        kept.starts_with(before.trim_end()),
        "{id}: the cut lost text before the loop (onset {}): {kept:?}",
        rec.onset
    );
    let bound = rec.onset + 3 * rec.unit_chars + 200;
    assert!(
        kept.chars().count() <= bound,
        "{id}: {} characters reached the client, more than the bound {bound} \
         (onset {} + 3 × {} + 200): {kept:?}",
        kept.chars().count(),
        rec.onset,
        rec.unit_chars
    );
    assert!(
        kept.len() < rec.text.len(),
        "{id}: nothing was cut: {kept:?}"
    );
}

/// The ending of a cut stream: the last data event has the first event's
/// `id`, `model` and `created`, choice 0 with `finish_reason` `stop`, and the
/// `deloop` object; `[DONE]` follows.
fn assert_well_formed_ending(id: &str, events: &[Value], done: bool, kept_bytes: usize) {
    assert!(done, "{id}: the cut stream does not end with [DONE]");
    let first = events.first().expect("events");
    let last = events.last().expect("events");
    for field in ["id", "model", "created", "object"] {
        assert_eq!(last[field], first[field], "{id}: {field} of {last}");
    }
    assert_eq!(last["choices"][0]["finish_reason"], "stop", "{id}: {last}");
    let deloop = &last["deloop"];
    assert!(deloop["detector"].is_string(), "{id}: {last}");
    assert_eq!(deloop["channel"], "content", "{id}: {last}");
    assert!(
        deloop["saved_chars"].as_u64().unwrap_or(0) > 0,
        "{id}: {last}"
    );
    assert!(
        deloop["start"].as_u64().expect("start") as usize <= kept_bytes,
        "{id}: the loop's start lies beyond the text: {last}"
    );
    // Nothing but the last event says finish_reason.
    let finishes = events
        .iter()
        .filter(|e| e["choices"][0]["finish_reason"].is_string())
        .count();
    assert_eq!(finishes, 1, "{id}: several finish_reasons");
}

/// Streams a looping generation through the proxy; judges the cut, then
/// that llama-server stopped. Returns nothing: the assertions say it all.
async fn cut_and_stop(model: Model, id: &str, chat: bool, max_tokens: u64) {
    let suite = format!("real_server::{}", model.name());
    let _one = one_server_at_a_time().await;
    let Some(server) = start(model, &suite, &[]) else {
        return;
    };
    let proxy = start_proxy(&server.base_url()).await;
    let rec = recorded(id);
    let (path, body) = if chat {
        (
            "/v1/chat/completions",
            chat_body(&rec.prompt, max_tokens, true),
        )
    } else {
        (
            "/v1/completions",
            completion_body(&rec.prompt, max_tokens, true),
        )
    };
    let predicted_before = counter(&server, "tokens_predicted_total").await;

    let (status, _, sse) = post(&proxy.url, path, &body).await;
    assert_eq!(status, 200, "{id}: {sse}");
    let (events, done) = data_events(&sse);
    let (text, pieces) = stream_text(&events, chat);
    eprintln!("{id}: the client got {pieces} pieces: {text:?}");
    assert_cut_within_bound(id, &text, &rec);
    assert_well_formed_ending(id, &events, done, text.len());
    assert_server_stopped(&server, id, predicted_before, pieces, max_tokens).await;
}

/// The server stops after a cut: its slot goes idle, and the tokens it
/// predicted for the request (`predicted_before` is the counter before it)
/// are fewer than `max_tokens` (it stopped at the close, not at its
/// limit); its counters then stay put.
async fn assert_server_stopped(
    server: &LlamaServer,
    id: &str,
    predicted_before: f64,
    pieces: usize,
    max_tokens: u64,
) {
    wait_idle(server).await;
    let predicted = counter(server, "tokens_predicted_total").await - predicted_before;
    let decoded = counter(server, "n_decode_total").await;
    eprintln!(
        "{id}: llama-server predicted {predicted} tokens of max_tokens {max_tokens} \
         ({pieces} text pieces reached the client)"
    );
    // What happened, not how fast: the slot went idle before its
    // `max_tokens`, so the generation ended because the proxy closed the
    // request at the cut (a server left running would have reached the
    // limit).
    assert!(
        predicted >= 1.0 && predicted < max_tokens as f64,
        "{id}: llama-server predicted {predicted} tokens for a request cut after {pieces} \
         pieces (max_tokens {max_tokens}): it did not stop at the cut"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        counter(server, "n_decode_total").await,
        decoded,
        "{id}: llama-server went on decoding after its slot was idle"
    );
    assert_eq!(counter(server, "requests_processing").await, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smollm2_looping_chat_stream_is_cut_and_llama_server_stops() {
    cut_and_stop(Model::SmolLm2, SMOLLM2_LOOP, true, SMOLLM2_MAX_TOKENS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemma3_looping_completion_stream_is_cut_and_llama_server_stops() {
    cut_and_stop(Model::Gemma3, GEMMA3_LOOP, false, GEMMA3_MAX_TOKENS).await;
}

/// llama-server also speaks Anthropic's Messages API (`/v1/messages`): the
/// same loop through it is cut with the Anthropic ending (the open block
/// closed, `message_delta` with `stop_reason` `end_turn` and the `deloop`
/// object, `message_stop`), and the server stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smollm2_looping_messages_stream_is_cut_and_llama_server_stops() {
    let id = SMOLLM2_LOOP;
    let _one = one_server_at_a_time().await;
    let Some(server) = start(Model::SmolLm2, "real_server::messages", &[]) else {
        return;
    };
    let proxy = start_proxy(&server.base_url()).await;
    let rec = recorded(id);
    let body = json!({
        "model": "smollm2",
        "messages": [{"role": "user", "content": rec.prompt}],
        "max_tokens": SMOLLM2_MAX_TOKENS, "temperature": 0, "top_k": 1, "seed": 0,
        "cache_prompt": false, "stream": true,
    });
    let predicted_before = counter(&server, "tokens_predicted_total").await;
    let (status, _, sse) = post(&proxy.url, "/v1/messages", &body).await;
    assert_eq!(status, 200, "{id}: {sse}");
    let evs: Vec<(String, Value)> = events(&sse)
        .into_iter()
        .map(|(name, d)| {
            let v: Value = serde_json::from_str(&d).unwrap_or_else(|e| panic!("{e}: {d}"));
            (name.unwrap_or_default(), v)
        })
        .collect();
    let mut text = String::new();
    let mut pieces = 0;
    for (_, v) in &evs {
        if let Some(t) = v["delta"]["text"].as_str().filter(|t| !t.is_empty()) {
            text.push_str(t);
            pieces += 1;
        }
    }
    eprintln!("{id} (messages): the client got {pieces} pieces: {text:?}");
    assert_cut_within_bound(id, &text, &rec);
    let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"), "{names:?}");
    assert_eq!(
        names[names.len().saturating_sub(3)..],
        ["content_block_stop", "message_delta", "message_stop"],
        "{id}: the ending"
    );
    for (n, v) in &evs {
        assert_eq!(
            v["type"].as_str(),
            Some(n.as_str()),
            "{id}: event name and type"
        );
    }
    let delta = &evs[evs.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "end_turn", "{delta}");
    assert!(delta["usage"]["output_tokens"].is_u64(), "{delta}");
    assert!(delta["deloop"]["detector"].is_string(), "{delta}");
    assert!(
        delta["deloop"]["saved_chars"].as_u64().unwrap_or(0) > 0,
        "{delta}"
    );
    assert_eq!(
        names.iter().filter(|n| **n == "message_delta").count(),
        1,
        "{id}: one message_delta"
    );
    assert_server_stopped(&server, id, predicted_before, pieces, SMOLLM2_MAX_TOKENS).await;
}

// --- Pass-through --------------------------------------------------------

/// A reply or event without the fields llama-server makes new on every
/// request: `id`, `created` and `timings` (its clock).
fn without_per_request_fields(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        for k in ["id", "created", "timings"] {
            o.remove(k);
        }
    }
    v
}

/// Sends `body` to `path` straight to llama-server and through the proxy;
/// asserts both replies are the same (streamed: event by event) up to the
/// per-request fields, and that the proxy marked nothing. Returns the
/// direct reply's text (choice 0) for the caller's own checks.
async fn same_direct_and_proxied(
    server: &LlamaServer,
    proxy: &Proxy,
    what: &str,
    path: &str,
    body: &Value,
) -> Value {
    let direct = post(&server.base_url(), path, body).await;
    let proxied = post(&proxy.url, path, body).await;
    assert_eq!(direct.0, 200, "{what}: {}", direct.2);
    assert_eq!(proxied.0, direct.0, "{what}: {}", proxied.2);
    for h in ["x-deloop-cuts", "x-deloop-saved-chars", "x-deloop-json"] {
        assert!(proxied.1.get(h).is_none(), "{what}: the proxy set {h}");
    }
    assert!(proxied.1.get("x-deloop-request-id").is_some(), "{what}");
    if body["stream"] == json!(true) {
        let (d, d_done) = data_events(&direct.2);
        let (p, p_done) = data_events(&proxied.2);
        assert!(d_done && p_done, "{what}: [DONE] missing");
        let d: Vec<Value> = d.into_iter().map(without_per_request_fields).collect();
        let p: Vec<Value> = p.into_iter().map(without_per_request_fields).collect();
        assert_eq!(p.len(), d.len(), "{what}: event count");
        for (i, (p, d)) in p.iter().zip(&d).enumerate() {
            assert_eq!(p, d, "{what}: event {i} differs");
        }
        assert!(
            p.iter().all(|e| e.get("deloop").is_none()),
            "{what}: a deloop object in a healthy stream"
        );
        json!(d)
    } else {
        let d: Value = serde_json::from_str(&direct.2).unwrap();
        let p: Value = serde_json::from_str(&proxied.2).unwrap();
        assert!(p.get("deloop").is_none(), "{what}: {p}");
        let d = without_per_request_fields(d);
        assert_eq!(without_per_request_fields(p), d, "{what}");
        d
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smollm2_healthy_answers_pass_through_byte_for_byte() {
    let _one = one_server_at_a_time().await;
    let Some(server) = start(Model::SmolLm2, "real_server::healthy", &[]) else {
        return;
    };
    let proxy = start_proxy(&server.base_url()).await;
    for id in SMOLLM2_HEALTHY {
        let rec = recorded(id);
        assert_eq!(rec.label, "healthy", "{id}");
        let plain = same_direct_and_proxied(
            &server,
            &proxy,
            &format!("{id} (not streamed)"),
            "/v1/chat/completions",
            &chat_body(&rec.prompt, SMOLLM2_MAX_TOKENS, false),
        )
        .await;
        let streamed = same_direct_and_proxied(
            &server,
            &proxy,
            &format!("{id} (streamed)"),
            "/v1/chat/completions",
            &chat_body(&rec.prompt, SMOLLM2_MAX_TOKENS, true),
        )
        .await;
        // And both are the recorded answer, whole: nothing was cut.
        let (streamed_text, _) = stream_text(streamed.as_array().unwrap(), true);
        assert_eq!(streamed_text, rec.text, "{id}: streamed");
        assert_eq!(plain["choices"][0]["message"]["content"], rec.text.as_str());
        assert_eq!(plain["choices"][0]["finish_reason"], "stop", "{id}");
    }
}

/// The tool the requests offer, and a history in which the assistant
/// called it and got its result.
fn tool_requests() -> (Value, Value) {
    let tools = json!([{"type": "function", "function": {
        "name": "get_weather", "description": "The current weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}]);
    let offer = json!({
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "tools": tools, "tool_choice": "auto",
        "max_tokens": 48, "temperature": 0, "top_k": 1, "seed": 0, "cache_prompt": false,
    });
    let history = json!({
        "messages": [
            {"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp_c\": 18, \"sky\": \"cloudy\"}"},
        ],
        "tools": tools,
        "max_tokens": 48, "temperature": 0, "top_k": 1, "seed": 0, "cache_prompt": false,
    });
    (offer, history)
}

/// SmolLM2's chat template (in its GGUF) knows no tools: llama-server
/// (`--jinja`, its default in this build) renders neither the `tools` nor
/// the assistant's `tool_calls`, and the model answers in text, so a tool
/// call in a reply cannot come from this model. What can be shown is that
/// the proxy forwards tool requests and tool-call histories unchanged: the
/// replies direct and proxied are the same, streamed and not, and the
/// prompt llama-server renders from the request (`/apply-template`, a path
/// the proxy passes through) is the same byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smollm2_tools_and_tool_call_history_pass_through_unchanged() {
    let _one = one_server_at_a_time().await;
    let Some(server) = start(Model::SmolLm2, "real_server::tools", &["--jinja"]) else {
        return;
    };
    let proxy = start_proxy(&server.base_url()).await;
    let (offer, history) = tool_requests();
    for (what, body) in [("tools offered", offer), ("tool-call history", history)] {
        let mut streamed = body.clone();
        streamed["stream"] = json!(true);
        let reply =
            same_direct_and_proxied(&server, &proxy, what, "/v1/chat/completions", &body).await;
        assert!(reply["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
        same_direct_and_proxied(&server, &proxy, what, "/v1/chat/completions", &streamed).await;
        let direct = post(&server.base_url(), "/apply-template", &body).await;
        let proxied = post(&proxy.url, "/apply-template", &body).await;
        assert_eq!(direct.0, 200, "{what}: {}", direct.2);
        assert_eq!(proxied.2, direct.2, "{what}: the rendered prompts differ");
        if what == "tool-call history" {
            // The tool's result reached the model.
            assert!(direct.2.contains("temp_c"), "{}", direct.2);
        }
    }
}

// --- The official OpenAI SDK ---------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_sdks_through_the_proxy_to_llama_server() {
    let python = sdk::python();
    if !deloop_testdata::real_component(
        sdk::present(&python),
        "real_server::sdks (openai and anthropic Python SDKs)",
        "bash scripts/setup-proxy-clients.sh",
    ) {
        return;
    }
    let _one = one_server_at_a_time().await;
    let Some(server) = start(Model::SmolLm2, "real_server::sdks", &[]) else {
        return;
    };
    let proxy = start_proxy(&server.base_url()).await;
    let looping = recorded(SMOLLM2_LOOP);
    let healthy = recorded(SMOLLM2_HEALTHY[0]);
    let results = sdk::run(
        &python,
        "real_server_client.py",
        &[
            proxy.url.to_string(),
            looping.prompt.to_string(),
            healthy.prompt.to_string(),
            SMOLLM2_MAX_TOKENS.to_string(),
        ],
        Duration::from_secs(600),
    )
    .await;
    let get = |name: &str| results.get(name);

    let r = get("looping_stream_with_usage");
    assert_cut_within_bound(SMOLLM2_LOOP, r["text"].as_str().unwrap(), &looping);
    assert_eq!(r["finish_reason"], "stop", "{r}");
    assert!(r["deloop"]["saved_chars"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(
        r["ids"], 1,
        "one id for the whole stream, the cut included: {r}"
    );
    // llama-server sends its usage only in its last chunk, which the cut
    // never reaches: the proxy reports null rather than invent counts.
    assert_eq!(r["usage_chunks"], 1, "{r}");
    assert!(r["usage"].is_null(), "{r}");

    let r = get("looping_stream_helper");
    assert_cut_within_bound(SMOLLM2_LOOP, r["text"].as_str().unwrap(), &looping);
    assert_eq!(r["finish_reason"], "stop", "{r}");

    let r = get("healthy_reply");
    assert_eq!(r["text"], healthy.text.as_str(), "{r}");
    assert_eq!(r["finish_reason"], "stop");
    assert!(r["deloop"].is_null() && r["x_deloop_cuts"].is_null(), "{r}");

    let r = get("healthy_stream");
    assert_eq!(r["text"], healthy.text.as_str(), "{r}");
    assert_eq!(r["finish_reason"], "stop");

    let r = get("anthropic_looping_stream");
    assert_cut_within_bound(SMOLLM2_LOOP, r["text"].as_str().unwrap(), &looping);
    assert_eq!(r["final_text"], r["text"], "{r}");
    assert_eq!(r["stop_reason"], "end_turn", "{r}");

    let r = get("anthropic_healthy_reply");
    assert_eq!(r["text"], healthy.text.as_str(), "{r}");
    assert_eq!(r["stop_reason"], "end_turn", "{r}");
    assert!(r["deloop"].is_null(), "{r}");

    wait_idle(&server).await;
}
