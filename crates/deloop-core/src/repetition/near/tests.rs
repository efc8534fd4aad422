//! The near-duplicate detector's rules and its fast path.

use super::*;
use crate::repetition::near::sentences::within_edits;
use proptest::prelude::*;

/// A run of sequential ids changes every token: content, not a loop.
/// A counter with a repeating word beside it is a loop.
#[test]
fn sequential_ids_pass_and_counted_units_fire() {
    let config = ClampConfig::default();
    let ids: String = (0..200).map(|i| format!("palabra{i} ")).collect();
    assert!(!crate::repetition::clamp_near(&ids, &config).is_clamped());
    let counted: String = (0..200).map(|i| format!("{i}:00 PM: ")).collect();
    assert!(crate::repetition::clamp_near(&counted, &config).is_clamped());
}

/// Pushing ASCII bytes one at a time or as words of any split gives
/// the same key, before and after another character.
#[test]
fn key_words_equal_bytes() {
    let text = b"abcdefghijklmnopqrstuvwxyz0123456789-_.,;:!?()[]{}";
    for len in 0..text.len() {
        for split in 0..=len {
            let mut one = Key::default();
            let mut words = Key::default();
            for key in [&mut one, &mut words] {
                key.push(u32::from(b'q'));
                key.push(0xe9);
            }
            for &c in &text[..len] {
                one.push(u32::from(c));
            }
            for part in [&text[..split], &text[split..len]] {
                for chunk in part.chunks(8) {
                    let k = chunk.len();
                    let w = load8(chunk, 0) & (u64::MAX >> (64 - 8 * k));
                    words.push_word(w, k as u32);
                }
            }
            assert_eq!(one.value(), words.value(), "{len} {split}");
            one.push(0x3b1);
            words.push(0x3b1);
            assert_eq!(one.value(), words.value(), "{len} {split}");
        }
    }
}

/// Texts for the fast path: prose in mixed case, digits, list items,
/// near-duplicate sentences, counters, long runs without white
/// space, fences, table rows, JSON `\n`, CJK and odd Unicode, with
/// loops and near-loops among healthy stretches.
fn near_text() -> impl Strategy<Value = Vec<(String, usize)>> {
    let word = prop::sample::select(vec![
        "the",
        "The",
        "of",
        "cell",
        "CELLS",
        "protein.",
        "was",
        "tumour,",
        "Growth!",
        "why?",
        "a",
        "x",
        "(n",
        "=",
        "p<0.05)",
        "12",
        "3.5",
        "1.",
        "2)",
        "76.",
        "a1b2",
        "#",
        "##",
        "-",
        "--",
        "|",
        "\\",
        "\\n",
        "\\x",
        "é",
        "İstanbul",
        "STRASSE",
        "straße",
        "K",
        "高",
        "级",
        "。",
        "！",
        "ａｂ",
        "\u{301}",
        "\u{FFFD}",
        "\0",
        "immunohistochemistry",
        "https://host/",
        "resak-kasra-tomo-",
        "0x00ff",
        "AAAAAAAAAAAAAAAAAAAA",
        "😂",
    ]);
    let space = prop::sample::select(vec![
        " ", " ", " ", " ", "  ", "\n", "\n\n", "\t", "\r\n", "\u{b}", "\u{c}", "\u{a0}",
        "\u{2028}", "\u{3000}",
    ]);
    let prose = prop::collection::vec((word.clone(), space), 1..120).prop_map(|v| {
        v.into_iter()
            .map(|(w, s)| format!("{w}{s}"))
            .collect::<String>()
    });
    let unit = prop::collection::vec(word, 1..12).prop_map(|v| v.join(" "));
    let looped = (unit, 2..12usize, 0..3usize).prop_map(|(u, n, how)| {
        (0..n)
            .map(|k| match how {
                0 => format!("{u} "),
                1 => format!("{k}. {u}\n"),
                _ => format!("{u} {k}:00 word{} ", k % 3),
            })
            .collect::<String>()
    });
    let shape = prop::sample::select(vec![
        "\n```\n",
        "\n~~~\n",
        "\n| a | b |\n",
        "\n",
        "The refrigerator uses a small fan to keep it cool. ",
        "The refrigerator also uses a small fan to keep it cool. ",
        "assistant57 ",
        "/api/v1/users",
        "_advanced_settings",
        "\\n",
        "0123456789abcdef0123",
    ])
    .prop_map(str::to_string);
    // Long units without white space, after a word or glued on.
    let chain = ("[a-zA-Z/_-]{13,30}", 3..6usize, any::<bool>())
        .prop_map(|(u, n, glued)| format!("{}{}", if glued { "x" } else { " " }, u.repeat(n)));
    let piece = prop_oneof![4 => prose, 2 => looped, 2 => shape, 1 => chain];
    let invalid = prop_oneof![6 => Just(0usize), 1 => 1..4usize];
    prop::collection::vec((piece, invalid), 1..40)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        crate::repetition::test_cases::cases(256)
    ))]

    /// The word-at-a-time path of [`Near::feed`] in any chunking
    /// (with invalid bytes, pushed as U+FFFD, between the pieces)
    /// fires after the same character as the one-character-at-a-
    /// time reference, with the same cut, and reports the same
    /// settled offset after every chunk.
    #[test]
    fn fast_path_equals_the_reference(pieces in near_text(), size in 1..64usize) {
        let config = ClampConfig::default();
        let mut fast = Near::new(&config);
        let mut slow = Near::new(&config);
        let mut pos = 0;
        'pieces: for (text, bad) in &pieces {
            let mut rest = text.as_str();
            while !rest.is_empty() {
                let mut cut = size.min(rest.len());
                while !rest.is_char_boundary(cut) {
                    cut += 1;
                }
                let (chunk, tail) = rest.split_at(cut);
                let fired = fast.feed(chunk, pos);
                let mut at = None;
                for (i, c) in chunk.char_indices() {
                    slow.push(c, pos + i, c.len_utf8());
                    if slow.best.is_some() {
                        at = Some(i + c.len_utf8());
                        break;
                    }
                }
                prop_assert_eq!(fired, at);
                prop_assert_eq!(&fast.best, &slow.best);
                if fired.is_some() {
                    break 'pieces;
                }
                pos += chunk.len();
                prop_assert_eq!(fast.settled(pos), slow.settled(pos));
                rest = tail;
            }
            if *bad > 0 {
                fast.push('\u{FFFD}', pos, *bad);
                slow.push('\u{FFFD}', pos, *bad);
                pos += bad;
                prop_assert_eq!(&fast.best, &slow.best);
                if fast.best.is_some() {
                    break;
                }
                prop_assert_eq!(fast.settled(pos), slow.settled(pos));
            }
        }
    }
}

#[test]
fn edit_distance_band() {
    let a = [1, 2, 3, 4, 5, 6, 7, 8];
    assert!(within_edits(&a, &a, 0));
    assert!(within_edits(&a, &[1, 2, 9, 3, 4, 5, 6, 7, 8], 1));
    assert!(!within_edits(&a, &[1, 2, 9, 3, 4, 5, 6, 7, 8], 0));
    assert!(within_edits(&a, &[1, 2, 4, 5, 6, 9, 8], 2));
    assert!(!within_edits(&a, &[8, 7, 6, 5, 4, 3, 2, 1], 2));
    assert!(within_edits(&[], &[1, 2], 2));
    assert!(!within_edits(&[], &[1, 2, 3], 2));
}
