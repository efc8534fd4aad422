//! Criterion benchmarks for the `rescue` guard: throughput on 1 MB of
//! broken LLM-style JSON (inner quotes and raw newlines in every record,
//! truncated at the end), on 1 MB of valid JSON (with serde_json as the
//! baseline), and on adversarial inner-quote input; and `repair_json`
//! against the Rust crate `jsonrepair` 0.1 (group `versus`).
use criterion::{criterion_group, Criterion, Throughput};
use deloop_core::rescue::{repair, repair_json, rescue, PartialExtractor};
use std::hint::black_box;

const TARGET: usize = 1 << 20;

/// Records of an array, each with unescaped inner quotes and raw newlines
/// in its text, alternating English and Spanish; cut mid-record at the end.
fn broken_llm_json() -> String {
    let mut s = String::from("```json\n{\"answer\": [\n");
    let mut i = 0;
    while s.len() < TARGET {
        if i % 2 == 0 {
            s.push_str(&format!(
                "{{\"id\": {i}, \"title\": \"Record {i}\", \"answer\": \"**Final review** \"the last pass\" of record {i}, see \"notes\": ok.\nSecond line with a tab\there and more text to make it long enough.\", \"score\": 0.{i}, \"tags\": [\"a\", \"b\",],}},\n"
            ));
        } else {
            s.push_str(&format!(
                "{{\"id\": {i}, \"title\": \"Registro {i}\", \"answer\": \"**Auditoría Suprema** \"la revisión final\" y más texto del registro {i}.\nSegunda línea: acentos ñ, emoji 😀 y \"comillas\", sin escapar.\", \"score\": 0.{i}, \"tags\": [\"x\", \"y\"]}},\n"
            ));
        }
        i += 1;
    }
    // Truncated in the middle of the last record's text.
    s.push_str("{\"id\": 0, \"answer\": \"cut at the tok");
    s
}

/// The issue's comparison input: an array of about 11,000 objects whose
/// `answer` strings hold unescaped inner quotes and raw newlines, in
/// English and Spanish, truncated mid-string; 1 MB.
fn issue_broken_json() -> String {
    let mut s = String::from("[\n");
    let mut i = 0;
    while s.len() < 1_000_000 {
        if i > 0 {
            s.push_str(",\n");
        }
        let answer = if i % 2 == 0 {
            format!("Final review {i}: \"the last pass\" is done.\nSee notes.")
        } else {
            format!("Auditoría {i}: \"la revisión\" está lista.\nVer notas.")
        };
        s.push_str(&format!(
            "{{\"id\": {i}, \"answer\": \"{answer}\", \"ok\": true}}"
        ));
        i += 1;
    }
    s.push_str(&format!(",\n{{\"id\": {i}, \"answer\": \"cut at the tok"));
    s
}

/// The valid counterpart of [`issue_broken_json`]: the same records, escaped
/// and closed.
fn issue_valid_json() -> String {
    let mut items = Vec::new();
    let mut len = 0;
    let mut i = 0;
    while len < 1_000_000 {
        let answer = if i % 2 == 0 {
            format!("Final review {i}: \"the last pass\" is done.\nSee notes.")
        } else {
            format!("Auditoría {i}: \"la revisión\" está lista.\nVer notas.")
        };
        let v = serde_json::json!({"id": i, "answer": answer, "ok": true});
        len += v.to_string().len() + 1;
        items.push(v);
        i += 1;
    }
    serde_json::Value::Array(items).to_string()
}

