//! End-to-end tests of `deloop ask` (and `deloop search --hyde`): the real
//! binary, a real SQLite index built by `deloop index` in a temp dir, and
//! fake Gemini / OpenAI-compatible servers on 127.0.0.1 that speak the real
//! wire formats (JSON bodies, SSE streams) from a script.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_deloop");

// ---------------------------------------------------------------- fake server

#[derive(Clone)]
enum Reply {
    Json(u16, Value),
    Sse(Vec<String>),
    /// `prefix` events, then `repeat` up to `max` times, 2 ms apart.
    LoopSse {
        prefix: Vec<String>,
        repeat: String,
        max: usize,
    },
    Slow(Duration, Box<Reply>),
}

#[derive(Default)]
struct Probe {
    sent: AtomicUsize,
    finished: AtomicBool,
}

struct Script {
    replies: Mutex<VecDeque<Reply>>,
    seen: Mutex<Vec<(String, Value)>>,
    probe: Arc<Probe>,
}

struct Fake {
    url: String,
    script: Arc<Script>,
    _rt: tokio::runtime::Runtime,
}

impl Fake {
    fn start(replies: Vec<Reply>) -> Fake {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let script = Arc::new(Script {
            replies: Mutex::new(replies.into()),
            seen: Mutex::new(Vec::new()),
            probe: Arc::new(Probe::default()),
        });
        let app = Router::new().fallback(handle).with_state(script.clone());
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        rt.spawn(async move { axum::serve(listener, app).await.unwrap() });
        Fake {
            url: format!("http://{addr}"),
            script,
            _rt: rt,
        }
    }

    fn hits(&self) -> usize {
        self.script.seen.lock().unwrap().len()
    }

    fn seen(&self) -> Vec<(String, Value)> {
        self.script.seen.lock().unwrap().clone()
    }
}

async fn handle(State(script): State<Arc<Script>>, req: Request) -> Response {
    let path = match req.uri().query() {
        Some(q) => format!("{}?{q}", req.uri().path()),
        None => req.uri().path().to_string(),
    };
    let bytes = axum::body::to_bytes(req.into_body(), 16 << 20)
        .await
        .unwrap_or_default();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    script.seen.lock().unwrap().push((path, body));
    let next = script.replies.lock().unwrap().pop_front();
    match next {
        Some(r) => respond(r, script.probe.clone()).await,
        None => (StatusCode::IM_A_TEAPOT, "script exhausted").into_response(),
    }
}

fn sse(body: Body) -> Response {
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(body)
        .unwrap()
}

async fn respond(reply: Reply, probe: Arc<Probe>) -> Response {
    match reply {
        Reply::Json(status, v) => {
            (StatusCode::from_u16(status).unwrap(), axum::Json(v)).into_response()
        }
        Reply::Sse(events) => sse(Body::from(
            events
                .iter()
                .map(|e| format!("data: {e}\n\n"))
                .collect::<String>(),
        )),
        Reply::LoopSse {
            prefix,
            repeat,
            max,
        } => {
            let stream = futures_util::stream::unfold(0usize, move |i| {
                let (prefix, repeat, probe) = (prefix.clone(), repeat.clone(), probe.clone());
                async move {
                    if i >= prefix.len() + max {
                        probe.finished.store(true, Ordering::SeqCst);
                        return None;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    let data = prefix.get(i).unwrap_or(&repeat);
                    probe.sent.fetch_add(1, Ordering::SeqCst);
                    Some((
                        Ok::<_, Infallible>(Bytes::from(format!("data: {data}\n\n"))),
                        i + 1,
                    ))
                }
            });
            sse(Body::from_stream(stream))
        }
        Reply::Slow(wait, inner) => {
            tokio::time::sleep(wait).await;
            Box::pin(respond(*inner, probe)).await
        }
    }
}

// ------------------------------------------------------------- wire formats

fn gemini(text: &str, finish: &str) -> Value {
    json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
            "finishReason": finish, "index": 0}],
           "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5}})
}

