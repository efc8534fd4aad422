//! The fast paths (byte loop, pre-filter, lazy line tracking) against
//! the engine fed one character at a time with the filter off.

use super::batch::{scan, scan_pair};
use super::*;
use crate::repetition::{ClampConfig, StreamWatcher};
use proptest::prelude::*;

fn key(c: &Candidate) -> (usize, usize, usize, u64, String) {
    (c.start, c.keep, c.period, c.keep_tokens, c.unit.clone())
}

/// The batch verdicts, one character at a time, filter off.
fn reference_batch(text: &str, config: &ClampConfig) -> (Option<Candidate>, Option<Candidate>) {
    let mut e = Engine::new(config, Mode::Both, false);
    for c in text.chars() {
        e.push_char(c, c.len_utf8());
    }
    e.finish();
    let w = e.words_verdict(false).cloned();
    let s = if w.is_none() {
        e.substring_verdict().cloned()
    } else {
        None
    };
    (w, s)
}

/// The first prefix with a verdict, one character at a time.
fn reference_stream(text: &str, config: &ClampConfig) -> Option<(usize, Candidate)> {
    let mut e = Engine::new(config, Mode::Both, false);
    for c in text.chars() {
        e.push_char(c, c.len_utf8());
        if let Some(v) = e.verdict(true) {
            return Some((e.pos, v.clone()));
        }
    }
    e.finish();
    e.verdict(true).map(|v| (e.pos, v.clone()))
}

/// Long texts: varied filler (so the filter stays quiet) between
/// loops, near-loops and structure, often far apart.
fn long_text() -> impl Strategy<Value = String> {
    let filler = (1..160usize, any::<u64>()).prop_map(|(n, seed)| {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut out = String::new();
        for _ in 0..n {
            let x = rng.u64(..);
            let w = [
                "alpha", "Beta", "gamma,", "délta", "eps", "zeta.", "éta", "θeta", "高", "io",
            ][(x % 10) as usize];
            out.push_str(&format!("{w}{} ", x % 997));
        }
        out
    });
    let unit = "[ab é高\\-|=]{1,6}";
    let piece = prop_oneof![
        4 => filler,
        2 => (unit, 2..16usize).prop_map(|(u, n)| u.repeat(n)),
        1 => (prop::sample::select(vec!["de la ", "the cat ", "Ab ab, ", "| x ", "高 ", "-- "]), 2..30usize)
            .prop_map(|(u, n)| u.repeat(n)),
        1 => prop::sample::select(vec!["\n```\n", "\n| a | a | a |\n", "\n", "          ", "\n\t~~~ ", "----------------------"])
            .prop_map(|s| s.to_string()),
        1 => (1..40usize).prop_map(|n| "word ".repeat(n)),
        // Long periods: a sentence of 14..45 distinct words, 1..5 times.
        1 => (14..45usize, any::<u16>(), 1..5usize, 0..3usize).prop_map(|(n, seed, times, tail)| {
            // Some units end in connectors, or are nothing else, so a
            // cut can fall back to the first copy's start.
            let connectors = crate::repetition::DEFAULT_CONNECTORS;
            let sentence: String = (0..n)
                .map(|i| match tail {
                    1 if i + 4 >= n => format!("{} ", connectors[i % connectors.len()]),
                    2 => format!("{} ", connectors[i % connectors.len()]),
                    _ => format!("w{}x{i} ", seed % 7),
                })
                .collect();
            sentence.repeat(times)
        }),
    ];
    // Shapes of the near-duplicate guard and the floods: counted
    // items, empty markers, long units, counters, code blocks,
    // sentences with a word changed, emoji and escaped newlines.
    let near = (0..8usize, 1..24usize, 0..90usize).prop_map(|(kind, n, k0)| {
        let mut out = String::new();
        for k in k0..k0 + n {
            match kind {
                0 => out.push_str(&format!("{k}. Anise\n")),
                1 => out.push_str(&format!("{k}.\n")),
                2 => out.push_str("resak-kasra-tomo-"),
                3 => out.push_str(&format!("{k}:00 PM: ")),
                4 => out.push_str(if k % 2 == 0 {
                    "```\nfoo(bar)\n"
                } else {
                    "baz qux\n"
                }),
                5 => out.push_str(if k % 3 == 0 {
                    "The unit uses a small fan to keep the air cool and dry. "
                } else {
                    "The unit also uses a small fan to keep the air cool and dry. "
                }),
                6 => out.push_str("😂😂😂😂😂"),
                _ => out.push_str("Network down.\\n"),
            }
        }
        out
    });
    let piece = prop_oneof![6 => piece, 1 => near];
    prop::collection::vec(piece, 0..24).prop_map(|v| v.concat())
}

