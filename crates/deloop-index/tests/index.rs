//! The index on real SQLite files: ingestion, incremental updates, lexical,
//! vector and hybrid search, fallbacks and embedder bookkeeping.

use std::path::{Path, PathBuf};

use deloop_index::{
    EmbedError, Embedder, Error, Index, IndexOptions, PassageRanking, Progress, Retrieval,
    SearchRequest, Stemmer,
};

/// A deterministic toy embedder: hashed bag of lowercase words.
struct Toy {
    id: &'static str,
    dim: usize,
}

impl Embedder for Toy {
    fn id(&self) -> &str {
        self.id
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0.0; self.dim];
                for w in t
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                {
                    let h = w
                        .to_lowercase()
                        .bytes()
                        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
                    v[(h % self.dim as u64) as usize] += 1.0;
                }
                v
            })
            .collect())
    }
}

/// An embedder that always fails.
struct Broken;

impl Embedder for Broken {
    fn id(&self) -> &str {
        "broken"
    }
    fn dim(&self) -> usize {
        4
    }
    fn embed(&self, _: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Err(EmbedError::Failed("boom".into()))
    }
}

fn write(dir: &Path, rel: &str, text: &[u8]) -> PathBuf {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p
}

fn lexical(index: &Index, q: &str) -> Vec<String> {
    let req = SearchRequest {
        text: q.into(),
        k: 10,
        mode: Retrieval::Lexical,
        ..Default::default()
    };
    index
        .search(&req)
        .unwrap()
        .matches
        .into_iter()
        .map(|m| m.source)
        .collect()
}

fn docs() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "es/cuenta.md",
        "# Cuenta\n\nPara cambiar la contraseña abre Ajustes.\n\n## Recuperación\n\nSi olvidaste la contraseña pide un enlace.\n".as_bytes(),
    );
    write(
        d.path(),
        "en/reset.txt",
        b"To reset your password open the settings page.\n\nThen follow the emailed link.\n",
    );
    write(d.path(), "en/empty.md", b"");
    write(d.path(), ".git/config.md", b"hidden password");
    write(d.path(), "target/out.md", b"build password");
    write(d.path(), "notes.rs", b"// password in code");
    d
}

#[test]
fn indexes_a_tree_and_finds_accented_words_without_accents() {
    let d = docs();
    let db = d.path().join("db/index.db");
    let mut index = Index::open(&db).unwrap();
    let mut events = Vec::new();
    let stats = index
        .index_paths(&[d.path().to_path_buf()], None, &mut |p| events.push(p))
        .unwrap();
    assert_eq!(
        stats.seen, 3,
        "hidden, target and non-doc files are skipped"
    );
    assert_eq!(stats.updated, 3);
    assert_eq!(stats.failed, 0);
    assert_eq!(stats.chunks_written, 3);
    assert_eq!(stats.embedder, "none");
    assert!(matches!(events[0], Progress::Start { total: 3 }));
    assert!(db.is_file());

    let hits = lexical(&index, "contrasena");
    assert_eq!(hits.len(), 2);
    assert!(hits.iter().all(|s| s.ends_with("cuenta.md")));
    // Accents in the query work too, and stemming matches plural forms.
    assert_eq!(lexical(&index, "CONTRASEÑAS").len(), 2);
    assert_eq!(lexical(&index, "recuperacion").len(), 1);
    assert!(lexical(&index, "password")[0].ends_with("reset.txt"));

    // Match details: lines and heading trail.
    let req = SearchRequest {
        text: "enlace olvidaste".into(),
        mode: Retrieval::Lexical,
        ..Default::default()
    };
    let m = &index.search(&req).unwrap().matches[0];
    assert_eq!((m.start_line, m.end_line), (5, 7));
    assert_eq!(m.heading_trail, vec!["Cuenta", "Recuperación"]);
    assert!(m.text.starts_with("## Recuperación"));
    assert!(m.doc_id.is_none());
}

