//! `Oracle` end to end: a real SQLite index in a temp dir and the fake
//! Gemini / OpenAI-compatible servers of deloop-llm's tests (real wire
//! formats on 127.0.0.1).

#[path = "../../deloop-llm/tests/common/mod.rs"]
mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::{assert_request_dropped, fast_retry, Fake, Reply};
use deloop_config::Config;
use deloop_llm::{ApiKey, Provider};
use deloop_oracle::{
    AskEvent, AskRequest, AskStatus, Mode, Oracle, OracleError, Retrieval, Role, Turn,
};
use serde_json::{json, Value};

const LOOPS_MD: &str = "# Loops\n\nWhen a stream loops, the watcher cuts it and the request is \
cancelled.\nCancel the stream as soon as the watcher fires.\n\n## Bucles\n\nCuando el stream \
entra en bucle, el vigilante lo corta y se cancela la petición.\n";
const RESCUE_MD: &str =
    "# Rescue\n\nThe JSON rescue recovers the answer from broken model output.\n";

const QUESTION: &str = "How do I stop a looping stream?";

/// A temp dir with two documents indexed lexically.
struct Library {
    _dir: tempfile::TempDir,
    db: PathBuf,
}

fn library() -> Library {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("loops.md"), LOOPS_MD).unwrap();
    std::fs::write(docs.join("rescue.md"), RESCUE_MD).unwrap();
    let db = dir.path().join("index.db");
    let mut index = deloop_index::Index::open(&db).unwrap();
    index.index_paths(&[docs], None, &mut |_| {}).unwrap();
    Library { _dir: dir, db }
}

fn openai_config(fake: &Fake) -> Config {
    let mut c = Config::default();
    c.llm.provider = Some(Provider::Openai);
    c.llm.openai_base_url = Some(format!("{}/v1", fake.url));
    c.llm.model = Some("test-model".into());
    c.llm.retry = fast_retry(1);
    c
}

fn gemini_config(fake: &Fake) -> Config {
    let mut c = Config::default();
    c.llm.provider = Some(Provider::Gemini);
    c.llm.gemini_api_key = Some(ApiKey::new("test-key"));
    c.llm.gemini_base_url = format!("{}/v1beta", fake.url);
    c.llm.retry = fast_retry(1);
    c
}

fn open(config: &Config, lib: &Library) -> Oracle {
    Oracle::open(config, Some(&lib.db)).unwrap()
}

