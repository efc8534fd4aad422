//! The real-model set recorded in this repository
//! (`testdata/real-model/`): greedy generations of SmolLM2-135M-Instruct and
//! Gemma 3 270M (base) from a real llama-server, on 64 prompts of our own in
//! English and Spanish, labelled by hand (`labels.jsonl`). Computes and
//! prints, per model, how many loops the default guard catches (batch
//! `clamp`), how many it changes of the healthy answers, and what a stream
//! guard saves: each generation is replayed token by token, as it was
//! streamed, through a [`GuardedStream`] (what `deloop clamp --stream` and a
//! proxy run), and the tokens generated after the token on which it cuts are
//! tokens (and, at the generation's own rate, seconds) a proxy would have
//! saved by dropping the upstream there. Asserts the figures do not regress.
//!
//! Unlike `repetition_real.rs`, this set ships with the repository, so the
//! test always runs.

use std::collections::HashMap;

use deloop_core::repetition::{clamp, ClampConfig, Clamped, GuardedStream};
use serde_json::Value;

struct Case {
    id: String,
    model: String,
    label: String,
    text: String,
    onset: usize,
    unit_chars: usize,
    /// Byte length of each streamed chunk (one token each, except where
    /// llama-server joined the tokens of a split UTF-8 character).
    chunk_bytes: Vec<usize>,
    /// Tokens generated and the seconds the server spent generating them.
    tokens: u64,
    seconds: f64,
}

fn read_jsonl(name: &str) -> Vec<Value> {
    let path = deloop_testdata::workspace_root()
        .join("testdata/real-model")
        .join(name);
    let data = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    data.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: {e}: {l}")))
        .collect()
}

/// The generations of one set: `""` (the recorded set) or `"held-out/"`.
fn load(set: &str) -> Vec<Case> {
    let generations = read_jsonl(&format!("{set}generations.jsonl"));
    let mut labels: HashMap<String, Value> = read_jsonl(&format!("{set}labels.jsonl"))
        .into_iter()
        .map(|v| (v["id"].as_str().expect("label id").to_string(), v))
        .collect();
    let cases: Vec<Case> = generations
        .iter()
        .map(|g| {
            let id = g["id"].as_str().expect("id").to_string();
            let label = labels
                .remove(&id)
                .unwrap_or_else(|| panic!("generation {id} has no hand label"));
            let text = g["text"].as_str().expect("text").to_string();
            let unit = label["unit"].as_str().unwrap_or("");
            let onset = label["onset"].as_u64().unwrap_or(0) as usize;
            if label["label"] == "loop" {
                // The unit is quoted from the text at the onset.
                let at: String = text
                    .chars()
                    .skip(onset)
                    .take(unit.chars().count())
                    .collect();
                assert_eq!(at, unit, "{id}: unit is not the text at onset {onset}");
            }
            let chunk_bytes: Vec<usize> = g["chunk_bytes"]
                .as_array()
                .expect("chunk_bytes")
                .iter()
                .map(|n| n.as_u64().expect("chunk size") as usize)
                .collect();
            assert_eq!(
                chunk_bytes.iter().sum::<usize>(),
                text.len(),
                "{id}: chunks do not add up to the text"
            );
            Case {
                model: id.split('/').next().expect("model/prompt id").to_string(),
                id,
                label: label["label"].as_str().expect("label").to_string(),
                text,
                onset,
                unit_chars: unit.chars().count(),
                chunk_bytes,
                tokens: g["tokens"].as_u64().expect("tokens"),
                seconds: g["seconds"].as_f64().expect("seconds"),
            }
        })
        .collect();
    assert!(
        labels.is_empty(),
        "labels without a generation: {:?}",
        labels.keys().collect::<Vec<_>>()
    );
    cases
}

/// The rule of `repetition_real.rs`: a loop is caught when the output keeps
/// what comes before `onset` and ends no later than
/// `onset + 3 × len(unit) + 200` characters. Two differences: the guard
/// must have fired (some generations here are short enough to fit that
/// bound whole), and the white space just before the onset may go (onsets
/// sit at line starts, and a guard that keeps the last healthy line and
/// puts its marker in place of the line break has kept all that matters).
fn caught(case: &Case, out: &Clamped) -> bool {
    let before: String = case.text.chars().take(case.onset).collect();
    out.is_clamped()
        && out.text.starts_with(before.trim_end())
        && out.text.chars().count() <= case.onset + 3 * case.unit_chars + 200
}