#[test]
fn reindexing_is_incremental() {
    let d = docs();
    let db = d.path().join("index.db");
    let root = vec![d.path().to_path_buf()];
    let mut index = Index::open(&db).unwrap();
    index.index_paths(&root, None, &mut |_| {}).unwrap();

    // Nothing changed: everything skipped.
    let s = index.index_paths(&root, None, &mut |_| {}).unwrap();
    assert_eq!((s.unchanged, s.updated, s.removed), (3, 0, 0));
    assert_eq!(s.chunks_written, 0);
    assert_eq!(s.chunks_total, 3);

    // One file changed, one deleted, one added.
    write(d.path(), "en/reset.txt", b"Rotate the API token monthly.\n");
    std::fs::remove_file(d.path().join("es/cuenta.md")).unwrap();
    write(d.path(), "new.markdown", b"# Nuevo\n\nTexto nuevo.\n");
    drop(index);
    let mut index = Index::open(&db).unwrap();
    let s = index.index_paths(&root, None, &mut |_| {}).unwrap();
    assert_eq!((s.unchanged, s.updated, s.removed), (1, 2, 1));
    assert_eq!(s.chunks_total, 2);
    assert!(lexical(&index, "contraseña").is_empty());
    assert!(lexical(&index, "password").is_empty());
    assert_eq!(lexical(&index, "token").len(), 1);

    // Indexing one file does not remove the others.
    let s = index
        .index_paths(&[d.path().join("new.markdown")], None, &mut |_| {})
        .unwrap();
    assert_eq!((s.unchanged, s.removed), (1, 0));
    assert_eq!(s.chunks_total, 2);
}

#[test]
fn invalid_utf8_files_are_skipped_with_a_warning() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "ok.md", b"fine text\n");
    let bad = write(d.path(), "bad.md", b"caf\xe9 latin-1\n");
    let mut index = Index::open(&d.path().join("i.db")).unwrap();
    let mut warnings = Vec::new();
    let s = index
        .index_paths(&[d.path().to_path_buf()], None, &mut |p| {
            if let Progress::Warning { message } = p {
                warnings.push(message)
            }
        })
        .unwrap();
    assert_eq!((s.updated, s.failed), (1, 1));
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("bad.md") && warnings[0].contains("UTF-8"));
    assert_eq!(s.warnings, warnings);

    // A file that was fine and turns invalid loses its old chunks.
    std::fs::write(&bad, b"now valid\n").unwrap();
    index
        .index_paths(&[d.path().to_path_buf()], None, &mut |_| {})
        .unwrap();
    assert_eq!(lexical(&index, "valid").len(), 1);
    std::fs::write(&bad, b"\xff\xfe").unwrap();
    let s = index
        .index_paths(&[d.path().to_path_buf()], None, &mut |_| {})
        .unwrap();
    assert_eq!(s.failed, 1);
    assert!(lexical(&index, "valid").is_empty());
}

#[test]
fn missing_paths_are_bad_input() {
    let mut index = Index::open_in_memory().unwrap();
    let err = index
        .index_paths(&[PathBuf::from("/no/such/dir")], None, &mut |_| {})
        .unwrap_err();
    assert!(matches!(err, Error::BadInput(_)), "{err}");
    assert!(err.to_string().contains("/no/such/dir"));
}

#[test]
fn hostile_queries_never_break_fts() {
    let d = docs();
    let mut index = Index::open_in_memory().unwrap();
    index
        .index_paths(&[d.path().to_path_buf()], None, &mut |_| {})
        .unwrap();
    for q in [
        "\"",
        "password\"",
        "NEAR(password settings)",
        "password AND OR NOT",
        "title:password",
        "pass*",
        "(((",
        "^password",
        "'; DROP TABLE chunks; --",
        "",
        "   ",
        "\u{0}\u{1}",
        "🙂 emoji",
        &"a ".repeat(10_000),
    ] {
        let req = SearchRequest {
            text: q.into(),
            mode: Retrieval::Lexical,
            ..Default::default()
        };
        index
            .search(&req)
            .unwrap_or_else(|e| panic!("query {q:?}: {e}"));
    }
    assert_eq!(lexical(&index, "'; DROP TABLE chunks; --").len(), 0);
    assert!(!lexical(&index, "password").is_empty(), "table still there");
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn any_text_is_a_valid_query(q in any::<String>(), e in proptest::option::of(any::<String>())) {
            let index = Index::open_in_memory().unwrap();
            let req = SearchRequest { text: q, expansion: e, mode: Retrieval::Lexical, ..Default::default() };
            prop_assert!(index.search(&req).is_ok());
        }
    }
}

