//! The sieve against [`Near`] reading every character, batch and stream.

use super::stream::STREAM_CAP;
use super::*;
use proptest::prelude::*;

/// [`Near`] reading every character: the reference.
fn exact(text: &str, config: &ClampConfig) -> Option<Candidate> {
    let mut n = Near::new(config);
    for (i, c) in text.char_indices() {
        n.push(c, i, c.len_utf8());
        if n.best.is_some() {
            break;
        }
    }
    n.best
}

/// Tokens of many lengths, marked and not, odd Unicode, escapes.
const WORDS: [&str; 40] = [
    "the",
    "of",
    "a",
    "cell",
    "CELLS",
    "protein.",
    "was",
    "tumour,",
    "growth!",
    "why?",
    "x",
    "(n",
    "=",
    "p<0.05)",
    "12",
    "3.5",
    "1.",
    "2)",
    "a1b2",
    "#",
    "#3",
    "-",
    "|",
    "\\",
    "\\x",
    "é",
    "İstanbul",
    "STRASSE",
    "straße",
    "\u{212a}elvin",
    "kelvin",
    "高",
    "。",
    "ｂ",
    "e\u{301}",
    "\u{FFFD}",
    "immunohistochemistry",
    "e.g.",
    "etc.)",
    "😂",
];
const SPACES: [&str; 12] = [
    " ", " ", " ", " ", "  ", "\n", "\n\n", "\t", "\r\n", "\u{a0}", "\u{2028}", "\\n",
];

fn prose() -> impl Strategy<Value = String> {
    prop::collection::vec((0..WORDS.len(), 0..SPACES.len()), 1..160).prop_map(|v| {
        v.into_iter()
            .map(|(w, s)| format!("{}{}", WORDS[w], SPACES[s]))
            .collect()
    })
}

/// Sentences of similar lengths (runs the sieve follows), some
/// near-duplicates (a word changed, one or two added), two sentences
/// of different lengths alternating, some unrelated.
fn sentences() -> impl Strategy<Value = String> {
    (1..12usize, 6..14usize, 0..4usize, any::<u64>(), 0..4usize).prop_map(
        |(copies, len, spread, seed, how)| {
            let mut out = String::new();
            let mut rng = fastrand::Rng::with_seed(seed);
            for c in 0..copies {
                let n = match how {
                    3 if c % 2 == 1 => 2 * len + spread,
                    _ => len + (c * spread) % 3,
                };
                for t in 0..n {
                    let x = rng.u64(..);
                    let w = match how {
                        // Near-duplicates: one word changes (or
                        // only the length does).
                        0 if t == n / 2 && spread < 2 => format!("w{}", x % 7),
                        0 => format!("word{t}"),
                        // Two sentences alternating.
                        1 | 3 => format!("s{}t{t}", c % 2),
                        _ => format!("v{}", x % 50),
                    };
                    out.push_str(&w);
                    out.push(' ');
                }
                out.pop();
                out.push_str(match rng.u64(..) % 5 {
                    0 => ".\n",
                    1 if c == 0 => ".\n",
                    2 => "? ",
                    _ => ". ",
                });
            }
            out
        },
    )
}

