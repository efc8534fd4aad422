//! The seed's examples, the false-positive catalogue of issue 2 §4, loops
//! the default guard must still catch, and hostile inputs.

use deloop_core::repetition::{
    clamp, clamp_substring, clamp_words, ClampConfig, Detector, StreamWatcher,
};

const S109_UNIT: &str = "la continuación de un proceso de automatización automático o la de ";

fn s109() -> String {
    format!(
        "El informe describe la migración del archivo y, en resumen, {}",
        S109_UNIT.repeat(40)
    )
}

#[test]
fn seed_s109_spanish_loop_is_cut_after_one_copy() {
    let text = s109();
    assert!(text.chars().count() > 2700);
    for config in [ClampConfig::seed_compat(), ClampConfig::default()] {
        let out = clamp_words(&text, &config);
        let report = out.report().expect("loop found");
        assert_eq!(report.detector, Detector::WordPeriod);
        assert_eq!(report.period, 11);
        assert_eq!(
            out.text,
            "El informe describe la migración del archivo y, en resumen, \
             la continuación de un proceso de automatización automático […]"
        );
        assert_eq!(report.start, text.find("la continuación").unwrap());
        assert_eq!(report.removed_bytes, text.len() - report.keep_bytes);
        assert!(out.text.chars().count() <= 200);
    }
}

#[test]
fn seed_wifi_sentence_is_untouched() {
    let text = "El wifi se configura accediendo a 192.168.1.1. El wifi requiere una contraseña.";
    for config in [ClampConfig::seed_compat(), ClampConfig::default()] {
        let out = clamp(text, &config);
        assert_eq!(out.text, text);
        assert!(!out.is_clamped());
    }
    // Also when long enough for the word guard to look at it.
    let longer = format!("{text} {text} Y nada más que decir sobre el router.");
    assert_eq!(clamp(&longer, &ClampConfig::default()).text, longer);
}

#[test]
fn seed_resak_json_answer() {
    let answer = format!("Claro: {}", "resak-".repeat(300));
    // The rescued answer: the seed cuts before the loop and trims.
    let out = clamp_substring(&answer, &ClampConfig::seed_compat());
    assert_eq!(out.text, "Claro:");
    let report = out.report().unwrap();
    assert_eq!(report.detector, Detector::Substring);
    assert_eq!(report.period, 6);
    // The raw JSON: the loop inside a string value is caught by default.
    let raw = format!("{{\"action\":\"responder\",\"answer\":\"{answer}\"}}");
    let out = clamp(&raw, &ClampConfig::default());
    assert!(out.is_clamped());
    assert_eq!(
        out.text,
        "{\"action\":\"responder\",\"answer\":\"Claro: resak- […]"
    );
}

#[test]
fn trailing_punctuation_rule() {
    let text = format!("Lista de cosas: {}", "de, ".repeat(30));
    // Default: `de,` equals `de` (and itself); one copy kept, then the
    // connector `de` is trimmed.
    let out = clamp_words(&text, &ClampConfig::default());
    assert_eq!(out.text, "Lista de cosas: […]");
    let mixed = format!("Intro text here: {}", "spam spam, spam. ".repeat(10));
    let out = clamp_words(&mixed, &ClampConfig::default());
    assert_eq!(out.report().unwrap().period, 1);
    // Seed: `spam,` and `spam` differ, so the period is 3 words.
    let out = clamp_words(&mixed, &ClampConfig::seed_compat());
    assert_eq!(out.report().unwrap().period, 3);
}

#[test]
fn case_folding_is_unicode() {
    let text = format!(
        "Texto inicial de prueba. {}",
        "Automatización automatización AUTOMATIZACIÓN ".repeat(10)
    );
    let out = clamp_words(&text, &ClampConfig::default());
    assert_eq!(out.report().unwrap().period, 1);
    assert_eq!(out.text, "Texto inicial de prueba. Automatización […]");
}

