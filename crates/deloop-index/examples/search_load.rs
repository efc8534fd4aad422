//! Search latency and throughput of an index (an SQLite file or a
//! PostgreSQL database), driven by `scripts/bench-postgres-search.py`.
//!
//! Every query is embedded first with the index's own embedder (not
//! timed): the figures are the search alone (lexical and vector lists,
//! fusion, loading the chunks). Then:
//! 1. one thread runs every query once: per-query latency (p50, p95, p99);
//! 2. `--threads` threads, each with its own `Index`, run the queries
//!    round-robin `--rounds` times: queries per second, and the latency
//!    under that load.
//!
//! ```text
//! cargo run --release -p deloop-index --example search_load -- \
//!     --db postgres://deloop@127.0.0.1:5432/scifact --queries queries.jsonl \
//!     [--mode hybrid] [--k 10] [--threads 4] [--rounds 2]
//! ```
//!
//! Prints one JSON object.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use deloop_index::{local_embedder_for_id, Index, Retrieval, SearchRequest};

struct Args {
    db: PathBuf,
    queries: PathBuf,
    mode: Retrieval,
    k: usize,
    threads: usize,
    rounds: usize,
}

fn args() -> Args {
    let mut a = Args {
        db: PathBuf::new(),
        queries: PathBuf::new(),
        mode: Retrieval::Hybrid,
        k: 10,
        threads: 4,
        rounds: 2,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--db" => a.db = value.into(),
            "--queries" => a.queries = value.into(),
            "--mode" => a.mode = Retrieval::parse(&value).expect("hybrid, lexical or vector"),
            "--k" => a.k = value.parse().expect("--k N"),
            "--threads" => a.threads = value.parse().expect("--threads N"),
            "--rounds" => a.rounds = value.parse().expect("--rounds N"),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(!a.db.as_os_str().is_empty(), "--db is required");
    a
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn summary(mut ms: Vec<f64>) -> serde_json::Value {
    ms.sort_by(f64::total_cmp);
    serde_json::json!({
        "queries": ms.len(),
        "mean_ms": ms.iter().sum::<f64>() / ms.len().max(1) as f64,
        "p50_ms": percentile(&ms, 50.0),
        "p95_ms": percentile(&ms, 95.0),
        "p99_ms": percentile(&ms, 99.0),
    })
}

fn main() {
    let a = args();
    let texts: Vec<String> = std::fs::read_to_string(&a.queries)
        .expect("read --queries")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
            v["text"].as_str().expect("a `text`").to_string()
        })
        .collect();
    let index = Index::open_existing(&a.db).expect("open the index");
    let info = index
        .embedder_info()
        .expect("read the embedder")
        .expect("an indexed corpus");
    let vectors: Vec<Option<Vec<f32>>> = if info.is_none() || a.mode == Retrieval::Lexical {
        vec![None; texts.len()]
    } else {
        let embedder = local_embedder_for_id(&info.id, None, None)
            .expect("a local embedder")
            .expect("the embedder loads");
        texts
            .chunks(32)
            .flat_map(|batch| {
                let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
                embedder.embed(&refs).expect("embed the queries")
            })
            .map(Some)
            .collect()
    };
    let requests: Arc<Vec<SearchRequest>> = Arc::new(
        texts
            .iter()
            .zip(vectors)
            .map(|(t, v)| SearchRequest {
                text: t.clone(),
                vector: v,
                k: a.k,
                mode: a.mode,
                ..Default::default()
            })
            .collect(),
    );

    // Warm-up (connections, caches), then one thread, every query once.
    for r in requests.iter().take(20) {
        index.search(r).expect("search");
    }
    let mut sequential = Vec::with_capacity(requests.len());
    let mut used = a.mode;
    for r in requests.iter() {
        let t = Instant::now();
        let out = index.search(r).expect("search");
        sequential.push(t.elapsed().as_secs_f64() * 1000.0);
        used = out.retrieval_used;
    }

    // Concurrent: each thread its own Index, round-robin over the queries.
    let total = requests.len() * a.rounds;
    let started = Instant::now();
    let handles: Vec<_> = (0..a.threads)
        .map(|t| {
            let (requests, db, threads) = (requests.clone(), a.db.clone(), a.threads);
            std::thread::spawn(move || {
                let index = Index::open_existing(&db).expect("open the index");
                let mut ms = Vec::new();
                let mut i = t;
                while i < total {
                    let r = &requests[i % requests.len()];
                    let q = Instant::now();
                    index.search(r).expect("search");
                    ms.push(q.elapsed().as_secs_f64() * 1000.0);
                    i += threads;
                }
                ms
            })
        })
        .collect();
    let loaded: Vec<f64> = handles
        .into_iter()
        .flat_map(|h| h.join().expect("a search thread"))
        .collect();
    let seconds = started.elapsed().as_secs_f64();
    let out = serde_json::json!({
        "db": index.location(),
        "mode": used.name(),
        "k": a.k,
        "embedder": info.id,
        "sequential": summary(sequential),
        "concurrent": {
            "threads": a.threads,
            "queries": total,
            "seconds": seconds,
            "queries_per_second": total as f64 / seconds,
            "latency": summary(loaded),
        },
    });
    println!("{out}");
}