/// Counted list items, empty markers, counters, long units, code
/// blocks, tables: the other rules, often one copy short of firing.
fn shapes() -> impl Strategy<Value = String> {
    (0..18usize, 1..24usize, 0..90usize, 1..9usize).prop_map(|(kind, n, k0, p)| {
        let mut out = String::new();
        for k in k0..k0 + n {
            match kind {
                0 => out.push_str(&format!("{k}. Anise seed\n")),
                1 => out.push_str(&format!("{k}.\n")),
                2 => out.push_str(&format!("{}) item {}\n", k, k % p)),
                3 => out.push_str(&format!("{k}:00 PM: ")),
                4 => {
                    for t in 0..p {
                        out.push_str(&format!("tok{t} "));
                    }
                    out.push_str(&format!("n{k} "));
                }
                5 => out.push_str("resak-kasra-tomo-"),
                6 => out.push_str(if k % 3 == 0 {
                    "```\nfoo(bar)\n"
                } else {
                    "baz qux\n"
                }),
                7 => out.push_str(&format!("| {k} | a | a |\n")),
                8 => out.push_str(&format!("step {k}\\nNetwork down.\\n")),
                9 => out.push_str(&format!("高级牛肉{k}。")),
                // A counter one token per line.
                10 => out.push_str(&format!("tok\nn{k}\n")),
                // Numbered near-duplicate sentences (not a list loop).
                11 => out.push_str(&format!(
                    "{k}. The fridge {} uses a small fan to keep it cool.\n",
                    if k % 2 == 0 { "also" } else { "still" }
                )),
                // A list that starts again every `p + 2` items (the
                // restarted-list rule), bodies too long for the
                // counter rule's periods and of lengths too far
                // apart for the sentence rule's.
                12 => {
                    let i = k % (p + 2) + 1;
                    let tail = "and so on ".repeat(i % 3 * 3);
                    out.push_str(&format!(
                        "{i}. item number {i} is long enough for nine tokens {tail}\n"
                    ));
                }
                // Lines going round 1 to 4 values, short lines between.
                13 => out.push_str(&format!(
                    "the line {} of words\n</code>\n",
                    ["alpha", "beta gamma", "delta", "epsilon"][(k * 7) % (p % 4 + 1)]
                )),
                // List items going round a few bodies of different
                // lengths.
                14 => out.push_str(&format!(
                    "{k}. add the {}\n",
                    ["salt now", "flour", "dry yeast here", "sugar"][(k * 5) % (p % 4 + 1)]
                )),
                // Codes going round a few values (the few-codes
                // rule), with no fixed period; hex codes for `p` odd.
                15 => {
                    let codes = if p % 2 == 0 {
                        ["802.11a,", "802.11b,", "802.11g,", "802.11a+,", "5GHz,"]
                    } else {
                        ["0x1f", "0xa0", "0x00", "0xff", "0x0b"]
                    };
                    out.push_str(codes[(k * k + k0) % (p % 5 + 1)]);
                    // Lines of one to three codes, so restart points
                    // (line starts) fall inside a run.
                    out.push(if (k + k0) % 3 == 0 { '\n' } else { ' ' });
                }
                // The same, one code per line, each a sentence: the
                // window spans many lines and segments.
                16 => {
                    let codes = ["802.11a", "802.11b", "802.11g", "5GHz", "802.11n"];
                    out.push_str(codes[(k * k + k0) % (p % 5 + 1)]);
                    out.push_str(".\n");
                }
                // A unit of exactly `p + 8` characters, `n` times.
                _ => {
                    let unit: String = (0..p + 8)
                        .map(|i| char::from(b'a' + (i as u8 * 7 + k0 as u8) % 26))
                        .collect();
                    out.push(' ');
                    out.push_str(&unit.repeat(n));
                    out.push(' ');
                    break;
                }
            }
        }
        out
    })
}

fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![4 => prose(), 3 => sentences(), 3 => shapes()];
    prop::collection::vec(piece, 1..24).prop_map(|v| v.concat())
}

/// Codes whose last value was last seen 9 or more tokens back: every
/// counter period misses at the flagged token, so the counter rule's
/// restart point is 8 tokens back while the window starts 15 back;
/// only the few-codes restart point lets the region see the window
/// (a restart at the later point fails this test).
#[test]
fn a_codes_window_older_than_the_counter_restart_is_seen() {
    let [a, b, c, d] = ["802.11a.\n", "802.11b.\n", "802.11g.\n", "5GHz.\n"];
    let codes = [a, d, b, d, c, a, b, c, a, a, b, c, b, a, c, d];
    let text = format!("Standards:\n{}", codes.concat());
    for config in configs() {
        assert_eq!(scan(&text, &config), exact(&text, &config));
    }
    let only = configs().pop().expect("the few-codes configuration");
    assert!(exact(&text, &only).is_some());
}