#[test]
fn long_period_sentence_loop_is_caught_by_default_only() {
    let sentence = "The committee reviewed the proposal in detail and decided that \
                    the budget should be revised before the next quarterly meeting \
                    of the board. ";
    assert_eq!(sentence.split_whitespace().count(), 23);
    let text = format!("Summary of the minutes. {}", sentence.repeat(20));
    let out = clamp(&text, &ClampConfig::default());
    let report = out.report().expect("long loop found");
    assert_eq!(report.detector, Detector::LongPeriod);
    assert_eq!(report.period, 23);
    assert_eq!(
        out.text,
        format!("Summary of the minutes. {} […]", sentence.trim_end())
    );
    assert_eq!(clamp(&text, &ClampConfig::seed_compat()).text, text);
    // Two copies (a repeated paragraph) are not a loop.
    let twice = format!("Summary. {}", sentence.repeat(2));
    assert_eq!(clamp(&twice, &ClampConfig::default()).text, twice);
}

#[test]
fn thirty_word_sentence_twenty_times() {
    let sentence = "one two three four five six seven eight nine ten eleven twelve \
                    thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty \
                    alpha beta gamma delta epsilon zeta eta theta iota kappa. ";
    assert_eq!(sentence.split_whitespace().count(), 30);
    let text = format!("Counting words: {}", sentence.repeat(20));
    let out = clamp(&text, &ClampConfig::default());
    assert_eq!(out.report().unwrap().period, 30);
    assert!(out.text.len() < 250);
}

#[test]
fn cjk_loops_are_caught() {
    let text = format!("神户牛肉是一种{}", "高级牛肉".repeat(200));
    let out = clamp(&text, &ClampConfig::default());
    assert!(out.is_clamped());
    assert!(out.text.starts_with("神户牛肉是一种高级牛肉"));
    assert!(out.text.chars().count() < 30, "{}", out.text);
    let clause = "要有自强不息、自强不息的战略思维，";
    let text = format!(
        "我们认为，这个问题需要从长远的角度来看待和分析。{}",
        clause.repeat(4)
    );
    let out = clamp(&text, &ClampConfig::default());
    assert!(out.is_clamped(), "17-character CJK clause ×4");
    assert!(out.text.starts_with(&format!(
        "我们认为，这个问题需要从长远的角度来看待和分析。{clause}"
    )));
}

fn assert_untouched(text: &str) {
    let out = clamp(text, &ClampConfig::default());
    assert_eq!(out.text, text, "changed: {:?}", out.reports);
}

#[test]
fn healthy_structures_are_left_alone() {
    let intro = "Here is the comparison you asked for, with every option listed.\n\n";
    // Markdown table separator rows and rows of repeated cells.
    let table = format!(
        "{intro}| {} |\n|{}\n| {} |\n",
        ["Feature"; 12].join(" | "),
        " --- |".repeat(12),
        ["✓"; 12].join(" | ")
    );
    assert_untouched(&table);
    let yes = format!("{intro}| Plan | {} |\n", ["Yes"; 20].join(" | "));
    assert_untouched(&yes);
    // Rules and dividers.
    for rule in ["-", "=", "─", "═", "_", "*"] {
        assert_untouched(&format!(
            "{intro}{}\nSection two starts here.\n",
            rule.repeat(120)
        ));
    }
    // Fenced code with repetitive data.
    let zeros = format!(
        "{intro}```python\nbuf = [{}]\ndump = \"{}\"\n```\nDone.\n",
        ["0"; 200].join(", "),
        "de ad be ef ".repeat(50)
    );
    assert_untouched(&zeros);
    // Dot leaders of a table of contents.
    let toc = format!(
        "Contents\n1. Introduction {} 3\n2. Methods {} 9\n",
        ". ".repeat(40),
        ". ".repeat(44)
    );
    assert_untouched(&toc);
    // Alignment spaces and an OCR quote run.
    assert_untouched(&format!(
        "{intro}Name{}Value\nKey{}Other\n",
        " ".repeat(60),
        " ".repeat(61)
    ));
    assert_untouched(&format!(
        "{intro}The scanned text said {} and ended.",
        "\"".repeat(25)
    ));
    // Forms with blanks, ASCII art, expanded products, LaTeX spacing.
    assert_untouched(&format!(
        "{intro}Name: {}\nDate: {}\n",
        "_".repeat(60),
        "_".repeat(30)
    ));
    let house = format!("{intro}{}", "|    |    |    |\n".repeat(100));
    assert_untouched(&house);
    assert_untouched(&format!("{intro}{}= 2^12", "2 x ".repeat(12)));
    assert_untouched(&format!("{intro}\\[\n{}x^2\n\\]", "\\quad".repeat(14)));
    // Lyrics with a chorus that comes back (not back to back).
    let chorus = "Oh the river runs so deep tonight, and we sing until the morning light,\n";
    let lyrics = format!(
        "Verse one starts slowly here\n{chorus}{chorus}Verse two is something new\n{chorus}{chorus}"
    );
    assert_untouched(&lyrics);
}

