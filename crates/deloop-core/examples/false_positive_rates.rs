//! False-positive rates of the guards on real healthy text (issue 22 §5):
//! how often each guard fires, per source. Run by
//! `scripts/false-positive-rates.sh`; prints a markdown table, then one
//! line per firing (`--list` prints every one, else the first 5 per cell).
//!
//! Guards: `clamp` (words, substring, near-duplicates, batch), the stream
//! watcher (the same text fed in 16-byte chunks, then `finish()`), the
//! near-duplicate guard alone (`clamp_near`), and the tool-loop guard
//! (every profile, critical verdicts, on the resolved trajectories).
//!
//! Sources: the healthy answers of `shared/data/real-llm-text`, the
//! healthy generations of `testdata/real-model`, the SciFact abstracts
//! (title, blank line, text), this repository's own tracked sources and
//! docs (`git ls-files`, vendored corpora and test data left out), and
//! the tool results and call arguments of the resolved trajectories, and
//! the conversations of the PyPI package `chitchat-dataset` when the
//! script installed it (`DELOOP_CHITCHAT_JSON`).

#[path = "../tests/loops_support/mod.rs"]
mod loops_support;

use std::collections::HashMap;
use std::path::Path;

use deloop_core::loops::replay::Replay;
use deloop_core::loops::{Guard, LoopConfig, Profile};
use deloop_core::repetition::{clamp, clamp_near, ClampConfig, ClampReport, StreamWatcher};
use serde_json::Value;

/// One text of a source.
struct Doc {
    id: String,
    text: String,
}

fn jsonl(path: &Path) -> Vec<Value> {
    let data = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    data.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn real_llm_text(shared: &Path) -> Option<Vec<Doc>> {
    let path = shared.join("data/real-llm-text/cases.jsonl");
    path.exists().then(|| {
        jsonl(&path)
            .into_iter()
            .filter(|v| v["label"] == "healthy")
            .map(|v| Doc {
                id: v["id"].as_str().unwrap_or("").to_string(),
                text: v["text"].as_str().unwrap_or("").to_string(),
            })
            .collect()
    })
}

/// The healthy generations of the recorded set and of the held-out set.
fn real_model(root: &Path) -> Vec<Doc> {
    let mut docs = Vec::new();
    for set in ["testdata/real-model", "testdata/real-model/held-out"] {
        let dir = root.join(set);
        let labels: HashMap<String, String> = jsonl(&dir.join("labels.jsonl"))
            .into_iter()
            .map(|v| {
                let id = v["id"].as_str().unwrap_or("").to_string();
                (id, v["label"].as_str().unwrap_or("").to_string())
            })
            .collect();
        for g in jsonl(&dir.join("generations.jsonl")) {
            let id = g["id"].as_str().unwrap_or("");
            if labels.get(id).map(String::as_str) == Some("healthy") {
                docs.push(Doc {
                    id: format!("{set}/{id}"),
                    text: g["text"].as_str().unwrap_or("").to_string(),
                });
            }
        }
    }
    docs
}

fn scifact(shared: &Path) -> Option<Vec<Doc>> {
    let path = shared.join("data/scifact/corpus.jsonl");
    path.exists().then(|| {
        jsonl(&path)
            .into_iter()
            .map(|v| Doc {
                id: v["_id"].as_str().unwrap_or("").to_string(),
                text: format!(
                    "{}\n\n{}",
                    v["title"].as_str().unwrap_or(""),
                    v["text"].as_str().unwrap_or("")
                ),
            })
            .collect()
    })
}

/// Tracked text files, without vendored corpora, test data and lock files.
fn own_sources(root: &Path) -> Vec<Doc> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["ls-files", "-z"])
        .output()
        .expect("git ls-files");
    let names = String::from_utf8_lossy(&out.stdout).into_owned();
    names
        .split('\0')
        .filter(|f| {
            let text = [
                ".rs", ".md", ".toml", ".sh", ".py", ".mjs", ".yml", ".yaml", ".html", ".css",
                ".js",
            ];
            text.iter().any(|e| f.ends_with(e)) && !f.starts_with("testdata/")
        })
        .filter_map(|f| {
            let text = std::fs::read_to_string(root.join(f)).ok()?;
            Some(Doc {
                id: f.to_string(),
                text,
            })
        })
        .collect()
}

/// The chitchat data set (PyPI `chitchat-dataset` 0.9.0, human chat, MIT):
/// one text per conversation, one message a line.
fn chitchat() -> Option<Vec<Doc>> {
    let path = std::path::PathBuf::from(std::env::var_os("DELOOP_CHITCHAT_JSON")?);
    let data = std::fs::read_to_string(path).ok()?;
    let v: Value = serde_json::from_str(&data).expect("dataset.json");
    let convs = v.as_object()?;
    Some(
        convs
            .iter()
            .map(|(id, c)| {
                let mut text = String::new();
                for turn in c["messages"].as_array().into_iter().flatten() {
                    for m in turn.as_array().into_iter().flatten() {
                        text.push_str(m["text"].as_str().unwrap_or(""));
                        text.push('\n');
                    }
                }
                Doc {
                    id: id.clone(),
                    text,
                }
            })
            .collect(),
    )
}

