//! The four classes of replies that rescue used to miss (issue 12,
//! section 4), each in English and Spanish: raw JSON-looking text inside
//! the answer string, a valid object followed by prose that mentions the
//! format again, several objects that hold the key, and regex-style
//! backslashes.

use deloop_core::rescue::{repair, rescue, PartialExtractor};

/// The text of `answer` in `raw`.
fn answer(raw: &str) -> String {
    let got = rescue(raw, "answer").unwrap_or_else(|e| panic!("{raw:?}: {e}"));
    got.as_text()
        .unwrap_or_else(|| panic!("{raw:?}: not a string: {}", got.value))
        .to_owned()
}

/// Streams `raw` byte by byte: the result must equal the batch text.
fn streamed(raw: &str) -> String {
    let mut ex = PartialExtractor::new("answer");
    let mut got = String::new();
    let mut at = 0;
    for (i, _) in raw.char_indices().skip(1).chain([(raw.len(), ' ')]) {
        got.push_str(ex.push(&raw[at..i]));
        at = i;
    }
    got.push_str(ex.finish());
    got
}

fn check(raw: &str, want: &str) {
    assert_eq!(answer(raw), want, "raw {raw:?}");
    assert_eq!(streamed(raw), want, "streamed {raw:?}");
}

/// Batch only: when a later object replaces a value already streamed,
/// streaming cannot take it back (see docs/rescue.md, "Streaming").
fn check_batch(raw: &str, want: &str) {
    assert_eq!(answer(raw), want, "raw {raw:?}");
}

// 1. Raw JSON-looking text inside the answer string, unescaped.

#[test]
fn embedded_object_in_the_answer_en() {
    check(
        r#"{"answer": "To create the user, send {"user": "ana", "role": "admin"} to the /users endpoint.", "confidence": 0.9}"#,
        r#"To create the user, send {"user": "ana", "role": "admin"} to the /users endpoint."#,
    );
}

#[test]
fn embedded_object_in_the_answer_es() {
    check(
        r#"{"answer": "Para crear el usuario, envía {"user": "ana", "role": "admin"} al endpoint /users."}"#,
        r#"Para crear el usuario, envía {"user": "ana", "role": "admin"} al endpoint /users."#,
    );
}

#[test]
fn embedded_pretty_object_over_several_lines_en() {
    check(
        "{\"answer\": \"Send this body:\n{\n  \"user\": \"ana\",\n  \"role\": \"admin\"\n}\nthen check the reply.\"}",
        "Send this body:\n{\n  \"user\": \"ana\",\n  \"role\": \"admin\"\n}\nthen check the reply.",
    );
}

#[test]
fn answer_quoting_the_format_itself_es() {
    check(
        r#"{"answer": "Responde siempre con {"answer": "texto", "fuentes": []} y nada más."}"#,
        r#"Responde siempre con {"answer": "texto", "fuentes": []} y nada más."#,
    );
    check(
        "{\"answer\": \"El formato es:\n{\"answer\": \"texto\"}\nsin nada más.\"}",
        "El formato es:\n{\"answer\": \"texto\"}\nsin nada más.",
    );
}

#[test]
fn answer_quoting_the_format_itself_en() {
    check(
        r#"{"answer": "Always reply with {"answer": "text", "sources": []} and nothing else.", "sources": [1]}"#,
        r#"Always reply with {"answer": "text", "sources": []} and nothing else."#,
    );
}

