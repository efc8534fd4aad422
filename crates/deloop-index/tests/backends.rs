//! One conformance suite for every index backend: the same inputs go into
//! an SQLite file and a PostgreSQL database (a real PostgreSQL 18 with
//! pgvector, started by the test on a free port of 127.0.0.1), and both
//! must give the same chunk ids, sources, lines and ranked results, with
//! the same scores. Then what only a server has: concurrent readers while
//! a writer adds documents, schema migrations, and clear errors.
//!
//! PostgreSQL comes from `scripts/setup-postgres.sh`; without it each test
//! prints one line and passes, and with `CI=true` or `DELOOP_REQUIRE_REAL=1`
//! it fails.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use deloop_index::{
    EmbedError, Embedder, Index, IndexOptions, PassageRanking, Retrieval, SearchOutcome,
    SearchRequest, Stemmer,
};
use deloop_testdata::postgres::{self, PgCluster};

/// A deterministic toy embedder: hashed bag of lowercase words.
struct Toy;

impl Embedder for Toy {
    fn id(&self) -> &str {
        "toy"
    }
    fn dim(&self) -> usize {
        16
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| toy_vector(t)).collect())
    }
}

/// Hashed words, plus a small wobble from the whole text in every
/// dimension: no two texts tie and no vector is orthogonal to another, so
/// the order is the same whatever rounds last.
fn toy_vector(t: &str) -> Vec<f32> {
    let whole = t
        .bytes()
        .fold(11u64, |h, b| h.wrapping_mul(131).wrapping_add(b as u64));
    let mut v: Vec<f32> = (0..16u64)
        .map(|d| 0.05 + ((whole.rotate_left(d as u32 * 4) ^ d) % 997) as f32 / 9970.0)
        .collect();
    for w in t
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let h = w
            .to_lowercase()
            .bytes()
            .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
        v[(h % 16) as usize] += 1.0 + (h % 7) as f32 / 10.0;
    }
    v
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
}

/// Markdown and text in English and Spanish: headings, plurals for the
/// stemmer, accents, a long section that is cut into overlapping chunks.
fn docs(dir: &Path) {
    write(
        dir,
        "es/cuenta.md",
        "# Cuenta\n\nPara cambiar la contraseña abre Ajustes.\n\n## Recuperación\n\n\
         Si olvidaste la contraseña pide un enlace.\n",
    );
    write(
        dir,
        "en/reset.txt",
        "To reset your password open the settings page.\n\nThen follow the emailed link.\n",
    );
    write(
        dir,
        "en/loops.md",
        "# Loops\n\nA model that loops repeats itself.\n\n## Streaming guards\n\n\
         The stream watcher cancels looping streams.\n\n## Password loops\n\n\
         A login loop asks for the password again and again.\n",
    );
    let long: String = (0..60)
        .map(|i| format!("Line {i} of the guide talks about guards, streams and models.\n"))
        .collect();
    write(dir, "en/guide.md", &format!("# Guide\n\n{long}"));
    write(
        dir,
        "en/json.md",
        "# JSON rescue\n\nBroken JSON from a model is repaired.\n\n## Keys\n\nThe key answer is read.\n",
    );
}

const QUERIES: &[&str] = &[
    "password",
    "contraseña",
    "How do I stop a looping stream?",
    "models guards",
    "JSON key",
    "reset settings link",
    "nothing matches zzzz",
];

/// Both indexes, built the same way.
struct Pair {
    sqlite: Index,
    pg: Index,
    _dir: tempfile::TempDir,
}

fn pair(cluster: &PgCluster, db: &str, options: IndexOptions) -> Pair {
    let dir = tempfile::tempdir().unwrap();
    cluster.create_database(db);
    let sqlite = Index::open_with(&dir.path().join("index.db"), options).unwrap();
    let pg = Index::open_with(Path::new(&cluster.url_with_password(db)), options).unwrap();
    Pair {
        sqlite,
        pg,
        _dir: dir,
    }
}

