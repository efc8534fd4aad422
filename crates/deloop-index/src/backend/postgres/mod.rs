//! The PostgreSQL backend: deloop's tables in a database with pgvector.
//!
//! - **Lexical:** every chunk's terms, computed by the same FTS5 tokenizer
//!   as the SQLite backend ([`crate::lexer`]), are stored in `deloop_terms`
//!   (an inverted index in a B-tree, with each term's occurrences per
//!   column and the chunk's length) and the corpus totals in
//!   `deloop_stats`. A query reads the candidates of its terms with one
//!   statement (one snapshot) and [`crate::bm25`] ranks them in Rust, as
//!   FTS5 does: the same scores and order as SQLite.
//! - **Vectors:** a pgvector column, typed to the embedder's dimension when
//!   the embedder is recorded, with an HNSW index (cosine).
//! - **Writes:** each batch of documents is one transaction (documents,
//!   chunks, terms and totals), so a reader never sees half a document.
//! - **Async inside a sync API:** [`crate::Index`] is synchronous (the CLI
//!   and the oracle's blocking threads call it), and tokio-postgres is
//!   async. Each database URL gets one small tokio runtime and one
//!   deadpool connection pool, shared by every `Index` opened on it in the
//!   process; a call runs its future on that runtime and waits for it
//!   (from a thread inside another runtime, through a channel, so an
//!   async caller's runtime is never blocked on re-entry).
//! - **Deadlines:** connecting (10 s), waiting for a pooled connection
//!   (30 s), and each statement (`statement_timeout`, 60 s) are bounded.
//!
//! The password comes from the URL, else `DELOOP_DB_PASSWORD`, else
//! `PGPASSWORD`; messages show the URL without it ([`redact`]).

mod schema;

use std::collections::HashMap;
use std::future::Future;
use std::str::FromStr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use pgvector::Vector;
use tokio_postgres::NoTls;

use super::{Backend, Counts, NewDocument};
use crate::bm25::{self, Candidate};
use crate::lexer::Lexer;
use crate::search::ChunkMatch;
use crate::store::{recorded_options, IndexOptions};
use crate::{Error, Result};

/// The variable read for the password when the URL has none (then
/// `PGPASSWORD`).
pub const PASSWORD_ENV: &str = "DELOOP_DB_PASSWORD";
/// Connections per database URL and process.
const POOL_SIZE: usize = 16;
/// Connecting to the server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Waiting for a free pooled connection.
const WAIT_TIMEOUT: Duration = Duration::from_secs(30);
/// One statement on the server.
const STATEMENT_TIMEOUT_MS: u64 = 60_000;
/// One call, end to end (a backstop above the others).
const CALL_TIMEOUT: Duration = Duration::from_secs(180);

/// `url` without its password: the `user:password@` secret and any
/// `password=` parameter are removed.
pub(crate) fn redact(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            format!("{user}@{host}")
        }
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let kept: Vec<&str> = query
                .split('&')
                .filter(|p| !p.to_ascii_lowercase().starts_with("password="))
                .collect();
            if kept.is_empty() {
                path.to_string()
            } else {
                format!("{path}?{}", kept.join("&"))
            }
        }
        None => tail.to_string(),
    };
    if scheme.is_empty() {
        format!("{authority}{tail}")
    } else {
        format!("{scheme}://{authority}{tail}")
    }
}

/// A failure inside a database call, named with the database afterwards.
enum Failure {
    Db(tokio_postgres::Error),
    Pool(deadpool_postgres::PoolError),
    Index(Error),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Self {
        Failure::Db(e)
    }
}

impl From<deadpool_postgres::PoolError> for Failure {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        Failure::Pool(e)
    }
}

