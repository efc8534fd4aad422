//! Criterion benchmarks for the `loops` guard:
//! * `loops/decide/*`: one call judged + its outcome recorded, history full (30), small args;
//! * `loops/hash/*`: canonical hashing of large results (throughput in bytes);
//! * `loops/replay/*`: replay of an in-memory parsed transcript (throughput in events);
//! * `loops/check/*`: the `deloop check --json` pipeline on events-format
//!   text: each line parsed by the CLI's own parser
//!   (`loops::transcript::EventBatch`), replayed through a streaming [`Replay`], and its verdict
//!   written as a JSON line (throughput in events; the CLI adds only file
//!   reading and UTF-8 checks).
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use deloop_core::loops::hashing::{digest_value, Canon};
use deloop_core::loops::replay::{CallVerdict, Event, Replay};
use deloop_core::loops::transcript::EventBatch;
use deloop_core::loops::{Guard, LoopConfig, Outcome, OutcomeBody, Profile, ToolCall};
use serde_json::{json, Value};
use std::hint::black_box;

fn small_args(i: usize) -> Value {
    json!({"path": format!("/repo/src/file{i}.rs"), "limit": 100})
}

fn decide(c: &mut Criterion) {
    let mut g = c.benchmark_group("loops/decide");
    let result = json!({"content": [{"type": "text", "text": "fn main() {}"}], "details": {}});
    for profile in Profile::ALL {
        // 64 distinct small calls in rotation: a full, healthy 30-call history.
        let args: Vec<Value> = (0..64).map(small_args).collect();
        let ids: Vec<String> = (0..64).map(|i| format!("c{i}")).collect();
        let mut guard = Guard::new(profile, LoopConfig::default());
        let mut i = 0usize;
        // Warm the history to its 30-call cap.
        for _ in 0..40 {
            let k = i % 64;
            guard.on_call(&ToolCall::new("read", &args[k]).id(&ids[k]));
            guard.on_outcome(&Outcome::new(OutcomeBody::Result(&result)).id(&ids[k]));
            i += 1;
        }
        g.bench_function(format!("call+outcome/{profile}"), |b| {
            b.iter(|| {
                let k = i % 64;
                i = i.wrapping_add(1);
                let v = guard.on_call(&ToolCall::new("read", &args[k]).id(&ids[k]));
                black_box(&v);
                black_box(
                    guard.on_outcome(&Outcome::new(OutcomeBody::Result(&result)).id(&ids[k])),
                );
            })
        });
        // The decision alone: only `on_call` is timed; the outcome that keeps
        // the history realistic is recorded outside the timed span.
        g.bench_function(format!("call-only/{profile}"), |b| {
            b.iter_custom(|iters| {
                let mut total = std::time::Duration::ZERO;
                for _ in 0..iters {
                    let k = i % 64;
                    i = i.wrapping_add(1);
                    let t = std::time::Instant::now();
                    let v = guard.on_call(&ToolCall::new("read", &args[k]).id(&ids[k]));
                    total += t.elapsed();
                    black_box(&v);
                    guard.on_outcome(&Outcome::new(OutcomeBody::Result(&result)).id(&ids[k]));
                }
                total
            })
        });
    }
    g.finish();
}

fn hash(c: &mut Criterion) {
    let mut g = c.benchmark_group("loops/hash");
    let big: String = (0..1_000_000u32)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let value = json!({"content": [{"type": "text", "text": big.clone()}], "details": {"status": "completed"}});
    g.throughput(Throughput::Bytes(big.len() as u64));
    g.bench_function("digest_value/1MB", |b| {
        b.iter(|| black_box(digest_value(&value, Canon::Outcome)))
    });
    g.finish();
}

/// A synthetic transcript of small events: varied reads, a few loops.
pub fn transcript(calls: usize) -> Vec<Event> {
    let mut ev = Vec::with_capacity(calls * 2);
    for i in 0..calls {
        let id = format!("c{i}");
        let (tool, args, text) = if (i / 50) % 4 == 3 {
            (
                "exec",
                json!({"command": "make test"}),
                "FAILED".to_string(),
            )
        } else {
            (
                "read",
                json!({"path": format!("/src/f{}.rs", i % 13)}),
                format!("body {}", i % 5),
            )
        };
        ev.push(Event::call(id.clone(), tool, args));
        ev.push(Event::result(
            id,
            json!({"content": [{"type": "text", "text": text}]}),
        ));
    }
    ev
}