/// The default, and thresholds low enough that the sieve flags often
/// and regions open and close many times in one text.
fn configs() -> Vec<ClampConfig> {
    let mut low = ClampConfig::default();
    let n = &mut low.near;
    n.list_items = 3;
    n.empty_items = 3;
    n.list_copy_items = 2;
    n.token_window = 6;
    n.token_window_values = 3;
    n.sentence_copies = 3;
    n.sentence_min_tokens = 3;
    n.masked_min_run = 8;
    n.masked_run_per_period = 2;
    n.chain_min_unit = 5;
    n.chain_copies = 3;
    n.code_block_copies = 2;
    let mut high = ClampConfig::default();
    let n = &mut high.near;
    n.list_items = 9;
    n.list_copy_items = 12;
    n.token_window_values = 2;
    n.sentence_copies = 9;
    n.sentence_max_edits = 4;
    n.masked_min_run = 60;
    let mut sentences = ClampConfig::default();
    let n = &mut sentences.near;
    n.list_items = 50;
    n.empty_items = 50;
    n.sentence_copies = 3;
    n.chain_min_unit = 9;
    n.chain_copies = 2;
    // Only the few-codes rule (and the code-block rule) can fire, so
    // no other rule's flag or restart point covers its own.
    let mut codes = ClampConfig::default();
    let n = &mut codes.near;
    n.list_items = 10_000;
    n.empty_items = 10_000;
    n.list_copy_items = 0;
    n.line_window = 0;
    n.sentence_copies = 10_000;
    n.masked_min_run = 100_000;
    n.chain_min_unit = 64;
    vec![ClampConfig::default(), low, high, sentences, codes]
}

/// The exact detector over a stream: where it first fires (the
/// offset just after that character) and what it found.
fn exact_stream(pieces: &[(String, usize)], config: &ClampConfig) -> Option<(usize, Candidate)> {
    let mut n = Near::new(config);
    let mut pos = 0;
    for (text, bad) in pieces {
        for c in text.chars() {
            n.push(c, pos, c.len_utf8());
            pos += c.len_utf8();
            if let Some(b) = &n.best {
                return Some((pos, b.clone()));
            }
        }
        if *bad > 0 {
            n.push('\u{FFFD}', pos, *bad);
            pos += bad;
            if let Some(b) = &n.best {
                return Some((pos, b.clone()));
            }
        }
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        crate::repetition::test_cases::cases(256)
    ))]

    /// The sieved scan reports what the exact detector reading every
    /// character reports.
    #[test]
    fn sieved_scan_equals_the_exact_scan(text in text()) {
        for config in configs() {
            prop_assert_eq!(scan(&text, &config), exact(&text, &config));
        }
    }

    /// The sieved stream, in any chunking and with invalid bytes (as
    /// U+FFFD of their length) between pieces, fires after the same
    /// character as the exact detector, with the same loop, and no
    /// offset it calls settled is ever cut.
    #[test]
    fn sieved_stream_equals_the_exact_stream(
        pieces in prop::collection::vec((text(), prop_oneof![8 => Just(0usize), 1 => 1..4usize]), 1..4),
        size in 1..300usize,
    ) {
        for config in configs() {
            let expected = exact_stream(&pieces, &config);
            let mut w = NearStream::new(&config, true);
            let mut pos = 0;
            let mut got = None;
            let mut settled = Vec::new();
            'pieces: for (text, bad) in &pieces {
                let mut rest = text.as_str();
                while !rest.is_empty() {
                    let mut cut = size.min(rest.len());
                    while !rest.is_char_boundary(cut) {
                        cut += 1;
                    }
                    let (chunk, tail) = rest.split_at(cut);
                    if let Some(k) = w.feed(chunk, pos) {
                        got = w.best().cloned().map(|b| (pos + k, b));
                        break 'pieces;
                    }
                    pos += chunk.len();
                    let s = w.settled(pos);
                    prop_assert!(s <= pos);
                    settled.push(s);
                    rest = tail;
                }
                if *bad > 0 {
                    w.push('\u{FFFD}', pos, *bad);
                    pos += bad;
                    if let Some(b) = w.best() {
                        got = Some((pos, b.clone()));
                        break;
                    }
                    settled.push(w.settled(pos));
                }
            }
            prop_assert_eq!(&got, &expected);
            if let Some((_, b)) = &got {
                for s in settled {
                    prop_assert!(s <= b.keep, "settled {} past the cut {}", s, b.keep);
                }
            }
        }
    }
}

