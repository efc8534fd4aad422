//! HyDE, refusals, failures and offline answers: what `deloop ask` does when
//! the model cannot or need not answer.

use crate::env::*;
use crate::fake_llm::*;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

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
