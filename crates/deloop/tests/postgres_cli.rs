//! `--db postgres://…` end to end: `deloop index`, `search`, `ask` and
//! `serve` on a real PostgreSQL 18 with pgvector started by the test
//! (scripts/setup-postgres.sh installs it; without it the suite prints one
//! line and passes, under `CI=true` it fails). The same commands on an
//! SQLite file give the same hits, and the password (given in
//! DELOOP_DB_PASSWORD) never appears in any output.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{json, Value};

mod common;

use common::{eventually, http, post, start};

const SUITE: &str = "postgres_cli";

fn deloop(dir: &Path, args: &[&str], password: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_deloop"))
        .args(args)
        .current_dir(dir)
        .env_remove("DELOOP_DB")
        .env_remove("DELOOP_CONFIG")
        .env_remove("GEMINI_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("DELOOP_MODEL")
        .env_remove("PGPASSWORD")
        .env("DELOOP_EMBEDDER", "none")
        .env("DELOOP_DB_PASSWORD", password)
        .output()
        .expect("run deloop")
}

fn ok(out: Output, args: &[&str], password: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    assert!(
        !stdout.contains(password) && !stderr.contains(password),
        "{args:?} printed the password: {stdout}{stderr}"
    );
    stdout
}

fn docs(dir: &Path) {
    let d = dir.join("docs");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("loops.md"),
        "# Loops\n\nThe stream watcher cancels a looping stream.\n\n## Exit codes\n\n\
         Exit code 3 means a guard fired.\n",
    )
    .unwrap();
    std::fs::write(
        d.join("cuenta.md"),
        "# Cuenta\n\nPara cambiar la contraseña abre Ajustes.\n",
    )
    .unwrap();
}