fn same_outcome(what: &str, a: &SearchOutcome, b: &SearchOutcome) {
    assert_eq!(a.retrieval_used, b.retrieval_used, "{what}");
    assert_eq!(a.fallback_reason, b.fallback_reason, "{what}");
    let ids = |o: &SearchOutcome| o.matches.iter().map(|m| m.chunk_id).collect::<Vec<_>>();
    assert_eq!(ids(a), ids(b), "{what}: ranked chunk ids differ");
    for (x, y) in a.matches.iter().zip(&b.matches) {
        assert_eq!(
            (
                &x.source,
                &x.doc_id,
                &x.text,
                x.start_line,
                x.end_line,
                &x.heading_trail
            ),
            (
                &y.source,
                &y.doc_id,
                &y.text,
                y.start_line,
                y.end_line,
                &y.heading_trail
            ),
            "{what}: chunk {}",
            x.chunk_id
        );
        let tolerance = 1e-5 * x.score.abs().max(1.0);
        assert!(
            (x.score - y.score).abs() <= tolerance,
            "{what}: chunk {} scores {} (SQLite) and {} (PostgreSQL)",
            x.chunk_id,
            x.score,
            y.score
        );
    }
}

fn search_both(p: &Pair, req: &SearchRequest) {
    let a = p.sqlite.search(req).unwrap();
    let b = p.pg.search(req).unwrap();
    same_outcome(&format!("{:?} {:?}", req.mode, req.text), &a, &b);
}

fn requests(text: &str) -> Vec<SearchRequest> {
    let vector = Some(toy_vector(text));
    let mut out = Vec::new();
    for mode in [Retrieval::Lexical, Retrieval::Vector, Retrieval::Hybrid] {
        for k in [3, 10] {
            out.push(SearchRequest {
                text: text.into(),
                vector: vector.clone(),
                k,
                mode,
                ..Default::default()
            });
        }
    }
    out.push(SearchRequest {
        text: text.into(),
        expansion: Some("guards rescue".into()),
        k: 10,
        mode: Retrieval::Lexical,
        ..Default::default()
    });
    out.push(SearchRequest {
        text: text.into(),
        vector: vector.clone(),
        passage: Some(PassageRanking {
            text: "streams loop guards".into(),
            vector: Some(toy_vector("streams loop guards")),
            weight: 1.0,
            agreement_power: 0.0,
        }),
        k: 10,
        mode: Retrieval::Hybrid,
        ..Default::default()
    });
    out
}

fn cluster(suite: &str) -> Option<PgCluster> {
    postgres::start(suite)
}

#[test]
fn both_backends_index_and_rank_alike() {
    let Some(pg) = cluster("backends::both_backends_index_and_rank_alike") else {
        return;
    };
    let mut p = pair(&pg, "conformance", IndexOptions::default());
    let dir = tempfile::tempdir().unwrap();
    docs(dir.path());
    let paths = [dir.path().to_path_buf()];
    let a = p
        .sqlite
        .index_paths(&paths, Some(&Toy), &mut |_| {})
        .unwrap();
    let b = p.pg.index_paths(&paths, Some(&Toy), &mut |_| {}).unwrap();
    assert_eq!(
        (a.seen, a.updated, a.chunks_written, a.chunks_total),
        (b.seen, b.updated, b.chunks_written, b.chunks_total)
    );
    assert!(a.chunks_total > 6, "the guide is cut in several chunks");
    assert_eq!(p.sqlite.summary().unwrap(), p.pg.summary().unwrap());
    for q in QUERIES {
        for req in requests(q) {
            search_both(&p, &req);
        }
    }

    // Incremental: one file changes, one goes, one is new; ids stay alike.
    write(
        dir.path(),
        "en/reset.txt",
        "To reset a forgotten password, open the settings page.\n",
    );
    std::fs::remove_file(dir.path().join("en/json.md")).unwrap();
    write(
        dir.path(),
        "en/new.md",
        "# New\n\nA new page on password streams.\n",
    );
    let a = p
        .sqlite
        .index_paths(&paths, Some(&Toy), &mut |_| {})
        .unwrap();
    let b = p.pg.index_paths(&paths, Some(&Toy), &mut |_| {}).unwrap();
    assert_eq!(
        (a.updated, a.unchanged, a.removed, a.chunks_total),
        (b.updated, b.unchanged, b.removed, b.chunks_total)
    );
    assert_eq!((a.updated, a.removed), (2, 1));
    for q in QUERIES {
        for req in requests(q) {
            search_both(&p, &req);
        }
    }

    // The HyDE cache and the embedder record.
    p.pg.hyde_cache_put("m", "q", "p1").unwrap();
    p.pg.hyde_cache_put("m", "q", "p2").unwrap();
    assert_eq!(
        p.pg.hyde_cache_get("m", "q").unwrap().as_deref(),
        Some("p2")
    );
    assert_eq!(p.pg.hyde_cache_get("m", "other").unwrap(), None);
    assert_eq!(
        p.sqlite.embedder_info().unwrap(),
        p.pg.embedder_info().unwrap()
    );

    // Reopening finds the same index, and `reset` empties both alike.
    let again = Index::open_existing(Path::new(&pg.url_with_password("conformance"))).unwrap();
    assert_eq!(again.summary().unwrap(), p.pg.summary().unwrap());
    p.sqlite.reset().unwrap();
    p.pg.reset().unwrap();
    assert_eq!(p.sqlite.summary().unwrap(), p.pg.summary().unwrap());
    assert_eq!(p.pg.summary().unwrap().chunks, 0);
}