/// Long tails: varied filler (enough tokens for the stream's sieve
/// to warm up and park its detector), then 2–3 copies of a unit of
/// 17–60 words, the last one cut at a random byte (inside a word or
/// not), sometimes followed by other text.
fn tail_text() -> impl Strategy<Value = String> {
    (
        (0..1200usize, any::<u64>()),
        (17..60usize, any::<u64>(), 2..4usize, 0..1000usize),
        prop::option::of("[xyz ]{1,12}"),
    )
        .prop_map(|((n, seed), (k, useed, copies, cut), after)| {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut out = String::new();
            for _ in 0..n {
                let x = rng.u64(..);
                out.push_str(&format!("f{} ", x % 100_000));
            }
            let unit: String = (0..k)
                .map(|i| {
                    let w = ["the", "Cat", "sat,", "on", "mat."][(useed as usize + i) % 5];
                    format!("{w}{} ", (useed >> (i % 32)) % 7)
                })
                .collect();
            out.push_str(&unit.repeat(copies - 1));
            let mut cut = cut * unit.len() / 1000;
            while !unit.is_char_boundary(cut) {
                cut -= 1;
            }
            out.push_str(&unit[..cut]);
            out.push_str(&after.unwrap_or_default());
            out
        })
}

fn configs() -> Vec<ClampConfig> {
    let mut long = ClampConfig::default();
    long.words.long_max_period = 40;
    // Each guard alone, so neither one's bounds hide the other's.
    let mut words_only = long.clone();
    words_only.substring.enabled = false;
    let mut substring_only = ClampConfig::default();
    substring_only.words.enabled = false;
    substring_only.near.enabled = false;
    let mut near_only = ClampConfig::default();
    near_only.words.enabled = false;
    near_only.substring.enabled = false;
    vec![
        ClampConfig::default(),
        ClampConfig::seed_compat(),
        long,
        words_only,
        substring_only,
        near_only,
    ]
}

proptest! {
    // PROPTEST_CASES raises the count for a longer hunt.
    #![proptest_config(ProptestConfig::with_cases(
        crate::repetition::test_cases::cases(64)
    ))]

    #[test]
    fn batch_fast_paths_equal_the_reference(text in long_text()) {
        for config in configs() {
            let (rw, rs) = reference_batch(&text, &config);
            let (w, s) = scan_pair(&text, &config, Mode::Both);
            prop_assert_eq!(w.as_ref().map(key), rw.as_ref().map(key));
            prop_assert_eq!(s.as_ref().map(key), rs.as_ref().map(key));
            let s_only = scan(&text, &config, Mode::Substring);
            let mut e = Engine::new(&config, Mode::Substring, false);
            for c in text.chars() {
                e.push_char(c, c.len_utf8());
            }
            prop_assert_eq!(s_only.as_ref().map(key), e.substring_verdict().map(key));
        }
    }

    #[test]
    fn stream_fast_paths_equal_the_reference(text in long_text(), size in 1..300usize) {
        for config in configs() {
            let expected = reference_stream(&text, &config);
            let mut w = StreamWatcher::new(config.clone());
            let mut got = None;
            for chunk in text.as_bytes().chunks(size) {
                if let Some(cut) = w.feed(chunk) {
                    got = Some(cut);
                    break;
                }
            }
            if got.is_none() {
                got = w.finish();
            }
            match (expected, got) {
                (None, None) => {}
                (Some((at, c)), Some(cut)) => {
                    prop_assert_eq!(cut.detected_at, at);
                    prop_assert_eq!(
                        (cut.report.start, cut.keep_bytes, cut.report.period, cut.report.unit.clone()),
                        (c.start, c.keep, c.period, c.unit.clone())
                    );
                }
                (e, g) => prop_assert!(false, "reference {:?} vs stream {:?}", e, g),
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        crate::repetition::test_cases::cases(64)
    ))]

    /// What the watcher calls settled is never cut later, and never
    /// runs ahead of the input.
    #[test]
    fn settled_prefix_is_never_cut(text in long_text(), size in 1..300usize) {
        for config in configs() {
            let (seen, cut, _) = watch_settled(&text, size, &config);
            for &(s, position) in &seen {
                prop_assert!(s <= position);
                prop_assert!(text.is_char_boundary(s));
            }
            if let Some(c) = cut {
                for (s, _) in seen {
                    prop_assert!(s <= c.keep_bytes, "settled {} > cut {}", s, c.keep_bytes);
                }
            }
        }
    }
}

