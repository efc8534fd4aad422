//! Property tests: the linear-time guards agree with slow, obviously
//! correct references of the seed's rules, and the streaming watcher agrees
//! with the batch guard on every prefix, for any chunking, and so does the
//! guarded stream built on it. Mid-stream the batch guard is asked about
//! an unfinished text (`words.tail_last_copy_percent = 100`: the tail rule
//! applies only where a text ends); after `finish()` about the whole text.

use deloop_core::repetition::{
    clamp, clamp_substring, clamp_words, ClampConfig, GuardedCut, GuardedStream, StreamWatcher,
};
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

/// The batch guard's settings for a text that has not ended: the tail
/// rule off (the watcher cannot know, mid-stream, that the text ends).
fn unfinished(config: &ClampConfig) -> ClampConfig {
    let mut c = config.clone();
    c.words.tail_last_copy_percent = 100;
    c
}

/// Feeds `text` in chunks; the cut, and whether `finish()` gave it.
fn feed_all(
    config: &ClampConfig,
    text: &str,
    sizes: &[usize],
) -> (Option<deloop_core::repetition::StreamCut>, bool) {
    let mut w = StreamWatcher::new(config.clone());
    let bytes = text.as_bytes();
    let mut off = 0;
    let mut i = 0;
    while off < bytes.len() {
        let size = sizes[i % sizes.len()].max(1);
        i += 1;
        let end = (off + size).min(bytes.len());
        if let Some(cut) = w.feed(&bytes[off..end]) {
            return (Some(cut), false);
        }
        off = end;
    }
    (w.finish(), true)
}

fn check_stream(config: &ClampConfig, text: &str, sizes: &[usize], exact_text: bool) {
    let open = unfinished(config);
    match feed_all(config, text, sizes) {
        (Some(cut), at_end) => {
            let d = cut.detected_at;
            assert!(text.is_char_boundary(d));
            assert!(text.is_char_boundary(cut.keep_bytes));
            let prefix = &text[..d];
            // Mid-stream: the first prefix on which the batch guard fires
            // as an unfinished text; at the end: the whole text's verdict.
            let batch = if at_end {
                assert_eq!(d, text.len());
                clamp(text, config)
            } else {
                clamp(prefix, &open)
            };
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
                    !clamp(&text[..b], &open).is_clamped(),
                    "fires earlier at {b}"
                );
            }
        }
        (None, _) => assert!(!clamp(text, config).is_clamped()),
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

    /// Long tails: 2 or 3 copies of a random unit, the last cut at a
    /// random byte (inside a word or not), sometimes followed by other
    /// text; the stream after `finish()` gives the whole text's verdict.
    #[test]
    fn stream_equals_batch_on_long_tails(
        filler in "[a-e ]{0,40}",
        words in prop::collection::vec("[a-d]{1,4}[.,]?", 17..60),
        copies in 2..4usize,
        cut in 0..1000usize,
        after in prop::option::of("[e-h ]{1,20}"),
        sizes in prop::collection::vec(1..17usize, 1..4),
        pct in prop::sample::select(vec![1usize, 34, 50, 66, 90, 100]),
    ) {
        let unit = format!("{} ", words.join(" "));
        let cut = cut * unit.len() / 1000;
        let text = format!(
            "{filler} {}{}{}",
            unit.repeat(copies - 1),
            &unit[..cut],
            after.unwrap_or_default()
        );
        let mut config = ClampConfig::default();
        config.words.tail_last_copy_percent = pct;
        check_stream(&config, &text, &sizes, true);
        check_guarded(&config, &text, &sizes, true, false);
        check_guarded(&config, &text, &sizes, false, true);
    }
}

/// Feeds `text` to a [`GuardedStream`] in chunks of the given byte sizes
/// (chunks split UTF-8 sequences), as bytes or, when every chunk boundary
/// is a character boundary, as text deltas. Returns what was forwarded,
/// the cut, and how many bytes were fed.
fn guarded_all(
    config: &ClampConfig,
    text: &str,
    sizes: &[usize],
    exact: bool,
    as_text: bool,
) -> (Vec<u8>, Option<GuardedCut>, usize, bool) {
    let mut g = GuardedStream::new(config.clone()).exact(exact);
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let (mut off, mut i) = (0, 0);
    while off < bytes.len() {
        let mut end = (off + sizes[i % sizes.len()].max(1)).min(bytes.len());
        i += 1;
        let step = if as_text {
            while !text.is_char_boundary(end) {
                end += 1;
            }
            g.push(&text[off..end])
        } else {
            g.push_bytes(&bytes[off..end]).expect("valid UTF-8")
        };
        off = end;
        out.extend_from_slice(step.bytes);
        if let Some(cut) = step.cut {
            return (out, Some(cut.clone()), off, false);
        }
    }
    let step = g.finish().expect("valid UTF-8");
    out.extend_from_slice(step.bytes);
    (out, step.cut.cloned(), off, true)
}