/// Replays the generation chunk by chunk through a stream guard; the
/// number of chunks received when it cut (the chunk that revealed the
/// loop included), or `None`.
fn stream_cut_after(case: &Case, config: &ClampConfig) -> Option<usize> {
    let mut stream = GuardedStream::new(config.clone());
    let mut at = 0;
    for (i, &n) in case.chunk_bytes.iter().enumerate() {
        let piece = &case.text.as_bytes()[at..at + n];
        at += n;
        if stream.push_bytes(piece).expect("valid UTF-8").cut.is_some() {
            return Some(i + 1);
        }
    }
    stream
        .finish()
        .expect("valid UTF-8")
        .cut
        .map(|_| case.chunk_bytes.len())
}

#[derive(Default, Debug, Clone, Copy, PartialEq)]
struct Tally {
    loops: usize,
    caught: usize,
    fired_on_loops: usize,
    healthy: usize,
    healthy_changed: usize,
    ambiguous: usize,
    ambiguous_changed: usize,
    /// Generations a stream guard cut, by label.
    stream_cut_loops: usize,
    stream_cut_healthy: usize,
    stream_cut_ambiguous: usize,
    tokens: u64,
    seconds: f64,
    tokens_saved: u64,
    seconds_saved: f64,
}

fn evaluate(config: &ClampConfig, name: &str) -> HashMap<String, Tally> {
    evaluate_set("", config, name)
}

fn evaluate_set(set: &str, config: &ClampConfig, name: &str) -> HashMap<String, Tally> {
    let mut tallies: HashMap<String, Tally> = HashMap::new();
    for case in load(set) {
        let out = clamp(&case.text, config);
        let t = tallies.entry(case.model.clone()).or_default();
        t.tokens += case.tokens;
        t.seconds += case.seconds;
        let stream_cut = stream_cut_after(&case, config);
        if let Some(received) = stream_cut {
            // Chunks are tokens except where a split character joined two;
            // scale by the server's token count.
            let chunks = case.chunk_bytes.len() as f64;
            let saved = (case.tokens as f64 * (chunks - received as f64) / chunks).round();
            t.tokens_saved += saved as u64;
            t.seconds_saved += saved * case.seconds / case.tokens as f64;
        }
        let stream_cut = stream_cut.is_some();
        match case.label.as_str() {
            "loop" => {
                t.loops += 1;
                t.stream_cut_loops += usize::from(stream_cut);
                t.fired_on_loops += usize::from(out.is_clamped());
                if caught(&case, &out) {
                    t.caught += 1;
                } else {
                    println!("[{name}] missed loop {} ({:?})", case.id, out.report());
                }
            }
            "healthy" => {
                t.healthy += 1;
                t.stream_cut_healthy += usize::from(stream_cut);
                if out.text != case.text {
                    t.healthy_changed += 1;
                    println!("[{name}] changed healthy {} ({:?})", case.id, out.report());
                }
            }
            "ambiguous" => {
                t.ambiguous += 1;
                t.stream_cut_ambiguous += usize::from(stream_cut);
                t.ambiguous_changed += usize::from(out.text != case.text);
            }
            other => panic!("{}: unknown label {other:?}", case.id),
        }
    }
    let mut models: Vec<_> = tallies.iter().collect();
    models.sort_by_key(|(m, _)| m.as_str());
    for (model, t) in models {
        println!(
            "[{name}] {model}: loops caught {}/{} (fired on {}), healthy changed {}/{}, \
             ambiguous {} ({} changed); stream guard cut {} loops, {} healthy, {} ambiguous; \
             tokens {} in {:.0} s, saved {} tokens, {:.0} s",
            t.caught,
            t.loops,
            t.fired_on_loops,
            t.healthy_changed,
            t.healthy,
            t.ambiguous,
            t.ambiguous_changed,
            t.stream_cut_loops,
            t.stream_cut_healthy,
            t.stream_cut_ambiguous,
            t.tokens,
            t.seconds,
            t.tokens_saved,
            t.seconds_saved
        );
    }
    tallies
}

#[test]
fn every_prompt_has_a_labelled_generation_from_each_model() {
    let prompts = read_jsonl("prompts.jsonl");
    let cases = load("");
    for model in ["smollm2", "gemma3"] {
        for p in &prompts {
            let id = format!("{model}/{}", p["id"].as_str().expect("prompt id"));
            assert!(cases.iter().any(|c| c.id == id), "no generation {id}");
        }
    }
    assert_eq!(cases.len(), 2 * prompts.len());
    assert!(prompts.len() >= 50);
}

