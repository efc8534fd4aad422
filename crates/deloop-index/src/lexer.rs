//! The terms FTS5 would index, for the PostgreSQL backend: the same
//! tokenizer (`unicode61 remove_diacritics 2`, with Porter stemming or
//! without) run by SQLite itself on an in-memory table, so both backends
//! see the same terms, the same chunk lengths and so the same BM25.
//!
//! (PostgreSQL's own `english` configuration stems with Snowball's Porter2
//! and drops stopwords: other terms and other lengths than FTS5's.)

use std::collections::HashMap;

use rusqlite::{params, Connection};

use crate::store::Stemmer;
use crate::Result;

/// The FTS5 tokenizer of one index, on an in-memory SQLite database.
#[derive(Debug)]
pub(crate) struct Lexer {
    conn: Connection,
}

/// The terms of one chunk.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct ChunkTerms {
    /// Tokens in the heading and the body.
    pub length: u64,
    /// Occurrences of each term: `(heading, body)`.
    pub terms: HashMap<String, (u32, u32)>,
}

impl Lexer {
    /// A tokenizer for `stemmer`.
    pub fn new(stemmer: Stemmer) -> Result<Self> {
        let conn = Connection::open_in_memory()?;
        conn.execute_batch(&format!(
            "CREATE VIRTUAL TABLE t USING fts5(heading, body, tokenize='{}');
             CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance');",
            crate::backend::sqlite::tokenize(stemmer)
        ))?;
        Ok(Self { conn })
    }

    /// The terms of a chunk's heading and body, as FTS5 indexes them.
    pub fn chunk(&self, heading: &str, body: &str) -> Result<ChunkTerms> {
        self.conn.execute(
            "INSERT INTO t(rowid, heading, body) VALUES(1, ?1, ?2)",
            params![heading, body],
        )?;
        let mut out = ChunkTerms::default();
        {
            let mut st = self
                .conn
                .prepare_cached("SELECT term, col, count(*) FROM v GROUP BY term, col")?;
            let mut rows = st.query([])?;
            while let Some(r) = rows.next()? {
                let term: String = r.get(0)?;
                let col: String = r.get(1)?;
                let n: i64 = r.get(2)?;
                out.length += n as u64;
                let e = out.terms.entry(term).or_default();
                if col == "heading" {
                    e.0 += n as u32;
                } else {
                    e.1 += n as u32;
                }
            }
        }
        self.conn.execute("DELETE FROM t", [])?;
        Ok(out)
    }

    /// The term of each query word (as FTS5 reads the phrase `"word"`), in
    /// order. A word the tokenizer splits in several tokens gives each
    /// (FTS5 would ask for them side by side); one it drops gives none.
    pub fn phrases(&self, words: &[String]) -> Result<Vec<String>> {
        let mut out = Vec::with_capacity(words.len());
        for w in words {
            self.conn
                .execute("INSERT INTO t(rowid, heading, body) VALUES(1, '', ?1)", [w])?;
            {
                let mut st = self
                    .conn
                    .prepare_cached("SELECT term FROM v ORDER BY offset")?;
                let rows = st.query_map([], |r| r.get::<_, String>(0))?;
                for t in rows {
                    out.push(t?);
                }
            }
            self.conn.execute("DELETE FROM t", [])?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porter_stems_folds_accents_and_counts_columns() {
        let lx = Lexer::new(Stemmer::Porter).unwrap();
        let t = lx
            .chunk("Looping Streams", "The stream loops; Contraseña!")
            .unwrap();
        assert_eq!(t.length, 6);
        assert_eq!(t.terms["loop"], (1, 1));
        assert_eq!(t.terms["stream"], (1, 1));
        assert_eq!(t.terms["the"], (0, 1));
        assert_eq!(t.terms["contrasena"], (0, 1));
        let words: Vec<String> = ["models", "contraseña"].map(String::from).into();
        assert_eq!(lx.phrases(&words).unwrap(), ["model", "contrasena"]);
        // The table is empty again after each call.
        assert_eq!(lx.chunk("", "x").unwrap().length, 1);
    }

    #[test]
    fn none_keeps_words_whole() {
        let lx = Lexer::new(Stemmer::None).unwrap();
        let words: Vec<String> = ["Models", "Ñandú"].map(String::from).into();
        assert_eq!(lx.phrases(&words).unwrap(), ["models", "nandu"]);
    }
}
