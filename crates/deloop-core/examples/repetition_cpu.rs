//! Throughput of the repetition guards in CPU time (not wall time), so the
//! figure holds on a busy machine: `cargo run --release -p deloop-core
//! --example repetition_cpu [MB] [words|substring|clamp|watcher] [RUNS]`. Reads the thread's CPU clock
//! (`CLOCK_THREAD_CPUTIME_ID`). Input: SciFact abstracts, as in the
//! criterion bench.

use std::hint::black_box;
use std::path::PathBuf;

use deloop_core::repetition::{clamp, clamp_substring, clamp_words, ClampConfig, StreamWatcher};

fn cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a
    // constant the platform defines.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn prose(size: usize) -> String {
    let dir = std::env::var_os("DELOOP_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared")));
    let path = dir.join("data/scifact/corpus.jsonl");
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

/// Median MB/s (10^6 bytes per CPU second) over `runs` runs of `f`.
fn measure(text: &str, runs: usize, f: impl Fn(&str)) -> f64 {
    let mut rates: Vec<f64> = (0..runs)
        .map(|_| {
            let t0 = cpu_ns();
            f(text);
            let dt = (cpu_ns() - t0).max(1) as f64;
            text.len() as f64 / dt * 1e3
        })
        .collect();
    rates.sort_by(|a, b| a.total_cmp(b));
    rates[runs / 2]
}

fn main() {
    let mb: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(8);
    let only = std::env::args().nth(2);
    let want = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let text = prose(mb << 20);
    let config = ClampConfig::default();
    let runs = 15;
    println!(
        "{} bytes of SciFact prose, median of {runs} runs, MB/s of CPU time",
        text.len()
    );
    let runs = std::env::args()
        .nth(3)
        .and_then(|a| a.parse().ok())
        .unwrap_or(if only.is_some() { 40 } else { runs });
    let skip = |_: &str| {};
    let words = measure(&text, runs, |t| {
        if !want("words") {
            return skip(t);
        }
        black_box(clamp_words(black_box(t), &config));
    });
    let substring = measure(&text, runs, |t| {
        if !want("substring") {
            return skip(t);
        }
        black_box(clamp_substring(black_box(t), &config));
    });
    let combined = measure(&text, runs, |t| {
        if !want("clamp") {
            return skip(t);
        }
        black_box(clamp(black_box(t), &config));
    });
    let watcher = measure(&text, runs, |t| {
        if !want("watcher") {
            return skip(t);
        }
        let mut w = StreamWatcher::new(config.clone());
        for chunk in t.as_bytes().chunks(4096) {
            black_box(w.feed(chunk));
        }
        black_box(w.finish());
    });
    println!("words      {words:8.1}");
    println!("substring  {substring:8.1}");
    println!("clamp      {combined:8.1}");
    println!("watcher    {watcher:8.1}");
}
