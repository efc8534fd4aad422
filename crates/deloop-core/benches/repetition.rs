//! Criterion benchmarks for the repetition guards and the streaming
//! watcher, on 1 KB, 1 MB and 8 MB of healthy prose (SciFact abstracts) and
//! of looping text (prose followed by a sentence loop).
//!
//! `cargo bench -p deloop-core --bench repetition -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use deloop_core::repetition::{clamp, clamp_substring, clamp_words, ClampConfig, StreamWatcher};

#[path = "support/prose.rs"]
mod support;
use support::prose;

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
