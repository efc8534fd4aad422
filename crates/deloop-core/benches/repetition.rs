//! Criterion benchmarks for the repetition guards and the streaming
//! watcher, on 1 KB, 1 MB and 8 MB of healthy prose (SciFact abstracts) and
//! of looping text (prose followed by a sentence loop).
//!
//! `cargo bench -p deloop-core --bench repetition -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use deloop_core::repetition::{clamp, clamp_substring, clamp_words, ClampConfig, StreamWatcher};

fn shared_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("DELOOP_SHARED_DIR") {
        return PathBuf::from(dir);
    }
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared"))
}

/// Healthy prose: SciFact titles and abstracts, repeated document by
/// document until `size` bytes (cut at a char boundary).
fn prose(size: usize) -> String {
    let path = shared_dir().join("data/scifact/corpus.jsonl");
    let data = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}; set DELOOP_SHARED_DIR", path.display()));
    let mut out = String::with_capacity(size + 4096);
    'outer: loop {
        for line in data.lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("json");
            out.push_str(v["title"].as_str().unwrap_or(""));
            out.push_str("\n\n");
            out.push_str(v["text"].as_str().unwrap_or(""));
            out.push_str("\n\n");
            if out.len() >= size {
                break 'outer;
            }
        }
    }
    let mut end = size.min(out.len());
    while !out.is_char_boundary(end) {
        end -= 1;
    }
    out.truncate(end);
    out
}

/// Looping text: one tenth prose, then a 20-word sentence repeated.
fn looping(size: usize) -> String {
    let mut out = prose(size / 10);
    let sentence = "and then the model said that the answer is the same as before because it keeps going around in circles again ";
    while out.len() < size {
        out.push_str(sentence);
    }
    out.truncate(size);
    out
}

fn bench(c: &mut Criterion) {
    let config = ClampConfig::default();
    let sizes = [("1KB", 1 << 10), ("1MB", 1 << 20), ("8MB", 8 << 20)];
    for (kind, make) in [
        ("healthy", prose as fn(usize) -> String),
        ("looping", looping),
    ] {
        let mut group = c.benchmark_group(format!("repetition/{kind}"));
        group.sample_size(10);
        for (label, size) in sizes {
            let text = make(size);
            group.throughput(Throughput::Bytes(text.len() as u64));
            group.bench_with_input(BenchmarkId::new("words", label), &text, |b, t| {
                b.iter(|| black_box(clamp_words(black_box(t), &config)))
            });
            group.bench_with_input(BenchmarkId::new("substring", label), &text, |b, t| {
                b.iter(|| black_box(clamp_substring(black_box(t), &config)))
            });
            group.bench_with_input(BenchmarkId::new("clamp", label), &text, |b, t| {
                b.iter(|| black_box(clamp(black_box(t), &config)))
            });
            group.bench_with_input(BenchmarkId::new("watcher", label), &text, |b, t| {
                b.iter(|| {
                    let mut w = StreamWatcher::new(config.clone());
                    for chunk in t.as_bytes().chunks(4096) {
                        if let Some(cut) = w.feed(chunk) {
                            return black_box(Some(cut));
                        }
                    }
                    black_box(w.finish())
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
