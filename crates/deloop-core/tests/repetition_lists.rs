//! The rules added for the real-model set's misses (issue 12 §2), both
//! sides: list items cycling with a period of up to 8 items, a list going
//! round a few items, odd units after a path-like prefix, and long tails
//! at the end of a text (`words.tail_last_copy_percent`).

use deloop_core::repetition::{
    clamp, ClampConfig, Detector, GuardedStream, StreamCut, StreamWatcher,
};

fn numbered(bodies: &[&str]) -> String {
    bodies
        .iter()
        .enumerate()
        .map(|(i, b)| format!("{}. {b}\n", i + 1))
        .collect()
}

#[test]
fn weekdays_cycling_under_rising_numbers_fire() {
    for week in [
        [
            "Monday",
            "Tuesday",
            "Wednesday",
            "Thursday",
            "Friday",
            "Saturday",
            "Sunday",
        ],
        [
            "Lunes",
            "Martes",
            "Miércoles",
            "Jueves",
            "Viernes",
            "Sábado",
            "Domingo",
        ],
    ] {
        let bodies: Vec<&str> = week.iter().cycle().take(40).copied().collect();
        let text = format!("Days:\n{}", numbered(&bodies));
        let out = clamp(&text, &ClampConfig::default());
        let r = out.report().expect("cycling weekdays fire");
        assert_eq!((r.detector, r.period), (Detector::NearDuplicate, 7));
        // One week is kept.
        assert!(out.text.contains(week[6]), "{}", out.text);
        assert!(
            !out.text.contains(&format!("8. {}", week[0])),
            "{}",
            out.text
        );
        // Three weeks (one copy short of 3p + 1 matching items) pass.
        let bodies: Vec<&str> = week.iter().cycle().take(21).copied().collect();
        let text = format!("Days:\n{}", numbered(&bodies));
        assert_eq!(clamp(&text, &ClampConfig::default()).text, text);
    }
}

#[test]
fn a_list_going_round_a_few_items_fires() {
    let en = [
        "Add your salt: add the salt to the bowl.",
        "Add your flour: add the flour to the bowl.",
        "Add your yeast: add the yeast to the bowl.",
    ];
    let es = [
        "Añada la sal: ponga la sal en el bol.",
        "Añada la harina: ponga la harina en el bol.",
        "Añada la levadura: ponga la levadura en el bol.",
    ];
    for items in [en, es] {
        // No fixed period: salt, flour, salt, flour, salt, yeast, ...
        let order = [0, 1, 0, 1, 0, 2, 0, 1, 0, 1, 0, 1, 2, 0];
        let bodies: Vec<&str> = order.iter().map(|&i| items[i]).collect();
        let text = format!("Steps:\n{}", numbered(&bodies));
        let out = clamp(&text, &ClampConfig::default());
        let r = out
            .report()
            .expect("a list of three items going round fires");
        assert_eq!(r.detector, Detector::NearDuplicate);
        // The cut keeps one of each item (the first yeast at least) and
        // drops the rest of the list.
        assert!(
            out.text.contains(&format!("6. {}", items[2])),
            "{}",
            out.text
        );
        assert!(!out.text.contains("12. "), "{}", out.text);
        // Twelve items with five different bodies pass.
        let order = [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 1, 0];
        let five = [
            items[0],
            items[1],
            items[2],
            "Bake it for forty minutes at 200 degrees.",
            "Let it cool on a rack before slicing.",
        ];
        let bodies: Vec<&str> = order.iter().map(|&i| five[i]).collect();
        let text = format!("Steps:\n{}", numbered(&bodies));
        assert_eq!(clamp(&text, &ClampConfig::default()).text, text);
    }
}

#[test]
fn short_answers_of_a_key_pass() {
    // An answer key: one- and two-token bodies from a few values.
    let keys = ["True", "False", "Verdadero", "Falso"];
    let bodies: Vec<&str> = [0, 1, 1, 0, 1, 0, 0, 1, 0, 1, 1, 0, 1, 0]
        .iter()
        .map(|&i| keys[i])
        .collect();
    let text = format!("Answers:\n{}", numbered(&bodies));
    assert_eq!(clamp(&text, &ClampConfig::default()).text, text);
    let bodies: Vec<&str> = [2, 3, 3, 2, 3, 2, 2, 3, 2, 3, 3, 2, 3, 2]
        .iter()
        .map(|&i| keys[i])
        .collect();
    let text = format!("Respuestas:\n{}", numbered(&bodies));
    assert_eq!(clamp(&text, &ClampConfig::default()).text, text);
}

