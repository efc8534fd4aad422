//! Healthy text that is regular by nature (issue 22 §3), which the
//! near-duplicate guard used to cut: matrices, tables of numbers,
//! enumerations in several languages, arrays of similar JSON objects,
//! lists of ids and hashes. Each must come out of `clamp` byte for byte
//! and pass a stream watcher whole. The loops these families resemble
//! (a counter that counts while nothing else changes, one row of numbers
//! repeated to the token limit, a sentence with one word changed) must
//! still be cut.

use deloop_core::repetition::{clamp, ClampConfig, Detector, StreamWatcher};

/// A small deterministic generator (no test depends on a random seed).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }

    fn hex(&mut self, len: usize) -> String {
        (0..len)
            .map(|_| char::from_digit(self.next(16) as u32, 16).unwrap_or('0'))
            .collect()
    }
}

const NAMES_EN: [&str; 14] = [
    "Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy", "Mallory",
    "Niaj", "Olivia", "Peggy",
];
const NAMES_ES: [&str; 14] = [
    "Ana", "Luis", "Marta", "Pedro", "Sofía", "Jorge", "Lucía", "Carlos", "Elena", "Diego",
    "Paula", "Raúl", "Irene", "Tomás",
];

/// Asserts `clamp` leaves `text` alone and a watcher fed 7-byte chunks
/// never cuts it.
fn healthy(name: &str, text: &str) {
    let config = ClampConfig::default();
    let out = clamp(text, &config);
    assert!(
        !out.is_clamped(),
        "{name} was cut: {:?}\n{text}",
        out.report()
    );
    let mut w = StreamWatcher::new(config);
    for chunk in text.as_bytes().chunks(7) {
        assert!(w.feed(chunk).is_none(), "{name}: the stream was cut");
    }
    assert!(
        w.finish().is_none(),
        "{name}: the stream was cut at its end"
    );
}

/// Asserts `clamp` cuts `text` with the near-duplicate guard, keeping
/// `kept`, and that the watcher cuts it too.
fn looping(name: &str, text: &str, kept: &str) {
    let config = ClampConfig::default();
    let out = clamp(text, &config);
    let r = out
        .report()
        .unwrap_or_else(|| panic!("{name} passed:\n{text}"));
    assert_eq!(r.detector, Detector::NearDuplicate, "{name}: {r:?}");
    assert!(out.text.starts_with(kept), "{name}: {}", out.text);
    let mut w = StreamWatcher::new(config);
    let cut = text.as_bytes().chunks(7).find_map(|c| w.feed(c));
    assert!(cut.is_some(), "{name}: the stream was not cut");
}