/// The settled-prefix rule, and batch against reference and stream,
/// where the tail rule fires at `finish()` (see [`tail_text`]). A
/// stream cut only at the end equals the whole text's batch verdict.
fn check_tail(text: &str, size: usize, config: &ClampConfig) -> Result<(), TestCaseError> {
    let (rw, rs) = reference_batch(text, config);
    let (w, s) = scan_pair(text, config, Mode::Both);
    prop_assert_eq!(w.as_ref().map(key), rw.as_ref().map(key));
    prop_assert_eq!(s.as_ref().map(key), rs.as_ref().map(key));
    let expected = reference_stream(text, config);
    let (seen, cut, at_end) = watch_settled(text, size, config);
    match (&expected, &cut) {
        (None, None) => {}
        (Some((at, c)), Some(cut)) => {
            prop_assert_eq!(cut.detected_at, *at);
            prop_assert_eq!((cut.report.start, cut.keep_bytes), (c.start, c.keep));
        }
        (e, g) => prop_assert!(false, "reference {:?} vs stream {:?}", e, g),
    }
    if at_end {
        let batch = w.or(s);
        prop_assert_eq!(
            cut.as_ref().map(|c| (c.report.start, c.keep_bytes)),
            batch.as_ref().map(|b| (b.start, b.keep))
        );
    }
    if let Some(c) = cut {
        for (s, _) in seen {
            prop_assert!(s <= c.keep_bytes, "settled {} > cut {}", s, c.keep_bytes);
        }
    }
    Ok(())
}

/// Feeds `text` to a watcher in chunks of `size` bytes: `settled()`
/// and `position()` after each chunk that did not cut, the cut (from
/// `feed`, else from `finish`), and whether it came from `finish`.
fn watch_settled(
    text: &str,
    size: usize,
    config: &ClampConfig,
) -> (
    Vec<(usize, usize)>,
    Option<crate::repetition::StreamCut>,
    bool,
) {
    let mut watcher = StreamWatcher::new(config.clone());
    let mut seen = Vec::new();
    for chunk in text.as_bytes().chunks(size) {
        if let Some(c) = watcher.feed(chunk) {
            return (seen, Some(c), false);
        }
        seen.push((watcher.settled(), watcher.position()));
    }
    (seen, watcher.finish(), true)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        crate::repetition::test_cases::cases(64)
    ))]

    #[test]
    fn long_tails_agree_and_keep_the_settled_prefix(
        text in tail_text(),
        size in 1..300usize,
        pct in prop::sample::select(vec![1usize, 50, 66, 100]),
    ) {
        for mut config in configs() {
            config.words.tail_last_copy_percent = pct;
            check_tail(&text, size, &config)?;
        }
    }
}

/// The tail rule fires where [`tail_text`]'s cases are meant to: a
/// long filler (the stream's sieve parks its detector on the quiet
/// last token) and a last word cut off mid-word.
#[test]
fn a_long_tail_after_a_long_filler_fires_in_batch_and_stream() {
    let filler: String = (0..1500).map(|i| format!("f{i} ")).collect();
    let mut config = ClampConfig::default();
    config.near.enabled = false;
    // The sieve's filter may call the cut-off word's shingle seen (a
    // collision), so several words and cuts.
    for name in ["word", "item", "línea"] {
        let unit: String = (0..30).map(|i| format!("{name}{i} ")).collect();
        let next = unit.find(&format!("{name}23")).expect("in the unit");
        for len in 1..name.len() + 2 {
            let mut cut = next + len;
            while !unit.is_char_boundary(cut) {
                cut += 1;
            }
            let text = format!("{filler}{unit}{unit}{}", &unit[..cut]);
            let (w, _) = scan_pair(&text, &config, Mode::Both);
            let w = w.expect("the tail fires");
            assert_eq!((w.period, w.keep), (30, filler.len() + unit.len() - 1));
            for size in [1, 5, 64, 4096] {
                let mut watcher = StreamWatcher::new(config.clone());
                for chunk in text.as_bytes().chunks(size) {
                    assert!(watcher.feed(chunk).is_none());
                }
                let cut = watcher.finish().expect("finish cuts");
                assert_eq!((cut.report.start, cut.keep_bytes), (w.start, w.keep));
            }
            if let Err(e) = check_tail(&text, 7, &config) {
                panic!("{e}");
            }
        }
    }
}

