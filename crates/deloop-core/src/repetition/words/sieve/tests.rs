//! The sieve against the exact word detector reading every token.

use super::*;
use crate::repetition::text::healthy::{Lines, Src};
use proptest::prelude::*;

/// `scan` over the whole of `text`, with a fresh line tracker.
fn with_lines<R>(text: &str, scan: impl FnOnce(&mut LineCtx<'_>) -> R) -> R {
    let mut lines = Lines::default();
    let mut lx = LineCtx {
        lines: &mut lines,
        src: Src {
            bytes: text.as_bytes(),
            base: 0,
        },
    };
    scan(&mut lx)
}

fn plain(text: &str, config: &ClampConfig) -> Option<Candidate> {
    with_lines(text, |lx| {
        exact_from(&mut Words::new(config, false), text, 0, lx)
    })
}

fn sieved(text: &str, config: &ClampConfig) -> Option<Candidate> {
    with_lines(text, |lx| scan_words(text, config, lx))
}

/// Spellings with equal exact keys (case, trailing punctuation,
/// folds to ASCII), so a loop can change spelling from copy to copy.
const VARIANTS: [&[&str]; 6] = [
    &["de", "De,", "DE…", "de.", "dE;"],
    &["straße", "STRASSE", "Strasse!"],
    &["so", "ſo", "SO?"],
    &["σοφος", "ΣΟΦΟΣ", "σοφοσ"],
    &["高", "高。"],
    &["the", "The", "THE:"],
];

/// Long texts: filler with a large vocabulary (many quiet tokens)
/// around loops of every period up to 300 tokens, near-loops one
/// copy short, spelling variants, CJK, Unicode white space and
/// structure.
fn text() -> impl Strategy<Value = String> {
    let filler = (1..400usize, any::<u64>()).prop_map(|(n, seed)| {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut out = String::new();
        for _ in 0..n {
            let x = rng.u64(..);
            match x % 16 {
                0 => out.push_str("the "),
                1 => out.push_str("of "),
                2 => out.push_str("é高 "),
                3 => out.push_str("x\u{a0}y "),
                _ => out.push_str(&format!("v{} ", x % 5000)),
            }
        }
        out
    });
    // A part of one more copy (`extra` per mille of it, cut inside a
    // word or not): a long tail when the piece ends the text.
    let unit = (
        1..300usize,
        1..5usize,
        any::<u64>(),
        any::<bool>(),
        0..1000usize,
    )
        .prop_map(|(k, times, seed, vary, extra)| {
            let mut out = String::new();
            let mut last = 0;
            for copy in 0..=times {
                if copy == times {
                    last = out.len();
                }
                let mut rng = fastrand::Rng::with_seed(seed);
                for t in 0..k {
                    let x = rng.u64(..);
                    let v = VARIANTS[(x >> 8) as usize % VARIANTS.len()];
                    if x.is_multiple_of(3) {
                        let pick = if vary { (copy + t) % v.len() } else { 0 };
                        out.push_str(v[pick]);
                    } else {
                        out.push_str(&format!("u{}", x % 997));
                    }
                    out.push(if t % 11 == 10 { '\n' } else { ' ' });
                }
            }
            let mut end = last + (out.len() - last) * extra / 1000;
            while !out.is_char_boundary(end) {
                end -= 1;
            }
            out.truncate(end);
            out
        });
    // Short loops of variant spellings only.
    let spelled = (1..4usize, 10..40usize, any::<u64>()).prop_map(|(k, times, seed)| {
        let mut out = String::new();
        for copy in 0..times {
            for t in 0..k {
                let v = VARIANTS[(seed as usize + t) % VARIANTS.len()];
                // No period in the spellings either.
                let h = (seed ^ (copy * 31 + t) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                out.push_str(v[(h >> 60) as usize % v.len()]);
                out.push(' ');
            }
        }
        out
    });
    let structure = prop::sample::select(vec![
        "\n```\n",
        "\n| a | a | a | a | a | a | a | a | a | a | a | a | a | a | a | a | a | a | a |\n",
        "\n",
        ". . . . . . . . . . . . . . . . . . . . . . . . . .",
        "高高高高高高高高高高高高高高高高高高高高",
    ])
    .prop_map(str::to_string);
    let piece = prop_oneof![6 => filler, 4 => unit, 1 => spelled, 1 => structure];
    prop::collection::vec(piece, 0..30).prop_map(|v| v.concat())
}

fn configs() -> Vec<ClampConfig> {
    let mut short = ClampConfig::default();
    short.words.long_max_period = 40;
    let mut eager = ClampConfig::default();
    eager.words.min_run = 3;
    eager.words.run_per_period = 1;
    eager.words.long_run_per_period = 1;
    let mut small = ClampConfig::default();
    small.words.max_period = 4;
    small.words.long_max_period = 300;
    small.words.ignore_trailing_punctuation = false;
    small.words.split_cjk = false;
    // Long tails need fewer matches than any other loop: the sieve
    // must flag for them.
    let mut tail = ClampConfig::default();
    tail.words.min_run = 60;
    tail.words.long_max_period = 120;
    tail.words.tail_last_copy_percent = 1;
    vec![
        ClampConfig::default(),
        ClampConfig::seed_compat(),
        short,
        eager,
        small,
        tail,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        crate::repetition::test_cases::cases(48)
    ))]

    /// The sieve's scan reports exactly what the exact detector
    /// reports reading every token.
    #[test]
    fn sieve_equals_the_exact_scan(text in text()) {
        for config in configs() {
            prop_assert_eq!(sieved(&text, &config), plain(&text, &config));
        }
    }
}