fn matrix(
    n: usize,
    cell: impl Fn(usize, usize) -> u32,
    row: impl Fn(&[String]) -> String,
) -> String {
    (0..n)
        .map(|i| {
            let cells: Vec<String> = (0..n).map(|j| cell(i, j).to_string()).collect();
            row(&cells)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn matrices_pass() {
    let plain = |c: &[String]| c.join(" ");
    let brackets = |c: &[String]| format!("[{}]", c.join(", "));
    let latex = |c: &[String]| format!("{} \\\\", c.join(" & "));
    for n in [8, 10, 12, 16] {
        let zero = |_, _| 0;
        let one = |_, _| 1;
        let identity = |i, j| u32::from(i == j);
        let upper = |i: usize, j: usize| u32::from(i <= j);
        for (kind, m) in [
            ("zero, plain", matrix(n, zero, plain)),
            ("zero, brackets", matrix(n, zero, brackets)),
            ("zero, latex", matrix(n, zero, latex)),
            ("ones, plain", matrix(n, one, plain)),
            ("identity, plain", matrix(n, identity, plain)),
            ("identity, brackets", matrix(n, identity, brackets)),
            ("identity, latex", matrix(n, identity, latex)),
            ("upper triangular, plain", matrix(n, upper, plain)),
        ] {
            let text = format!("Here is the {n}×{n} matrix:\n\n{m}\n\nEach row has {n} entries.");
            healthy(&format!("{kind} {n}"), &text);
            let text = format!("$$\\begin{{pmatrix}}\n{m}\n\\end{{pmatrix}}$$");
            healthy(&format!("{kind} {n} in pmatrix"), &text);
        }
    }
}

#[test]
fn tables_of_numbers_pass() {
    let mut rng = Lcg(7);
    let rows: Vec<String> = (0..24)
        .map(|_| {
            (0..8)
                .map(|_| format!("{:>4}", rng.next(1000)))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    healthy("random table", &format!("Readings:\n{}\n", rows.join("\n")));
    let times: String = (1..=12)
        .flat_map(|a| (1..=10).map(move |b| format!("{a} x {b} = {}\n", a * b)))
        .collect();
    healthy("multiplication table", &times);
    let times_es: String = (1..=3)
        .flat_map(|a| (1..=10).map(move |b| format!("{a} por {b} es igual a {}\n", a * b)))
        .collect();
    healthy("tabla de multiplicar", &times_es);
    let years: String = (2000..2024)
        .map(|y| {
            format!(
                "In {y} the population was {} thousand and the rate was {}.{} per cent.\n",
                3_100 + (y - 2000) * 17,
                (y % 7) + 1,
                y % 10
            )
        })
        .collect();
    healthy("yearly figures", &years);
}

#[test]
fn enumerations_pass_in_several_languages() {
    let squares = [
        ("en", "The term number {i} of the sequence is {v}."),
        ("es", "El término número {i} de la sucesión es {v}."),
        ("fr", "Le terme numéro {i} de la suite vaut {v}."),
        ("de", "Das Glied Nummer {i} der Folge ist {v}."),
        ("pt", "O termo número {i} da sequência é {v}."),
    ];
    for (lang, pattern) in squares {
        let text: String = (1..=24)
            .map(|i| {
                pattern
                    .replace("{i}", &i.to_string())
                    .replace("{v}", &(i * i).to_string())
                    + "\n"
            })
            .collect();
        healthy(&format!("squares, {lang}"), &text);
    }
    // Counters in words, with a value that changes.
    let ordinals_en = [
        "first",
        "second",
        "third",
        "fourth",
        "fifth",
        "sixth",
        "seventh",
        "eighth",
        "ninth",
        "tenth",
        "eleventh",
        "twelfth",
        "thirteenth",
        "fourteenth",
    ];
    let text: String = ordinals_en
        .iter()
        .enumerate()
        .map(|(i, o)| format!("The {o} term of the sequence is {}.\n", (i + 1) * (i + 1)))
        .collect();
    healthy("ordinals, en", &text);
    let ordinals_es = [
        "primer", "segundo", "tercer", "cuarto", "quinto", "sexto", "séptimo", "octavo", "noveno",
        "décimo",
    ];
    let text: String = ordinals_es
        .iter()
        .enumerate()
        .map(|(i, o)| format!("El {o} término de la sucesión es {}.\n", 3 * i + 2))
        .collect();
    healthy("ordinals, es", &text);
    // Similar orders that differ in a name and a number (issue 22: cut in
    // Spanish, not in English, because the Spanish lines are longer).
    let orders = [
        (
            "en",
            "- Order from {n}: {k} kilos of tomatoes for Monday morning delivery.",
            NAMES_EN,
        ),
        (
            "es",
            "- Pedido de {n}: {k} kilos de tomates para el lunes por la mañana.",
            NAMES_ES,
        ),
        (
            "fr",
            "- La commande de {n} contient {k} boîtes de pommes pour lundi matin.",
            NAMES_EN,
        ),
        (
            "de",
            "- Die Bestellung von {n} enthält {k} Kisten Äpfel für Montag früh.",
            NAMES_EN,
        ),
    ];
    for (lang, pattern, names) in orders {
        let text: String = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                pattern
                    .replace("{n}", n)
                    .replace("{k}", &(i + 2).to_string())
                    + "\n"
            })
            .collect();
        healthy(
            &format!("orders, {lang}"),
            &format!("Orders:\n\n{text}\nThanks."),
        );
    }
}

#[test]
fn arrays_of_similar_json_objects_pass() {
    let pretty: Vec<String> = (0..20)
        .map(|i| {
            format!(
                "  {{\n    \"id\": {i},\n    \"name\": \"{}\",\n    \"age\": {},\n    \"active\": {}\n  }}",
                NAMES_EN[i % 14],
                20 + i,
                i % 2 == 0
            )
        })
        .collect();
    healthy("pretty array", &format!("[\n{}\n]", pretty.join(",\n")));
    let lines: Vec<String> = (0..20)
        .map(|i| {
            format!(
                "{{\"name\": \"{}\", \"role\": \"user\", \"active\": true, \"id\": {i}}}",
                NAMES_EN[i % 14]
            )
        })
        .collect();
    healthy("one object a line", &format!("[{}]", lines.join(",\n")));
    let lower: Vec<String> = (0..14)
        .map(|i| {
            format!(
                "{{\"name\": \"{}\", \"role\": \"admin\", \"team\": \"core\", \"age\": {}}}",
                NAMES_EN[i].to_lowercase(),
                30 + i
            )
        })
        .collect();
    healthy("JSON lines", &lower.join("\n"));
    // The same records as markdown inside a JSON string (`\n` escapes).
    let items: Vec<String> = NAMES_EN
        .iter()
        .enumerate()
        .map(|(i, n)| {
            format!(
                "- {n} ordered {} boxes of apples for the Monday delivery.",
                i + 2
            )
        })
        .collect();
    healthy(
        "records in a JSON string",
        &format!("{{\"answer\": \"{}\"}}", items.join("\\n")),
    );
}

#[test]
fn lists_of_ids_and_hashes_pass() {
    let mut rng = Lcg(42);
    let users: String = (0..40)
        .map(|_| format!("user_{}: active\n", 1000 + rng.next(9000)))
        .collect();
    healthy("user ids", &users);
    let orders: Vec<String> = (0..40)
        .map(|_| format!("ORD-{}", 10_000 + rng.next(90_000)))
        .collect();
    healthy("order ids", &format!("Order ids: {}.", orders.join(", ")));
    let hashes: String = (0..20)
        .map(|i| format!("- {}  file{i}.bin\n", rng.hex(64)))
        .collect();
    healthy("sha-256 list", &format!("Checksums:\n\n{hashes}"));
    let uuids: String = (0..30)
        .map(|i| {
            format!(
                "{}. {}-{}-{}-{}-{}\n",
                i + 1,
                rng.hex(8),
                rng.hex(4),
                rng.hex(4),
                rng.hex(4),
                rng.hex(12)
            )
        })
        .collect();
    healthy("uuid list", &format!("IDs:\n{uuids}"));
    let commits: String = NAMES_EN
        .iter()
        .map(|n| format!("- commit {} by {n}\n", rng.hex(10)))
        .collect();
    healthy("commit list", &commits);
    let tickets: String = (0..30)
        .map(|i| {
            format!(
                "Ticket #{} opened by {} is waiting for review.\n",
                4000 + rng.next(5000),
                NAMES_EN[i % 14]
            )
        })
        .collect();
    healthy("tickets", &tickets);
}

#[test]
fn the_loops_these_families_resemble_are_still_cut() {
    // A counter in words that counts while the value stays.
    let ordinals = [
        "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
        "tenth", "eleventh", "twelfth",
    ];
    let text: String = ordinals
        .iter()
        .map(|o| format!("The {o} term of the sequence is always equal to 1.\n"))
        .collect();
    looping(
        "ordinal counter",
        &format!("The sequence is constant.\n{text}"),
        "The sequence is constant.\n",
    );
    // One row of different numbers repeated to the token limit.
    let text = format!(" {}", "12 10 9 8 7 6 5 4 3 2 1\n".repeat(11));
    looping("row of numbers", &text, " 12 10 9 8 7 6 5 4 3 2 1");
    // A row of zeros repeated well past a square.
    let row = "0 0 0 0 0 0 0 0 0 0\n";
    looping(
        "rows of zeros",
        &format!("Zeros:\n{}", row.repeat(30)),
        "Zeros:\n",
    );
    // A step that comes back with one word changed, under rising numbers.
    let text: String = (1..=14)
        .map(|i| {
            let side = if i % 2 == 1 { "superior" } else { "inferior" };
            format!("{i}. En la parte {side} de la tortilla, se coloca la harina de avena.\n")
        })
        .collect();
    looping("one word changed", &text, "1. En la parte superior");
    // Steps numbered in words: the first seven each bring a new verb
    // (content), from the eighth only the ordinal changes (the loop).
    let verbs = [
        "prepare", "make", "knead", "cook", "bake", "store", "serve", "wash", "wash", "wash",
        "wash", "wash", "wash", "wash",
    ];
    let ordinals = [
        "first",
        "second",
        "third",
        "fourth",
        "fifth",
        "sixth",
        "seventh",
        "eighth",
        "ninth",
        "tenth",
        "eleventh",
        "twelfth",
        "thirteenth",
        "fourteenth",
    ];
    let text: String = ordinals
        .iter()
        .zip(verbs)
        .map(|(o, v)| format!("The {o} step is to {v} the dough.\n"))
        .collect();
    looping(
        "steps in words",
        &text,
        "The first step is to prepare the dough.\nThe second step is to make the dough.\nThe third step is to knead the dough.\nThe fourth step is to cook the dough.\nThe fifth step is to bake the dough.\nThe sixth step is to store the dough.\nThe seventh step is to serve the dough.\nThe eighth step is to wash the dough.",
    );
    assert!(!clamp(&text, &ClampConfig::default()).text.contains("ninth"));
    // A counter under one word, counting to the limit.
    let text: String = (11..80).map(|i| format!("- El {i}\n")).collect();
    looping(
        "counting names",
        &format!("Nombres:\n\n{text}"),
        "Nombres:\n\n- El 11",
    );
}
