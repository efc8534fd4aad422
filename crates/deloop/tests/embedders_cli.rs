//! The embedders of `deloop index`, `search` and `ask` end to end (issue 24
//! §3): the `auto` choice (ONNX Runtime's MiniLM, else candle's, else
//! lexical only) with the real model files, and a remote OpenAI-compatible
//! embedder served by a real llama.cpp `llama-server` (`--embeddings`,
//! SmolLM2-135M mean-pooled) that requires an API key, so a key that is not
//! sent in the `Authorization` header fails.
//!
//! Without the model files or llama-server each test prints one line and
//! passes; with `CI=true` or `DELOOP_REQUIRE_REAL=1` it fails instead.

use std::path::Path;
use std::process::{Command, Output};

use deloop_testdata::llama::{self, Model, Options};
use serde_json::Value;

/// The key llama-server is started with (a test value, not a secret).
const KEY: &str = "sk-embed-test-5bd1c0a7";
/// The embedding model name deloop sends (llama-server serves its one model
/// whatever the name).
const MODEL: &str = "smollm2-embed";

/// Runs deloop in `dir` with deloop's and the providers' variables cleared
/// and then `env` set. Model files are never fetched.
fn deloop(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_deloop"));
    cmd.args(args)
        .current_dir(dir)
        .env("DELOOP_MODEL_FETCH", "0")
        .env("NO_COLOR", "1");
    for var in [
        "DELOOP_DB",
        "DELOOP_EMBEDDER",
        "DELOOP_CONFIG",
        "DELOOP_LLM_PROVIDER",
        "DELOOP_EMBEDDING_MODEL",
        "DELOOP_MODEL",
        "GEMINI_API_KEY",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "DELOOP_ONNX_DIR",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run deloop")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn json_ok(out: &Output, what: &str) -> Value {
    assert_eq!(out.status.code(), Some(0), "{what}: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Three short documents in `docs/`.
fn with_docs() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("docs");
    std::fs::create_dir_all(&d).unwrap();
    for (name, body) in [
        (
            "password.md",
            "# Password\n\nTo reset your password open Settings, choose Security and \
             press Reset. A link arrives by e-mail.\n",
        ),
        (
            "release.md",
            "# Release\n\nPublishing a new version: tag the commit, run the release \
             script and upload the archive.\n",
        ),
        (
            "cuenta.md",
            "# Cuenta\n\nPara borrar la cuenta escribe a soporte desde la dirección \
             registrada.\n",
        ),
    ] {
        std::fs::write(d.join(name), body).unwrap();
    }
    tmp
}

fn embedder_of(stats: &Value) -> String {
    stats["embedder"].as_str().unwrap_or_default().to_string()
}

/// `auto` builds a new index with ONNX Runtime's MiniLM when its files are
/// installed, with candle's when only those are, and lexical only (with a
/// warning that says why) when neither is.
#[test]
fn auto_prefers_onnx_then_candle_then_lexical() {
    let present =
        deloop_index::find_minilm_dir(None).is_ok() && deloop_index::find_onnx_dir(None).is_ok();
    if !deloop_testdata::real_component(
        present,
        "deloop embedders_cli auto",
        "run scripts/setup-model.sh and scripts/setup-onnx.sh",
    ) {
        return;
    }
    let tmp = with_docs();
    let dir = tmp.path();
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let empty = empty.to_str().unwrap();

    let stats = json_ok(&deloop(dir, &["index", "--json", "docs"], &[]), "auto");
    let id = embedder_of(&stats);
    assert!(id.starts_with("minilm-onnx"), "{stats}");

    // An index keeps its embedder: `auto` on it reuses the recorded one.
    std::fs::write(dir.join("docs/more.md"), "# More\n\nAnother page.\n").unwrap();
    let stats = json_ok(&deloop(dir, &["index", "--json", "docs"], &[]), "again");
    assert_eq!(embedder_of(&stats), id, "{stats}");

    let out = deloop(
        dir,
        &["index", "--json", "--reindex", "--onnx-dir", empty, "docs"],
        &[],
    );
    let stats = json_ok(&out, "no onnx");
    assert_eq!(embedder_of(&stats), "minilm:all-MiniLM-L6-v2", "{stats}");

    let out = deloop(
        dir,
        &[
            "index",
            "--json",
            "--reindex",
            "--onnx-dir",
            empty,
            "--minilm-dir",
            empty,
            "docs",
        ],
        &[],
    );
    let stats = json_ok(&out, "no model");
    assert_eq!(embedder_of(&stats), "none", "{stats}");
    let err = text(&out.stderr);
    assert!(err.contains("lexical search only"), "{err}");
    assert!(
        err.contains(empty),
        "the warning names the directory: {err}"
    );
}

/// `--embedder openai` with no LLM provider configured is a usage error
/// that says what to configure; naming the other remote provider than the
/// configured one is too.
#[test]
fn a_remote_embedder_without_its_provider_says_what_to_configure() {
    let tmp = with_docs();
    let out = deloop(tmp.path(), &["index", "--embedder", "openai", "docs"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("embedder"), "{err}");
    assert!(err.contains("docs/llm.md"), "{err}");

    let out = deloop(
        tmp.path(),
        &["index", "--embedder", "gemini", "docs"],
        &[
            ("DELOOP_LLM_PROVIDER", "openai"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("DELOOP_LLM_PROVIDER=gemini"), "{err}");
}

/// A remote OpenAI-compatible embedder (llama-server's `/v1/embeddings`
/// with an API key): `deloop index --embedder openai` records its vectors,
/// `search` and `ask` embed queries with it (vector and hybrid, no
/// fallback), `auto` keeps it; a wrong key fails with the server's 401 and
/// neither key is ever printed.
#[test]
fn remote_openai_embedder_through_llama_server() {
    let options = Options {
        ctx_size: 2048,
        slots: 1,
        threads: Some(1),
        extra_args: ["--embeddings", "--pooling", "mean", "--api-key", KEY]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    };
    let Some(server) = llama::start_with(Model::SmolLm2, &options, "deloop embedders_cli remote")
    else {
        return;
    };
    let base = format!("{}/v1", server.base_url());
    let tmp = with_docs();
    let dir = tmp.path();
    let env = |key: &'static str| {
        vec![
            ("DELOOP_LLM_PROVIDER", "openai".to_string()),
            ("OPENAI_BASE_URL", base.clone()),
            ("OPENAI_API_KEY", key.to_string()),
            ("DELOOP_EMBEDDING_MODEL", MODEL.to_string()),
        ]
    };
    let run = |args: &[&str], key: &'static str| {
        let vars = env(key);
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let out = deloop(dir, args, &vars);
        for secret in [KEY, "sk-wrong"] {
            assert!(
                !text(&out.stdout).contains(secret) && !text(&out.stderr).contains(secret),
                "{args:?} printed a key: {}{}",
                text(&out.stdout),
                text(&out.stderr)
            );
        }
        out
    };

    let stats = json_ok(
        &run(&["index", "--embedder", "openai", "--json", "docs"], KEY),
        "index",
    );
    assert_eq!(embedder_of(&stats), format!("openai:{MODEL}"), "{stats}");
    assert_eq!(stats["chunks_total"], 3, "{stats}");

    for (retrieval, query) in [
        ("vector", "publishing a new version"),
        ("hybrid", "forgot my password"),
    ] {
        let v = json_ok(
            &run(
                &[
                    "search",
                    "--json",
                    "--retrieval",
                    retrieval,
                    "--k",
                    "3",
                    query,
                ],
                KEY,
            ),
            retrieval,
        );
        assert_eq!(v["retrieval_used"], retrieval, "{v}");
        assert!(v["fallback_reason"].is_null(), "{v}");
        assert_eq!(v["hits"].as_array().map(Vec::len), Some(3), "{v}");
    }
    // `ask` on that index embeds its question with the same embedder.
    let v = json_ok(
        &run(
            &[
                "ask",
                "--json",
                "--no-llm",
                "--db",
                ".deloop/index.db",
                "how do I reset my password",
            ],
            KEY,
        ),
        "ask",
    );
    assert_eq!(v["retrieval"]["used"], "hybrid", "{v}");

    // `auto` keeps the recorded remote embedder for a changed document.
    std::fs::write(
        dir.join("docs/release.md"),
        "# Release\n\nTag, build, upload.\n",
    )
    .unwrap();
    let stats = json_ok(&run(&["index", "--json", "docs"], KEY), "auto");
    assert_eq!(embedder_of(&stats), format!("openai:{MODEL}"), "{stats}");

    // A wrong key: the search falls back to lexical and says why; building
    // an index fails with exit 1 and the server's answer.
    let v = json_ok(
        &run(
            &[
                "search",
                "--json",
                "--retrieval",
                "vector",
                "reset password",
            ],
            "sk-wrong",
        ),
        "wrong key search",
    );
    assert_eq!(v["retrieval_used"], "lexical", "{v}");
    let why = v["fallback_reason"].as_str().unwrap_or_default();
    assert!(why.contains("401"), "{v}");
    let out = run(
        &["index", "--reindex", "--embedder", "openai", "docs"],
        "sk-wrong",
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("401"), "{}", text(&out.stderr));
}