/// Long tails at the end of the text, every unit length around the
/// shortest long period and every cut of the last copy, with words
/// that keep the last, cut-off token quiet (so a region ends on it):
/// the sieved scan equals the exact one, and the tail rule fires.
#[test]
fn long_tails_sieve_like_the_exact_scan() {
    let filler: String = (0..300).map(|i| format!("f{i} ")).collect();
    let mut tail = ClampConfig::default();
    tail.words.min_run = 60;
    tail.words.long_max_period = 120;
    tail.words.tail_last_copy_percent = 1;
    let mut fired = 0;
    for config in [ClampConfig::default(), tail] {
        for d in 17..40 {
            for name in ["línea", "u"] {
                let unit: String = (0..d).map(|i| format!("{name}{i} ")).collect();
                for times in 1..3 {
                    for cut in (1..unit.len()).step_by(3) {
                        let mut cut = cut;
                        while !unit.is_char_boundary(cut) {
                            cut -= 1;
                        }
                        let text = format!("{filler}{}{}", unit.repeat(times), &unit[..cut]);
                        let got = sieved(&text, &config);
                        assert_eq!(got, plain(&text, &config), "{d} {times} {cut}");
                        fired += usize::from(got.is_some());
                    }
                }
            }
        }
    }
    assert!(fired > 500, "{fired}");
}

/// Floods of one long token (`words/flood.rs`) fire from the third
/// copy, before any shingle repeats: every token length around the rule's
/// shortest, 1 to 5 copies, spelling variants, and a last copy cut off
/// anywhere (the text's end): the sieved scan equals the exact one.
#[test]
fn token_floods_sieve_like_the_exact_scan() {
    let filler: String = (0..300).map(|i| format!("f{i} ")).collect();
    let base = "https://example.com/Path/to/a/resource/that/goes/on/for/a/while/and/more/";
    let mut fired = 0;
    let mut off = ClampConfig::default();
    off.healthy.token_flood_bytes = 0;
    for config in [ClampConfig::default(), off] {
        for len in [11, 12, 13, 14, 23, 24, 25, 40, 70] {
            let token = &base[..len];
            for sep in [" ", "\n", ", "] {
                for times in 1..6 {
                    let copies: Vec<String> = (0..times)
                        .map(|k| match k % 3 {
                            0 => token.to_string(),
                            1 => token.to_uppercase(),
                            _ => format!("{token}."),
                        })
                        .collect();
                    let flood = copies.join(sep);
                    for cut in [0, 1, 12, 23, 24, 25, len - 1] {
                        let text = format!("{filler}{flood}{sep}{}", &token[..cut.min(len)]);
                        let got = sieved(&text, &config);
                        assert_eq!(got, plain(&text, &config), "{len} {sep:?} {times} {cut}");
                        fired += usize::from(got.is_some());
                    }
                }
            }
        }
    }
    assert!(fired > 50, "{fired}");
}

