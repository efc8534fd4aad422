//! Throughput of the repetition guards in CPU time (not wall time), so the
//! figure holds on a busy machine: `cargo run --release -p deloop-core
//! --example repetition_cpu [SIZE] [words|substring|clamp|watcher] [RUNS]`
//! (SIZE in MiB, or KiB with a `k` suffix). Reads the thread's CPU clock
//! (`CLOCK_THREAD_CPUTIME_ID`). Input: SciFact abstracts, as in the
//! criterion bench.

use std::hint::black_box;

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

#[path = "../benches/support/prose.rs"]
mod support;
use support::prose;

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
    // Size: `8` is 8 MiB, `1k` is 1 KiB.
    let size = std::env::args().nth(1).unwrap_or_else(|| "8".into());
    let bytes = match size.strip_suffix('k') {
        Some(k) => k.parse::<usize>().expect("size") << 10,
        None => size.parse::<usize>().expect("size") << 20,
    };
    let only = std::env::args().nth(2);
    let want = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let text = prose(bytes);
    let config = ClampConfig::default();
    let runs = std::env::args()
        .nth(3)
        .and_then(|a| a.parse().ok())
        .unwrap_or(if bytes < 1 << 20 { 2001 } else { 15 });
    println!(
        "{} bytes of SciFact prose, median of {runs} runs, MB/s of CPU time",
        text.len()
    );
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