#[test]
fn exempt_structures_still_fire_when_absurdly_long() {
    let text = format!("Title:\n[Name]\n\n{}", "-".repeat(40_000));
    let out = clamp(&text, &ClampConfig::default());
    assert!(out.is_clamped());
    assert!(out.text.len() < 40);
}

#[test]
fn hostile_inputs_never_panic() {
    let config = ClampConfig::default();
    let seed = ClampConfig::seed_compat();
    let cases: Vec<String> = vec![
        String::new(),
        " ".repeat(10_000),
        "\n".repeat(10_000),
        "a".repeat(1 << 20),
        "ab".repeat(1 << 19),
        "é".repeat(100_000),
        "💖".repeat(50_000),
        "x ".repeat(200_000),
        "\u{0}\u{FFFD}\u{10FFFF}".repeat(1000),
        "```\n".repeat(1000),
        "|".repeat(5000),
    ];
    for text in &cases {
        for cfg in [&config, &seed] {
            let out = clamp(text, cfg);
            assert!(out.text.len() <= text.len() + 8);
            for r in &out.reports {
                assert!(r.keep_bytes <= text.len());
            }
        }
    }
    // Extreme configurations.
    let mut weird = ClampConfig::default();
    weird.words.max_period = 0;
    weird.words.min_run = 0;
    weird.words.run_per_period = 0;
    weird.words.long_max_period = 100_000;
    weird.words.long_run_per_period = 0;
    weird.substring.min_unit = 0;
    weird.substring.max_unit = 1000;
    weird.substring.min_copies = 0;
    weird.words.min_chars = 0;
    weird.substring.min_chars = 0;
    for text in &cases {
        let _ = clamp(text, &weird);
        let mut w = StreamWatcher::new(weird.clone());
        for chunk in text.as_bytes().chunks(3) {
            if w.feed(chunk).is_some() {
                break;
            }
        }
        let _ = w.finish();
    }
}

#[test]
fn stream_handles_invalid_utf8_and_splits() {
    let mut w = StreamWatcher::new(ClampConfig::default());
    assert!(w.feed(&[0xff, 0xfe, b'a', 0xe2]).is_none());
    assert!(w.feed(&[0x82]).is_none());
    assert!(w.feed(&[0xac]).is_none()); // '€' split over three chunks
    assert_eq!(w.position(), 6);
    let text = "over and over ".repeat(40);
    let mut cut = None;
    for b in text.as_bytes() {
        if let Some(c) = w.feed(&[*b]) {
            cut = Some(c);
            break;
        }
    }
    let cut = cut.expect("loop seen");
    assert!(cut.keep_bytes > 6);
    assert!(w.is_done());
    assert!(w.feed(b"more").is_none());
    assert!(w.finish().is_none());
}

#[test]
fn config_round_trips_through_json_with_defaults() {
    let config = ClampConfig::default();
    let json = serde_json::to_string(&config).unwrap();
    let back: ClampConfig = serde_json::from_str(&json).unwrap();
    assert_eq!(back, config);
    let partial: ClampConfig =
        serde_json::from_str(r#"{"words": {"max_period": 8}, "healthy": {"enabled": false}}"#)
            .unwrap();
    assert_eq!(partial.words.max_period, 8);
    assert_eq!(partial.words.min_run, 18);
    assert!(!partial.healthy.enabled);
    assert!(serde_json::from_str::<ClampConfig>(r#"{"wrods": {}}"#).is_err());
}