#[test]
fn both_backends_agree_without_stemming_and_without_vectors() {
    let Some(pg) = cluster("backends::both_backends_agree_without_stemming") else {
        return;
    };
    let options = IndexOptions {
        stemmer: Stemmer::None,
        ..Default::default()
    };
    let mut p = pair(&pg, "plain", options);
    assert_eq!(p.pg.options().stemmer, Stemmer::None);
    let dir = tempfile::tempdir().unwrap();
    docs(dir.path());
    let paths = [dir.path().to_path_buf()];
    p.sqlite.index_paths(&paths, None, &mut |_| {}).unwrap();
    p.pg.index_paths(&paths, None, &mut |_| {}).unwrap();
    for q in QUERIES.iter().chain(&["Contrasena", "loop", "loops"]) {
        for req in requests(q) {
            // Hybrid and vector fall back to lexical on both, saying why.
            search_both(&p, &req);
        }
    }
}

/// The BEIR path on real data: 600 SciFact documents, every SciFact query,
/// lexical rankings and scores identical. (Vectors are compared on the
/// small corpus above, where HNSW is exact; on SciFact the approximate
/// HNSW ranking is measured by nDCG@10 in docs/retrieval.md.)
#[test]
fn both_backends_rank_scifact_alike() {
    let Some(corpus) = deloop_testdata::shared_data(
        "data/scifact/corpus.jsonl",
        "backends::both_backends_rank_scifact_alike",
    ) else {
        return;
    };
    let Some(pg) = cluster("backends::both_backends_rank_scifact_alike") else {
        return;
    };
    let queries = corpus.with_file_name("queries.jsonl");
    let tmp = tempfile::tempdir().unwrap();
    let subset = tmp.path().join("corpus.jsonl");
    let text = std::fs::read_to_string(&corpus).unwrap();
    let head: String = text.lines().take(600).map(|l| format!("{l}\n")).collect();
    std::fs::write(&subset, head).unwrap();
    let mut p = pair(&pg, "scifact", IndexOptions::default());
    p.sqlite
        .index_beir(&subset, Some(&Toy), &mut |_| {})
        .unwrap();
    p.pg.index_beir(&subset, Some(&Toy), &mut |_| {}).unwrap();
    let mut compared = 0;
    for line in std::fs::read_to_string(&queries).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let q = v["text"].as_str().unwrap();
        let req = SearchRequest {
            text: q.into(),
            k: 20,
            mode: Retrieval::Lexical,
            ..Default::default()
        };
        search_both(&p, &req);
        compared += 1;
    }
    assert!(compared > 1000, "{compared} queries");
}