impl Failure {
    fn into_error(self, location: &str) -> Error {
        const CHECK: &str = "check that the server is running and that the URL (host, port, \
                             user, database) and the password (in the URL or DELOOP_DB_PASSWORD) \
                             are right";
        match self {
            Failure::Index(e) => e,
            Failure::Db(e) | Failure::Pool(deadpool_postgres::PoolError::Backend(e)) => {
                let message = db_message(location, &e, CHECK);
                if unreachable(&e) {
                    Error::Unavailable(message)
                } else {
                    Error::Postgres(message)
                }
            }
            Failure::Pool(deadpool_postgres::PoolError::Timeout(_)) => Error::Unavailable(format!(
                "PostgreSQL index {location}: no connection within {} s ({CHECK})",
                WAIT_TIMEOUT.as_secs()
            )),
            Failure::Pool(e) => Error::Postgres(format!("PostgreSQL index {location}: {e}")),
        }
    }
}

/// True when `e` says the server cannot be reached now rather than that a
/// statement is wrong: no server error at all (I/O, a closed connection, a
/// connect timeout), or SQLSTATE class 08 (connection), 57P01-57P03
/// (shutdown, crash, starting up) or 53300 (too many connections).
fn unreachable(e: &tokio_postgres::Error) -> bool {
    match e.as_db_error() {
        None => true,
        Some(db) => {
            let code = db.code().code();
            code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03" | "53300")
        }
    }
}

fn db_message(location: &str, e: &tokio_postgres::Error, check: &str) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut m = format!("PostgreSQL index {location}: {}", db.message());
            if let Some(d) = db.detail() {
                m.push_str(&format!(" ({d})"));
            }
            if let Some(h) = db.hint() {
                m.push_str(&format!("; {h}"));
            }
            m
        }
        None => {
            let cause = std::error::Error::source(e)
                .map(|s| format!(": {s}"))
                .unwrap_or_default();
            format!("PostgreSQL index {location}: {e}{cause}; {check}")
        }
    }
}

type CallResult<T> = std::result::Result<T, Failure>;

/// A tokio runtime that is shut down without waiting when dropped (a drop
/// inside another runtime must not block it).
struct OwnedRuntime(Option<tokio::runtime::Runtime>);

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// The runtime and pool of one database URL, shared in the process.
struct Shared {
    rt: OwnedRuntime,
    pool: Pool,
    location: String,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// The shared runtime and pool for `url` (made on first use).
    fn for_url(url: &str) -> Result<Arc<Shared>> {
        static SHARED: Mutex<Vec<(String, Weak<Shared>)>> = Mutex::new(Vec::new());
        let mut all = SHARED.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|(_, w)| w.strong_count() > 0);
        if let Some(s) = all
            .iter()
            .find(|(u, _)| u == url)
            .and_then(|(_, w)| w.upgrade())
        {
            return Ok(s);
        }
        let shared = Arc::new(Shared::new(url)?);
        all.push((url.to_string(), Arc::downgrade(&shared)));
        Ok(shared)
    }

    fn new(url: &str) -> Result<Shared> {
        let location = redact(url);
        let mut config = tokio_postgres::Config::from_str(url).map_err(|e| {
            Error::BadInput(format!(
                "invalid PostgreSQL URL {location}: {e}; expected postgres://USER@HOST:PORT/DATABASE"
            ))
        })?;
        if config.get_password().is_none() {
            let from_env = [PASSWORD_ENV, "PGPASSWORD"]
                .iter()
                .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()));
            if let Some(p) = from_env {
                config.password(p);
            }
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_options().is_none() {
            config.options(format!("-c statement_timeout={STATEMENT_TIMEOUT_MS}"));
        }
        if config.get_application_name().is_none() {
            config.application_name("deloop");
        }
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("deloop-postgres")
            .enable_all()
            .build()
            .map_err(|source| Error::Io {
                path: "a runtime for PostgreSQL".into(),
                source,
            })?;
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(WAIT_TIMEOUT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| Error::Postgres(format!("PostgreSQL index {location}: {e}")))?;
        Ok(Shared {
            rt: OwnedRuntime(Some(rt)),
            pool,
            location,
        })
    }

    /// Runs `f` with a pooled connection on this URL's runtime and waits
    /// for it.
    fn call<T, F, Fut>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Pool) -> Fut,
        Fut: Future<Output = CallResult<T>> + Send + 'static,
    {
        let rt = self
            .rt
            .0
            .as_ref()
            .expect("the runtime lives as long as Shared");
        let fut = f(self.pool.clone());
        let out = if tokio::runtime::Handle::try_current().is_err() {
            rt.block_on(async { tokio::time::timeout(CALL_TIMEOUT, fut).await })
        } else {
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            rt.spawn(async move {
                let _ = tx.send(tokio::time::timeout(CALL_TIMEOUT, fut).await);
            });
            rx.recv().unwrap_or_else(|_| {
                Ok(Err(Failure::Index(Error::Postgres(
                    "the PostgreSQL runtime stopped".into(),
                ))))
            })
        };
        match out {
            Ok(r) => r.map_err(|f| f.into_error(&self.location)),
            Err(_) => Err(Error::Unavailable(format!(
                "PostgreSQL index {}: no answer within {} s",
                self.location,
                CALL_TIMEOUT.as_secs()
            ))),
        }
    }
}

