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

/// A token of `len` characters cut from one of three shapes: a URL, a
/// long identifier, base64.
fn long_token(shape: usize, len: usize) -> String {
    let base = [
        "https://example.com/api/v2/projects/deloop/issues/22/comments/floods/and/more/segments/that/keep/going/",
        "self.configuration_manager.registry_lookup_table_entries_for_the_application_server_cluster_node_x_",
        "QmFzZTY0ZW5jb2RlZFN0cmluZ0V4YW1wbGVGb3JUZXN0aW5nUHVycG9zZXNPbmx5QW5kTm90aGluZ0Vsc2VBdEFsbE1vcmU",
    ][shape];
    base.chars().cycle().take(len).collect()
}

/// Characters of the stream read past the flood's start when the
/// watcher cut; the batch verdict keeps the text before the flood and
/// one copy at most.
fn token_flood_distance(text: &str, copy: usize) -> usize {
    let config = ClampConfig::default();
    let r = clamp(text, &config)
        .report()
        .cloned()
        .expect("the flood is cut");
    assert!(r.keep_bytes <= INTRO.len() + copy, "{r:?}");
    let mut w = StreamWatcher::new(config);
    let cut = text
        .as_bytes()
        .chunks(5)
        .find_map(|c| w.feed(c))
        .expect("the stream is cut");
    // The stream's verdict is the batch verdict on the prefix it read.
    let on_prefix = clamp(&text[..cut.detected_at], &ClampConfig::default());
    assert_eq!(
        on_prefix.report().map(|p| p.keep_bytes),
        Some(cut.keep_bytes),
        "{:?}",
        &text[INTRO.len()..cut.detected_at]
    );
    text[INTRO.len()..cut.detected_at].chars().count()
}

/// A flood of one long token on one line (separated by spaces, `, `,
/// tabs or nothing) is cut within 300 characters of its start up to
/// tokens of 130 characters; copies on lines of their own need five
/// (logs repeat a line four times), the last of which may be its first
/// 24 bytes: within 300 characters up to tokens of 65.
#[test]
fn a_flood_of_one_long_token_is_cut_within_300_characters() {
    for shape in 0..3 {
        for len in [13, 16, 20, 30, 45, 60, 64, 65, 80, 90, 100, 120, 130] {
            for sep in [" ", "", ", ", "\t", "\n", "\n\n", ",\n"] {
                let unit = format!("{}{sep}", long_token(shape, len));
                let text = format!("{INTRO}{}", unit.repeat(6000 / unit.len()));
                let chars = token_flood_distance(&text, unit.len());
                let bound = if sep.contains('\n') {
                    300.max(4 * unit.len() + 24)
                } else {
                    300
                };
                assert!(
                    chars <= bound,
                    "{unit:?}: cut {chars} characters after the start"
                );
                if sep.contains('\n') && len <= 65 {
                    assert!(
                        chars <= 300,
                        "{unit:?}: cut {chars} characters after the start"
                    );
                }
            }
        }
    }
}

#[test]
fn healthy_text_with_long_tokens_passes() {
    let zeros = "0.000000000000000000e+00 ".repeat(8).trim_end().to_string() + "\n";
    let zero_matrix = format!("np.savetxt wrote:\n{}", zeros.repeat(8));
    let identity: String = (0..8)
        .map(|i| {
            let row: Vec<&str> = (0..8)
                .map(|k| {
                    if i == k {
                        "1.000000000000000000e+00"
                    } else {
                        "0.000000000000000000e+00"
                    }
                })
                .collect();
            row.join(" ") + "\n"
        })
        .collect();
    let numbers: String = (0..20)
        .map(|i| format!("| {i} | {} | {} |\n", i * 1000, i * i))
        .collect();
    let hashes: String = (0..20)
        .map(|i| format!("{:016x}{:016x}{:08x}\n", i * 7919 + 1, i * 104_729, i))
        .collect();
    let names = [
        "ana", "bo", "cy", "dee", "ed", "flo", "gus", "hal", "ivy", "jo", "kit", "lu",
    ];
    let json: String = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            format!("  {{\"id\": {}, \"name\": \"{n}\", \"status\": \"pending_verification\", \"owner\": \"configuration_manager\"}},\n", 7 * i + 3)
        })
        .collect();
    let code = "def reload(self):\n    self.configuration_manager.load()\n    if self.configuration_manager.dirty:\n        self.configuration_manager.load()\n        self.configuration_manager.save()\n    self.configuration_manager.load()\n    return self.configuration_manager.state\n".repeat(2);
    let enumeration: String = (1..30).map(|i| format!("{i}. Step number {i}\n")).collect();
    let short = "Thank you very very very much, it was really really really good and so so nice. Bye bye bye bye!".to_string();
    let leaders = format!(
        "Introduction {} 1\nMethods {} 5\nResults {} 9\n",
        ".".repeat(120),
        ".".repeat(126),
        ".".repeat(126)
    );
    let url = long_token(0, 120);
    let twice = format!("See {url} {url} for the details, and the docs.\n");
    let listed = format!(
        "Links:\n{url}\n{url}\nhttps://other.example.org/{}\n",
        long_token(1, 90)
    );
    let uuids = "\"00000000-0000-0000-0000-000000000000\", ".repeat(12);
    // pytest's warnings summary lists a location once per occurrence.
    let path =
        "../opt/miniconda3/envs/testbed/lib/python3.9/site-packages/pkg_resources/__init__.py:3154";
    let pytest = format!(
        "=== warnings summary ===\n{}  {}: DeprecationWarning: Deprecated call\n{}",
        format!("{path}\n").repeat(4),
        &path[2..],
        "tests/test_quickstart.py::test_quickstart_and_build\n".repeat(3)
    );
    let fenced = format!("```\n{}\n```\n", [long_token(2, 60).as_str(); 8].join(" "));
    for (name, body) in [
        ("zero matrix", zero_matrix),
        ("identity matrix", identity),
        ("table of numbers", numbers),
        ("hashes", hashes),
        ("JSON objects", json),
        ("code", code),
        ("enumeration", enumeration),
        ("short words", short),
        ("dot leaders", leaders),
        ("a URL twice", twice),
        ("a link listed twice", listed),
        ("nil UUIDs", uuids),
        ("a log line four times", pytest),
        ("fenced base64", fenced),
    ] {
        let text = format!("{INTRO}{body}\nThat is all.\n");
        let out = clamp(&text, &ClampConfig::default());
        assert!(!out.is_clamped(), "{name}: {:?}", out.report());
        let mut w = StreamWatcher::new(ClampConfig::default());
        for chunk in text.as_bytes().chunks(5) {
            assert!(w.feed(chunk).is_none(), "{name}: the stream was cut");
        }
        assert!(w.finish().is_none(), "{name}: cut at the end");
    }
}