/// The tokens as the exact detector reads them: split at Unicode
/// white space, CJK characters alone (with `split_cjk`); with the
/// string its key hashes (the case fold, trailing punctuation
/// dropped unless that leaves nothing).
fn spec_tokens(text: &str, split_cjk: bool) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, Vec<char>)> = Vec::new();
    let mut open = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            open = false;
            continue;
        }
        let cjk = split_cjk && is_cjk(c);
        if !open || cjk {
            out.push((i, Vec::new()));
        }
        if let Some(last) = out.last_mut() {
            last.1.push(c);
        }
        open = !cjk;
    }
    out.into_iter()
        .map(|(i, cs)| {
            let mut n = cs.len();
            while n > 0 && is_trailing_punct(cs[n - 1]) {
                n -= 1;
            }
            let core = if n == 0 { &cs[..] } else { &cs[..n] };
            let mut folded = String::new();
            for &c in core {
                fold_char(c, |l| folded.push(l));
            }
            (i, folded)
        })
        .collect()
}

fn sieve_tokens(text: &str, config: &ClampConfig) -> Vec<(usize, u64)> {
    let mut sv = Sieve::new(config).expect("the default rules can be sieved");
    let mut i = 0;
    while sv.run::<FLAG>(text, &mut i).is_some() {}
    sv.tables.trace
}

/// Same tokens as the exact detector, and equal key strings give
/// equal sieve keys (both read paths: ASCII words and characters).
fn check_tokens(text: &str, split_cjk: bool) -> Result<(), TestCaseError> {
    let mut config = ClampConfig::default();
    config.words.split_cjk = split_cjk;
    let spec = spec_tokens(text, split_cjk);
    let got = sieve_tokens(text, &config);
    let starts: Vec<usize> = got.iter().map(|t| t.0).collect();
    let want: Vec<usize> = spec.iter().map(|t| t.0).collect();
    prop_assert_eq!(starts, want);
    let mut by_string = std::collections::HashMap::new();
    for ((_, key), (_, string)) in got.iter().zip(&spec) {
        let first = *by_string.entry(string.clone()).or_insert(*key);
        prop_assert_eq!(first, *key, "{:?}", string);
    }
    Ok(())
}

#[test]
fn variant_spellings_share_a_sieve_key() {
    // (`高。` is two tokens when CJK characters are split.)
    let mut whole = ClampConfig::default();
    whole.words.split_cjk = false;
    for group in VARIANTS {
        let text = group.join(" ");
        let keys: Vec<u64> = sieve_tokens(&text, &whole).iter().map(|t| t.1).collect();
        assert_eq!(keys.len(), group.len(), "{text}");
        assert!(keys.iter().all(|&k| k == keys[0]), "{text}");
    }
    // Different words keep different keys.
    let keys = sieve_tokens("de del ed d e", &ClampConfig::default());
    let mut distinct: Vec<u64> = keys.iter().map(|t| t.1).collect();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 5);
}

proptest! {
    #[test]
    fn sieve_tokens_follow_the_exact_rules(
        words in prop::collection::vec(
            "[a-cA-C.,;:!?…。高é ſßΣσς\u{a0}\u{3000}\t\n]{0,12}", 0..40),
        split_cjk in any::<bool>(),
    ) {
        check_tokens(&words.join(" "), split_cjk)?;
    }
}