/// A deloop index in a PostgreSQL database.
#[derive(Debug)]
pub(crate) struct PostgresBackend {
    shared: Arc<Shared>,
    lexer: Lexer,
}

impl PostgresBackend {
    /// Opens the index in the database at `url`. With `create`, the schema
    /// is created (or migrated) and `create`'s options recorded when new;
    /// without, a database without deloop's tables is [`Error::NoIndex`].
    /// Returns the options in force.
    pub fn open(url: &str, create: Option<IndexOptions>) -> Result<(Self, IndexOptions)> {
        let shared = Shared::for_url(url)?;
        let location = shared.location.clone();
        let options = shared.call(move |pool| async move {
            let mut client = pool.get().await?;
            check_server(&client).await.map_err(Failure::Index)?;
            let present: bool = client
                .query_one("SELECT to_regclass('deloop_migrations') IS NOT NULL", &[])
                .await?
                .get(0);
            if !present && create.is_none() {
                return Err(Failure::Index(Error::NoIndex { path: location }));
            }
            if create.is_some() || present {
                migrate(&mut client, create, &location).await?;
            }
            let rows = client
                .query("SELECT key, value FROM deloop_meta", &[])
                .await?;
            let meta: HashMap<String, String> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
            recorded_options(&|k| Ok(meta.get(k).cloned())).map_err(Failure::Index)
        })?;
        let lexer = Lexer::new(options.stemmer)?;
        Ok((Self { shared, lexer }, options))
    }

    /// Drops deloop's tables from the database at `url` (nothing else).
    pub fn remove(url: &str) -> Result<()> {
        let shared = Shared::for_url(url)?;
        shared.call(|pool| async move {
            let mut client = pool.get().await?;
            let tx = client.transaction().await?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&schema::LOCK])
                .await?;
            tx.batch_execute(schema::DROP).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn call<T, F, Fut>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Pool) -> Fut,
        Fut: Future<Output = CallResult<T>> + Send + 'static,
    {
        self.shared.call(f)
    }
}

/// Refuses a server that is too old or lacks pgvector, saying what to do.
async fn check_server(client: &tokio_postgres::Client) -> Result<(), Error> {
    let fail = |e: tokio_postgres::Error| Error::Postgres(format!("PostgreSQL: {e}"));
    let version: i32 = client
        .query_one("SELECT current_setting('server_version_num')::int", &[])
        .await
        .map_err(fail)?
        .get(0);
    if version < schema::MIN_SERVER {
        return Err(Error::Postgres(format!(
            "the PostgreSQL server is version {}.{}; deloop's index needs PostgreSQL 13 or \
             later with pgvector {}.{} or later",
            version / 10_000,
            version % 10_000 / 100,
            schema::MIN_VECTOR.0,
            schema::MIN_VECTOR.1
        )));
    }
    Ok(())
}