/// Texts with invalid UTF-8 sprinkled in (as U+FFFD of their length).
fn long_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        6 => long_text().prop_map(String::into_bytes),
        1 => prop::collection::vec(0x80u8..=0xff, 1..4),
        1 => prop::sample::select(vec![
            b"\xe9\xab".to_vec(),
            b"\xf0\x9f\x98".to_vec(),
            b"ab\xffab\xffab\xffab\xffab\xffab\xffab\xffab\xffab\xffab\xff".to_vec(),
        ]),
    ];
    prop::collection::vec(piece, 0..6).prop_map(|v| v.concat())
}

fn watch(config: &ClampConfig, bytes: &[u8], size: usize) -> Option<crate::repetition::StreamCut> {
    let mut w = StreamWatcher::new(config.clone());
    for chunk in bytes.chunks(size.max(1)) {
        if let Some(c) = w.feed(chunk) {
            return Some(c);
        }
    }
    w.finish()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        crate::repetition::test_cases::cases(64)
    ))]

    /// With invalid bytes anywhere (the watcher then leaves the filter
    /// for good), any chunking gives the verdict of one whole chunk,
    /// and the one-character-at-a-time reference agrees.
    #[test]
    fn invalid_utf8_streams_agree_whatever_the_chunking(bytes in long_bytes(), size in 1..200usize) {
        for config in configs() {
            let whole = watch(&config, &bytes, bytes.len());
            let chunked = watch(&config, &bytes, size);
            prop_assert_eq!(&whole, &chunked);
            // Reference: decode as the watcher does, one char at a time.
            let mut e = Engine::new(&config, Mode::Both, false);
            let mut rest: &[u8] = &bytes;
            let mut expected = None;
            'outer: while !rest.is_empty() {
                let (valid, bad) = match std::str::from_utf8(rest) {
                    Ok(s) => (s, 0),
                    Err(err) => (
                        std::str::from_utf8(&rest[..err.valid_up_to()]).unwrap_or_default(),
                        err.error_len().unwrap_or(rest.len() - err.valid_up_to()),
                    ),
                };
                for c in valid.chars() {
                    e.push_char(c, c.len_utf8());
                    if let Some(v) = e.verdict(true) {
                        expected = Some((e.pos, v.clone()));
                        break 'outer;
                    }
                }
                if bad > 0 {
                    e.push_char('\u{FFFD}', bad);
                    if let Some(v) = e.verdict(true) {
                        expected = Some((e.pos, v.clone()));
                        break 'outer;
                    }
                }
                rest = &rest[valid.len() + bad..];
            }
            if expected.is_none() {
                e.finish();
                expected = e.verdict(true).map(|v| (e.pos, v.clone()));
            }
            match (expected, whole) {
                (None, None) => {}
                (Some((at, c)), Some(cut)) => {
                    prop_assert_eq!(cut.detected_at, at);
                    prop_assert_eq!((cut.report.start, cut.keep_bytes), (c.start, c.keep));
                }
                (e, g) => prop_assert!(false, "reference {:?} vs stream {:?}", e, g),
            }
        }
    }
}

/// Regression: an invalid byte (U+FFFD, three bytes of preview for one
/// byte of input) at the end of a 22-byte token overran the preview.
/// A stretch longer than the sieve's history cap with no token
/// boundary hands the stream to the exact detector for good (memory
/// stays bounded), and the verdict is still the reference's.
#[test]
fn a_huge_token_ends_the_stream_sieve() {
    let mut config = ClampConfig::default();
    config.substring.enabled = false;
    // `word0 word1 …` is a counter loop for the near-duplicate guard.
    config.near.enabled = false;
    let mut text: String = (0..400).map(|i| format!("word{i} ")).collect();
    text.push_str(&"x".repeat(300 * 1024));
    text.push(' ');
    text.push_str(&"then the same three words ".repeat(12));
    let mut e = Engine::new(&config, Mode::Both, true);
    assert!(e.stream.is_some());
    let mut fired = None;
    for chunk in text.as_bytes().chunks(4096) {
        let s = std::str::from_utf8(chunk).expect("ASCII");
        if e.feed_str(s) {
            fired = Some(e.pos);
            break;
        }
        if let Some(st) = &e.stream {
            assert!(!st.over_cap());
        }
    }
    assert!(e.stream.is_none(), "the sieve gave up");
    let expected = reference_stream(&text, &config).map(|(at, _)| at);
    assert!(expected.is_some());
    assert_eq!(fired, expected);
}

