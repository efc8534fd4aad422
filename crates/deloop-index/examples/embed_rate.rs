//! Embedding throughput of the local embedders, in chunks per second: the
//! figure of the embedder tables in docs/retrieval.md.
//!
//! Embeds the first `--docs` documents of a BEIR `corpus.jsonl` (title and
//! text, one chunk each, as `deloop index --format beir` does) with
//! `minilm` (candle) or `minilm-onnx`, after one warm-up batch, and prints
//! one JSON object: the embedder id, the documents, the wall and CPU
//! seconds, and chunks per second of each.
//!
//! ```text
//! cargo run --release -p deloop-index --example embed_rate -- \
//!     --corpus ../shared/data/scifact/corpus.jsonl --embedder minilm-onnx [--docs 1000]
//! ```

use std::io::BufRead;
use std::time::Instant;

use deloop_index::SharedEmbedder;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut corpus = None;
    let mut embedder = String::from("minilm-onnx");
    let mut docs = 1000usize;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--corpus" => corpus = Some(value),
            "--embedder" => embedder = value,
            "--docs" => docs = value.parse()?,
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let corpus = corpus.ok_or("--corpus PATH is required")?;
    let mut texts = Vec::with_capacity(docs);
    for line in std::io::BufReader::new(std::fs::File::open(&corpus)?).lines() {
        if texts.len() == docs {
            break;
        }
        let v: serde_json::Value = serde_json::from_str(&line?)?;
        let field = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        texts.push(format!("{}\n\n{}", field("title"), field("text")));
    }
    let model: SharedEmbedder = match embedder.as_str() {
        "minilm" => Box::new(deloop_index::MiniLm::from_env()?),
        "minilm-onnx" => Box::new(deloop_index::load_onnx(None, None)?),
        other => return Err(format!("unknown embedder {other}").into()),
    };
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    // Warm-up: the first call loads the extra ONNX sessions.
    model.embed(&refs[..refs.len().min(32)])?;
    let (wall, cpu) = (Instant::now(), cpu_seconds());
    model.embed(&refs)?;
    let wall = wall.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu;
    let n = refs.len() as f64;
    println!(
        "{}",
        serde_json::json!({
            "embedder": model.id(),
            "docs": refs.len(),
            "wall_s": wall,
            "cpu_s": cpu,
            "chunks_per_s": n / wall,
            "chunks_per_cpu_s": n / cpu,
            "cores": std::thread::available_parallelism().map_or(1, |c| c.get()),
        })
    );
    Ok(())
}

/// CPU seconds used by this process so far (user + system, from
/// /proc/self/stat; 0 where it cannot be read).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after ')'.
    (ticks(11) + ticks(12)) / 100.0
}
