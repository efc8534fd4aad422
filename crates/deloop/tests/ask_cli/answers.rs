//! Answers from the model: valid and broken JSON rescued, loops cut and
//! clamped, degraded replies, SSE and retries.

use crate::env::*;
use crate::fake_llm::*;
use serde_json::json;
use std::sync::atomic::Ordering;
use std::time::Duration;

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