#[test]
fn default_guard_on_the_real_model_set() {
    let t = evaluate(&ClampConfig::default(), "default");
    let smol = t["smollm2"];
    let gemma = t["gemma3"];
    // The hand labels (see testdata/real-model/SOURCE.md).
    assert_eq!(
        (smol.loops, smol.healthy, smol.ambiguous),
        SMOLLM2_LABELS,
        "SmolLM2 labels changed"
    );
    assert_eq!(
        (gemma.loops, gemma.healthy, gemma.ambiguous),
        GEMMA3_LABELS,
        "Gemma 3 labels changed"
    );
    // No healthy answer may change.
    assert_eq!(smol.healthy_changed, 0, "a healthy SmolLM2 answer changed");
    assert_eq!(gemma.healthy_changed, 0, "a healthy Gemma 3 answer changed");
    assert_eq!(
        smol.stream_cut_healthy, 0,
        "a healthy SmolLM2 stream was cut"
    );
    assert_eq!(
        gemma.stream_cut_healthy, 0,
        "a healthy Gemma 3 stream was cut"
    );
    // Exact, so a change either way updates the figures here and in
    // docs/real-model.md.
    assert_eq!(smol.caught, SMOLLM2_CAUGHT, "SmolLM2 loops caught changed");
    assert_eq!(gemma.caught, GEMMA3_CAUGHT, "Gemma 3 loops caught changed");
}

#[test]
fn seed_compat_counts_are_reported() {
    // Informational: the seed's rules on the same set (printed, not bounded).
    let t = evaluate(&ClampConfig::seed_compat(), "seed-compat");
    assert_eq!(t.len(), 2);
}

/// (loops, healthy, ambiguous) by hand, per model.
const SMOLLM2_LABELS: (usize, usize, usize) = (33, 26, 5);
const GEMMA3_LABELS: (usize, usize, usize) = (60, 1, 3);
/// Loops the default guard catches: 82 when the set was recorded, 88
/// since issue 12 §2 (list items cycling with a period of up to 8 items,
/// lines going round a few values, odd units after a path, a word loop on
/// one line of a code fence), 91 with three more: a numbered list that
/// starts again and copies its own items (a count from 1 to 20 started
/// again from 2, then from 3), codes going round a few values (Wi-Fi
/// standards cycling with no period), and the long tail at the end of a
/// text (`words.tail_last_copy_percent = 66`: three question-and-answer
/// pairs cycling, two copies and two thirds when the token limit stopped
/// them), 92 with issue 22 §3's new-values rule: steps numbered in words
/// (`The first step is to prepare the dough.` … `The seventh step is to
/// serve the dough.`) each bring two new words, so the near-duplicate
/// sentence rule now starts the loop where only the ordinal changes
/// (`The eighth step is to wash the dough.`), not at the first step.
/// Still missed — SmolLM2: sentences with a rising number (five copies,
/// interleaved with another sentence).
const SMOLLM2_CAUGHT: usize = 32;
const GEMMA3_CAUGHT: usize = 60;

/// The held-out set (issue 22 §3, `testdata/real-model/held-out/`): 12 new
/// prompts (English, Spanish, French, German, Portuguese; matrices,
/// squares, JSON, orders, recipes, cities, a training plan, counting, a
/// story, SQL) written after the rules of issue 22 §3, generated with the
/// same two models and decoding, labelled by hand, and never used to tune
/// a rule. Its figures are the honest ones; the test keeps them from
/// falling and asserts no healthy answer changes.
#[test]
fn default_guard_on_the_held_out_set() {
    let t = evaluate_set("held-out/", &ClampConfig::default(), "held-out");
    let (smol, gemma) = (t["smollm2"], t["gemma3"]);
    assert_eq!((smol.loops, smol.healthy, smol.ambiguous), (6, 5, 1));
    assert_eq!((gemma.loops, gemma.healthy, gemma.ambiguous), (12, 0, 0));
    assert_eq!(smol.healthy_changed + smol.ambiguous_changed, 0);
    assert_eq!(smol.stream_cut_healthy + smol.stream_cut_ambiguous, 0);
    // Misses, by hand: numbers counting on with no word (both models; by
    // design, a count of numbers is content), two numbers rising together
    // (`N. Elite: N`), a sentence said again twice at the very end, and
    // question-and-answer pairs whose questions are shorter than a
    // compared sentence.
    assert!(
        smol.caught >= 3,
        "SmolLM2 held-out loops caught: {}",
        smol.caught
    );
    assert!(
        gemma.caught >= 10,
        "Gemma 3 held-out loops caught: {}",
        gemma.caught
    );
}