/// Makes sure `vector` is installed, then applies the migrations this
/// database lacks, in one transaction under the schema lock.
async fn migrate(
    client: &mut deadpool_postgres::Client,
    create: Option<IndexOptions>,
    location: &str,
) -> CallResult<()> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&schema::LOCK])
        .await?;
    let installed: Option<String> = tx
        .query_opt(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'",
            &[],
        )
        .await?
        .map(|r| r.get(0));
    let version = match installed {
        Some(v) => v,
        None => {
            let available = tx
                .query_opt(
                    "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'",
                    &[],
                )
                .await?;
            if available.is_none() {
                return Err(Failure::Index(Error::Postgres(format!(
                    "PostgreSQL index {location}: the server has no `vector` extension \
                     (pgvector): install pgvector {}.{} or later on the database server",
                    schema::MIN_VECTOR.0,
                    schema::MIN_VECTOR.1
                ))));
            }
            tx.batch_execute("SAVEPOINT ext").await?;
            if let Err(e) = tx
                .batch_execute("CREATE EXTENSION IF NOT EXISTS vector")
                .await
            {
                let why = e
                    .as_db_error()
                    .map_or(e.to_string(), |d| d.message().to_string());
                return Err(Failure::Index(Error::Postgres(format!(
                    "PostgreSQL index {location}: cannot create the `vector` extension ({why}): \
                     run `CREATE EXTENSION vector;` in this database as a superuser, then retry"
                ))));
            }
            tx.query_one(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'",
                &[],
            )
            .await?
            .get(0)
        }
    };
    if schema::major_minor(&version).is_none_or(|v| v < schema::MIN_VECTOR) {
        return Err(Failure::Index(Error::Postgres(format!(
            "PostgreSQL index {location}: pgvector {version} has no HNSW index; deloop needs \
             pgvector {}.{} or later: run `ALTER EXTENSION vector UPDATE;`",
            schema::MIN_VECTOR.0,
            schema::MIN_VECTOR.1
        ))));
    }
    tx.batch_execute(schema::MIGRATIONS_TABLE).await?;
    let applied: i32 = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM deloop_migrations",
            &[],
        )
        .await?
        .get(0);
    let latest = schema::MIGRATIONS.last().map_or(0, |m| m.0);
    if applied > latest {
        return Err(Failure::Index(Error::Schema(format!(
            "PostgreSQL index {location} has schema version {applied}, this deloop knows up to \
             {latest}: upgrade deloop, or rebuild the index with `deloop index --reindex`"
        ))));
    }
    for (version, what, sql) in schema::MIGRATIONS.iter().filter(|m| m.0 > applied) {
        tx.batch_execute(sql).await?;
        tx.execute(
            "INSERT INTO deloop_migrations(version, description) VALUES ($1, $2)",
            &[version, what],
        )
        .await?;
    }
    if applied == 0 {
        let o = create.unwrap_or_default();
        let values = [
            ("stemmer", o.stemmer.name().to_string()),
            ("chunk_max_bytes", o.chunking.max_bytes.to_string()),
            ("chunk_overlap_bytes", o.chunking.overlap_bytes.to_string()),
        ];
        for (k, v) in values {
            tx.execute(
                "INSERT INTO deloop_meta(key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
                &[&k, &v],
            )
            .await?;
        }
    }
    tx.commit().await?;
    Ok(())
}

/// One chunk's row and terms, ready to send.
struct ChunkRow {
    heading: String,
    body: String,
    trail: String,
    start_line: i32,
    end_line: i32,
    length: i32,
    vector: Option<Vector>,
    terms: Vec<String>,
    heading_tf: Vec<i32>,
    body_tf: Vec<i32>,
}

