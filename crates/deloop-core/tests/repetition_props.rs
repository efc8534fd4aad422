//! Property tests: the linear-time guards agree with slow, obviously
//! correct references of the seed's rules, and the streaming watcher agrees
//! with the batch guard on every prefix, for any chunking.

use deloop_core::repetition::{clamp, clamp_substring, clamp_words, ClampConfig, StreamWatcher};
use proptest::prelude::*;

/// The seed's `(.{2,12}?)\1{9,}` on Unicode scalar values, by brute force:
/// leftmost start, then the smallest unit; cut before it and trim.
fn reference_substring(text: &str) -> String {
    let cs: Vec<(usize, char)> = text.char_indices().collect();
    let n = cs.len();
    if n < 40 {
        return text.to_string();
    }
    for s in 0..n {
        for l in 2..=12 {
            if s + 10 * l <= n && (l..10 * l).all(|k| cs[s + k].1 == cs[s + k - l].1) {
                return text[..cs[s].0].trim().to_string();
            }
        }
    }
    text.to_string()
}

fn fold(s: &str) -> String {
    s.chars()
        .flat_map(|c| c.to_uppercase())
        .flat_map(|c| c.to_lowercase())
        .collect()
}

/// The seed's `clampRepetition`, by brute force: for each position i and
/// period p, the run of `tok[j] == tok[j-p]` from `j = i + p`; the first
/// run of `max(18, 3p)` keeps `tok[..i+p]` minus dangling connectors
/// (never below i), re-joined with spaces, plus ` […]`.
fn reference_words(text: &str) -> String {
    if text.chars().count() < 80 {
        return text.to_string();
    }
    let connectors: Vec<String> = ClampConfig::seed_compat().words.connectors;
    let toks: Vec<&str> = text.split_whitespace().collect();
    let keys: Vec<String> = toks.iter().map(|t| fold(t)).collect();
    let n = toks.len();
    for i in 0..n {
        for p in 1..=16 {
            let thr = 18.max(3 * p);
            let mut run = 0;
            let mut j = i + p;
            while j < n && keys[j] == keys[j - p] {
                run += 1;
                j += 1;
            }
            if run >= thr {
                let mut t = i + p;
                while t > i && connectors.contains(&keys[t - 1]) {
                    t -= 1;
                }
                let kept = toks[..t].join(" ");
                return if kept.is_empty() {
                    "[…]".to_string()
                } else {
                    kept + " […]"
                };
            }
        }
    }
    text.to_string()
}

/// Texts made of random filler and repeated units, so loops, near-loops
/// and structure (pipes, fences, newlines) all occur.
fn text_strategy() -> impl Strategy<Value = String> {
    let filler = "[ab é\n.,|`\\-]{0,24}";
    let unit = "[ab é.]{1,5}";
    let vocab = prop::sample::select(vec![
        "de", "la", "the", "and", "A", "a", "B", "x", "Ab", "ab,", "ab", "|", "---", "é", "高",
    ]);
    let piece = prop_oneof![
        filler.prop_map(|s| s),
        (unit, 1..30usize).prop_map(|(u, n)| u.repeat(n)),
        (prop::collection::vec(vocab, 1..6), 1..12usize).prop_map(|(ws, n)| format!(
            "{} ",
            ws.join(" ")
        )
        .repeat(n)),
    ];
    prop::collection::vec(piece, 0..10).prop_map(|v| v.concat())
}

fn feed_all(
    config: &ClampConfig,
    text: &str,
    sizes: &[usize],
) -> Option<deloop_core::repetition::StreamCut> {
    let mut w = StreamWatcher::new(config.clone());
    let bytes = text.as_bytes();
    let mut off = 0;
    let mut i = 0;
    while off < bytes.len() {
        let size = sizes[i % sizes.len()].max(1);
        i += 1;
        let end = (off + size).min(bytes.len());
        if let Some(cut) = w.feed(&bytes[off..end]) {
            return Some(cut);
        }
        off = end;
    }
    w.finish()
}

fn check_stream(config: &ClampConfig, text: &str, sizes: &[usize], exact_text: bool) {
    match feed_all(config, text, sizes) {
        Some(cut) => {
            let d = cut.detected_at;
            assert!(text.is_char_boundary(d));
            assert!(text.is_char_boundary(cut.keep_bytes));
            let prefix = &text[..d];
            let batch = clamp(prefix, config);
            let r = batch.report().expect("batch fires on the stream's prefix");
            assert_eq!(r, &cut.report);
            if exact_text {
                assert_eq!(
                    batch.text,
                    format!("{}{}", &text[..cut.keep_bytes], cut.replacement_tail)
                );
            }
            // No shorter prefix fires.
            let bounds: Vec<usize> = prefix.char_indices().map(|(i, _)| i).collect();
            for &b in bounds.iter().rev().take(200) {
                assert!(
                    !clamp(&text[..b], config).is_clamped(),
                    "fires earlier at {b}"
                );
            }
        }
        None => assert!(!clamp(text, config).is_clamped()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn substring_matches_the_seed_regex(text in text_strategy()) {
        let out = clamp_substring(&text, &ClampConfig::seed_compat());
        prop_assert_eq!(out.text, reference_substring(&text));
    }

    #[test]
    fn words_match_the_seed_rule(text in text_strategy()) {
        let out = clamp_words(&text, &ClampConfig::seed_compat());
        prop_assert_eq!(out.text, reference_words(&text));
    }

    #[test]
    fn default_output_is_a_source_prefix_plus_marker(text in text_strategy()) {
        let out = clamp(&text, &ClampConfig::default());
        if let Some(first) = out.report() {
            prop_assert!(text.is_char_boundary(first.keep_bytes));
            prop_assert!(first.start <= text.len());
            prop_assert!(out.text.ends_with("[…]"));
            let body = out.text.trim_end_matches("[…]").trim_end();
            prop_assert!(text.starts_with(body));
        } else {
            prop_assert_eq!(out.text, text);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn stream_equals_batch_on_the_prefix_default(
        text in text_strategy(),
        sizes in prop::collection::vec(1..9usize, 1..6),
    ) {
        check_stream(&ClampConfig::default(), &text, &sizes, true);
    }

    #[test]
    fn stream_equals_batch_on_the_prefix_seed(
        text in text_strategy(),
        sizes in prop::collection::vec(1..9usize, 1..6),
    ) {
        // Seed mode re-joins tokens and trims both ends, so only the
        // report (start, kept offset, period, unit) is compared.
        check_stream(&ClampConfig::seed_compat(), &text, &sizes, false);
    }

    #[test]
    fn stream_equals_batch_with_long_periods(
        filler in "[a-e ]{0,40}",
        words in prop::collection::vec("[a-d]{1,3}", 17..40),
        copies in 2..5usize,
        tail in "[a-e ]{0,20}",
        sizes in prop::collection::vec(1..17usize, 1..4),
    ) {
        let text = format!("{filler} {}{tail}", format!("{} ", words.join(" ")).repeat(copies));
        check_stream(&ClampConfig::default(), &text, &sizes, true);
    }
}