/// `repair_json` (what `deloop repair` runs) against the crate `jsonrepair`
/// 0.1 on broken input, and against serde_json parsing and writing valid
/// input.
fn bench_versus(c: &mut Criterion) {
    let broken = issue_broken_json();
    let valid = issue_valid_json();
    let opts = jsonrepair::Options::default();
    assert!(serde_json::from_str::<serde_json::Value>(&broken).is_err());
    let mut g = c.benchmark_group("versus");
    g.sample_size(20);
    g.throughput(Throughput::Bytes(broken.len() as u64));
    g.bench_function("deloop_repair_json_broken_1mb", |b| {
        b.iter(|| repair_json(black_box(&broken)).unwrap())
    });
    g.bench_function("jsonrepair_crate_broken_1mb", |b| {
        b.iter(|| jsonrepair::repair_to_string(black_box(&broken), &opts).unwrap())
    });
    g.throughput(Throughput::Bytes(valid.len() as u64));
    g.bench_function("deloop_repair_json_valid_1mb", |b| {
        b.iter(|| repair_json(black_box(&valid)).unwrap())
    });
    g.bench_function("serde_json_parse_and_write_valid_1mb", |b| {
        b.iter(|| {
            serde_json::from_str::<serde_json::Value>(black_box(&valid))
                .unwrap()
                .to_string()
        })
    });
    g.bench_function("jsonrepair_crate_valid_1mb", |b| {
        b.iter(|| jsonrepair::repair_to_string(black_box(&valid), &opts).unwrap())
    });
    g.finish();
}

fn valid_json() -> String {
    let mut items = Vec::new();
    let mut len = 0;
    let mut i = 0;
    while len < TARGET {
        let v = serde_json::json!({
            "id": i,
            "answer": format!("**Auditoría** \"la revisión\" {i}\nline two\twith tab"),
            "score": i as f64 / 7.0,
            "tags": ["a", "b", null, true],
        });
        len += v.to_string().len() + 1;
        items.push(v);
        i += 1;
    }
    serde_json::to_string(&serde_json::json!({ "answer": items })).unwrap()
}

/// One huge string full of inner quotes, commas, colons and braces (the
/// input that makes naive look-ahead quadratic).
fn adversarial() -> String {
    format!(
        "{{\"answer\": \"{}",
        "a \"b\", \"c\": {\"d\"} e \"} x ".repeat(TARGET / 28)
    )
}

/// A streamed reply whose answer is `n` bytes of model text with inner
/// quotes, escapes, raw newlines and accents, closed at the end.
fn streamed_reply(n: usize) -> String {
    let mut s = String::from("{\"answer\": \"");
    let piece = "La \"revisión final\" dice: use \\\"strict\\\": true, ok.\nLínea 😀 con más texto, {llaves} y [corchetes]. ";
    while s.len() < n {
        s.push_str(piece);
    }
    s.push_str("\", \"sources\": [1, 2]}");
    s
}

/// Streams `reply` through a [`PartialExtractor`] in chunks of `chunk`
/// bytes (moved to char boundaries); returns the streamed length.
fn stream(reply: &str, chunk: usize) -> usize {
    let mut ex = PartialExtractor::new("answer");
    let mut at = 0;
    let mut total = 0;
    while at < reply.len() {
        let mut end = (at + chunk).min(reply.len());
        while !reply.is_char_boundary(end) {
            end += 1;
        }
        total += ex.push(&reply[at..end]).len();
        at = end;
    }
    total + ex.finish().len()
}

fn bench_stream(c: &mut Criterion) {
    let mut g = c.benchmark_group("rescue_stream");
    g.sample_size(10);
    for (name, n) in [
        ("stream_16b_chunks_1mb", TARGET),
        ("stream_16b_chunks_8mb", 8 * TARGET),
    ] {
        let reply = streamed_reply(n);
        g.throughput(Throughput::Bytes(reply.len() as u64));
        g.bench_function(name, |b| b.iter(|| stream(black_box(&reply), 16)));
    }
    g.finish();
}