fn completion(text: &str) -> Value {
    json!({"id": "c1", "object": "chat.completion", "model": "test-model",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop"}]})
}

fn chunk(text: &str) -> String {
    json!({"id": "c1", "object": "chat.completion.chunk",
           "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
    .to_string()
}

fn last_chunk() -> String {
    json!({"id": "c1", "object": "chat.completion.chunk",
           "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    .to_string()
}

fn gemini_reply(text: &str) -> Value {
    json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
            "finishReason": "STOP", "index": 0}]})
}

fn answer(text: &str) -> String {
    json!({"answer": text, "citations": [{"source": "loops.md", "start_line": 1, "end_line": 5}]})
        .to_string()
}

fn history() -> Vec<Turn> {
    vec![
        Turn {
            role: Role::User,
            content: "What is a loop?".into(),
        },
        Turn {
            role: Role::Assistant,
            content: "A unit repeated back to back.".into(),
        },
    ]
}

/// Collects every event of one ask.
async fn ask_events(oracle: &Oracle, req: AskRequest) -> (Vec<AskEvent>, AskStatus) {
    let (tx, mut rx) = tokio::sync::mpsc::channel(4);
    let collect = async {
        let mut events = Vec::new();
        while let Some(e) = rx.recv().await {
            events.push(e);
        }
        events
    };
    let (outcome, events) = tokio::join!(oracle.ask_with_events(req, tx), collect);
    (events, outcome.unwrap().status)
}

fn names(events: &[AskEvent]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for e in events {
        // Runs of deltas collapse into one `delta*`.
        if !(e.name() == "delta" && out.last() == Some(&"delta*")) {
            out.push(if e.name() == "delta" {
                "delta*"
            } else {
                e.name()
            });
        }
    }
    out
}

#[test]
fn oracle_and_its_futures_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>(_: &T) {}
    assert_send_sync::<Oracle>();
    assert_send_sync::<AskEvent>();
    let lib = library();
    let oracle = open(&Config::default(), &lib);
    // A server spawns asks on a multi-threaded runtime: the futures must be Send.
    let ask = oracle.ask(AskRequest::new(QUESTION));
    assert_send(&ask);
    let (tx, _rx) = tokio::sync::mpsc::channel(1);
    assert_send(&oracle.ask_with_events(AskRequest::new(QUESTION), tx));
    assert_send(&oracle.search(QUESTION, 3, None, false));
}

#[tokio::test]
async fn history_turns_reach_the_openai_server_before_the_question() {
    let lib = library();
    let fake = Fake::start(vec![Reply::Json(
        200,
        completion(&answer("Cancel it when the watcher fires.")),
    )])
    .await;
    let oracle = open(&openai_config(&fake), &lib);
    let mut req = AskRequest::new(QUESTION);
    req.mode = Some(Mode::Tutor);
    req.stream = Some(false);
    req.history = history();
    req.history.push(Turn {
        role: Role::User,
        content: "   ".into(), // empty turns are dropped
    });
    let out = oracle.ask(req).await.unwrap();
    assert_eq!(out.status, AskStatus::Answered, "{:?}", out.report);
    assert_eq!(out.report.answer, "Cancel it when the watcher fires.");
    let messages = fake.seen()[0].body["messages"].clone();
    let messages = messages.as_array().unwrap();
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(
        messages[1],
        json!({"role": "user", "content": "What is a loop?"})
    );
    assert_eq!(
        messages[2],
        json!({"role": "assistant", "content": "A unit repeated back to back."})
    );
    assert_eq!(messages[3]["role"], "user");
    assert!(messages[3]["content"].as_str().unwrap().contains(QUESTION));
}

#[tokio::test]
async fn history_turns_reach_the_gemini_server_as_user_and_model() {
    let lib = library();
    let fake = Fake::start(vec![Reply::Json(
        200,
        gemini_reply(&answer("Corta el stream cuando salte el vigilante.")),
    )])
    .await;
    let oracle = open(&gemini_config(&fake), &lib);
    let mut req = AskRequest::new("¿Cómo paro un stream en bucle?");
    req.stream = Some(false);
    req.history = history();
    let out = oracle.ask(req).await.unwrap();
    assert_eq!(out.status, AskStatus::Answered, "{:?}", out.report);
    let contents = fake.seen()[0].body["contents"].clone();
    let roles: Vec<&str> = contents
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "model", "user"]);
    assert_eq!(
        contents[1]["parts"][0]["text"],
        "A unit repeated back to back."
    );
    assert!(contents[2]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .contains("¿Cómo paro un stream en bucle?"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_asks_share_one_oracle() {
    let lib = library();
    let fake = Fake::start(vec![
        Reply::Json(200, completion(&answer("First answer, about the watcher."))),
        Reply::Json(
            200,
            completion(&answer("Second answer, about the watcher.")),
        ),
    ])
    .await;
    let oracle = Arc::new(open(&openai_config(&fake), &lib));
    let ask = |o: Arc<Oracle>| async move {
        let mut req = AskRequest::new(QUESTION);
        req.stream = Some(false);
        o.ask(req).await.unwrap()
    };
    let (a, b) = tokio::join!(
        tokio::spawn(ask(oracle.clone())),
        tokio::spawn(ask(oracle.clone()))
    );
    let mut answers = vec![a.unwrap().report.answer, b.unwrap().report.answer];
    answers.sort();
    assert_eq!(
        answers,
        [
            "First answer, about the watcher.",
            "Second answer, about the watcher."
        ]
    );
    assert_eq!(fake.hits(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_ask_does_not_hold_up_another() {
    let lib = library();
    let fake = Fake::start(vec![
        Reply::SseThenStall(vec![chunk("{\"answer\": \"Slow")]),
        Reply::Json(
            200,
            completion(&answer("The fast answer, about the watcher.")),
        ),
    ])
    .await;
    let oracle = Arc::new(open(&openai_config(&fake), &lib));
    let slow = {
        let oracle = oracle.clone();
        tokio::spawn(async move { oracle.ask(AskRequest::new(QUESTION)).await })
    };
    assert!(common::eventually(|| fake.hits() == 1).await);
    let mut req = AskRequest::new(QUESTION);
    req.stream = Some(false);
    let fast = oracle.ask(req).await.unwrap();
    assert_eq!(fast.report.answer, "The fast answer, about the watcher.");
    assert!(!slow.is_finished());
    slow.abort();
}

#[tokio::test]
async fn events_come_in_order_meta_sources_deltas_cut_done() {
    let lib = library();
    let max = 2_000;
    let fake = Fake::start(vec![Reply::LoopSse {
        prefix: vec![chunk(
            "{\"answer\": \"The watcher stops a looping stream and cancels the request. ",
        )],
        repeat: chunk("la continuación de un proceso "),
        max,
    }])
    .await;
    let oracle = open(&openai_config(&fake), &lib);
    let (events, status) = ask_events(&oracle, AskRequest::new(QUESTION)).await;
    assert_eq!(status, AskStatus::LoopCut);
    assert_eq!(
        names(&events),
        ["meta", "sources", "delta*", "cut", "done"],
        "{events:?}"
    );
    let AskEvent::Meta(meta) = &events[0] else {
        unreachable!()
    };
    assert_eq!(meta.provider, "openai");
    assert_eq!(meta.model, "test-model");
    assert_eq!(meta.mode, Mode::Oracle);
    assert_eq!(events[0].payload()["retrieval"], "hybrid");
    let sources = events[1].payload();
    assert!(sources["sources"][0]["source"]
        .as_str()
        .unwrap()
        .ends_with("docs/loops.md"));
    assert!(sources["sources"][0]["text"]
        .as_str()
        .unwrap()
        .contains("watcher"));
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            AskEvent::Delta(d) => Some(d.text.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        text.starts_with("The watcher stops a looping stream"),
        "{text}"
    );
    let cut = events.iter().find(|e| e.name() == "cut").unwrap().payload();
    assert!(
        cut["detector"].is_string() && cut["start"].as_u64().unwrap() > 0,
        "{cut}"
    );
    let done = events.last().unwrap().payload();
    assert_eq!(done["loop_cut"], true);
    assert_eq!(done["saved_chars"], cut["saved_chars"]);
    assert!(fake.probe().sent.load(std::sync::atomic::Ordering::SeqCst) < max);
}

#[tokio::test]
async fn extractive_events_have_one_delta_and_no_cut() {
    let lib = library();
    let oracle = open(&Config::default(), &lib);
    let (events, status) = ask_events(&oracle, AskRequest::new(QUESTION)).await;
    assert_eq!(status, AskStatus::Answered);
    assert_eq!(names(&events), ["meta", "sources", "delta*", "done"]);
    assert_eq!(events.iter().filter(|e| e.name() == "delta").count(), 1);
    let done = events[3].payload();
    assert_eq!(done["provider"], "extractive");
    assert_eq!(events[2].payload()["text"], done["answer"]);
}

#[tokio::test]
async fn a_closed_receiver_does_not_fail_the_ask() {
    let lib = library();
    let fake = Fake::start(vec![Reply::Sse(vec![
        chunk("{\"answer\": \"Cancel the stream "),
        chunk("when the watcher fires.\"}"),
        last_chunk(),
        "[DONE]".into(),
    ])])
    .await;
    let oracle = open(&openai_config(&fake), &lib);
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    drop(rx);
    let out = oracle
        .ask_with_events(AskRequest::new(QUESTION), tx)
        .await
        .unwrap();
    assert_eq!(out.status, AskStatus::Answered);
    assert_eq!(
        out.report.answer,
        "Cancel the stream when the watcher fires."
    );
}

#[tokio::test]
async fn dropping_the_ask_closes_the_upstream_connection() {
    let lib = library();
    let max = 100_000;
    let fake = Fake::start(vec![Reply::LoopSse {
        prefix: vec![chunk("{\"answer\": \"Words ")],
        repeat: chunk("and more words "),
        max,
    }])
    .await;
    let mut config = openai_config(&fake);
    // No loop guard: only the client going away can end this stream early.
    config.guards.clamp.words.enabled = false;
    config.guards.clamp.substring.enabled = false;
    let oracle = Arc::new(open(&config, &lib));
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let task = {
        let oracle = oracle.clone();
        tokio::spawn(async move { oracle.ask_with_events(AskRequest::new(QUESTION), tx).await })
    };
    // Wait for answer text: the stream is flowing.
    while let Some(e) = rx.recv().await {
        if e.name() == "delta" {
            break;
        }
    }
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_request_dropped(&fake, max).await;
}

fn assert_honest_failure(out: &deloop_oracle::AskOutcome, what: &str) {
    let r = &out.report;
    assert_eq!(out.status, AskStatus::LlmFailed, "{what}: {r:?}");
    assert!(r.degraded, "{what}");
    assert_eq!(r.degraded_reason.as_deref(), Some("llm_failed"), "{what}");
    assert!(r.llm_error.is_some(), "{what}");
    assert!(
        r.answer.starts_with("The configured LLM failed"),
        "{what}: {}",
        r.answer
    );
    assert!(!r.citations.is_empty(), "{what}");
}

#[tokio::test]
async fn upstream_faults_end_in_an_honest_extractive_answer() {
    let lib = library();
    let faults = [
        (
            "429 with Retry-After",
            Reply::JsonHeader(
                429,
                json!({"error": {"message": "rate limited"}}),
                "retry-after",
                "1".into(),
            ),
        ),
        (
            "503",
            Reply::Json(503, json!({"error": {"message": "overloaded"}})),
        ),
        (
            "a dropped connection mid-stream",
            Reply::SseThenDrop(vec![chunk("{\"answer\": \"Half an ans")]),
        ),
        (
            "a stream that stalls past the timeout",
            Reply::SseThenStall(vec![chunk("{\"answer\": \"Half an ans")]),
        ),
        (
            "a reply slower than the timeout",
            common::slow(Reply::Json(200, completion(&answer("too late")))),
        ),
    ];
    for (what, reply) in faults {
        let fake = Fake::start(vec![reply]).await;
        let mut config = openai_config(&fake);
        config.oracle.timeout_secs = 1;
        let oracle = open(&config, &lib);
        let out = oracle.ask(AskRequest::new(QUESTION)).await.unwrap();
        assert_honest_failure(&out, what);
        eprintln!("{what}: {}", out.report.llm_error.as_deref().unwrap());
    }
}

#[tokio::test]
async fn bad_requests_are_errors_with_an_error_event() {
    let lib = library();
    let oracle = open(&Config::default(), &lib);
    for (req, want) in [
        (AskRequest::new("  "), "empty"),
        (
            AskRequest {
                k: Some(0),
                ..AskRequest::new(QUESTION)
            },
            "k = 0",
        ),
        (
            AskRequest {
                k: Some(usize::MAX),
                ..AskRequest::new(QUESTION)
            },
            "out of range",
        ),
    ] {
        let err = oracle.ask(req.clone()).await.unwrap_err();
        assert!(matches!(err, OracleError::BadRequest(_)), "{err:?}");
        assert!(err.is_usage() && err.to_string().contains(want), "{err}");
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        assert!(oracle.ask_with_events(req, tx).await.is_err());
        let e = rx.recv().await.unwrap();
        assert_eq!(e.name(), "error");
        assert_eq!(e.payload()["kind"], "bad_request");
        assert!(rx.recv().await.is_none());
    }
}

#[tokio::test]
async fn requests_override_the_configured_defaults() {
    let lib = library();
    let mut config = Config::default();
    config.oracle.mode = "help".into();
    config.oracle.language = "es".into();
    let oracle = open(&config, &lib);
    let out = oracle.ask(AskRequest::new(QUESTION)).await.unwrap();
    assert_eq!(out.report.mode, Mode::Help);
    assert_eq!(out.report.language, deloop_oracle::Language::Es);
    let req = AskRequest {
        mode: Some(Mode::Tutor),
        lang: Some(deloop_oracle::Language::En),
        k: Some(1),
        retrieval: Some(Retrieval::Lexical),
        hyde: Some(true),
        ..AskRequest::new(QUESTION)
    };
    let out = oracle.ask(req).await.unwrap();
    let r = out.report;
    assert_eq!(
        (r.mode, r.language),
        (Mode::Tutor, deloop_oracle::Language::En)
    );
    assert_eq!(r.passages.len(), 1);
    assert_eq!(r.retrieval.requested, "lexical");
    assert_eq!(r.retrieval.fallback_reason, None);
    assert_eq!(
        r.hyde.unwrap().fallback_reason.as_deref(),
        Some("no LLM configured")
    );
}

#[tokio::test]
async fn an_explicit_missing_index_and_a_bad_config_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let err = Oracle::open(&Config::default(), Some(&dir.path().join("none.db"))).unwrap_err();
    assert!(matches!(err, OracleError::NoIndex { .. }), "{err:?}");
    assert!(err.to_string().contains("deloop index"), "{err}");
    let mut config = Config::default();
    config.oracle.mode = "oracel".into();
    let err = Oracle::open(&config, Some(&dir.path().join("none.db"))).unwrap_err();
    assert!(
        matches!(err, OracleError::Config(_)) && err.is_usage(),
        "{err:?}"
    );
    assert!(err.to_string().contains("oracel"), "{err}");
}

#[tokio::test]
async fn search_reports_hits_like_deloop_search_json() {
    let lib = library();
    let oracle = open(&Config::default(), &lib);
    let report = oracle
        .search("watcher cancel stream", 2, Some(Retrieval::Lexical), false)
        .await
        .unwrap();
    assert_eq!(report.retrieval_requested, "lexical");
    assert_eq!(report.retrieval_used, "lexical");
    assert!(report.hyde.is_none());
    assert!(!report.hits.is_empty() && report.hits.len() <= 2);
    assert!(report.hits[0].source.ends_with("loops.md"));
    let v = serde_json::to_value(&report).unwrap();
    for key in [
        "query",
        "retrieval_requested",
        "retrieval_used",
        "fallback_reason",
        "hits",
    ] {
        assert!(v.get(key).is_some(), "{key} missing: {v}");
    }
    assert!(v.get("hyde").is_none());
    // Hybrid without vectors falls back to lexical and says so; HyDE
    // without an LLM says why.
    let report = oracle.search("watcher", 3, None, true).await.unwrap();
    assert_eq!(report.retrieval_used, "lexical");
    assert!(report.fallback_reason.is_some());
    assert_eq!(
        report.hyde.unwrap().fallback_reason.as_deref(),
        Some("no LLM configured")
    );
    assert!(matches!(
        oracle.search(" ", 3, None, false).await,
        Err(OracleError::BadRequest(_))
    ));
}

#[tokio::test]
async fn a_long_history_is_bounded_in_the_prompt() {
    let lib = library();
    let fake = Fake::start(vec![Reply::Json(
        200,
        completion(&answer("Bounded, with the watcher.")),
    )])
    .await;
    let oracle = open(&openai_config(&fake), &lib);
    let mut req = AskRequest::new(QUESTION);
    req.stream = Some(false);
    req.history = (0..500)
        .map(|i| Turn {
            role: if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            },
            content: format!("turn {i} {}", "x".repeat(5_000)),
        })
        .collect();
    oracle.ask(req).await.unwrap();
    let messages = fake.seen()[0].body["messages"].as_array().unwrap().clone();
    let history: usize = messages[1..messages.len() - 1]
        .iter()
        .map(|m| m["content"].as_str().unwrap().chars().count())
        .sum();
    assert!(
        history <= deloop_oracle::prompts::MAX_HISTORY_CHARS,
        "{history}"
    );
    assert!(messages[messages.len() - 2]["content"]
        .as_str()
        .unwrap()
        .starts_with("turn 499 "));
}

/// A HyDE passage about the wrong topic (a weak model's): with `fused`, the
/// default, it is ranked on its own and fused with the question's ranking,
/// so the section the question finds stays first; with `average` (here
/// lexical: the passage expands the query) it takes the first place.
#[tokio::test]
async fn a_bad_hyde_passage_cannot_displace_the_best_match_when_fused() {
    let lib = library();
    let bad = "The JSON rescue recovers the answer from broken model output: \
               rescue, recover, repair broken JSON output.";
    let fake = Fake::start(vec![Reply::Json(
        200,
        completion(&json!({ "passage": bad }).to_string()),
    )])
    .await;
    let mut tops = Vec::new();
    for mode in ["fused", "average", "concat"] {
        let mut config = openai_config(&fake);
        config.oracle.hyde_query_vector = mode.into();
        let oracle = open(&config, &lib);
        let report = oracle
            .search("watcher cancel", 3, Some(Retrieval::Lexical), true)
            .await
            .unwrap();
        let hyde = report.hyde.unwrap();
        assert_eq!(hyde.passage.as_deref(), Some(bad), "{mode}");
        // One generation: the later modes read the passage from the cache.
        assert_eq!(hyde.cached, mode != "fused", "{mode}");
        assert_eq!(hyde.query_vector, mode);
        tops.push(report.hits[0].source.clone());
    }
    assert!(tops[0].ends_with("loops.md"), "fused: {tops:?}");
    assert!(tops[1].ends_with("rescue.md"), "average: {tops:?}");
    assert!(tops[2].ends_with("rescue.md"), "concat: {tops:?}");
    assert_eq!(fake.hits(), 1);
}