/// The rules the streaming tests above state, for the guarded stream:
/// the cut is the watcher's (the batch guard's verdict on the prefix where
/// it fired); exact mode forwards exactly the batch output before the
/// marker; default mode forwards everything it received up to the cut's
/// step; `apply_to` gives the guarded text; `saved_chars` counts what the
/// cut discarded.
fn check_guarded(config: &ClampConfig, text: &str, sizes: &[usize], exact: bool, as_text: bool) {
    let (out, cut, fed, at_end) = guarded_all(config, text, sizes, exact, as_text);
    let (watcher_cut, _) = feed_all(config, text, sizes);
    match cut {
        Some(cut) => {
            let keep = cut.cut.keep_bytes;
            let d = cut.cut.detected_at;
            let batch = if at_end {
                clamp(text, config)
            } else {
                clamp(&text[..d], &unfinished(config))
            };
            assert_eq!(batch.report(), Some(&cut.cut.report));
            assert_eq!(cut.detector, cut.cut.report.detector);
            assert_eq!(cut.start, cut.cut.report.start);
            // A byte chunk may end inside a character: it counts as one.
            let rest = &text.as_bytes()[keep..fed];
            assert_eq!(
                cut.saved_chars,
                String::from_utf8_lossy(rest).chars().count()
            );
            if exact {
                assert_eq!(out, &text.as_bytes()[..keep]);
                assert_eq!(cut.late_bytes(), 0);
            } else {
                assert_eq!(out, &text.as_bytes()[..keep.max(cut.forwarded_before)]);
            }
            // Valid up to the cut (a byte chunk may end inside a character
            // after it).
            let mut guarded = String::from_utf8_lossy(&out).into_owned();
            cut.apply_to(&mut guarded);
            assert_eq!(
                guarded,
                format!("{}{}", &text[..keep], cut.cut.replacement_tail)
            );
            // The watcher finds the same cut whatever the chunking.
            assert_eq!(watcher_cut.as_ref(), Some(&cut.cut));
        }
        None => {
            assert_eq!(out, text.as_bytes());
            assert!(!clamp(text, config).is_clamped());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn guarded_stream_follows_the_batch_guard(
        text in text_strategy(),
        sizes in prop::collection::vec(1..9usize, 1..6),
        exact: bool,
        as_text: bool,
    ) {
        check_guarded(&ClampConfig::default(), &text, &sizes, exact, as_text);
    }

    #[test]
    fn guarded_stream_lossy_forwards_invalid_bytes_unchanged(
        text in text_strategy(),
        junk in prop::collection::vec(prop::sample::select(vec![0x80u8, 0xff, 0xc3, 0xe2]), 0..4),
        at in 0..64usize,
        sizes in prop::collection::vec(1..9usize, 1..6),
    ) {
        let mut bytes = text.into_bytes();
        let at = at.min(bytes.len());
        bytes.splice(at..at, junk);
        let mut g = GuardedStream::new(ClampConfig::default()).lossy(true);
        let mut w = StreamWatcher::new(ClampConfig::default());
        let mut out = Vec::new();
        let (mut off, mut i) = (0, 0);
        let mut cut = None;
        while off < bytes.len() && cut.is_none() {
            let end = (off + sizes[i % sizes.len()]).min(bytes.len());
            i += 1;
            let step = g.push_bytes(&bytes[off..end]).expect("lossy never fails");
            out.extend_from_slice(step.bytes);
            cut = step.cut.cloned();
            let theirs = w.feed(&bytes[off..end]);
            prop_assert_eq!(cut.as_ref().map(|c| &c.cut), theirs.as_ref());
            off = end;
        }
        if cut.is_none() {
            let step = g.finish().expect("lossy never fails");
            out.extend_from_slice(step.bytes);
            cut = step.cut.cloned();
            let theirs = w.finish();
            prop_assert_eq!(cut.as_ref().map(|c| &c.cut), theirs.as_ref());
        }
        match cut {
            Some(c) => prop_assert_eq!(&out[..], &bytes[..c.cut.keep_bytes.max(c.forwarded_before)]),
            None => prop_assert_eq!(out, bytes),
        }
    }
}