#[test]
fn odd_units_after_a_path_fire_and_encoded_zeros_pass() {
    for (prefix, unit) in [
        ("$ cd /home/user/Desktop/Python/", "python/"),
        ("Ruta: /srv/datos/Proyectos/Informe/", "datos/"),
    ] {
        let text = format!("Run this:\n{prefix}{}", unit.repeat(30));
        let out = clamp(&text, &ClampConfig::default());
        let odd = unit.chars().count() % 2 == 1;
        assert_eq!(out.is_clamped(), odd, "{unit}: {}", out.text);
    }
    // Encoded zeros after base64 and hex: runs of one value stay data.
    for blob in [
        format!("iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB{}", "A".repeat(200)),
        format!("0x{}", "0".repeat(150)),
    ] {
        let text = format!("The image data follows.\n\n{blob}\n");
        assert_eq!(clamp(&text, &ClampConfig::default()).text, text);
    }
}

const TAIL_EN: &str = "The committee reviewed the proposal again and decided that the budget \
              should be approved after one more round of comments from every member \
              of the board, who will meet next week to vote on it.";
const TAIL_ES: &str = "El comité revisó la propuesta otra vez y decidió que el presupuesto \
              debe aprobarse después de una ronda más de comentarios de cada miembro \
              de la junta, que se reunirá la semana próxima para votarlo.";

/// Two copies of `unit` and the first `part` words of a third, after an
/// introduction: a generation stopped by its token limit mid-copy.
fn tail_text(unit: &str, part: usize) -> String {
    let words: Vec<&str> = unit.split_whitespace().collect();
    let tail_words = words[..part].join(" ");
    format!("Summary of the meeting. {unit} {unit} {tail_words}")
}

/// Feeds `text` to a watcher in chunks of `size` bytes, then ends it.
fn watch(text: &str, config: &ClampConfig, size: usize) -> Option<StreamCut> {
    let mut w = StreamWatcher::new(config.clone());
    for chunk in text.as_bytes().chunks(size) {
        if let Some(cut) = w.feed(chunk) {
            return Some(cut);
        }
    }
    w.finish()
}

#[test]
fn long_tails_at_the_end_fire_by_default() {
    for unit in [TAIL_EN, TAIL_ES] {
        let d = unit.split_whitespace().count();
        assert!(d > 16);
        // Two copies and 70 % of a third.
        let text = tail_text(unit, d * 7 / 10);
        let out = clamp(&text, &ClampConfig::default());
        let r = out.report().expect("a long tail at the end fires");
        assert_eq!((r.detector, r.period), (Detector::LongPeriod, d));
        // One copy is kept.
        assert_eq!(out.text, format!("Summary of the meeting. {unit} […]"));
        // The stream sees it only when it ends, with the same cut.
        for size in [1, 7, 64, text.len()] {
            let cut = watch(&text, &ClampConfig::default(), size).expect("finish cuts");
            assert_eq!(&cut.report, r);
            assert_eq!(cut.detected_at, text.len());
            assert_eq!(
                format!("{}{}", &text[..cut.keep_bytes], cut.replacement_tail),
                out.text
            );
        }
        // 100 turns the rule off: three whole copies are needed.
        let mut off = ClampConfig::default();
        off.words.tail_last_copy_percent = 100;
        assert_eq!(clamp(&text, &off).text, text);
        assert!(watch(&text, &off, 7).is_none());
    }
}

#[test]
fn long_tails_below_the_share_or_followed_by_other_text_pass() {
    for unit in [TAIL_EN, TAIL_ES] {
        let d = unit.split_whitespace().count();
        // Two copies and half of a third stay below 66 %.
        let text = tail_text(unit, d / 2);
        assert_eq!(clamp(&text, &ClampConfig::default()).text, text);
        assert!(watch(&text, &ClampConfig::default(), 5).is_none());
        // The same 2⅔ copies followed by other text: not at the end.
        let text = format!(
            "{} And then the meeting moved on to other business entirely.",
            tail_text(unit, d * 7 / 10)
        );
        assert_eq!(clamp(&text, &ClampConfig::default()).text, text);
        assert!(watch(&text, &ClampConfig::default(), 5).is_none());
    }
}