#[test]
fn expansion_adds_lexical_terms() {
    let d = docs();
    let mut index = Index::open_in_memory().unwrap();
    index
        .index_paths(&[d.path().to_path_buf()], None, &mut |_| {})
        .unwrap();
    let req = SearchRequest {
        text: "zzzz".into(),
        mode: Retrieval::Lexical,
        ..Default::default()
    };
    assert!(index.search(&req).unwrap().matches.is_empty());
    let req = SearchRequest {
        expansion: Some("emailed link".into()),
        ..req
    };
    let got = index.search(&req).unwrap();
    assert_eq!(got.matches.len(), 1);
    assert!(got.matches[0].source.ends_with("reset.txt"));
}

#[test]
fn vector_and_hybrid_search_with_an_embedder() {
    let d = docs();
    let toy = Toy { id: "toy", dim: 64 };
    let mut index = Index::open(&d.path().join("v.db")).unwrap();
    let s = index
        .index_paths(&[d.path().to_path_buf()], Some(&toy), &mut |_| {})
        .unwrap();
    assert_eq!(s.embedder, "toy");
    let info = index.embedder_info().unwrap().unwrap();
    assert_eq!((info.id.as_str(), info.dim), ("toy", 64));
    assert_eq!(index.summary().unwrap().vectors, 3);

    let q = "follow the emailed link";
    let vector = toy.embed(&[q]).unwrap().pop();
    for mode in [Retrieval::Vector, Retrieval::Hybrid] {
        let req = SearchRequest {
            text: q.into(),
            vector: vector.clone(),
            k: 3,
            mode,
            ..Default::default()
        };
        let got = index.search(&req).unwrap();
        assert_eq!(got.retrieval_used, mode);
        assert_eq!(got.fallback_reason, None);
        assert_eq!(got.matches.len(), 3);
        assert!(got.matches[0].source.ends_with("reset.txt"), "{mode:?}");
        assert!(got.matches[0].score >= got.matches[1].score);
    }
    // Vector scores are cosines.
    let req = SearchRequest {
        text: q.into(),
        vector: vector.clone(),
        mode: Retrieval::Vector,
        ..Default::default()
    };
    let top = index.search(&req).unwrap().matches[0].score;
    assert!(top > 0.0 && top <= 1.0001, "{top}");

    // A vector of the wrong length is an error, not a silent empty result.
    let req = SearchRequest {
        vector: Some(vec![1.0; 3]),
        ..req
    };
    assert!(index.search(&req).is_err());
}

