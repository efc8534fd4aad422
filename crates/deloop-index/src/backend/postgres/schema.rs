//! deloop's tables in PostgreSQL, created and upgraded by numbered
//! migrations recorded in `deloop_migrations`.
//!
//! Every table is prefixed `deloop_`, so an index can share a database with
//! other tables. Migrations run in one transaction under an advisory lock:
//! two processes opening a new database at once apply each migration once.

/// The oldest server deloop runs on (`server_version_num`): pgvector 0.5+
/// and `INCLUDE` indexes need 13 at least.
pub(super) const MIN_SERVER: i32 = 130_000;
/// The oldest pgvector with HNSW indexes.
pub(super) const MIN_VECTOR: (u32, u32) = (0, 5);
/// The advisory lock key of schema changes ("deloop" in ASCII).
pub(super) const LOCK: i64 = 0x64656c6f6f70;
/// HNSW indexes hold vectors of at most this many dimensions.
pub(super) const HNSW_MAX_DIM: usize = 2000;

/// `(version, what it does, SQL)`, in order. Never edit one that shipped:
/// add the next.
pub(super) const MIGRATIONS: &[(i32, &str, &str)] = &[
    (
        1,
        "documents, chunks with a pgvector column, the BM25 term table, the HyDE cache",
        "
    CREATE TABLE deloop_meta(key text PRIMARY KEY, value text NOT NULL);
    CREATE TABLE deloop_documents(
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        key text NOT NULL UNIQUE,
        kind text NOT NULL,
        doc_id text,
        source text NOT NULL,
        hash text NOT NULL
    );
    CREATE INDEX deloop_documents_kind ON deloop_documents(kind);
    CREATE TABLE deloop_chunks(
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        document_id bigint NOT NULL REFERENCES deloop_documents(id) ON DELETE CASCADE,
        heading text NOT NULL,
        body text NOT NULL,
        trail text NOT NULL,
        start_line integer NOT NULL,
        end_line integer NOT NULL,
        length integer NOT NULL,
        embedding vector
    );
    CREATE INDEX deloop_chunks_document ON deloop_chunks(document_id);
    -- The inverted index: one row per term of a chunk, as FTS5 tokenizes
    -- it, with its occurrences per column and the chunk's length: what
    -- BM25 needs, read by one range scan per query term.
    CREATE TABLE deloop_terms(
        term text NOT NULL,
        chunk_id bigint NOT NULL REFERENCES deloop_chunks(id) ON DELETE CASCADE,
        heading_tf integer NOT NULL,
        body_tf integer NOT NULL,
        length integer NOT NULL,
        PRIMARY KEY(term, chunk_id) INCLUDE (heading_tf, body_tf, length)
    );
    CREATE INDEX deloop_terms_chunk ON deloop_terms(chunk_id);
    -- BM25's corpus statistics, kept by each write in its transaction.
    CREATE TABLE deloop_stats(
        one boolean PRIMARY KEY DEFAULT true CHECK (one),
        chunks bigint NOT NULL,
        tokens bigint NOT NULL
    );
    INSERT INTO deloop_stats(chunks, tokens) VALUES (0, 0);
    CREATE TABLE deloop_hyde_cache(
        model text NOT NULL,
        question text NOT NULL,
        passage text NOT NULL,
        created_at bigint NOT NULL,
        PRIMARY KEY(model, question)
    );
    ",
    ),
    (
        2,
        "vectors move to a narrow table of their own (the HNSW walk reads only them)",
        "
    CREATE TABLE deloop_vectors(
        chunk_id bigint PRIMARY KEY REFERENCES deloop_chunks(id) ON DELETE CASCADE,
        embedding vector NOT NULL
    );
    INSERT INTO deloop_vectors(chunk_id, embedding)
        SELECT id, embedding FROM deloop_chunks WHERE embedding IS NOT NULL;
    DROP INDEX IF EXISTS deloop_chunks_embedding;
    ALTER TABLE deloop_chunks DROP COLUMN embedding;
    -- Type the column and index it as the recorded embedder asks (what
    -- prepare_vectors does for a new index).
    DO $$
    DECLARE d integer;
    BEGIN
        SELECT value::integer INTO d FROM deloop_meta WHERE key = 'embedder_dim';
        IF d IS NOT NULL AND d > 0 THEN
            EXECUTE format('ALTER TABLE deloop_vectors ALTER COLUMN embedding TYPE vector(%s)', d);
            IF d <= 2000 THEN
                CREATE INDEX deloop_vectors_embedding ON deloop_vectors
                    USING hnsw (embedding vector_cosine_ops);
            END IF;
        END IF;
    END $$;
    ",
    ),
];

/// The SQL that drops every deloop table (`deloop index --reindex`).
pub(super) const DROP: &str = "
    DROP TABLE IF EXISTS deloop_terms, deloop_vectors, deloop_chunks, deloop_documents, deloop_stats,
        deloop_hyde_cache, deloop_meta, deloop_migrations CASCADE;
";

/// The table of applied migrations.
pub(super) const MIGRATIONS_TABLE: &str = "
    CREATE TABLE IF NOT EXISTS deloop_migrations(
        version integer PRIMARY KEY,
        description text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
    );
";

/// Parses `0.8.6` into `(0, 8)`.
pub(super) fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut it = version.split('.');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_from_one_without_gaps() {
        for (i, (v, what, sql)) in MIGRATIONS.iter().enumerate() {
            assert_eq!(*v as usize, i + 1);
            assert!(!what.is_empty() && !sql.trim().is_empty());
        }
        assert_eq!(major_minor("0.8.6"), Some((0, 8)));
        assert!(major_minor("0.4.4").unwrap() < MIN_VECTOR);
        assert_eq!(major_minor("x"), None);
    }
}
