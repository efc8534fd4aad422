//! How often the tool-argument guard ([`ToolArgsWatcher`]) fires on the
//! arguments real agents wrote: every call of the trajectories in
//! `../shared/data/trajectories` (`DELOOP_SHARED_DIR` overrides), its
//! arguments serialised as a model streams them and fed in 16-byte pieces,
//! by the run's outcome. Prints the counts, then every firing.
//!
//! `cargo run --release -p deloop-core --example tool_args_rates`

use std::path::PathBuf;

use deloop_core::repetition::{ClampConfig, ToolArgsWatcher};
use serde_json::Value;

fn main() {
    let shared = std::env::var_os("DELOOP_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    let root = shared.join("data/trajectories");
    let Ok(index) = std::fs::read_to_string(root.join("index.jsonl")) else {
        println!("tool_args_rates: no trajectories under {}", root.display());
        return;
    };
    let config = ClampConfig::default();
    let mut rows: Vec<(String, usize, usize)> = Vec::new();
    let mut firings = Vec::new();
    for row in index
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        let outcome = row["outcome"].as_str().unwrap_or("unknown").to_string();
        let file = row["file"].as_str().unwrap_or("").to_string();
        let Ok(events) = std::fs::read_to_string(root.join(&file)) else {
            continue;
        };
        let at = match rows.iter().position(|r| r.0 == outcome) {
            Some(i) => i,
            None => {
                rows.push((outcome.clone(), 0, 0));
                rows.len() - 1
            }
        };
        for (n, line) in events.lines().enumerate() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            if v["type"] != "call" {
                continue;
            }
            let args = v["args"].to_string();
            let mut w = ToolArgsWatcher::new(config.clone());
            let bytes = args.as_bytes();
            let mut i = 0;
            while i < bytes.len() && w.cut().is_none() {
                let mut end = (i + 16).min(bytes.len());
                while !args.is_char_boundary(end) {
                    end += 1;
                }
                w.push(&args[i..end]);
                i = end;
            }
            w.finish();
            rows[at].1 += 1;
            if let Some(c) = w.cut() {
                rows[at].2 += 1;
                let unit: String = c.report.unit.chars().take(60).collect();
                firings.push(format!(
                    "{outcome} {file}:{} {:?} {:?} at {}: {unit:?}",
                    n + 1,
                    c.channel,
                    c.detector,
                    c.start
                ));
            }
        }
    }
    println!("| runs' outcome | calls | cut |");
    println!("|---|---|---|");
    for (outcome, calls, cut) in &rows {
        println!("| {outcome} | {calls} | {cut} |");
    }
    for f in firings {
        println!("{f}");
    }
}