fn gemini_chunk(text: &str) -> String {
    json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}]})
        .to_string()
}

fn gemini_last(text: &str) -> String {
    gemini(text, "STOP").to_string()
}

fn openai(text: &str) -> Value {
    json!({"id": "c1", "object": "chat.completion", "model": "m",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop"}]})
}

fn openai_chunk(text: &str) -> String {
    json!({"id": "c1", "object": "chat.completion.chunk",
           "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
    .to_string()
}

// ------------------------------------------------------------------- set-up

struct Env {
    dir: tempfile::TempDir,
    db: PathBuf,
    loops_md: String,
}

const LOOPS_MD: &str =
    "# Loops\n\nWhen a stream loops, the watcher cuts it and the request is cancelled.\n\
Cancel the stream as soon as the watcher fires.\n\n## Bucles\n\nCuando el stream entra en bucle, \
el vigilante lo corta y se cancela la petición.\n";
const RESCUE_MD: &str =
    "# Rescue\n\nThe JSON rescue recovers the answer from broken model output.\n";

/// A temp dir (also the working directory of the binary) with two docs
/// indexed lexically into `index.db` by the real `deloop index`.
fn setup(config: &str) -> Env {
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

const FAST: &str =
    "[llm.retry]\nmax_attempts = 1\n[oracle]\nhyde_timeout_secs = 1\ntimeout_secs = 20\n";

enum Provider<'a> {
    None,
    Gemini(&'a Fake),
    OpenAi(&'a Fake),
}

fn ask(env: &Env, provider: Provider, args: &[&str]) -> (Output, Value) {
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

fn code(out: &Output) -> i32 {
    out.status.code().unwrap()
}

// -------------------------------------------------------------------- tests

#[test]
fn gemini_valid_json_keeps_real_citations_and_drops_a_bogus_one() {
    let env = setup(FAST);
    let reply = json!({
        "answer": "Cancel the stream as soon as the **watcher** fires.",
        "citations": [
            {"source": env.loops_md, "start_line": 1, "end_line": 4},
            {"source": "docs/invented.md", "start_line": 1, "end_line": 2}
        ]
    })
    .to_string();
    let fake = Fake::start(vec![Reply::Json(200, gemini(&reply, "STOP"))]);
    let (out, v) = ask(
        &env,
        Provider::Gemini(&fake),
        &["--no-stream", "How do I stop a looping stream?"],
    );
    assert_eq!(code(&out), 0, "{v}");
    assert_eq!(
        v["answer"],
        "Cancel the stream as soon as the **watcher** fires."
    );
    assert_eq!(v["provider"], "gemini");
    assert_eq!(v["model"], "gemma-4-26b-a4b-it");
    assert_eq!(v["language"], "en");
    assert_eq!(v["degraded"], false);
    assert_eq!(v["citations"].as_array().unwrap().len(), 1);
    assert_eq!(v["citations"][0]["source"], env.loops_md.as_str());
    assert_eq!(v["dropped_citations"], 1);
    // The request really carried the retrieved passage and the JSON schema.
    let seen = fake.seen();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].0.ends_with(":generateContent"), "{}", seen[0].0);
    let body = seen[0].1.to_string();
    assert!(body.contains("watcher cuts it"), "{body}");
    assert!(body.contains("citations"));
}

#[test]
fn gemini_stream_with_the_seeds_broken_json_is_rescued() {
    let env = setup(FAST);
    // Seed 001, PR #96: an unescaped inner quote in markdown, streamed in pieces.
    let events = vec![
        gemini_chunk("{\"answer\": \"**Auditoría Suprema** "),
        gemini_chunk("\"la revisión final\" del sistema de bucles.\"}"),
        gemini_last("\n```garbage"),
    ];
    let fake = Fake::start(vec![Reply::Sse(events)]);
    let (out, v) = ask(
        &env,
        Provider::Gemini(&fake),
        &["¿Qué es la auditoría suprema?"],
    );
    assert_eq!(code(&out), 0, "{v}");
    assert_eq!(
        v["answer"],
        "**Auditoría Suprema** \"la revisión final\" del sistema de bucles."
    );
    assert_eq!(v["language"], "es");
    assert_eq!(v["streamed"], true);
    assert!(fake.seen()[0].0.contains(":streamGenerateContent?alt=sse"));
}

#[test]
fn openai_broken_json_with_raw_newline_and_garbage_is_rescued() {
    let env = setup(FAST);
    let fake = Fake::start(vec![Reply::Json(
        200,
        openai("{\"answer\": \"Línea uno\nlínea dos: corta el stream.\"}\nGARBAGE ```"),
    )]);
    let (out, v) = ask(
        &env,
        Provider::OpenAi(&fake),
        &["--no-stream", "--mode", "help", "¿Cómo corto un bucle?"],
    );
    assert_eq!(code(&out), 0, "{v}");
    assert_eq!(v["answer"], "Línea uno\nlínea dos: corta el stream.");
    assert_eq!(v["provider"], "openai");
    assert_eq!(v["model"], "fake-model");
    assert_eq!(v["mode"], "help");
    assert!(fake.seen()[0].0.ends_with("/v1/chat/completions"));
}

#[test]
fn openai_looping_stream_is_cancelled_early_and_clamped() {
    let env = setup(FAST);
    let max = 2_000;
    let fake = Fake::start(vec![Reply::LoopSse {
        prefix: vec![openai_chunk(
            "{\"answer\": \"The watcher stops a looping stream and cancels the request. ",
        )],
        repeat: openai_chunk("la continuación de un proceso "),
        max,
    }]);
    let (out, v) = ask(
        &env,
        Provider::OpenAi(&fake),
        &["How do I stop a looping stream?"],
    );
    assert_eq!(code(&out), 3, "{v}");
    assert_eq!(v["loop_cut"], true);
    assert_eq!(v["clamped"], true);
    // A loop mid-stream is reported like the other upstream faults: the
    // answer is the part before the loop, marked degraded, with the reason.
    assert_eq!(v["degraded"], true);
    assert_eq!(v["degraded_reason"], "loop_cut");
    assert!(v["llm_error"].as_str().unwrap().contains("looped"), "{v}");
    assert!(v["loop_detector"].is_string(), "{v}");
    assert!(
        v["answer"]
            .as_str()
            .unwrap()
            .starts_with("The watcher stops a looping stream"),
        "{v}"
    );
    assert!(v["answer"].as_str().unwrap().len() < 400);
    // The request was cancelled: the server never got to the end.
    std::thread::sleep(Duration::from_millis(200));
    assert!(!fake.script.probe.finished.load(Ordering::SeqCst));
    assert!(fake.script.probe.sent.load(Ordering::SeqCst) < max);
}

#[test]
fn a_word_loop_in_a_plain_reply_is_clamped() {
    let env = setup(FAST);
    let looping = "la continuación de un proceso de automatización automático o la de ".repeat(40);
    let reply = json!({"answer": format!("El vigilante corta el bucle. {looping}")}).to_string();
    let fake = Fake::start(vec![Reply::Json(200, gemini(&reply, "STOP"))]);
    let (out, v) = ask(
        &env,
        Provider::Gemini(&fake),
        &["--no-stream", "¿Cómo corto un bucle?"],
    );
    assert_eq!(code(&out), 3, "{v}");
    assert_eq!(v["clamped"], true);
    assert_eq!(v["degraded"], false);
    assert!(v["answer"]
        .as_str()
        .unwrap()
        .starts_with("El vigilante corta el bucle."));
    assert!(v["answer"].as_str().unwrap().chars().count() < 300, "{v}");
}

#[test]
fn a_reply_clamped_below_20_chars_degrades_in_the_right_language() {
    let env = setup(FAST);
    let reply = json!({"answer": format!("ok {}", "resak-".repeat(200))}).to_string();
    let fake = Fake::start(vec![
        Reply::Json(200, gemini(&reply, "STOP")),
        Reply::Json(200, gemini(&reply, "STOP")),
    ]);
    let (out, v) = ask(
        &env,
        Provider::Gemini(&fake),
        &["--no-stream", "--mode", "help", "¿Cómo corto un bucle?"],
    );
    assert_eq!(code(&out), 3, "{v}");
    assert_eq!(v["degraded"], true);
    assert_eq!(v["degraded_reason"], "loop_too_short");
    // The passages that answer the question are shown instead of the
    // seed's one-line fallback, under a note that says what failed.
    let answer = v["answer"].as_str().unwrap();
    assert!(
        answer.starts_with("El modelo entró en un bucle y deloop cortó su respuesta"),
        "{v}"
    );
    assert!(answer.contains("el vigilante lo corta"), "{v}");
    assert!(!v["citations"].as_array().unwrap().is_empty(), "{v}");
    let (_, v) = ask(
        &env,
        Provider::Gemini(&fake),
        &["--no-stream", "--mode", "tutor", "How do I stop a loop?"],
    );
    let answer = v["answer"].as_str().unwrap();
    assert!(
        answer.starts_with("The model looped and deloop cut its answer"),
        "{v}"
    );
    assert!(answer.contains("Cancel the stream"), "{v}");
}

#[test]
fn a_reply_clamped_too_short_with_nothing_retrieved_keeps_the_modes_fallback() {
    let env = setup(FAST);
    let reply = json!({"answer": format!("ok {}", "resak-".repeat(200))}).to_string();
    let fake = Fake::start(vec![Reply::Json(200, gemini(&reply, "STOP"))]);
    let (out, v) = ask(
        &env,
        Provider::Gemini(&fake),
        &[
            "--no-stream",
            "--mode",
            "help",
            "¿Qué es la auditoría suprema?",
        ],
    );
    assert_eq!(code(&out), 3, "{v}");
    assert_eq!(v["passages"].as_array().unwrap().len(), 0, "{v}");
    assert_eq!(
        v["answer"],
        "No tengo una respuesta clara. Revisa la documentación."
    );
}

#[test]
fn nothing_rescued_with_passages_answers_with_the_passages() {
    let env = setup(FAST);
    let fake = Fake::start(vec![Reply::Json(200, gemini("", "STOP"))]);
    let (out, v) = ask(
        &env,
        Provider::Gemini(&fake),
        &["--no-stream", "How do I cancel a looping stream?"],
    );
    assert_eq!(code(&out), 1, "{v}");
    assert_eq!(v["degraded_reason"], "nothing_rescued");
    let answer = v["answer"].as_str().unwrap();
    assert!(
        answer.starts_with("No answer could be read from the model's reply"),
        "{v}"
    );
    assert!(answer.contains("Cancel the stream"), "{v}");
}

#[test]
fn nothing_rescued_and_nothing_retrieved_gives_the_modes_generic_fallback() {
    let env = setup(FAST);
    let fake = Fake::start(vec![Reply::Json(200, gemini("", "STOP"))]);
    let (out, v) = ask(
        &env,
        Provider::Gemini(&fake),
        &["--no-stream", "¿Qué es la auditoría suprema?"],
    );
    assert_eq!(code(&out), 1, "{v}");
    assert_eq!(v["degraded_reason"], "nothing_rescued");
    assert_eq!(v["passages"].as_array().unwrap().len(), 0, "{v}");
    assert_eq!(
        v["answer"],
        "Tu pregunta es muy amplia. Consulta la documentación específica."
    );
}

#[test]
fn max_tokens_truncated_json_is_rescued_anyway() {
    let env = setup(FAST);
    let fake = Fake::start(vec![Reply::Json(
        200,
        gemini(
            "{\"answer\": \"The watcher cuts the stream at the first loop and",
            "MAX_TOKENS",
        ),
    )]);
    let (out, v) = ask(
        &env,
        Provider::Gemini(&fake),
        &["--no-stream", "How do I stop a looping stream?"],
    );
    assert_eq!(code(&out), 0, "{v}");
    assert_eq!(v["truncated"], true);
    assert!(v["answer"]
        .as_str()
        .unwrap()
        .starts_with("The watcher cuts the stream"));
}

#[test]
fn safety_block_gives_an_honest_refusal() {
    let env = setup(FAST);
    let blocked = json!({"candidates": [{"finishReason": "SAFETY", "index": 0,
        "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH"}]}]});
    let fake = Fake::start(vec![
        Reply::Json(200, blocked.clone()),
        Reply::Json(200, blocked),
    ]);
    let (out, v) = ask(
        &env,
        Provider::Gemini(&fake),
        &["--no-stream", "How do I stop a looping stream?"],
    );
    assert_eq!(code(&out), 0, "{v}");
    assert_eq!(v["refusal"], "SAFETY");
    assert_eq!(v["degraded_reason"], "refused");
    assert!(v["answer"]
        .as_str()
        .unwrap()
        .starts_with("The model declined to answer"));
    // Refusals are not retried.
    assert_eq!(fake.hits(), 1);
    let (_, v) = ask(
        &env,
        Provider::Gemini(&fake),
        &["--no-stream", "¿Cómo corto un bucle?"],
    );
    assert!(v["answer"]
        .as_str()
        .unwrap()
        .starts_with("El modelo se ha negado"));
}

#[test]
fn hyde_passage_is_used_then_served_from_the_cache() {
    let env = setup(FAST);
    let passage = "Cancel the request when the watcher fires; the stream stops.";
    let answer =
        json!({"answer": "Cancel it when the watcher fires.", "citations": []}).to_string();
    let fake = Fake::start(vec![
        Reply::Json(
            200,
            gemini(&json!({"passage": passage}).to_string(), "STOP"),
        ),
        Reply::Json(200, gemini(&answer, "STOP")),
        // Second run: no HyDE call (cached), only the answer.
        Reply::Json(200, gemini(&answer, "STOP")),
    ]);
    let q = "How do I stop a looping stream?";
    let (out, v) = ask(&env, Provider::Gemini(&fake), &["--no-stream", "--hyde", q]);
    assert_eq!(code(&out), 0, "{v}");
    assert_eq!(v["hyde"]["passage"], passage);
    assert_eq!(v["hyde"]["cached"], false);
    assert_eq!(v["hyde"]["query_vector"], "fused");
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    // The HyDE call used the seed's generation parameters.
    let cfg = &seen[0].1["generationConfig"];
    assert_eq!(cfg["temperature"], 1.0);
    assert_eq!(cfg["topK"], 64);
    assert_eq!(cfg["maxOutputTokens"], 220);
    assert!((cfg["topP"].as_f64().unwrap() - 0.95).abs() < 1e-6);
    assert!(seen[0]
        .1
        .to_string()
        .contains("hypothetical documentation passage"));

    let (_, v) = ask(&env, Provider::Gemini(&fake), &["--no-stream", "--hyde", q]);
    assert_eq!(v["hyde"]["passage"], passage);
    assert_eq!(v["hyde"]["cached"], true);
    assert_eq!(
        fake.hits(),
        3,
        "the cached question made no second HyDE call"
    );
}

#[test]
fn hyde_timeout_and_error_fall_back_to_the_plain_question() {
    let env = setup(FAST);
    let answer = json!({"answer": "Cancel it when the watcher fires."}).to_string();
    let fake = Fake::start(vec![
        Reply::Slow(
            Duration::from_secs(3),
            Box::new(Reply::Json(200, gemini("{\"passage\": \"late\"}", "STOP"))),
        ),
        Reply::Json(200, gemini(&answer, "STOP")),
        Reply::Json(
            500,
            json!({"error": {"code": 500, "message": "boom", "status": "INTERNAL"}}),
        ),
        Reply::Json(200, gemini(&answer, "STOP")),
    ]);
    let (out, v) = ask(
        &env,
        Provider::Gemini(&fake),
        &["--no-stream", "--hyde", "¿Cómo corto un bucle?"],
    );
    assert_eq!(code(&out), 0, "{v}");
    assert!(v["hyde"]["passage"].is_null());
    assert!(
        v["hyde"]["fallback_reason"]
            .as_str()
            .unwrap()
            .contains("timed out"),
        "{v}"
    );
    assert_eq!(v["answer"], "Cancel it when the watcher fires.");
    // The HyDE prompt was in Spanish.
    assert!(fake.seen()[0].1.to_string().contains("pasaje hipotético"));

    let (out, v) = ask(
        &env,
        Provider::Gemini(&fake),
        &["--no-stream", "--hyde", "How do I stop a loop?"],
    );
    assert_eq!(code(&out), 0, "{v}");
    assert!(
        v["hyde"]["fallback_reason"]
            .as_str()
            .unwrap()
            .contains("500"),
        "{v}"
    );
    assert_eq!(v["answer"], "Cancel it when the watcher fires.");
}

#[test]
fn llm_failure_falls_back_to_extractive_and_exits_1() {
    let env = setup(FAST);
    let fake = Fake::start(vec![Reply::Json(
        503,
        json!({"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}),
    )]);
    let (out, v) = ask(
        &env,
        Provider::Gemini(&fake),
        &["--no-stream", "How do I stop a looping stream?"],
    );
    assert_eq!(code(&out), 1, "{v}");
    assert_eq!(v["degraded_reason"], "llm_failed");
    assert!(v["llm_error"].as_str().unwrap().contains("503"));
    assert!(v["answer"]
        .as_str()
        .unwrap()
        .starts_with("The configured LLM failed"));
    assert!(!v["citations"].as_array().unwrap().is_empty());
}

#[test]
fn extractive_offline_in_both_languages() {
    let env = setup("");
    let (out, v) = ask(&env, Provider::None, &["How do I stop a looping stream?"]);
    assert_eq!(code(&out), 0, "{v}");
    assert_eq!(v["provider"], "extractive");
    let a = v["answer"].as_str().unwrap();
    assert!(a.starts_with("No LLM configured: here are the most relevant passages."));
    assert!(a.contains("watcher cuts it"));
    assert_eq!(v["citations"][0]["source"], env.loops_md.as_str());
    assert_eq!(v["retrieval"]["used"], "lexical");
    assert!(v["retrieval"]["fallback_reason"].is_string());
    let (_, v) = ask(
        &env,
        Provider::None,
        &["¿Cómo corto un bucle en el stream?"],
    );
    assert!(v["answer"]
        .as_str()
        .unwrap()
        .starts_with("No hay ningún LLM configurado: estos son los pasajes más relevantes."));
    assert_eq!(v["language"], "es");
    // HyDE without an LLM: reported, not fatal.
    let (out, v) = ask(&env, Provider::None, &["--hyde", "loops"]);
    assert_eq!(code(&out), 0);
    assert_eq!(v["hyde"]["fallback_reason"], "no LLM configured");
}

#[test]
fn embedded_default_answers_on_a_fresh_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .env_clear()
        // Lexical only keeps this debug-build test fast; the MiniLM path is
        // the same code with an embedder (exercised by the manual run in docs/oracle.md).
        .env("DELOOP_EMBEDDER", "none")
        .current_dir(dir.path())
        .args(["ask", "How do I stop a looping stream?"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.starts_with("No LLM configured: here are the most relevant passages."));
    assert!(stdout.contains("Sources:"));
    assert!(
        stderr.contains("built it from deloop's embedded documentation"),
        "{stderr}"
    );
    assert!(dir.path().join(".deloop/index.db").is_file());
    // Second run: reuses the index, says nothing about building it.
    let out = Command::new(BIN)
        .env_clear()
        .current_dir(dir.path())
        .args(["ask", "--json", "¿Cómo rescato el JSON roto?"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("built it"));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["language"], "es");
    for c in v["citations"].as_array().unwrap() {
        let src = c["source"].as_str().unwrap();
        assert!(src == "README.md" || src.starts_with("docs/"), "{src}");
    }
}

#[test]
fn explicit_missing_db_and_bad_config_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .env_clear()
        .current_dir(dir.path())
        .args(["ask", "--db", "nope.db", "q"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("deloop index"));
    assert!(!dir.path().join("nope.db").exists());

    std::fs::write(
        dir.path().join("deloop.toml"),
        "[oracle]\nmdoe = \"help\"\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .env_clear()
        .current_dir(dir.path())
        .args(["ask", "q"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("mdoe"));
}

#[test]
fn search_hyde_expands_the_query() {
    let env = setup(FAST);
    let fake = Fake::start(vec![Reply::Json(
        200,
        gemini(
            &json!({"passage": "The JSON rescue recovers broken output."}).to_string(),
            "STOP",
        ),
    )]);
    let out = Command::new(BIN)
        .env_clear()
        .current_dir(env.dir.path())
        .env("GEMINI_API_KEY", "k")
        .env("GEMINI_BASE_URL", format!("{}/v1beta", fake.url))
        .args([
            "search",
            "--hyde",
            "--json",
            "--retrieval",
            "lexical",
            "--db",
        ])
        .arg(&env.db)
        .arg("zzzunmatched")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The question alone matches nothing; the passage finds rescue.md.
    assert!(stdout.contains("rescue.md"), "{stdout}");
    assert_eq!(fake.hits(), 1);
    let _ = Path::new(&env.loops_md);
}

#[test]
fn openai_sse_answer_with_done_and_citation() {
    let env = setup(FAST);
    let full = json!({"answer": "The watcher cuts the loop.",
                      "citations": [{"source": env.loops_md, "start_line": 2, "end_line": 3}]})
    .to_string();
    let (a, b) = full.split_at(full.len() / 2);
    let fake = Fake::start(vec![Reply::Sse(vec![
        openai_chunk(a),
        openai_chunk(b),
        "[DONE]".to_string(),
    ])]);
    let (out, v) = ask(
        &env,
        Provider::OpenAi(&fake),
        &["How do I stop a looping stream?"],
    );
    assert_eq!(code(&out), 0, "{v}");
    assert_eq!(v["answer"], "The watcher cuts the loop.");
    assert_eq!(v["streamed"], true);
    assert_eq!(v["loop_cut"], false);
    assert_eq!(v["citations"][0]["start_line"], 2);
    assert_eq!(v["dropped_citations"], 0);
    assert_eq!(fake.seen()[0].1["stream"], true);
}

#[test]
fn gemini_429_with_retry_info_then_json_mode_refusal_are_handled() {
    let env = setup(
        "[llm.retry]\nmax_attempts = 3\nbase_delay_ms = 1\nmax_delay_ms = 5\n[oracle]\ntimeout_secs = 20\n",
    );
    let answer = json!({"answer": "Cancel the stream when the watcher fires."}).to_string();
    let fake = Fake::start(vec![
        Reply::Json(
            429,
            json!({"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED",
                "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.05s"}]}}),
        ),
        Reply::Json(
            400,
            json!({"error": {"code": 400, "status": "INVALID_ARGUMENT",
                "message": "JSON mode is not enabled for models/gemma-4-26b-a4b-it"}}),
        ),
        Reply::Json(200, gemini(&answer, "STOP")),
    ]);
    let (out, v) = ask(
        &env,
        Provider::Gemini(&fake),
        &["--no-stream", "How do I stop a looping stream?"],
    );
    assert_eq!(code(&out), 0, "{v}");
    assert_eq!(v["answer"], "Cancel the stream when the watcher fires.");
    let seen = fake.seen();
    assert_eq!(seen.len(), 3);
    // After the 400, JSON mode was dropped and the JSON asked for in the prompt.
    assert!(seen[1].1["generationConfig"]
        .get("responseMimeType")
        .is_some());
    assert!(
        seen[2].1["generationConfig"]
            .get("responseMimeType")
            .is_none(),
        "{}",
        seen[2].1
    );
}