#[test]
fn a_passage_ranking_joins_the_fusion_in_every_mode() {
    let d = docs();
    let toy = Toy { id: "toy", dim: 64 };
    let mut index = Index::open(&d.path().join("v.db")).unwrap();
    index
        .index_paths(&[d.path().to_path_buf()], Some(&toy), &mut |_| {})
        .unwrap();
    let q = "follow the emailed link";
    let bad = "cambiar contraseña ajustes recuperación enlace olvidaste";
    // Agreement power 0: the fixed weight, whatever the question finds.
    let passage = |weight: f32, vector: bool| PassageRanking {
        text: bad.into(),
        vector: vector.then(|| toy.embed(&[bad]).unwrap().remove(0)),
        weight,
        agreement_power: 0.0,
    };
    let sources = |req: &SearchRequest| -> Vec<String> {
        let got = index.search(req).unwrap();
        got.matches.iter().map(|m| m.source.clone()).collect()
    };
    for mode in [Retrieval::Lexical, Retrieval::Vector, Retrieval::Hybrid] {
        let plain = SearchRequest {
            text: q.into(),
            vector: toy.embed(&[q]).unwrap().pop(),
            k: 3,
            mode,
            ..Default::default()
        };
        let first = sources(&plain);
        assert!(first[0].ends_with("reset.txt"), "{mode:?}: {first:?}");
        // A passage about another document, fused with weight 1 or less:
        // the question's first match stays first.
        for w in [0.5, 1.0] {
            let req = SearchRequest {
                passage: Some(passage(w, true)),
                ..plain.clone()
            };
            let got = sources(&req);
            assert_eq!(got[0], first[0], "{mode:?} w={w}: {got:?}");
            assert!(
                got.iter().any(|s| s.contains("cuenta")),
                "{mode:?}: {got:?}"
            );
            // Weight 0: the passage's chunks come last, the order is the question's.
            let zero = SearchRequest {
                passage: Some(passage(0.0, true)),
                ..plain.clone()
            };
            let got = sources(&zero);
            assert_eq!(
                got[..first.len().min(got.len())],
                first[..first.len().min(got.len())],
                "{mode:?}"
            );
        }
        // Scores of a fused search are RRF sums.
        let req = SearchRequest {
            passage: Some(passage(1.0, true)),
            ..plain.clone()
        };
        let top = index.search(&req).unwrap().matches[0].score;
        assert!(top > 0.0 && top <= 3.0 / 61.0 + 1e-6, "{mode:?}: {top}");
    }
    // With an agreement power, a passage whose lexical matches the
    // question's do not share (cuenta.md against reset.txt) weighs nothing:
    // the lexical ranking is the question's alone.
    let plain = SearchRequest {
        text: q.into(),
        k: 3,
        mode: Retrieval::Lexical,
        ..Default::default()
    };
    let uncorroborated = SearchRequest {
        passage: Some(PassageRanking {
            agreement_power: 3.0,
            ..passage(1.0, false)
        }),
        ..plain.clone()
    };
    assert_eq!(sources(&uncorroborated), sources(&plain));
    // The same passage with a fixed weight does join.
    let fixed = SearchRequest {
        passage: Some(passage(1.0, false)),
        ..plain.clone()
    };
    assert_ne!(sources(&fixed), sources(&plain));
    // The passage's vector must have the index's dimension, and its weight
    // must be a number >= 0.
    let mut wrong = passage(1.0, true);
    wrong.vector = Some(vec![1.0; 3]);
    let req = SearchRequest {
        text: q.into(),
        vector: toy.embed(&[q]).unwrap().pop(),
        passage: Some(wrong),
        ..Default::default()
    };
    let err = index.search(&req).unwrap_err().to_string();
    assert!(err.contains("passage vector has 3 dimensions"), "{err}");
    for w in [f32::NAN, -1.0, f32::INFINITY] {
        let req = SearchRequest {
            text: q.into(),
            passage: Some(passage(w, false)),
            mode: Retrieval::Lexical,
            ..Default::default()
        };
        assert!(index.search(&req).is_err(), "weight {w}");
        let req = SearchRequest {
            text: q.into(),
            passage: Some(PassageRanking {
                agreement_power: w,
                ..passage(1.0, false)
            }),
            mode: Retrieval::Lexical,
            ..Default::default()
        };
        assert!(index.search(&req).is_err(), "agreement power {w}");
    }
    // Without a vector for the passage, hybrid search ignores it.
    let plain = SearchRequest {
        text: q.into(),
        vector: toy.embed(&[q]).unwrap().pop(),
        k: 3,
        ..Default::default()
    };
    let with = SearchRequest {
        passage: Some(passage(1.0, false)),
        ..plain.clone()
    };
    assert_eq!(sources(&with), sources(&plain));
}

#[test]
fn hybrid_falls_back_to_lexical_and_says_why() {
    let d = docs();
    let mut index = Index::open_in_memory().unwrap();
    index
        .index_paths(&[d.path().to_path_buf()], None, &mut |_| {})
        .unwrap();
    let req = SearchRequest {
        text: "password".into(),
        vector: Some(vec![0.5; 8]),
        mode: Retrieval::Hybrid,
        ..Default::default()
    };
    let got = index.search(&req).unwrap();
    assert_eq!(got.retrieval_used, Retrieval::Lexical);
    assert!(got.fallback_reason.unwrap().contains("--embedder none"));
    assert!(!got.matches.is_empty());

    // Vectors exist but no query vector (the embedder failed): lexical too.
    let toy = Toy { id: "toy", dim: 8 };
    let mut index = Index::open_in_memory().unwrap();
    index
        .index_paths(&[d.path().to_path_buf()], Some(&toy), &mut |_| {})
        .unwrap();
    let req = SearchRequest {
        text: "password".into(),
        mode: Retrieval::Vector,
        ..Default::default()
    };
    let got = index.search(&req).unwrap();
    assert_eq!(got.retrieval_used, Retrieval::Lexical);
    assert!(got.fallback_reason.is_some());
    assert!(!got.matches.is_empty());
}