#[test]
fn embedded_object_keeps_the_rest_of_the_reply() {
    let r =
        repair(r#"{"answer": "send {"user": "ana", "role": "admin"} to it", "confidence": 0.9}"#)
            .unwrap();
    assert_eq!(r.value["confidence"], 0.9);
    assert_eq!(r.value.as_object().unwrap().len(), 2, "{}", r.value);
}

#[test]
fn braces_that_open_no_object_change_nothing() {
    // `{` not followed by a quoted key, and `{}` in code, keep the old rule.
    check(
        r#"{"answer": "use {x} and "quotes"", "n": 1}"#,
        r#"use {x} and "quotes""#,
    );
    check(
        r#"{"answer": "function f() { return "x"; }", "n": 1}"#,
        r#"function f() { return "x"; }"#,
    );
}

// 2. A valid object followed by prose that mentions `{"answer": ...}`.

#[test]
fn prose_mentioning_the_format_after_the_answer_es() {
    check(
        "{\"answer\": \"La capital de Francia es París.\"}\n\nNota: respondí con el formato {\"answer\": ...} como pediste.",
        "La capital de Francia es París.",
    );
}

#[test]
fn prose_mentioning_the_format_after_the_answer_en() {
    check(
        "{\"answer\": \"Paris is the capital of France.\"}\nI used the {\"answer\": ...} format, as requested.",
        "Paris is the capital of France.",
    );
    check(
        "```json\n{\"answer\": \"Paris.\"}\n```\nRemember: the format is {\"answer\": \"...\"}.",
        "Paris.",
    );
}

#[test]
fn a_placeholder_alone_is_still_returned() {
    // With nothing better, the placeholder is what the reply holds.
    let got = rescue(r#"The format is {"answer": "..."}."#, "answer").unwrap();
    assert_eq!(got.as_text(), Some("..."));
}

// 3. Several objects that hold the key: the last complete one wins.

#[test]
fn array_of_drafts_es() {
    check_batch(
        r#"[{"answer": "borrador uno"}, {"answer": "borrador dos"}, {"answer": "versión final"}]"#,
        "versión final",
    );
}

#[test]
fn array_of_drafts_en() {
    check_batch(
        r#"{"drafts": [{"answer": "first draft"}, {"answer": "final answer"}]}"#,
        "final answer",
    );
}

#[test]
fn draft_then_correction_es() {
    check_batch(
        "{\"answer\": \"Madrid es la capital de Francia.\"}\nPerdón, corrijo:\n{\"answer\": \"París es la capital de Francia.\"}",
        "París es la capital de Francia.",
    );
}

#[test]
fn draft_then_correction_en() {
    check_batch(
        "Draft: {\"answer\": \"Lyon\"}\nCorrection: {\"answer\": \"Paris\"}",
        "Paris",
    );
}

#[test]
fn a_truncated_last_draft_loses_to_a_complete_one() {
    // en and es: the last *complete* object holding the key wins.
    check_batch(
        r#"[{"answer": "complete draft"}, {"answer": "cut at the tok"#,
        "complete draft",
    );
    check_batch(
        r#"{"drafts": [{"answer": "borrador completo"}, {"answer": "cortado a mit"#,
        "borrador completo",
    );
}

#[test]
fn the_shallowest_key_still_wins() {
    check_batch(
        r#"{"answer": "top", "drafts": [{"answer": "a"}, {"answer": "b"}]}"#,
        "top",
    );
}

// 4. Regex-style backslashes (invalid JSON escapes) keep the backslash.

#[test]
fn regex_backslashes_en() {
    check(
        r#"{"answer": "Use the regex \b\d{3}\.\d{2}\b to match prices."}"#,
        r"Use the regex \b\d{3}\.\d{2}\b to match prices.",
    );
}

#[test]
fn regex_backslashes_es() {
    check(
        r#"{"answer": "La expresión \bcolou?r\b y \d+\.\d+ validan texto y decimales."}"#,
        r"La expresión \bcolou?r\b y \d+\.\d+ validan texto y decimales.",
    );
}

#[test]
fn valid_json_escapes_are_still_decoded() {
    // A string with only valid escapes is JSON: `\b` is a backspace there.
    check(
        r#"{"answer": "tab\tnew\nback\bfeed\f"}"#,
        "tab\tnew\nback\u{8}feed\u{c}",
    );
}

// Hostile input for the new rules: each stays linear (a quadratic reading
// of these 1 MB inputs would not finish).

#[test]
fn many_written_objects_and_long_runs_stay_linear() {
    let deep = format!("{{\"answer\": \"{}", "{\"k\": ".repeat(150_000));
    assert!(answer(&deep).starts_with("{\"k\": {\"k\":"));
    let spaces = format!(
        "{{\"answer\": \"a {{{}\"k\": 1}} b\", \"n\": 1}}",
        " ".repeat(1 << 20)
    );
    assert!(answer(&spaces).ends_with("\"k\": 1} b"));
    let regex = format!("{{\"answer\": \"{}\\d\"}}", "\\b".repeat(300_000));
    assert!(answer(&regex).starts_with("\\b\\b"));
}
