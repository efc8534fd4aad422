//! Opening a database: the server checks (version, pgvector) and the
//! numbered migrations of [`super::schema`], applied under the schema lock.

use super::connection::{CallResult, Failure};
use super::schema;
use crate::store::IndexOptions;
use crate::Error;

/// Refuses a server that is too old or lacks pgvector, saying what to do.
pub(super) async fn check_server(client: &tokio_postgres::Client) -> Result<(), Error> {
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
pub(super) async fn migrate(
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