/// The resolved runs: their event files, and every tool result text and
/// call argument string as a document.
fn trajectories(shared: &Path) -> Option<(Vec<String>, Vec<Doc>)> {
    let root = shared.join("data/trajectories");
    if !root.exists() {
        return None;
    }
    let mut runs = Vec::new();
    let mut docs = Vec::new();
    for row in jsonl(&root.join("index.jsonl")) {
        if row["outcome"] != "resolved" {
            continue;
        }
        let file = row["file"].as_str().unwrap_or("").to_string();
        let events = std::fs::read_to_string(root.join(&file)).expect("a trajectory");
        for (n, line) in events.lines().enumerate() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let mut texts = Vec::new();
            if let Some(content) = v["result"]["content"].as_array() {
                texts.extend(content.iter().filter_map(|c| c["text"].as_str()));
            }
            if let Some(e) = v["error"].as_str() {
                texts.push(e);
            }
            if let Some(args) = v["args"].as_object() {
                texts.extend(args.values().filter_map(Value::as_str));
            }
            for (k, t) in texts.into_iter().enumerate() {
                docs.push(Doc {
                    id: format!("{file}:{}:{k}", n + 1),
                    text: t.to_string(),
                });
            }
        }
        runs.push(events);
    }
    Some((runs, docs))
}

fn describe(r: &ClampReport) -> String {
    let unit: String = r.unit.chars().take(48).collect();
    format!(
        "{:?} period {} at byte {}: {unit:?}",
        r.detector, r.period, r.start
    )
}

fn stream(text: &str, config: &ClampConfig) -> Option<ClampReport> {
    let mut w = StreamWatcher::new(config.clone());
    for chunk in text.as_bytes().chunks(16) {
        if let Some(cut) = w.feed(chunk) {
            return Some(cut.report);
        }
    }
    w.finish().map(|cut| cut.report)
}

/// A table row's cell: fired / total, and the firings.
#[derive(Default)]
struct Cell {
    fired: usize,
    total: usize,
    hits: Vec<String>,
}

impl Cell {
    fn add(&mut self, id: &str, hit: Option<String>) {
        self.total += 1;
        if let Some(h) = hit {
            self.fired += 1;
            self.hits.push(format!("{id}: {h}"));
        }
    }

    fn show(&self) -> String {
        if self.total == 0 {
            return "–".into();
        }
        let pct = 100.0 * self.fired as f64 / self.total as f64;
        format!("{} / {} ({pct:.2} %)", self.fired, self.total)
    }
}

fn main() {
    let list = std::env::args().any(|a| a == "--list");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let shared = match std::env::var_os("DELOOP_SHARED_DIR") {
        Some(d) => std::path::PathBuf::from(d),
        None => root.join("../shared"),
    };
    let config = ClampConfig::default();
    let traj = trajectories(&shared);
    let sources: Vec<(&str, Option<Vec<Doc>>)> = vec![
        ("real-llm-text, healthy answers", real_llm_text(&shared)),
        ("real-model, healthy generations", Some(real_model(&root))),
        ("SciFact abstracts", scifact(&shared)),
        ("deloop's own sources and docs", Some(own_sources(&root))),
        ("chitchat-dataset (PyPI), conversations", chitchat()),
        (
            "resolved trajectories (tool results, arguments)",
            traj.as_ref().map(|(_, d)| {
                d.iter()
                    .map(|d| Doc {
                        id: d.id.clone(),
                        text: d.text.clone(),
                    })
                    .collect()
            }),
        ),
    ];
    println!(
        "| source | texts | clamp | stream watcher | near-duplicates | tool loops (critical) |"
    );
    println!("|---|---|---|---|---|---|");
    let mut notes = Vec::new();
    for (name, docs) in sources {
        let Some(docs) = docs else {
            println!("| {name} | absent | – | – | – | – |");
            continue;
        };
        let (mut c, mut s, mut n) = (Cell::default(), Cell::default(), Cell::default());
        for d in &docs {
            c.add(&d.id, clamp(&d.text, &config).report().map(describe));
            s.add(&d.id, stream(&d.text, &config).as_ref().map(describe));
            n.add(&d.id, clamp_near(&d.text, &config).report().map(describe));
        }
        let mut t = Cell::default();
        let mut runs = "–".to_string();
        if name.starts_with("resolved trajectories") {
            if let Some((events, _)) = &traj {
                let mut per = Vec::new();
                for profile in Profile::ALL {
                    let mut cell = Cell::default();
                    for run in events {
                        let mut r = Replay::new(Guard::new(profile, LoopConfig::default()));
                        for ev in loops_support::parse_events(run) {
                            let _ = r.push(ev);
                        }
                        let first = r.verdicts().iter().position(|v| v.verdict.is_critical());
                        let hit = first.map(|i| format!("critical at call {}", i + 1));
                        cell.add(profile.name(), hit.clone());
                        t.add(profile.name(), hit);
                    }
                    per.push(format!("{} {}", profile.name(), cell.show()));
                }
                runs = format!("{} runs: {}", events.len(), per.join("; "));
            }
        }
        println!(
            "| {name} | {} | {} | {} | {} | {runs} |",
            docs.len(),
            c.show(),
            s.show(),
            n.show()
        );
        for (guard, cell) in [
            ("clamp", &c),
            ("stream", &s),
            ("near", &n),
            ("tool loops", &t),
        ] {
            let shown = if list {
                cell.hits.len()
            } else {
                cell.hits.len().min(5)
            };
            for h in &cell.hits[..shown] {
                notes.push(format!("- {name} / {guard}: {h}"));
            }
            if shown < cell.hits.len() {
                notes.push(format!(
                    "- {name} / {guard}: … {} more (--list)",
                    cell.hits.len() - shown
                ));
            }
        }
    }
    if !notes.is_empty() {
        println!("\nFirings:\n");
        for n in notes {
            println!("{n}");
        }
    }
}