fn bench(c: &mut Criterion) {
    let broken = broken_llm_json();
    let valid = valid_json();
    assert!(serde_json::from_str::<serde_json::Value>(&broken).is_err());

    let mut g = c.benchmark_group("rescue");
    g.sample_size(20);
    g.throughput(Throughput::Bytes(broken.len() as u64));
    g.bench_function("repair_broken_llm_1mb", |b| {
        b.iter(|| repair(black_box(&broken)).unwrap())
    });
    g.bench_function("rescue_key_broken_llm_1mb", |b| {
        b.iter(|| rescue(black_box(&broken), "answer").unwrap())
    });
    g.throughput(Throughput::Bytes(valid.len() as u64));
    g.bench_function("repair_valid_1mb", |b| {
        b.iter(|| repair(black_box(&valid)).unwrap())
    });
    g.bench_function("serde_json_valid_1mb_baseline", |b| {
        b.iter(|| serde_json::from_str::<serde_json::Value>(black_box(&valid)).unwrap())
    });
    // Adversarial: one huge string full of inner quotes, commas, colons and
    // braces (the input that makes naive look-ahead quadratic).
    let adversarial = adversarial();
    g.throughput(Throughput::Bytes(adversarial.len() as u64));
    g.bench_function("rescue_adversarial_inner_quotes_1mb", |b| {
        b.iter(|| rescue(black_box(&adversarial), "answer").unwrap())
    });
    g.finish();
}

/// On-CPU time of this thread in nanoseconds (Linux `schedstat`), so the
/// figure stays meaningful when the machine is shared.
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Prints MB/s per on-CPU second for each workload (wall-clock figures
/// from criterion are inflated by other processes on a shared machine).
fn cpu_throughput() {
    let broken = broken_llm_json();
    let valid = valid_json();
    let adversarial = adversarial();
    type Run<'a> = (&'a str, &'a str, &'a dyn Fn(&str));
    let runs: [Run; 5] = [
        ("repair_broken_llm_1mb", &broken, &|s| {
            black_box(repair(s).unwrap());
        }),
        ("rescue_key_broken_llm_1mb", &broken, &|s| {
            black_box(rescue(s, "answer").unwrap());
        }),
        ("repair_valid_1mb", &valid, &|s| {
            black_box(repair(s).unwrap());
        }),
        ("serde_json_valid_1mb_baseline", &valid, &|s| {
            black_box(serde_json::from_str::<serde_json::Value>(s).unwrap());
        }),
        ("rescue_adversarial_inner_quotes_1mb", &adversarial, &|s| {
            black_box(rescue(s, "answer").unwrap());
        }),
    ];
    let stream_1 = streamed_reply(TARGET);
    let stream_8 = streamed_reply(8 * TARGET);
    let want = rescue(&stream_1, "answer")
        .unwrap()
        .as_text()
        .unwrap()
        .len();
    assert_eq!(stream(&stream_1, 16), want, "streaming must equal batch");
    let mut per_mb = Vec::new();
    for (name, input) in [
        ("stream_16b_chunks_1mb", &stream_1),
        ("stream_16b_chunks_8mb", &stream_8),
    ] {
        let Some(t0) = cpu_ns() else {
            return;
        };
        let n = 3;
        for _ in 0..n {
            black_box(stream(black_box(input), 16));
        }
        let Some(t1) = cpu_ns() else {
            return;
        };
        let secs = (t1 - t0) as f64 / 1e9 / n as f64;
        per_mb.push(secs);
        println!(
            "cpu-time {name}: {:.1} ms, {:.0} MB/s",
            secs * 1e3,
            input.len() as f64 / 1e6 / secs
        );
    }
    println!(
        "cpu-time ratio stream 8 MB / 1 MB: {:.2}",
        per_mb[1] / per_mb[0]
    );
    for (name, input, f) in runs {
        let Some(t0) = cpu_ns() else {
            return;
        };
        let n = 20;
        for _ in 0..n {
            f(black_box(input));
        }
        let Some(t1) = cpu_ns() else {
            return;
        };
        let secs = (t1 - t0) as f64 / 1e9;
        let mb = (input.len() * n) as f64 / 1e6;
        println!("cpu-time throughput {name}: {:.0} MB/s", mb / secs);
    }
}

criterion_group!(benches, bench, bench_stream, bench_versus);

fn main() {
    benches();
    cpu_throughput();
    Criterion::default().configure_from_args().final_summary();
}
