//! Floods (issue 22 §3): a run of white space, punctuation, emoji or one
//! token must be cut within 300 characters of its start, in batch and in
//! a stream, while the healthy runs of the same characters pass (a table
//! cell padded with 1,200 spaces, indentation, a divider).

use deloop_core::repetition::{clamp, ClampConfig, StreamWatcher};

const INTRO: &str =
    "Sure. Here is the answer to your question about the weather in Paris today.\n\n";

/// The flood units: white space (newlines, spaces, tabs, CRLF, no-break
/// spaces, mixed), punctuation, emoji, escapes and short tokens.
const UNITS: [&str; 22] = [
    "\n", " ", "\n ", "\t", "\r\n", "\u{a0}", ".", "!", "-", "=", "…", "。", "* ", ". ", "😂",
    "😂 ", "🙏🏻", "0", "0 ", "ok ", "<br>", "\\n",
];

/// Characters of the stream read when the watcher cut, counted from the
/// flood's start, and the batch verdict's kept length.
fn cut_distance(text: &str) -> (usize, usize) {
    let config = ClampConfig::default();
    let out = clamp(text, &config);
    let r = out.report().expect("the flood is cut");
    assert!(r.keep_bytes <= INTRO.len() + 8, "{r:?}");
    let mut w = StreamWatcher::new(config);
    let cut = text
        .as_bytes()
        .chunks(5)
        .find_map(|c| w.feed(c))
        .expect("the stream is cut");
    (
        text[INTRO.len()..cut.detected_at].chars().count(),
        r.keep_bytes,
    )
}

#[test]
fn every_flood_is_cut_within_300_characters() {
    for unit in UNITS {
        let text = format!("{INTRO}{}", unit.repeat(6000 / unit.len()));
        let (chars, _) = cut_distance(&text);
        assert!(
            chars <= 300,
            "{unit:?}: cut {chars} characters after the start"
        );
    }
}

#[test]
fn a_flood_of_empty_table_cells_is_cut() {
    let text = format!("{INTRO}| a | b |\n|---|---|\n{}", "| ".repeat(3000));
    let out = clamp(&text, &ClampConfig::default());
    assert!(out.is_clamped());
    assert!(out.text.len() < INTRO.len() + 300, "{}", out.text);
}

#[test]
fn healthy_runs_of_the_same_characters_pass() {
    let padded = format!(
        "| Player{} | Team |\n|{}|------|\n| Derek Jeter{} | Yankees |\n",
        " ".repeat(1200),
        "-".repeat(1208),
        " ".repeat(1195)
    );
    let code = format!("```python\ndef f():\n{}return 1\n```\n", " ".repeat(120));
    let divider = format!("Title\n{}\nText after the rule.\n", "=".repeat(200));
    let paragraphs = format!("One.\n{}Two.\n", "\n".repeat(40));
    let aligned = format!(
        "name{}value\nother{}thing\n",
        " ".repeat(90),
        " ".repeat(89)
    );
    for (name, text) in [
        ("padded table", padded),
        ("indented code", code),
        ("divider", divider),
        ("blank lines", paragraphs),
        ("alignment", aligned),
    ] {
        let out = clamp(&text, &ClampConfig::default());
        assert!(!out.is_clamped(), "{name}: {:?}", out.report());
        let mut w = StreamWatcher::new(ClampConfig::default());
        for chunk in text.as_bytes().chunks(5) {
            assert!(w.feed(chunk).is_none(), "{name}: the stream was cut");
        }
    }
}

#[test]
fn reasoning_that_restates_itself_is_cut_within_six_sentences() {
    // Thinking that says the same thing again with a word or two changed.
    let variants = [
        "So the total number of apples that Sarah has is twelve in the end.",
        "So the total number of apples that Sarah has is twelve at the end.",
        "So the total number of apples Sarah has is twelve in the end.",
        "So the total number of apples that Sarah has must be twelve in the end.",
    ];
    let intro =
        "Let me work through the problem. Sarah starts with five apples and buys seven more.\n";
    let text: String = std::iter::once(intro.to_string())
        .chain((0..40).map(|i| format!("{}\n", variants[i % variants.len()])))
        .collect();
    let mut w = StreamWatcher::new(ClampConfig::default());
    let cut = text
        .as_bytes()
        .chunks(5)
        .find_map(|c| w.feed(c))
        .expect("the restating is cut");
    assert_eq!(cut.keep_bytes, intro.len() + variants[0].len());
    let read = &text[intro.len()..cut.detected_at];
    assert!(
        read.lines().count() <= 6,
        "cut after {} sentences",
        read.lines().count()
    );
}