#[test]
fn a_long_tail_cut_off_mid_word_fires() {
    let unit = TAIL_EN;
    let words: Vec<&str> = unit.split_whitespace().collect();
    let part = words.len() * 7 / 10;
    // The last word stops after its first letters, as at a token limit.
    let next = words[part];
    let text = format!("{} {}", tail_text(unit, part), &next[..2]);
    let out = clamp(&text, &ClampConfig::default());
    let r = out.report().expect("a prefix of the next word counts");
    assert_eq!(r.period, words.len());
    assert_eq!(out.text, format!("Summary of the meeting. {unit} […]"));
    let cut = watch(&text, &ClampConfig::default(), 3).expect("finish cuts");
    assert_eq!(&cut.report, r);
    // A last word that is not a prefix of the next one breaks the run.
    let text = format!("{} zq", tail_text(unit, part));
    let r = clamp(&text, &ClampConfig::default());
    assert!(!r.is_clamped(), "{}", r.text);
}

#[test]
fn the_tail_rule_keeps_what_a_stream_already_settled() {
    let unit = TAIL_EN;
    let d = unit.split_whitespace().count();
    let text = tail_text(unit, d * 7 / 10);
    for exact in [true, false] {
        let mut g = GuardedStream::new(ClampConfig::default()).exact(exact);
        let mut out = Vec::new();
        for chunk in text.as_bytes().chunks(9) {
            let step = g.push_bytes(chunk).expect("UTF-8");
            assert!(step.cut.is_none());
            out.extend_from_slice(step.bytes);
        }
        let step = g.finish().expect("UTF-8");
        out.extend_from_slice(step.bytes);
        let cut = step.cut.cloned().expect("finish cuts");
        let mut guarded = String::from_utf8(out).expect("UTF-8");
        if exact {
            assert_eq!(guarded, &text[..cut.cut.keep_bytes]);
            assert_eq!(cut.late_bytes(), 0);
        }
        cut.apply_to(&mut guarded);
        assert_eq!(guarded, clamp(&text, &ClampConfig::default()).text);
    }
}

#[test]
fn hostile_input_at_the_end_of_a_stream() {
    // Empty: nothing to cut.
    let mut w = StreamWatcher::new(ClampConfig::default());
    assert!(w.finish().is_none());
    assert!(w.finish().is_none());
    // A long tail whose last bytes are an unfinished UTF-8 sequence (a
    // U+FFFD token): that token breaks the run, nothing is cut.
    let unit = TAIL_ES;
    let d = unit.split_whitespace().count();
    let mut bytes = tail_text(unit, d * 7 / 10).into_bytes();
    bytes.extend_from_slice(b" \xc3");
    let mut w = StreamWatcher::new(ClampConfig::default());
    assert!(w.feed(&bytes).is_none());
    assert!(w.finish().is_none());
    // An invalid byte in the introduction: still no panic, and the lossy
    // guarded stream forwards them unchanged.
    let mut bytes = tail_text(unit, d * 7 / 10).into_bytes();
    bytes.insert(3, 0xff);
    let mut g = GuardedStream::new(ClampConfig::default()).lossy(true);
    let mut out = Vec::new();
    out.extend_from_slice(g.push_bytes(&bytes).expect("lossy").bytes);
    let step = g.finish().expect("lossy");
    out.extend_from_slice(step.bytes);
    let cut = step
        .cut
        .cloned()
        .expect("the tail after the bad byte fires");
    assert!(cut.cut.keep_bytes > 40);
    assert_eq!(&out[..cut.cut.keep_bytes], &bytes[..cut.cut.keep_bytes]);
    // Strict: the first invalid byte is named.
    let mut g = GuardedStream::new(ClampConfig::default());
    assert!(g.push_bytes(&bytes).is_err());
}

#[test]
fn lines_going_round_a_few_values_fire() {
    let en = [
        "<code>var age = age.age",
        "<code>var city = city.city",
        "<code>var name = name.name",
    ];
    let es = [
        "<code>var edad = edad.edad",
        "<code>var ciudad = ciudad.ciudad",
        "<code>var nombre = nombre.nombre",
    ];
    for lines in [en, es] {
        let order = [0, 1, 0, 2, 1, 0, 1, 2, 0, 1, 0, 2, 1, 0];
        let body: String = order
            .iter()
            .map(|&i| format!("{}\n</code>\n\n", lines[i]))
            .collect();
        let text = format!("Here is the code:\n\n{body}");
        let out = clamp(&text, &ClampConfig::default());
        let r = out
            .report()
            .expect("code lines going round three values fire");
        assert_eq!(r.detector, Detector::NearDuplicate);
        // One of each line is kept.
        assert!(out.text.contains(lines[2]), "{}", out.text);
        assert!(out.text.len() < text.len() / 2, "{}", out.text);
    }
}