#[test]
fn mixing_embedders_is_refused() {
    let d = docs();
    let db = d.path().join("mix.db");
    let root = vec![d.path().to_path_buf()];
    let a = Toy {
        id: "toy-a",
        dim: 8,
    };
    let b = Toy {
        id: "toy-b",
        dim: 8,
    };
    let mut index = Index::open(&db).unwrap();
    index.index_paths(&root, Some(&a), &mut |_| {}).unwrap();
    for other in [Some(&b as &dyn Embedder), None] {
        let err = index.index_paths(&root, other, &mut |_| {}).unwrap_err();
        assert!(matches!(err, Error::EmbedderMismatch { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("toy-a") && msg.contains("--reindex"), "{msg}");
    }
    // After a reset the other embedder is fine.
    index.reset().unwrap();
    assert_eq!(index.embedder_info().unwrap(), None);
    index.index_paths(&root, Some(&b), &mut |_| {}).unwrap();
    assert_eq!(index.embedder_info().unwrap().unwrap().id, "toy-b");
}

#[test]
fn embedder_failures_stop_indexing_with_the_cause() {
    let d = docs();
    let mut index = Index::open_in_memory().unwrap();
    let err = index
        .index_paths(&[d.path().to_path_buf()], Some(&Broken), &mut |_| {})
        .unwrap_err();
    assert!(err.to_string().contains("boom"), "{err}");
}

#[test]
fn beir_corpus_ingestion() {
    let d = tempfile::tempdir().unwrap();
    let corpus = write(
        d.path(),
        "corpus.jsonl",
        concat!(
            r#"{"_id": "d1", "title": "Vitamin D", "text": "Vitamin D lowers fracture risk.", "metadata": {}}"#,
            "\n\n",
            r#"{"_id": 42, "title": "", "text": "Aspirin and heart attacks."}"#,
            "\n",
            r#"{"_id": "d3", "title": "Sleep", "text": "Sleep loss impairs memory.", "extra": [1,2]}"#,
            "\n"
        )
        .as_bytes(),
    );
    let toy = Toy { id: "toy", dim: 32 };
    let mut index = Index::open(&d.path().join("b.db")).unwrap();
    let s = index.index_beir(&corpus, Some(&toy), &mut |_| {}).unwrap();
    assert_eq!((s.seen, s.updated, s.chunks_total), (3, 3, 3));
    let req = SearchRequest {
        text: "vitamin".into(),
        mode: Retrieval::Lexical,
        ..Default::default()
    };
    let m = &index.search(&req).unwrap().matches[0];
    assert_eq!(m.doc_id.as_deref(), Some("d1"));
    assert_eq!(m.heading_trail, vec!["Vitamin D"]);
    assert_eq!(m.text, "Vitamin D lowers fracture risk.");
    let req = SearchRequest {
        text: "aspirin".into(),
        vector: toy.embed(&["aspirin"]).unwrap().pop(),
        mode: Retrieval::Hybrid,
        ..Default::default()
    };
    assert_eq!(
        index.search(&req).unwrap().matches[0].doc_id.as_deref(),
        Some("42")
    );

    // Again: unchanged. Then a corpus without d3 removes it.
    let s = index.index_beir(&corpus, Some(&toy), &mut |_| {}).unwrap();
    assert_eq!((s.unchanged, s.updated), (3, 0));
    let smaller = write(
        d.path(),
        "small.jsonl",
        br#"{"_id": "d1", "title": "Vitamin D", "text": "Vitamin D lowers fracture risk."}"#,
    );
    let s = index.index_beir(&smaller, Some(&toy), &mut |_| {}).unwrap();
    assert_eq!((s.unchanged, s.removed, s.chunks_total), (1, 2, 1));
}

#[test]
fn malformed_beir_lines_name_the_line() {
    let d = tempfile::tempdir().unwrap();
    let corpus = write(
        d.path(),
        "c.jsonl",
        b"{\"_id\": \"a\", \"text\": \"x\"}\n{\"title\": \"no id\"}\n",
    );
    let mut index = Index::open_in_memory().unwrap();
    let err = index.index_beir(&corpus, None, &mut |_| {}).unwrap_err();
    assert!(matches!(err, Error::BadInput(_)));
    assert!(err.to_string().contains("line 2"), "{err}");
    let corpus = write(d.path(), "c2.jsonl", b"not json\n");
    let err = index.index_beir(&corpus, None, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("line 1"), "{err}");
}

#[test]
fn stemmer_choice_is_recorded_and_used() {
    let d = docs();
    let mut plain = Index::open_in_memory_with(IndexOptions {
        stemmer: Stemmer::None,
        ..Default::default()
    })
    .unwrap();
    plain
        .index_paths(&[d.path().to_path_buf()], None, &mut |_| {})
        .unwrap();
    assert_eq!(plain.summary().unwrap().stemmer, "none");
    // Without stemming the plural does not match; accents still fold.
    assert!(lexical(&plain, "contraseñas").is_empty());
    assert_eq!(lexical(&plain, "contrasena").len(), 2);
}