/// Readers search while a writer adds documents of 6 chunks each: a reader
/// sees all 6 chunks of a document or none, and every reader and the writer
/// finish without an error.
#[test]
fn readers_never_see_half_a_document() {
    let Some(pg) = cluster("backends::readers_never_see_half_a_document") else {
        return;
    };
    pg.create_database("live");
    let url = pg.url_with_password("live");
    let dir = tempfile::tempdir().unwrap();
    let mut writer = Index::open(Path::new(&url)).unwrap();
    write(dir.path(), "seed.md", "# Seed\n\nseed text\n");
    writer
        .index_paths(&[dir.path().to_path_buf()], Some(&Toy), &mut |_| {})
        .unwrap();

    const DOCS: usize = 30;
    let done = Arc::new(AtomicBool::new(false));
    let checks = Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = (0..3)
        .map(|r| {
            let (url, done, checks) = (url.clone(), done.clone(), checks.clone());
            std::thread::spawn(move || {
                let index = Index::open_existing(Path::new(&url)).unwrap();
                let mut i = r;
                while !done.load(Ordering::SeqCst) || i < DOCS * 2 {
                    let doc = i % DOCS;
                    let marker = format!("marker{doc}");
                    let outcome = index
                        .search(&SearchRequest {
                            text: marker.clone(),
                            vector: Some(toy_vector(&marker)),
                            k: 50,
                            mode: Retrieval::Hybrid,
                            ..Default::default()
                        })
                        .unwrap();
                    let lexical = index
                        .search(&SearchRequest {
                            text: marker.clone(),
                            k: 50,
                            mode: Retrieval::Lexical,
                            ..Default::default()
                        })
                        .unwrap();
                    let n = lexical.matches.len();
                    assert!(n == 0 || n == 6, "{marker}: {n} of 6 chunks visible");
                    assert!(!outcome.matches.is_empty());
                    checks.fetch_add(1, Ordering::SeqCst);
                    i += 3;
                }
            })
        })
        .collect();
    for d in 0..DOCS {
        let sections: String = (0..6)
            .map(|s| format!("## Part {s}\n\nmarker{d} section {s} of document {d}.\n\n"))
            .collect();
        write(
            dir.path(),
            &format!("doc{d:02}.md"),
            &format!("# Doc {d}\n\n{sections}"),
        );
        writer
            .index_paths(&[dir.path().to_path_buf()], Some(&Toy), &mut |_| {})
            .unwrap();
    }
    done.store(true, Ordering::SeqCst);
    for r in readers {
        r.join().unwrap();
    }
    assert!(checks.load(Ordering::SeqCst) >= DOCS * 2);
    let last = Index::open_existing(Path::new(&url)).unwrap();
    let hits = last
        .search(&SearchRequest {
            text: "marker7".into(),
            k: 50,
            mode: Retrieval::Lexical,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(hits.matches.len(), 6);
}

#[test]
fn migrations_and_errors_name_the_problem() {
    let Some(pg) = cluster("backends::migrations_and_errors_name_the_problem") else {
        return;
    };
    pg.create_database("empty");
    // No deloop tables: `open_existing` says to index first, without the password.
    let err = Index::open_existing(Path::new(&pg.url_with_password("empty")))
        .unwrap_err()
        .to_string();
    assert!(err.contains("run `deloop index"), "{err}");
    assert!(!err.contains(pg.password()), "{err}");
    assert!(err.contains(&pg.url("empty")), "{err}");

    // Creating records migration 1 and the vector extension, once.
    let url = pg.url_with_password("empty");
    Index::open(Path::new(&url)).unwrap();
    Index::open(Path::new(&url)).unwrap();
    assert_eq!(
        pg.psql(
            "empty",
            "SELECT string_agg(version::text, ',') FROM deloop_migrations"
        )
        .trim(),
        "1,2"
    );
    assert_eq!(
        pg.psql(
            "empty",
            "SELECT count(*) FROM pg_extension WHERE extname = 'vector'"
        )
        .trim(),
        "1"
    );

    // A schema from a newer deloop is refused.
    pg.psql(
        "empty",
        "INSERT INTO deloop_migrations(version, description) VALUES (99, 'future')",
    );
    let err = Index::open_existing(Path::new(&pg.url_with_password("empty")))
        .unwrap_err()
        .to_string();
    assert!(err.contains("schema version 99"), "{err}");

    // `remove` drops deloop's tables and nothing else.
    pg.psql("empty", "CREATE TABLE theirs(x int)");
    Index::remove(Path::new(&url)).unwrap();
    assert_eq!(
        pg.psql(
            "empty",
            "SELECT to_regclass('deloop_chunks') IS NULL, to_regclass('theirs') IS NOT NULL"
        )
        .trim(),
        "t|t"
    );

    // Without the right to create `vector`, the error says who must.
    pg.psql("postgres", "CREATE ROLE reader LOGIN PASSWORD 'reader-pw'");
    pg.psql("postgres", "CREATE DATABASE noext OWNER reader");
    let noext = format!("postgres://reader:reader-pw@127.0.0.1:{}/noext", pg.port());
    let err = Index::open(Path::new(&noext)).unwrap_err().to_string();
    assert!(
        err.contains("CREATE EXTENSION vector") && err.contains("superuser"),
        "{err}"
    );
    assert!(!err.contains("reader-pw"), "{err}");

    // A wrong password is named as a connection problem, without the password.
    let wrong = format!("postgres://deloop:not-the-pw@127.0.0.1:{}/empty", pg.port());
    let err = Index::open(Path::new(&wrong)).unwrap_err().to_string();
    assert!(err.contains("password"), "{err}");
    assert!(!err.contains("not-the-pw"), "{err}");
}

/// Nothing listens there: the error says what to check, quickly.
#[test]
fn an_unreachable_server_is_a_clear_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url: PathBuf = format!("postgres://deloop:pw@127.0.0.1:{port}/x").into();
    let err = Index::open(&url).unwrap_err().to_string();
    assert!(
        err.contains(&format!("postgres://deloop@127.0.0.1:{port}/x")),
        "{err}"
    );
    assert!(err.contains("check that the server is running"), "{err}");
    assert!(!err.contains(":pw@"), "{err}");
}

/// An index of schema version 1 (vectors in a column of the chunk table)
/// with vectors in it is moved to version 2 (a narrow vector table with
/// its HNSW index) when it is opened, and ranks exactly as before.
#[test]
fn a_version_1_index_with_vectors_migrates_and_ranks_alike() {
    let Some(pg) = cluster("backends::a_version_1_index_migrates") else {
        return;
    };
    let mut p = pair(&pg, "v1", IndexOptions::default());
    let dir = tempfile::tempdir().unwrap();
    docs(dir.path());
    let paths = [dir.path().to_path_buf()];
    p.sqlite
        .index_paths(&paths, Some(&Toy), &mut |_| {})
        .unwrap();
    p.pg.index_paths(&paths, Some(&Toy), &mut |_| {}).unwrap();
    let vectors = p.pg.summary().unwrap().vectors;
    assert!(vectors > 6);
    let Pair {
        sqlite,
        pg: pg_index,
        _dir,
    } = p;
    drop(pg_index);
    // Back to version 1's layout, as a deloop of that version left it.
    pg.psql(
        "v1",
        "BEGIN;
         ALTER TABLE deloop_chunks ADD COLUMN embedding vector(16);
         UPDATE deloop_chunks c SET embedding = v.embedding
             FROM deloop_vectors v WHERE v.chunk_id = c.id;
         CREATE INDEX deloop_chunks_embedding ON deloop_chunks
             USING hnsw (embedding vector_cosine_ops);
         DROP TABLE deloop_vectors;
         DELETE FROM deloop_migrations WHERE version = 2;
         COMMIT;",
    );
    let url = pg.url_with_password("v1");
    let migrated = Index::open_existing(Path::new(&url)).unwrap();
    assert_eq!(
        pg.psql(
            "v1",
            "SELECT string_agg(version::text, ',' ORDER BY version) FROM deloop_migrations"
        )
        .trim(),
        "1,2"
    );
    assert_eq!(
        pg.psql(
            "v1",
            "SELECT to_regclass('deloop_vectors_embedding') IS NOT NULL,
                    format_type(atttypid, atttypmod)
             FROM pg_attribute WHERE attrelid = 'deloop_vectors'::regclass
             AND attname = 'embedding'"
        )
        .trim(),
        "t|vector(16)"
    );
    assert_eq!(migrated.summary().unwrap().vectors, vectors);
    let both = Pair {
        sqlite,
        pg: migrated,
        _dir,
    };
    for q in QUERIES {
        for req in requests(q) {
            search_both(&both, &req);
        }
    }
}

/// A statement held up on the server (a lock another session keeps)
/// ends at `db_timeout` as `Unavailable`, naming the database, and the
/// same index answers again once the lock is gone.
#[test]
fn a_statement_held_up_ends_at_the_deadline() {
    let Some(pg) = cluster("backends::a_statement_held_up") else {
        return;
    };
    let mut p = pair(&pg, "slow", IndexOptions::default());
    let dir = tempfile::tempdir().unwrap();
    docs(dir.path());
    p.pg.index_paths(&[dir.path().to_path_buf()], Some(&Toy), &mut |_| {})
        .unwrap();
    let url = pg.url_with_password("slow");
    let index = Index::open_existing_within(Path::new(&url), std::time::Duration::from_millis(300))
        .unwrap();
    let req = SearchRequest {
        text: "password".into(),
        vector: Some(toy_vector("password")),
        k: 5,
        mode: Retrieval::Hybrid,
        ..Default::default()
    };
    assert!(!index.search(&req).unwrap().matches.is_empty());
    // Another session holds the statistics table until it is told to stop.
    let locked = Arc::new(AtomicBool::new(false));
    let holder = {
        let (bin, port, password) = (pg.bin().to_path_buf(), pg.port(), pg.password().to_string());
        let locked = locked.clone();
        std::thread::spawn(move || {
            let mut child = std::process::Command::new(bin.join("psql"))
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &port.to_string(),
                    "-U",
                    "deloop",
                    "-d",
                    "slow",
                ])
                .args(["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1"])
                .env("PGPASSWORD", password)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::{BufRead, Write};
            let mut stdin = child.stdin.take().unwrap();
            writeln!(
                stdin,
                "BEGIN; LOCK TABLE deloop_stats IN ACCESS EXCLUSIVE MODE; SELECT 'locked';"
            )
            .unwrap();
            let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
            let mut line = String::new();
            while out.read_line(&mut line).unwrap() > 0 && !line.contains("locked") {
                line.clear();
            }
            locked.store(true, Ordering::SeqCst);
            (child, stdin)
        })
    };
    let (mut child, stdin) = holder.join().unwrap();
    assert!(locked.load(Ordering::SeqCst));
    let err = index.search(&req).unwrap_err();
    assert!(
        matches!(err, deloop_index::Error::Unavailable(_)),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains(&pg.url("slow")), "{text}");
    assert!(text.contains("statement timeout"), "{text}");
    assert!(!text.contains(pg.password()), "{text}");
    drop(stdin);
    child.wait().unwrap();
    assert!(!index.search(&req).unwrap().matches.is_empty());
}

/// A host that accepts connections and never answers (a hung server, a
/// black-holed network) is `Unavailable` at the deadline, not a hang.
#[test]
fn a_server_that_never_answers_ends_at_the_deadline() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().take(4) {
            held.push(s);
        }
        held
    });
    let url: PathBuf = format!("postgres://deloop:pw@127.0.0.1:{port}/x").into();
    let err = Index::open_existing_within(&url, std::time::Duration::from_millis(300)).unwrap_err();
    assert!(
        matches!(err, deloop_index::Error::Unavailable(_)),
        "{err:?}"
    );
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
    drop(held);
}