#[cfg(test)]
mod edge_tests {
    use super::*;

    fn both(text: &str, config: &ClampConfig) -> Option<Candidate> {
        let mut n = Near::new(config);
        n.feed(text, 0);
        let sieved = scan(text, config);
        assert_eq!(sieved, n.best, "{text:?}");
        sieved
    }

    /// A long unit whose fourth copy ends the span: it fires on the
    /// span's last character, so the sieve must flag spans of exactly
    /// `chain_copies · chain_min_unit` bytes.
    #[test]
    fn a_long_unit_at_the_threshold() {
        let text = format!(
            "Some prose here. {} and more prose after it.",
            "abcdefghijklm".repeat(4)
        );
        assert!(both(&text, &ClampConfig::default()).is_some());
    }

    /// Near-duplicate sentences, each two words longer than the one
    /// before (so only the distance-1 comparison allows them).
    #[test]
    fn sentences_two_words_longer() {
        let mut text = String::from("An opening line of prose.\n");
        for k in 0..6 {
            let extra = " very".repeat(2 * k);
            text.push_str(&format!(
                "The quick brown fox{extra} jumps over the lazy dog again. "
            ));
        }
        text.push_str("Then something else entirely, much longer than any sentence before it was.");
        assert!(both(&text, &ClampConfig::default()).is_some());
    }
}

#[cfg(test)]
mod stream_tests {
    use super::*;

    fn exact_fire(text: &str, config: &ClampConfig) -> Option<(usize, Candidate)> {
        let mut n = Near::new(config);
        for (i, c) in text.char_indices() {
            n.push(c, i, c.len_utf8());
            if let Some(b) = &n.best {
                return Some((i + c.len_utf8(), b.clone()));
            }
        }
        None
    }

    fn stream_fire(
        text: &str,
        config: &ClampConfig,
        size: usize,
    ) -> (Option<(usize, Candidate)>, NearStream) {
        let mut w = NearStream::new(config, true);
        let mut pos = 0;
        let mut rest = text;
        while !rest.is_empty() {
            let mut cut = size.min(rest.len());
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            let (chunk, tail) = rest.split_at(cut);
            if let Some(k) = w.feed(chunk, pos) {
                let best = w.best().cloned();
                return (best.map(|b| (pos + k, b)), w);
            }
            pos += chunk.len();
            rest = tail;
        }
        (None, w)
    }

    /// A line longer than the kept stream's cap (the restart point stays
    /// at its start) hands the rest of the stream to the exact detector:
    /// memory stays bounded, and the verdict is still the exact one.
    #[test]
    fn a_long_line_hands_the_stream_to_the_exact_detector() {
        let config = ClampConfig::default();
        // Words without digits or sentence ends: nothing flags, so the
        // restart point stays at the line's start.
        let syllables = ["ka", "lo", "mi", "ren", "tu", "sa", "vo", "qui"];
        let mut text = String::new();
        let mut rng = fastrand::Rng::with_seed(12345);
        while text.len() <= STREAM_CAP + 64 * 1024 {
            let x = rng.u64(..);
            let n = 1 + (x % 3) as usize;
            for k in 0..n {
                text.push_str(syllables[((x >> (8 * k)) % 8) as usize]);
            }
            text.push(' ');
        }
        assert!(text.len() > STREAM_CAP);
        for _ in 0..8 {
            text.push_str("The unit also uses a small fan to keep the air cool and dry. ");
        }
        let expected = exact_fire(&text, &config);
        assert!(expected.is_some());
        let (got, w) = stream_fire(&text, &config, 4096);
        assert_eq!(got, expected);
        assert!(w.sieve.is_none(), "the stream is read exactly for good");
    }