#[test]
fn logs_poems_and_short_lines_pass() {
    // A log: two messages, but every line has its own time stamp.
    let log: String = (0..30)
        .map(|i| {
            let msg = if i % 3 == 0 {
                "WARN disk almost full"
            } else {
                "INFO request served in 12 ms"
            };
            format!("2024-03-{:02} 10:{:02}:07 {msg}\n", 1 + i % 28, i)
        })
        .collect();
    assert_eq!(clamp(&log, &ClampConfig::default()).text, log);
    // Lines of one or two tokens from a few values (a tally, braces).
    // (No period: the order comes from a small linear congruential step.)
    let values = ["yes", "no", "}", "{"];
    let mut x = 7u32;
    let short: String = (0..40)
        .map(|_| {
            x = (x * 1103 + 12345) % 65536;
            format!("{}\n", values[(x >> 8) as usize % 4])
        })
        .collect();
    let text = format!("The answers:\n{short}");
    assert_eq!(clamp(&text, &ClampConfig::default()).text, text);
    // A poem whose refrain comes back between different lines.
    let verses = [
        "The river keeps its secrets in the stone",
        "El río guarda sus secretos en la piedra",
        "And every evening light comes home alone",
        "Y cada tarde vuelve sola la luz",
        "The wind forgets the names it used to know",
        "El viento olvida los nombres que sabía",
    ];
    let poem: String = verses
        .iter()
        .map(|v| format!("{v}\nand still the water sings below\n"))
        .collect();
    assert_eq!(clamp(&poem, &ClampConfig::default()).text, poem);
}

#[test]
fn a_word_loop_on_one_line_of_a_fence_fires_and_data_passes() {
    for (intro, line) in [
        ("The query:", "WHERE d > DATE_SUB(NOW(), INTERVAL '1 YEAR'"),
        ("La consulta:", "WHERE f > DATE_SUB(NOW(), INTERVAL '1 AÑO'"),
    ] {
        let unit = line.rsplit_once(", ").map(|(_, u)| u).unwrap_or(line);
        let text = format!(
            "{intro}\n```sql\nSELECT id FROM t\n{line}{}\n```\n",
            format!(" - {unit}").repeat(30)
        );
        let out = clamp(&text, &ClampConfig::default());
        let r = out.report().expect("a looping SQL line fires");
        assert_eq!(r.detector, Detector::WordPeriod);
        assert!(out.text.len() < text.len() / 2, "{}", out.text);
        // Below 256 bytes of loop the line passes.
        let text = format!(
            "{intro}\n```sql\nSELECT id FROM t\n{line}{}\n```\n",
            format!(" - {unit}").repeat(8)
        );
        assert_eq!(clamp(&text, &ClampConfig::default()).text, text);
    }
    // Arrays of numbers (no word) and loops spread over lines (each line
    // short) stay data.
    let zeros = format!("```python\nbuf = [{}0]\n```\n", "0, ".repeat(300));
    assert_eq!(clamp(&zeros, &ClampConfig::default()).text, zeros);
    let rows: String = (0..40).map(|_| "    row(\"a\", 1),\n").collect();
    let text = format!("Rows:\n```python\nrows = [\n{rows}]\n```\n");
    assert_eq!(clamp(&text, &ClampConfig::default()).text, text);
}

#[test]
fn rows_of_art_after_an_introduction_pass() {
    let row = "\u{2800}".repeat(40);
    let art: String = (0..30).map(|_| format!("{row}\n")).collect();
    let text = format!("Here is a simple picture of a dog for a Braille printer:\n\n{art}");
    assert_eq!(clamp(&text, &ClampConfig::default()).text, text);
}