/// The ids, sources and scores of `deloop search --json`.
fn hits(stdout: &str) -> Vec<(String, String, f64)> {
    let v: Value = serde_json::from_str(stdout).unwrap();
    v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["chunk_id"].to_string(),
                h["source"].as_str().unwrap_or_default().to_string(),
                h["score"].as_f64().unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
fn index_search_ask_and_serve_on_postgres() {
    let Some(pg) = deloop_testdata::postgres::start(SUITE) else {
        return;
    };
    pg.create_database("cli");
    let url = pg.url("cli");
    let password = pg.password().to_string();
    let tmp = tempfile::tempdir().unwrap();
    docs(tmp.path());
    let dir = tmp.path();

    // Index into PostgreSQL and into an SQLite file.
    let args = ["index", "--db", url.as_str(), "--json", "docs"];
    let stats: Value =
        serde_json::from_str(&ok(deloop(dir, &args, &password), &args, &password)).unwrap();
    assert_eq!(stats["db"], url.as_str(), "{stats}");
    assert_eq!(stats["updated"], 2, "{stats}");
    let args = ["index", "--db", "i.db", "--json", "docs"];
    ok(deloop(dir, &args, &password), &args, &password);
    // Unchanged on a second run.
    let args = ["index", "--db", url.as_str(), "--json", "docs"];
    let again: Value =
        serde_json::from_str(&ok(deloop(dir, &args, &password), &args, &password)).unwrap();
    assert_eq!(again["unchanged"], 2, "{again}");

    // Search: the same hits from both.
    for q in ["looping stream", "contrasena", "exit code"] {
        let a = ["search", "--db", url.as_str(), "--json", q];
        let b = ["search", "--db", "i.db", "--json", q];
        let from_pg = hits(&ok(deloop(dir, &a, &password), &a, &password));
        let from_file = hits(&ok(deloop(dir, &b, &password), &b, &password));
        assert!(!from_pg.is_empty(), "{q}");
        assert_eq!(from_pg, from_file, "{q}");
    }

    // Ask, extractive (no LLM), cites the loops document.
    let args = [
        "ask",
        "--db",
        url.as_str(),
        "--no-llm",
        "--json",
        "What does exit code 3 mean?",
    ];
    let v: Value =
        serde_json::from_str(&ok(deloop(dir, &args, &password), &args, &password)).unwrap();
    assert!(
        v["answer"].as_str().unwrap_or_default().contains("3"),
        "{v}"
    );

    // --reindex drops deloop's tables and builds anew.
    let args = ["index", "--db", url.as_str(), "--reindex", "--json", "docs"];
    let fresh: Value =
        serde_json::from_str(&ok(deloop(dir, &args, &password), &args, &password)).unwrap();
    assert_eq!(fresh["updated"], 2, "{fresh}");

    // Two `deloop serve` replicas read the same database.
    let env = [("DELOOP_DB_PASSWORD", password.as_str())];
    let replicas = [
        start(&["--db", url.as_str()], &env),
        start(&["--db", url.as_str()], &env),
    ];
    for server in &replicas {
        let ready = eventually(300, || {
            http("GET", &format!("{}/readyz", server.url), None, "text/plain").0 == 200
        });
        assert!(ready, "a replica never became ready");
        let (status, v) = post(
            &format!("{}/api/oracle", server.url),
            &json!({"question": "How do I stop a looping stream?", "lang": "en"}),
        );
        assert_eq!(status, 200, "{v}");
        let cited = v["citations"].to_string();
        assert!(cited.contains("loops.md"), "{v}");
    }

    // The database goes away: the replicas answer 503 naming the index
    // (the client may retry), never 500, and without the password.
    drop(pg);
    for server in &replicas {
        let (status, v) = post(
            &format!("{}/api/oracle", server.url),
            &json!({"question": "How do I stop a looping stream?", "lang": "en"}),
        );
        assert_eq!(status, 503, "{v}");
        let detail = v.to_string();
        assert!(detail.contains("index is unavailable"), "{v}");
        assert!(!detail.contains(&password), "{v}");
    }
}

#[test]
fn a_database_without_an_index_exits_2_without_the_password() {
    let Some(pg) = deloop_testdata::postgres::start(SUITE) else {
        return;
    };
    pg.create_database("bare");
    let tmp = tempfile::tempdir().unwrap();
    let with_pw = pg.url_with_password("bare");
    let out = deloop(
        tmp.path(),
        &["search", "--db", &with_pw, "anything"],
        "unused",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("deloop index"), "{stderr}");
    assert!(stderr.contains(&pg.url("bare")), "{stderr}");
    assert!(!stderr.contains(pg.password()), "{stderr}");
}

/// The database is down when `deloop serve` starts: the server starts,
/// `/healthz` answers 200, `/readyz` and the oracle answer 503 naming the
/// database (never its password); once the database is up, the same
/// process becomes ready and answers, without a restart.
#[test]
fn serve_waits_for_a_database_that_is_down_at_start() {
    let Some(mut pg) = deloop_testdata::postgres::start(SUITE) else {
        return;
    };
    pg.create_database("later");
    let url = pg.url("later");
    let password = pg.password().to_string();
    let tmp = tempfile::tempdir().unwrap();
    docs(tmp.path());
    let args = ["index", "--db", url.as_str(), "--json", "docs"];
    ok(deloop(tmp.path(), &args, &password), &args, &password);
    pg.stop();

    let env = [
        ("DELOOP_DB_PASSWORD", password.as_str()),
        ("DELOOP_DB_TIMEOUT_MS", "500"),
    ];
    let server = start(&["--db", url.as_str()], &env);
    let question = json!({"question": "How do I stop a looping stream?", "lang": "en"});
    // Until the first attempt fails, the index is only "opening".
    let mut named = None;
    for _ in 0..200 {
        let (status, body) = http("GET", &format!("{}/readyz", server.url), None, "text/plain");
        assert_eq!(status, 503, "{body}");
        if body.contains("cannot be reached") {
            named = Some(body);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let named = named.expect("/readyz never named the unreachable database");
    assert!(named.contains(&url), "{named}");
    assert!(!named.contains(&password), "{named}");
    assert_eq!(
        http(
            "GET",
            &format!("{}/healthz", server.url),
            None,
            "text/plain"
        )
        .0,
        200
    );
    let (status, v) = post(&format!("{}/api/oracle", server.url), &question);
    assert_eq!(status, 503, "{v}");
    assert!(v.to_string().contains(&url), "{v}");

    pg.start_again();
    let ready = eventually(300, || {
        http("GET", &format!("{}/readyz", server.url), None, "text/plain").0 == 200
    });
    assert!(
        ready,
        "the server never became ready once the database was up"
    );
    let (status, v) = post(&format!("{}/api/oracle", server.url), &question);
    assert_eq!(status, 200, "{v}");
    assert!(v["citations"].to_string().contains("loops.md"), "{v}");

    // It goes down again under a ready server: 503 naming it, and back.
    pg.stop();
    let (status, v) = post(&format!("{}/api/oracle", server.url), &question);
    assert_eq!(status, 503, "{v}");
    assert!(!v.to_string().contains(&password), "{v}");
    pg.start_again();
    let back = eventually(100, || {
        post(&format!("{}/api/oracle", server.url), &question).0 == 200
    });
    assert!(
        back,
        "the same process did not answer again once the database was back"
    );
}