/// With a minimum length longer than the sieve's warm-up, the first
/// exact detector runs until the stream is that long: a loop that
/// starts earlier is reported where the reference reports it (at the
/// minimum length), not where it starts.
#[test]
fn a_long_minimum_length_keeps_the_first_detector() {
    let mut config = ClampConfig::default();
    config.substring.enabled = false;
    config.words.min_chars = 20_000;
    let mut text: String = (0..1200).map(|i| format!("t{i} ")).collect();
    text.push_str(&"de la casa grande ".repeat(1500));
    let expected = reference_stream(&text, &config).map(|(at, _)| at);
    assert!(expected.is_some_and(|at| at >= 20_000));
    let mut w = StreamWatcher::new(config);
    let mut got = None;
    for chunk in text.as_bytes().chunks(64) {
        if let Some(cut) = w.feed(chunk) {
            got = Some(cut.detected_at);
            break;
        }
    }
    assert_eq!(got, expected);
}

#[test]
fn invalid_byte_after_a_long_token_does_not_panic() {
    for n in 20..26 {
        let mut bytes = b"abcdefghijklmnopqrstuvwxyz"[..n].to_vec();
        bytes.extend_from_slice(b"\xff\xfe more words here");
        let mut w = StreamWatcher::new(ClampConfig::default());
        assert!(w.feed(&bytes).is_none());
        assert!(w.finish().is_none());
    }
}

/// A long unit made only of connectors is cut back to its first
/// copy's start: before the shingles adopt its period, only the run
/// going on at that distance says how far back the cut can fall.
#[test]
fn settled_accounts_for_long_runs_not_yet_adopted() {
    let mut config = ClampConfig::default();
    config.words.long_max_period = 40;
    // The substring guard's margin would hide the word guard's bound.
    config.substring.enabled = false;
    let connectors = crate::repetition::DEFAULT_CONNECTORS;
    let unit: String = (0..38).map(|i| format!("{} ", connectors[i])).collect();
    let intro: String = (0..60).map(|i| format!("w{i} ")).collect();
    let text = format!("{intro}{}", unit.repeat(4));
    let mut w = StreamWatcher::new(config);
    let mut seen = Vec::new();
    let mut cut = None;
    for b in text.as_bytes().chunks(1) {
        if let Some(c) = w.feed(b) {
            cut = Some(c);
            break;
        }
        seen.push(w.settled());
    }
    let cut = cut
        .or_else(|| w.finish())
        .expect("the connector loop is cut");
    assert_eq!(cut.report.period, 38);
    for s in seen {
        assert!(s <= cut.keep_bytes, "settled {s} > cut {}", cut.keep_bytes);
    }
}

/// Loops far apart, after long clean stretches: the filter's regions
/// open and close several times.
#[test]
fn distant_regions() {
    let clean: String = (0..400).map(|i| format!("w{i} ")).collect();
    let text = format!(
        "{clean}| -- | -- | -- | -- |\n{clean}```\n0000000000000000000000000\n```\n{clean}xy{}{clean}",
        "ab".repeat(30)
    );
    for config in configs() {
        let (rw, rs) = reference_batch(&text, &config);
        let (w, s) = scan_pair(&text, &config, Mode::Both);
        assert_eq!(w.as_ref().map(key), rw.as_ref().map(key));
        assert_eq!(s.as_ref().map(key), rs.as_ref().map(key));
    }
}

/// Regression: a long connector-free loop after short filler, read one
/// character at a time, gives the batch scan's word verdict.
#[test]
fn char_by_char_reference_equals_the_batch_scan() {
    let mut text = String::from("Beta339 zeta.989 θeta742 zeta.354 ");
    for _ in 0..3 {
        for k in 0..39 {
            text.push_str(&format!("w0x{k} "));
        }
    }
    let config = ClampConfig::default();
    let mut e = Engine::new(&config, Mode::Both, false);
    for c in text.chars() {
        e.push_char(c, c.len_utf8());
    }
    e.finish();
    let r = e.words_verdict(false).cloned();
    let (w, _) = scan_pair(&text, &config, Mode::Both);
    let mut e2 = Engine::new(&config, Mode::Both, true);
    e2.feed_str(&text);
    e2.finish();
    let r2 = e2.words_verdict(false).cloned();
    assert_eq!(r, w, "stream-feed: {:?}", r2);
}