fn replay(c: &mut Criterion) {
    let mut g = c.benchmark_group("loops/replay");
    let events = transcript(5_000);
    g.throughput(Throughput::Elements(events.len() as u64));
    for profile in Profile::ALL {
        g.bench_function(format!("10k-events/{profile}"), |b| {
            b.iter_batched(
                || events.clone(),
                |evs| {
                    let mut r = Replay::new(Guard::new(profile, LoopConfig::default()));
                    for e in evs {
                        r.push(e).unwrap();
                    }
                    black_box(r.verdicts().len())
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

/// Events-format text of `events` small events: call/result pairs over 4
/// runs (read, exec, grep, write and process polls), with a repeating
/// failing `exec` block every 1000 calls.
pub fn events_text(events: usize) -> String {
    let tools = ["read", "exec", "grep", "write", "process"];
    let mut s = String::with_capacity(events * 110);
    for i in 0..events / 2 {
        let run = i / 1000 % 4;
        let mut tool = tools[i % 5];
        let (args, result) = if (i / 40) % 25 == 3 {
            tool = "exec";
            (
                r#"{"command":"make test"}"#.to_string(),
                r#"{"content":[{"type":"text","text":"FAILED: 1 test"}],"details":{"status":"completed","exitCode":1}}"#.to_string(),
            )
        } else if tool == "exec" {
            (
                format!(r#"{{"command":"ls src/m{}"}}"#, i % 97),
                format!(
                    r#"{{"content":[{{"type":"text","text":"a.rs b.rs {}"}}],"details":{{"status":"completed","exitCode":0,"durationMs":{}}}}}"#,
                    i % 7,
                    i % 1000
                ),
            )
        } else if tool == "process" {
            (
                format!(r#"{{"action":"poll","sessionId":"s{}"}}"#, i % 3),
                format!(
                    r#"{{"content":[{{"type":"text","text":"line {i}"}}],"details":{{"status":"running"}}}}"#
                ),
            )
        } else {
            (
                format!(r#"{{"path":"/repo/src/f{}.rs","limit":100}}"#, i % 211),
                format!(
                    r#"{{"content":[{{"type":"text","text":"fn f{}() {{}}"}}]}}"#,
                    i % 13
                ),
            )
        };
        s.push_str(&format!(
            "{{\"type\":\"call\",\"id\":\"c{i}\",\"tool\":\"{tool}\",\"args\":{args},\"run\":\"run{run}\"}}\n"
        ));
        s.push_str(&format!(
            "{{\"type\":\"result\",\"id\":\"c{i}\",\"result\":{result}}}\n"
        ));
    }
    s
}

/// One JSON line per verdict, written without `format!` as the CLI does.
fn write_line(out: &mut Vec<u8>, v: &CallVerdict) {
    let f = &v.verdict;
    out.extend_from_slice(b"{\"index\":");
    let mut n = v.index;
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
    out.extend_from_slice(b",\"tool\":");
    serde_json::to_writer(&mut *out, &*v.tool).expect("Vec");
    out.extend_from_slice(b",\"level\":\"");
    out.extend_from_slice(f.level.as_str().as_bytes());
    out.extend_from_slice(b"\",\"detector\":");
    serde_json::to_writer(&mut *out, &f.detector.map(|d| d.as_str())).expect("Vec");
    out.extend_from_slice(b",\"count\":");
    serde_json::to_writer(&mut *out, &f.count).expect("Vec");
    out.extend_from_slice(b",\"message\":");
    serde_json::to_writer(&mut *out, &f.message).expect("Vec");
    out.extend_from_slice(b",\"fingerprint\":");
    serde_json::to_writer(&mut *out, &f.fingerprint).expect("Vec");
    out.extend_from_slice(b"}\n");
}

/// Replays events text the way `deloop check --json` does; returns the
/// number of bytes written.
pub fn check_pipeline(text: &str, profile: Profile) -> usize {
    let mut r = Replay::streaming(Guard::new(profile, LoopConfig::default()));
    let mut out: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut written = 0;
    // The CLI's parser: lines go through an `EventBatch` a block at a time.
    let mut batch = EventBatch::new();
    let mut lines = text.lines().enumerate().peekable();
    while lines.peek().is_some() {
        batch.clear();
        for (i, line) in lines.by_ref().take(4096) {
            batch.push_line(line, i + 1);
        }
        for (_, event) in batch.iter() {
            let event = event.expect("bench input is valid");
            event.replay(&mut r).expect("ids match");
            while let Some(v) = r.pop_settled() {
                write_line(&mut out, &v);
                if out.len() > 1 << 16 {
                    written += out.len();
                    out.clear();
                }
            }
        }
    }
    r.finish();
    written + out.len() + r.verdicts().len()
}

fn check(c: &mut Criterion) {
    let mut g = c.benchmark_group("loops/check");
    let events = 100_000;
    let text = events_text(events);
    g.throughput(Throughput::Elements(events as u64));
    g.sample_size(10);
    for profile in Profile::ALL {
        g.bench_function(format!("100k-events/{profile}"), |b| {
            b.iter(|| black_box(check_pipeline(&text, profile)))
        });
    }
    g.finish();
}

/// On-CPU nanoseconds of this thread (Linux `schedstat`), to report CPU
/// time next to criterion's wall-clock figures on a shared machine.
fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Prints CPU time per operation (not a criterion measurement).
fn cpu_time_report(_c: &mut Criterion) {
    let Some(_) = thread_cpu_ns() else {
        eprintln!("loops/cpu: /proc/thread-self/schedstat unavailable, skipped");
        return;
    };
    let args: Vec<Value> = (0..64).map(small_args).collect();
    let ids: Vec<String> = (0..64).map(|i| format!("c{i}")).collect();
    let result = json!({"content": [{"type": "text", "text": "fn main() {}"}], "details": {}});
    for profile in Profile::ALL {
        let mut guard = Guard::new(profile, LoopConfig::default());
        let n = 200_000usize;
        let (mut call_ns, mut pair_ns) = (0u64, 0u64);
        for i in 0..n {
            let k = i % 64;
            let a = thread_cpu_ns().unwrap_or(0);
            black_box(guard.on_call(&ToolCall::new("read", &args[k]).id(&ids[k])));
            let b = thread_cpu_ns().unwrap_or(0);
            black_box(guard.on_outcome(&Outcome::new(OutcomeBody::Result(&result)).id(&ids[k])));
            let c = thread_cpu_ns().unwrap_or(0);
            call_ns += b - a;
            pair_ns += c - a;
        }
        // Subtract the cost of one schedstat read (measured back to back).
        let m = 20_000u64;
        let t0 = thread_cpu_ns().unwrap_or(0);
        for _ in 0..m {
            black_box(thread_cpu_ns());
        }
        let read_cost = (thread_cpu_ns().unwrap_or(0) - t0) / m;
        eprintln!(
            "loops/cpu/{profile}: on_call {} ns, on_call+on_outcome {} ns (mean CPU time, history 30)",
            (call_ns / n as u64).saturating_sub(read_cost),
            (pair_ns / n as u64).saturating_sub(2 * read_cost)
        );
        let events = transcript(50_000);
        let count = events.len() as u64;
        let t0 = thread_cpu_ns().unwrap_or(0);
        let mut r = Replay::new(Guard::new(profile, LoopConfig::default()));
        for e in events {
            r.push(e).unwrap();
        }
        let ns = thread_cpu_ns().unwrap_or(0) - t0;
        black_box(r.verdicts().len());
        eprintln!(
            "loops/cpu/{profile}: replay {:.0} events/s CPU time ({count} events)",
            count as f64 * 1e9 / ns as f64
        );
        let text = events_text(200_000);
        let t0 = thread_cpu_ns().unwrap_or(0);
        black_box(check_pipeline(&text, profile));
        let ns = thread_cpu_ns().unwrap_or(0) - t0;
        eprintln!(
            "loops/cpu/{profile}: check pipeline {:.0} events/s CPU time (200000 events)",
            200_000f64 * 1e9 / ns as f64
        );
    }
}

criterion_group!(benches, cpu_time_report, decide, hash, replay, check);
criterion_main!(benches);