fn to_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

impl Backend for PostgresBackend {
    fn location(&self) -> String {
        self.shared.location.clone()
    }

    fn meta(&self, key: &str) -> Result<Option<String>> {
        let key = key.to_string();
        self.call(|pool| async move {
            let c = pool.get().await?;
            Ok(
                c.query_opt("SELECT value FROM deloop_meta WHERE key = $1", &[&key])
                    .await?
                    .map(|r| r.get(0)),
            )
        })
    }

    fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        let (key, value) = (key.to_string(), value.to_string());
        self.call(|pool| async move {
            let c = pool.get().await?;
            c.execute(
                "INSERT INTO deloop_meta(key, value) VALUES ($1, $2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                &[&key, &value],
            )
            .await?;
            Ok(())
        })
    }

    fn counts(&self) -> Result<Counts> {
        self.call(|pool| async move {
            let c = pool.get().await?;
            let r = c
                .query_one(
                    "SELECT (SELECT count(*) FROM deloop_documents),
                            (SELECT chunks FROM deloop_stats),
                            (SELECT count(*) FROM deloop_chunks WHERE embedding IS NOT NULL)",
                    &[],
                )
                .await?;
            Ok(Counts {
                documents: r.get::<_, i64>(0) as u64,
                chunks: r.get::<_, i64>(1) as u64,
                vectors: r.get::<_, i64>(2) as u64,
            })
        })
    }

    fn reset(&mut self) -> Result<()> {
        self.call(|pool| async move {
            let mut c = pool.get().await?;
            let tx = c.transaction().await?;
            tx.batch_execute(
                "LOCK TABLE deloop_stats IN EXCLUSIVE MODE;
                 DELETE FROM deloop_documents;
                 UPDATE deloop_stats SET chunks = 0, tokens = 0;
                 DELETE FROM deloop_meta WHERE key IN ('embedder_id', 'embedder_dim');",
            )
            .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn prepare_vectors(&mut self, dim: usize) -> Result<()> {
        self.call(move |pool| async move {
            let mut c = pool.get().await?;
            let tx = c.transaction().await?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&schema::LOCK])
                .await?;
            let typed = if dim == 0 {
                "vector".to_string()
            } else {
                format!("vector({dim})")
            };
            tx.batch_execute(&format!(
                "DROP INDEX IF EXISTS deloop_chunks_embedding;
                 ALTER TABLE deloop_chunks ALTER COLUMN embedding TYPE {typed};"
            ))
            .await?;
            if dim > 0 && dim <= schema::HNSW_MAX_DIM {
                tx.batch_execute(
                    "CREATE INDEX deloop_chunks_embedding ON deloop_chunks
                     USING hnsw (embedding vector_cosine_ops)",
                )
                .await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }

    fn document(&self, key: &str) -> Result<Option<(i64, String)>> {
        let key = key.to_string();
        self.call(|pool| async move {
            let c = pool.get().await?;
            Ok(c.query_opt(
                "SELECT id, hash FROM deloop_documents WHERE key = $1",
                &[&key],
            )
            .await?
            .map(|r| (r.get(0), r.get(1))))
        })
    }

    fn documents(&self, kind: &str) -> Result<Vec<(i64, String)>> {
        let kind = kind.to_string();
        self.call(|pool| async move {
            let c = pool.get().await?;
            let rows = c
                .query(
                    "SELECT id, key FROM deloop_documents WHERE kind = $1 ORDER BY id",
                    &[&kind],
                )
                .await?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }

    fn write_documents(&mut self, docs: &[NewDocument]) -> Result<()> {
        if docs.is_empty() {
            return Ok(());
        }
        // Tokenize here (the lexer is this thread's), send in one transaction.
        let mut prepared = Vec::with_capacity(docs.len());
        for d in docs {
            let mut rows = Vec::with_capacity(d.chunks.len());
            for c in &d.chunks {
                let t = self.lexer.chunk(&c.heading, &c.body)?;
                let mut terms: Vec<(String, (u32, u32))> = t.terms.into_iter().collect();
                terms.sort();
                rows.push(ChunkRow {
                    heading: c.heading.clone(),
                    body: c.body.clone(),
                    trail: serde_json::to_string(&c.trail).unwrap_or_else(|_| "[]".into()),
                    start_line: to_i32(c.start_line),
                    end_line: to_i32(c.end_line),
                    length: i32::try_from(t.length).unwrap_or(i32::MAX),
                    vector: c.vector.clone().map(Vector::from),
                    heading_tf: terms.iter().map(|(_, (h, _))| *h as i32).collect(),
                    body_tf: terms.iter().map(|(_, (_, b))| *b as i32).collect(),
                    terms: terms.into_iter().map(|(t, _)| t).collect(),
                });
            }
            prepared.push((
                d.key.clone(),
                d.kind.to_string(),
                d.doc_id.clone(),
                d.source.clone(),
                d.hash.clone(),
                rows,
            ));
        }
        self.call(|pool| async move {
            let mut c = pool.get().await?;
            let tx = c.transaction().await?;
            let del_stats = tx
                .prepare(
                    "WITH gone AS (
                         SELECT count(*) AS n, coalesce(sum(c.length), 0) AS t
                         FROM deloop_chunks c JOIN deloop_documents d ON d.id = c.document_id
                         WHERE d.key = $1)
                     UPDATE deloop_stats SET chunks = chunks - gone.n, tokens = tokens - gone.t
                     FROM gone WHERE gone.n > 0",
                )
                .await?;
            let del = tx
                .prepare("DELETE FROM deloop_documents WHERE key = $1")
                .await?;
            let ins_doc = tx
                .prepare(
                    "INSERT INTO deloop_documents(key, kind, doc_id, source, hash)
                     VALUES ($1, $2, $3, $4, $5) RETURNING id",
                )
                .await?;
            let ins_chunk = tx
                .prepare(
                    "INSERT INTO deloop_chunks(document_id, heading, body, trail, start_line,
                                               end_line, length, embedding)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
                )
                .await?;
            let ins_terms = tx
                .prepare(
                    "INSERT INTO deloop_terms(term, chunk_id, heading_tf, body_tf, length)
                     SELECT t, $2, h, b, $3
                     FROM unnest($1::text[], $4::int[], $5::int[]) AS x(t, h, b)",
                )
                .await?;
            let (mut chunks, mut tokens) = (0i64, 0i64);
            for (key, kind, doc_id, source, hash, rows) in &prepared {
                tx.execute(&del_stats, &[key]).await?;
                tx.execute(&del, &[key]).await?;
                let doc: i64 = tx
                    .query_one(&ins_doc, &[key, kind, doc_id, source, hash])
                    .await?
                    .get(0);
                for r in rows {
                    let id: i64 = tx
                        .query_one(
                            &ins_chunk,
                            &[
                                &doc,
                                &r.heading,
                                &r.body,
                                &r.trail,
                                &r.start_line,
                                &r.end_line,
                                &r.length,
                                &r.vector,
                            ],
                        )
                        .await?
                        .get(0);
                    tx.execute(
                        &ins_terms,
                        &[&r.terms, &id, &r.length, &r.heading_tf, &r.body_tf],
                    )
                    .await?;
                    chunks += 1;
                    tokens += i64::from(r.length);
                }
            }
            tx.execute(
                "UPDATE deloop_stats SET chunks = chunks + $1, tokens = tokens + $2",
                &[&chunks, &tokens],
            )
            .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn delete_document(&mut self, id: i64) -> Result<()> {
        self.call(move |pool| async move {
            let mut c = pool.get().await?;
            let tx = c.transaction().await?;
            tx.execute(
                "WITH gone AS (
                     SELECT count(*) AS n, coalesce(sum(length), 0) AS t
                     FROM deloop_chunks WHERE document_id = $1)
                 UPDATE deloop_stats SET chunks = chunks - gone.n, tokens = tokens - gone.t
                 FROM gone",
                &[&id],
            )
            .await?;
            tx.execute("DELETE FROM deloop_documents WHERE id = $1", &[&id])
                .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn lexical(&self, words: &[String], k: usize) -> Result<Vec<(i64, f32)>> {
        if words.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        let phrases = self.lexer.phrases(words)?;
        if phrases.is_empty() {
            return Ok(Vec::new());
        }
        let mut distinct = phrases.clone();
        distinct.sort();
        distinct.dedup();
        let (chunks, tokens, candidates) = self.call(|pool| async move {
            let c = pool.get().await?;
            // One statement, one snapshot: the totals match the rows.
            let rows = c
                .query(
                    "SELECT s.chunks, s.tokens, t.chunk_id, t.term, t.heading_tf, t.body_tf,
                            t.length
                     FROM deloop_stats s
                     LEFT JOIN deloop_terms t ON t.term = ANY($1)",
                    &[&distinct],
                )
                .await?;
            let mut candidates: HashMap<i64, Candidate> = HashMap::new();
            let (mut chunks, mut tokens) = (0i64, 0i64);
            for r in &rows {
                chunks = r.get(0);
                tokens = r.get(1);
                let Some(id) = r.get::<_, Option<i64>>(2) else {
                    continue;
                };
                let e = candidates.entry(id).or_default();
                e.length = r.get::<_, i32>(6).max(0) as u64;
                e.terms.insert(
                    r.get(3),
                    (
                        r.get::<_, i32>(4).max(0) as u32,
                        r.get::<_, i32>(5).max(0) as u32,
                    ),
                );
            }
            Ok((chunks.max(0) as u64, tokens.max(0) as u64, candidates))
        })?;
        Ok(bm25::rank(&phrases, &candidates, chunks, tokens, k))
    }

    fn vector_dim(&self) -> Result<Option<usize>> {
        self.call(|pool| async move {
            let c = pool.get().await?;
            let dim: Option<i32> = c
                .query_opt(
                    "SELECT vector_dims(embedding) FROM deloop_chunks
                     WHERE embedding IS NOT NULL LIMIT 1",
                    &[],
                )
                .await?
                .map(|r| r.get(0));
            Ok(dim.map(|d| d.max(0) as usize))
        })
    }

    fn vector(&self, query: &[f32], k: usize) -> Result<Vec<(i64, f32)>> {
        if k == 0 || query.is_empty() {
            return Ok(Vec::new());
        }
        let q = Vector::from(query.to_vec());
        // A few more rows than asked, so chunks tied at the k-th score are
        // ordered by id as in SQLite (the index orders by distance only).
        // HNSW returns at most ef_search rows: twice that (at least its
        // default 40), up to its maximum 1000; past that, an exact scan.
        let fetch = k + k / 2 + 8;
        let ef = (fetch * 2).clamp(40, 1000);
        let exact = fetch > 500;

        let mut out = self.call(move |pool| async move {
            let mut c = pool.get().await?;
            let tx = c.build_transaction().read_only(true).start().await?;
            let setting = if exact {
                "SET LOCAL enable_indexscan = off".to_string()
            } else {
                format!("SET LOCAL hnsw.ef_search = {ef}")
            };
            tx.batch_execute(&setting).await?;
            // The limit is written out: as a parameter, the planner cannot
            // see that it is small and may scan and sort every vector
            // instead of walking the HNSW index.
            let rows = tx
                .query(
                    &format!(
                        "SELECT id, 1 - (embedding <=> $1) FROM deloop_chunks
                         WHERE embedding IS NOT NULL ORDER BY embedding <=> $1 LIMIT {fetch}"
                    ),
                    &[&q],
                )
                .await?;
            tx.commit().await?;
            Ok(rows
                .iter()
                .map(|r| (r.get::<_, i64>(0), r.get::<_, f64>(1) as f32))
                .collect::<Vec<(i64, f32)>>())
        })?;
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        out.truncate(k);
        Ok(out)
    }

    fn load_matches(&self, ranked: &[(i64, f32)]) -> Result<Vec<ChunkMatch>> {
        if ranked.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = ranked.iter().map(|r| r.0).collect();
        let mut found = self.call(|pool| async move {
            let c = pool.get().await?;
            let rows = c
                .query(
                    "SELECT c.id, c.body, c.trail, c.start_line, c.end_line, d.source, d.doc_id
                     FROM deloop_chunks c JOIN deloop_documents d ON d.id = c.document_id
                     WHERE c.id = ANY($1)",
                    &[&ids],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|r| {
                    let trail: String = r.get(2);
                    let id: i64 = r.get(0);
                    (
                        id,
                        ChunkMatch {
                            chunk_id: id,
                            text: r.get(1),
                            heading_trail: serde_json::from_str(&trail).unwrap_or_default(),
                            start_line: r.get::<_, i32>(3).max(0) as usize,
                            end_line: r.get::<_, i32>(4).max(0) as usize,
                            source: r.get(5),
                            doc_id: r.get(6),
                            score: 0.0,
                        },
                    )
                })
                .collect::<HashMap<i64, ChunkMatch>>())
        })?;
        // A chunk deleted by a writer since it was ranked is left out.
        Ok(ranked
            .iter()
            .filter_map(|&(id, score)| {
                found.remove(&id).map(|mut m| {
                    m.score = score;
                    m
                })
            })
            .collect())
    }

    fn hyde_get(&self, model: &str, question: &str) -> Result<Option<String>> {
        let (model, question) = (model.to_string(), question.to_string());
        self.call(|pool| async move {
            let c = pool.get().await?;
            Ok(c.query_opt(
                "SELECT passage FROM deloop_hyde_cache WHERE model = $1 AND question = $2",
                &[&model, &question],
            )
            .await?
            .map(|r| r.get(0)))
        })
    }

    fn hyde_put(&self, model: &str, question: &str, passage: &str) -> Result<()> {
        let (model, question, passage) =
            (model.to_string(), question.to_string(), passage.to_string());
        self.call(|pool| async move {
            let c = pool.get().await?;
            c.execute(
                "INSERT INTO deloop_hyde_cache(model, question, passage, created_at)
                 VALUES ($1, $2, $3, extract(epoch FROM now())::bigint)
                 ON CONFLICT (model, question) DO UPDATE
                 SET passage = excluded.passage, created_at = excluded.created_at",
                &[&model, &question, &passage],
            )
            .await?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_survive_redaction() {
        for (url, shown) in [
            ("postgres://u:pw@h:5432/db", "postgres://u@h:5432/db"),
            (
                "postgresql://u:p:w@x@h/db?sslmode=disable",
                "postgresql://u@h/db?sslmode=disable",
            ),
            (
                "postgres://u@h/db?password=pw&application_name=a",
                "postgres://u@h/db?application_name=a",
            ),
            ("postgres://h/db?PASSWORD=pw", "postgres://h/db"),
            ("postgres://u@h:1/db", "postgres://u@h:1/db"),
        ] {
            assert_eq!(redact(url), shown);
            assert!(!redact(url).contains("pw"));
        }
    }

    #[test]
    fn a_bad_url_is_named_without_its_password() {
        let err = Shared::new("postgres://u:secret@h:notaport/db")
            .unwrap_err()
            .to_string();
        assert!(err.contains("postgres://u@h:notaport/db"), "{err}");
        assert!(!err.contains("secret"), "{err}");
    }
}
