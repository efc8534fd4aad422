//! Writing documents: each batch is one transaction (documents, chunks,
//! vectors, terms and the BM25 totals), so a reader sees all of a
//! document or none of it.

use deadpool_postgres::Pool;
use pgvector::Vector;

use super::connection::CallResult;
use crate::backend::NewDocument;
use crate::lexer::Lexer;
use crate::Result;

/// One chunk's row, vector and terms, ready to send.
pub(super) struct ChunkRow {
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

/// One document's row and its chunks.
pub(super) struct DocumentRows {
    key: String,
    kind: String,
    doc_id: Option<String>,
    source: String,
    hash: String,
    chunks: Vec<ChunkRow>,
}

fn to_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Tokenizes `docs` with `lexer` (the same terms as SQLite's FTS5).
pub(super) fn prepare(lexer: &Lexer, docs: &[NewDocument]) -> Result<Vec<DocumentRows>> {
    let mut prepared = Vec::with_capacity(docs.len());
    for d in docs {
        let mut chunks = Vec::with_capacity(d.chunks.len());
        for c in &d.chunks {
            let t = lexer.chunk(&c.heading, &c.body)?;
            let mut terms: Vec<(String, (u32, u32))> = t.terms.into_iter().collect();
            terms.sort();
            chunks.push(ChunkRow {
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
        prepared.push(DocumentRows {
            key: d.key.clone(),
            kind: d.kind.to_string(),
            doc_id: d.doc_id.clone(),
            source: d.source.clone(),
            hash: d.hash.clone(),
            chunks,
        });
    }
    Ok(prepared)
}

/// Writes `docs` in one transaction, each replacing the document of its
/// key (its chunks, vectors and terms go by cascade).
pub(super) async fn transaction(pool: Pool, docs: Vec<DocumentRows>) -> CallResult<()> {
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
                                       end_line, length)
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
        )
        .await?;
    let ins_vector = tx
        .prepare("INSERT INTO deloop_vectors(chunk_id, embedding) VALUES ($1, $2)")
        .await?;
    let ins_terms = tx
        .prepare(
            "INSERT INTO deloop_terms(term, chunk_id, heading_tf, body_tf, length)
             SELECT t, $2, h, b, $3
             FROM unnest($1::text[], $4::int[], $5::int[]) AS x(t, h, b)",
        )
        .await?;
    let (mut chunks, mut tokens) = (0i64, 0i64);
    for d in &docs {
        tx.execute(&del_stats, &[&d.key]).await?;
        tx.execute(&del, &[&d.key]).await?;
        let doc: i64 = tx
            .query_one(&ins_doc, &[&d.key, &d.kind, &d.doc_id, &d.source, &d.hash])
            .await?
            .get(0);
        for r in &d.chunks {
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
                    ],
                )
                .await?
                .get(0);
            if let Some(v) = &r.vector {
                tx.execute(&ins_vector, &[&id, v]).await?;
            }
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
}