#[test]
fn out_of_range_settings_are_rejected_and_hostile_ones_do_not_panic() {
    let mut c = ClampConfig::default();
    c.near.line_window = 40;
    c.words.long_last_copy_percent = 0;
    c.words.tail_last_copy_percent = 101;
    let err = c.check_bounds().expect_err("out of range");
    assert_eq!(err.key, "words.long_last_copy_percent", "{err}");
    c.words.long_last_copy_percent = 100;
    let err = c.check_bounds().expect_err("out of range");
    assert_eq!((err.key, err.value), ("words.tail_last_copy_percent", 101));
    assert!(err.to_string().contains("1 to 100"), "{err}");
    c.words.tail_last_copy_percent = 100;
    assert_eq!(c.check_bounds().unwrap_err().key, "near.line_window");
    c.near.line_window_values = 1000;
    c.near.line_window_min_tokens = 0;
    c.healthy.code_line_run_bytes = 1;
    let lines: String = (0..200).map(|i| format!("{}. x y z\n", i % 3)).collect();
    for text in [
        lines.as_str(),
        "",
        "\n\n\n",
        "```\n\u{2800}\u{2800} a a a a\n",
    ] {
        let _ = clamp(text, &c);
    }
}

/// A count restarted again and again, each block the one before minus its
/// first line (the real-model set's `gemma3/es-code-04`), and a list
/// started again with the same items: the copy is cut, the first list is
/// kept whole.
#[test]
fn a_restarted_list_copying_itself_fires() {
    let block = |from: usize| -> String {
        (from..=20)
            .map(|i| format!("{i}. {i}\n"))
            .collect::<String>()
            + "\n"
    };
    let count = format!("Aquí está:\n\n{}{}{}", block(1), block(2), block(3));
    let fruit = [
        "Apple", "Banana", "Cherry", "Grape", "Lemon", "Mango", "Pear", "Plum",
    ];
    let fruits = format!("Fruits:\n{}{}", numbered(&fruit), numbered(&fruit));
    let frutas = [
        "Manzana", "Plátano", "Cereza", "Uva", "Limón", "Mango", "Pera",
    ];
    let frutas = format!("Frutas:\n{}{}", numbered(&frutas), numbered(&frutas));
    for (text, first_end) in [
        (&count, "20. 20\n"),
        (&fruits, "8. Plum\n"),
        (&frutas, "7. Pera\n"),
    ] {
        let out = clamp(text, &ClampConfig::default());
        let r = out.report().expect("a restarted copy fires");
        assert_eq!(r.detector, Detector::NearDuplicate, "{text}");
        let kept = &text[..r.keep_bytes];
        assert!(kept.trim_end().ends_with(first_end.trim_end()), "{kept:?}");
        assert_eq!(kept.matches(first_end.trim_end()).count(), 1, "{kept:?}");
    }
}

/// What must pass: a count that goes on (`1. 1` to `40. 40`), two lists
/// with a line of text between them, five items copied (one short of
/// the default six), and a restarted list whose items differ.
#[test]
fn lists_that_go_on_or_differ_pass() {
    let config = ClampConfig::default();
    let on: String = (1..=40).map(|i| format!("{i}. {i}\n")).collect();
    let items = ["Apple", "Banana", "Cherry", "Grape", "Lemon", "Mango"];
    let two = format!(
        "Buy:\n{}Then, at the other shop:\n{}",
        numbered(&items),
        numbered(&items)
    );
    let five = format!("Fruits:\n{}{}", numbered(&items), numbered(&items[..5]));
    let other = ["Pear", "Plum", "Kiwi", "Lime", "Date", "Fig"];
    let differ = format!("Fruits:\n{}{}", numbered(&items), numbered(&other));
    // The same sub-steps under each parent item: not the items right
    // before them said again.
    let steps = ["Build", "Test", "Package", "Upload", "Migrate", "Notify"];
    let nested = ["dev", "staging", "production"]
        .iter()
        .enumerate()
        .map(|(i, env)| format!("{}. Deploy to {env}\n{}", i + 1, numbered(&steps)))
        .collect::<String>();
    for text in [on, two, five, differ, nested] {
        assert_eq!(clamp(&text, &config).text, text);
    }
    // Off: `near.list_copy_items = 0`.
    let mut off = ClampConfig::default();
    off.near.list_copy_items = 0;
    let fruits = format!("Fruits:\n{}{}", numbered(&items), numbered(&items));
    assert_eq!(clamp(&fruits, &off).text, fruits);
    assert!(clamp(&fruits, &config).is_clamped());
}