    /// Lines going round a few values whose window closes in the
    /// stream's unread rest (`\n` escapes inside one token): the exact
    /// detector reads that rest before the sieve flags anything, so it
    /// must start where the window does, eight lines before the counter
    /// and sentence rules' restart point.
    #[test]
    fn a_window_closing_in_the_unread_rest() {
        let config = ClampConfig::default();
        let mut text = String::from("Some words to begin with here.\n");
        for _ in 0..4 {
            text.push_str("one two three\nfour five six seven\n");
        }
        text.push_str("xa\\nyb\\nxa\\nyb\\nzz more words\n");
        let expected = exact_fire(&text, &config);
        assert!(expected.is_some(), "the window fires");
        for size in [8, 16, 64, 120, 140, text.len()] {
            let (got, _) = stream_fire(&text, &config, size);
            assert_eq!(got, expected, "chunks of {size}");
        }
        assert_eq!(scan(&text, &config), expected.map(|e| e.1));
    }

    /// Hostile inputs: nothing but white space, NULs, control bytes,
    /// invalid bytes, one huge token, escapes and marks at every offset.
    #[test]
    fn hostile_inputs_do_not_panic_and_agree() {
        let config = ClampConfig::default();
        let mut texts = vec![
            String::new(),
            " ".repeat(3000),
            "\n".repeat(3000),
            "\0".repeat(3000),
            "\u{1}\u{2}\u{7f} ".repeat(1000),
            "x".repeat(20_000),
            "\\".repeat(2000),
            "\\n".repeat(2000),
            "#".repeat(2000),
            "9".repeat(2000),
            ". ".repeat(2000),
            "1.\n".repeat(1000),
            "```\n".repeat(1000),
            "| a |\n".repeat(1000),
            "\u{a0}\u{2028}\u{3000}".repeat(1000),
            "高。".repeat(1000),
        ];
        texts.push(format!("{}{}", "word ".repeat(500), "\u{FFFD}".repeat(500)));
        for text in &texts {
            let e = exact_fire(text, &config);
            assert_eq!(
                scan(text, &config),
                e.as_ref().map(|(_, b)| b.clone()),
                "{:?}",
                &text[..text.len().min(40)]
            );
            for size in [1, 7, 4096] {
                assert_eq!(
                    stream_fire(text, &config, size).0,
                    e,
                    "{:?} {size}",
                    &text[..text.len().min(40)]
                );
            }
        }
        // Invalid bytes only, pushed as replacement characters.
        let mut w = NearStream::new(&config, true);
        for k in 0..5000 {
            w.push('\u{FFFD}', k, 1);
        }
        assert!(w.best().is_none());
        assert!(w.settled(5000) <= 5000);
    }
}

#[cfg(test)]
mod key_tests {
    use super::*;

    /// The word-at-a-time masked key equals [`Near`]'s, character by
    /// character, for ASCII tokens of every shape.
    #[test]
    fn masked_keys_equal_the_detector_keys() {
        let tokens = [
            "a1",
            "A12b",
            "x9y99z999",
            "28:00",
            "29:00",
            "p<0.05)",
            "1234567890",
            "#",
            "#1",
            "abcdefgh1",
            "abcdefghijklmnop12qrstuvwx",
            "v1.2.3-RC4",
            "9",
            "99.",
            "e1e2e3e4e5e6e7e8",
        ];
        for t in tokens {
            // Near's masked key of `t`, as `Near::token_char` builds it.
            let mut n = Key::default();
            let mut in_digits = false;
            let mut digits = false;
            let mut raw = Key::default();
            for c in t.chars() {
                let l = fold(c);
                let d = c.is_ascii_digit();
                if d && !digits {
                    digits = true;
                    n = raw;
                }
                raw.push(l);
                if d {
                    if !in_digits {
                        n.push(u32::from(b'#'));
                    }
                } else if digits {
                    n.push(l);
                }
                in_digits = d;
            }
            let expected = if digits { n.value() } else { raw.value() };
            assert_eq!(masked_key(t.as_bytes()), expected, "{t}");
        }
    }
}
