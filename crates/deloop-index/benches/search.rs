//! Query latency on a synthetic index: 5,000 chunks of pseudo-random words
//! with 384-dimension vectors (the MiniLM size), lexical, vector and hybrid.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use deloop_index::{EmbedError, Embedder, Index, Retrieval, SearchRequest};

const DOCS: usize = 5_000;
const DIM: usize = 384;

/// xorshift64*: deterministic, no extra dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Pseudo-random unit-ish vectors seeded by the text (no model needed).
struct Hashed;

impl Embedder for Hashed {
    fn id(&self) -> &str {
        "bench-hash"
    }
    fn dim(&self) -> usize {
        DIM
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let seed = t.bytes().fold(1469598103934665603u64, |h, b| {
                    (h ^ b as u64).wrapping_mul(1099511628211)
                });
                let mut r = Rng(seed | 1);
                (0..DIM)
                    .map(|_| (r.next() % 2001) as f32 / 1000.0 - 1.0)
                    .collect()
            })
            .collect())
    }
}

fn corpus() -> (tempfile::TempDir, Vec<String>) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let vocab: Vec<String> = (0..20_000).map(|i| format!("w{i:x}")).collect();
    let dir = tempfile::tempdir().unwrap();
    let mut lines = String::new();
    for i in 0..DOCS {
        let words: Vec<&str> = (0..150)
            .map(|_| {
                // Zipf-like: small ids are frequent.
                let a = (rng.next() % vocab.len() as u64) as usize;
                let b = (rng.next() % (a as u64 + 1)) as usize;
                vocab[b].as_str()
            })
            .collect();
        let doc = serde_json::json!({"_id": i.to_string(), "title": words[..5].join(" "), "text": words.join(" ")});
        lines.push_str(&doc.to_string());
        lines.push('\n');
    }
    std::fs::write(dir.path().join("corpus.jsonl"), lines).unwrap();
    let queries = (0..50)
        .map(|_| {
            (0..12)
                .map(|_| vocab[(rng.next() % 3000) as usize].clone())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    (dir, queries)
}

fn bench(c: &mut Criterion) {
    let (dir, queries) = corpus();
    let mut index = Index::open(&dir.path().join("bench.db")).unwrap();
    index
        .index_beir(&dir.path().join("corpus.jsonl"), Some(&Hashed), &mut |_| {})
        .unwrap();
    let vectors: Vec<Vec<f32>> = queries
        .iter()
        .map(|q| Hashed.embed(&[q]).unwrap().pop().unwrap())
        .collect();
    let mut g = c.benchmark_group("search_5k_chunks_k10");
    for mode in [Retrieval::Lexical, Retrieval::Vector, Retrieval::Hybrid] {
        let mut i = 0;
        g.bench_function(mode.name(), |b| {
            b.iter(|| {
                i = (i + 1) % queries.len();
                let req = SearchRequest {
                    text: queries[i].clone(),
                    vector: Some(vectors[i].clone()),
                    k: 10,
                    mode,
                    ..Default::default()
                };
                black_box(index.search(&req).unwrap())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