/// Codes going round a handful of values with no fixed period (the
/// real-model set's `smollm2/en-howto-02`: Wi-Fi standards cycling to the
/// token limit) fire, in English and Spanish prose; the window's first
/// copy of each value is kept.
#[test]
fn codes_going_round_a_few_values_fire() {
    let order = [
        0, 1, 2, 3, 0, 2, 3, 0, 1, 0, 2, 3, 0, 1, 0, 1, 0, 2, 3, 1, 0,
    ];
    let codes = ["802.11a,", "802.11a+,", "802.11b,", "802.11g,"];
    let run: String = order.iter().map(|&i| format!("{} ", codes[i])).collect();
    for intro in [
        "Choose a router that supports the newest standards, including ",
        "Elija un router compatible con los estándares más nuevos, como ",
    ] {
        let text = format!("{intro}{run}");
        let out = clamp(&text, &ClampConfig::default());
        let r = out.report().expect("codes going round fire");
        assert_eq!(r.detector, Detector::NearDuplicate, "{text}");
        assert_eq!(r.start, intro.len());
        for code in codes {
            assert_eq!(out.text.matches(code).count(), 1, "{}", out.text);
        }
    }
}

/// What must pass: a hex dump going round a few bytes, codes that all
/// differ (versions, UUID-like ids), numbers alone, and codes with words
/// between them.
#[test]
fn data_and_changing_codes_pass() {
    let config = ClampConfig::default();
    let order = [
        0, 1, 2, 3, 0, 2, 3, 0, 1, 0, 2, 3, 0, 1, 0, 1, 0, 2, 3, 1, 0,
    ];
    let hex: String = order
        .iter()
        .map(|&i| ["0x00 ", "0x1f ", "0xa0 ", "0xff "][i])
        .collect();
    let versions: String = (0..40).map(|i| format!("v1.{i}b, ")).collect();
    let ids: String = (0..40).map(|i| format!("a{i:03}f{} ", i * 7)).collect();
    let bits: String = order
        .iter()
        .map(|&i| ["1, ", "0, ", "10, ", "11, "][i])
        .collect();
    let words: String = order
        .iter()
        .map(|&i| format!("{} and ", ["802.11a", "802.11g", "802.11b", "802.11n"][i]))
        .collect();
    // A chord chart said four times has a fixed period: the word guard's
    // thresholds judge it, and four copies of four chords pass.
    let chords = "Am7 D7 Gmaj7 Cmaj7 ".repeat(4);
    for body in [hex, versions, ids, bits, words, chords] {
        let text = format!("Values: {body}");
        assert_eq!(clamp(&text, &config).text, text);
    }
}

/// Hostile sizes: a count of 100,000 items passes; a list of 300 items
/// said again whole is past the rule's reach of 256 items (documented)
/// and passes, one of 200 fires; a stream of codes split
/// by invalid UTF-8 bytes does not panic and cuts where the batch guard
/// does on the lossy text.
#[test]
fn restarted_lists_and_codes_at_hostile_sizes() {
    let config = ClampConfig::default();
    let long: String = (1..=100_000).map(|i| format!("{i}. {i}\n")).collect();
    assert_eq!(clamp(&long, &config).text, long);
    let item = |i: usize| format!("{i}. item {i} of the inventory\n");
    for (n, fires) in [(300, false), (200, true)] {
        let mut text: String = (1..=n).map(item).collect();
        text.extend((1..=n).map(item));
        assert_eq!(clamp(&text, &config).is_clamped(), fires, "{n}");
    }
    let mut bytes = b"Standards: ".to_vec();
    for (i, &k) in [
        0, 1, 2, 3, 0, 2, 3, 0, 1, 0, 2, 3, 0, 1, 0, 1, 0, 2, 3, 1, 0,
    ]
    .iter()
    .enumerate()
    {
        bytes
            .extend_from_slice(["802.11a, ", "802.11a+, ", "802.11b, ", "802.11g, "][k].as_bytes());
        if i == 3 {
            bytes.extend_from_slice(b"\xff\xfe ");
        }
    }
    let lossy = String::from_utf8_lossy(&bytes).into_owned();
    let batch = clamp(&lossy, &config);
    assert!(batch.is_clamped());
    let mut w = deloop_core::repetition::StreamWatcher::new(config);
    let mut cut = None;
    for chunk in bytes.chunks(5) {
        if let Some(c) = w.feed(chunk) {
            cut = Some(c);
            break;
        }
    }
    let cut = cut.or_else(|| w.finish()).expect("the stream cuts");
    assert_eq!(cut.report.detector, Detector::NearDuplicate);
}
