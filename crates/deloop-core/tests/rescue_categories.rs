//! Every category of the rescue issue, in English and Spanish.

use deloop_core::rescue::{
    partial_string, repair, rescue, rescue_with, PartialExtractor, Repair, RescueError,
    RescueOptions,
};
use serde_json::json;

fn text(raw: &str, key: &str) -> String {
    match rescue(raw, key) {
        Ok(r) => r
            .as_text()
            .unwrap_or_else(|| panic!("value of {key:?} is not text: {}", r.value))
            .to_owned(),
        Err(e) => panic!("rescue failed on {raw:?}: {e}"),
    }
}

fn repairs(raw: &str, key: &str) -> Vec<Repair> {
    rescue(raw, key).expect("rescued").repairs
}

// ---------------------------------------------------------------- noise

#[test]
fn bom_and_zero_width() {
    let raw = "\u{feff}{\"answer\": \"Hello\"}";
    assert_eq!(text(raw, "answer"), "Hello");
    assert!(repairs(raw, "answer").contains(&Repair::StrippedBom));
    let raw = "\u{200b}{\u{200b}\"answer\"\u{2060}: \"Hola, ¿qué tal?\"\u{200b}}";
    assert_eq!(text(raw, "answer"), "Hola, ¿qué tal?");
    assert!(repairs(raw, "answer").contains(&Repair::StrippedZeroWidth));
    // Inside a string, zero-width joiners are text (emoji sequences).
    assert_eq!(
        text("{\"answer\": \"👩\u{200d}💻\"}", "answer"),
        "👩\u{200d}💻"
    );
}

#[test]
fn code_fences_with_prose() {
    let en = "Sure! Here is the JSON:\n```json\n{\"answer\": \"The sky is blue.\"}\n```\nLet me know if you need more.";
    assert_eq!(text(en, "answer"), "The sky is blue.");
    let es = "¡Claro! Aquí tienes:\n```\n{\"answer\": \"El cielo es azul.\"}\n```\n¿Algo más?";
    assert_eq!(text(es, "answer"), "El cielo es azul.");
    let r = repairs(en, "answer");
    assert!(r.contains(&Repair::SkippedLeadingText), "{r:?}");
    assert!(r.contains(&Repair::SkippedTrailingText), "{r:?}");
}

#[test]
fn think_blocks_with_drafts() {
    let en = "<think>The user wants {\"answer\": \"draft one\"}. Better: {\"answer\": \"draft two\"}</think>\n{\"answer\": \"final answer\"}";
    assert_eq!(text(en, "answer"), "final answer");
    assert!(repairs(en, "answer").contains(&Repair::SkippedThinkBlock));
    let es = "<think>Borrador: {\"answer\": \"primer intento\"}</think>{\"answer\": \"respuesta final\"}";
    assert_eq!(text(es, "answer"), "respuesta final");
    // The reply after </think> is truncated: still preferred to the drafts.
    let cut = "<think>{\"answer\": \"borrador\"}</think>{\"answer\": \"respuesta cort";
    assert_eq!(text(cut, "answer"), "respuesta cort");
}

#[test]
fn free_text_reasoning_with_drafts_last_complete_wins() {
    let en = "Let me think. A first draft would be {\"answer\": \"draft\"} but it is too short.\nFinal:\n{\"answer\": \"the final one\", \"sources\": []}";
    assert_eq!(text(en, "answer"), "the final one");
    let es =
        "Pienso: {\"answer\": \"borrador\"}. Mejor así: {\"answer\": \"la definitiva\"} y fin.";
    assert_eq!(text(es, "answer"), "la definitiva");
    // An object without the key after the answer does not win.
    let en2 = "{\"answer\": \"yes\"} and metadata {\"tokens\": 12}";
    assert_eq!(text(en2, "answer"), "yes");
    assert!(repairs(es, "answer").contains(&Repair::ChoseOneOfSeveral));
}

#[test]
fn json_mid_sentence() {
    assert_eq!(
        text("The result is {\"answer\": \"42\"} as requested.", "answer"),
        "42"
    );
    assert_eq!(
        text(
            "El resultado es {\"answer\": \"cuarenta y dos\"} como pediste.",
            "answer"
        ),
        "cuarenta y dos"
    );
}

#[test]
fn several_top_level_values_and_trailing_garbage() {
    assert_eq!(
        text("{\"answer\": \"one\"}\n{\"answer\": \"two\"}", "answer"),
        "two"
    );
    assert_eq!(
        text("{\"answer\": \"uno\"}}}]\"\u{0}garbage", "answer"),
        "uno"
    );
    assert_eq!(text("{\"answer\": \"done\"}```\nEOF", "answer"), "done");
    assert_eq!(
        repair("{\"a\": 1}\n{\"b\": 2}").unwrap().value,
        json!([{"a": 1}, {"b": 2}])
    );
    assert_eq!(
        repair("{\"estado\": \"listo\"} ¡Espero que sirva!")
            .unwrap()
            .value,
        json!({"estado": "listo"})
    );
}

// ---------------------------------------------------------------- strings

#[test]
fn seed_inner_quotes() {
    let es = r#"{"answer": "**Auditoría Suprema** "la revisión final" y más texto"}"#;
    assert_eq!(
        text(es, "answer"),
        r#"**Auditoría Suprema** "la revisión final" y más texto"#
    );
    assert!(repairs(es, "answer").contains(&Repair::EscapedInnerQuote));
    let en = r#"{"answer": "The "final review" is done", "sources": ["AUDITORIA_SUPREMA.md"]}"#;
    assert_eq!(text(en, "answer"), r#"The "final review" is done"#);
    // The greedy regex of the seed swallowed the following keys.
    assert_eq!(
        rescue(en, "sources").unwrap().value,
        json!(["AUDITORIA_SUPREMA.md"])
    );
    let es2 = r#"{"answer":"**Auditoría Suprema**"la revisión""}"#;
    assert_eq!(text(es2, "answer"), r#"**Auditoría Suprema**"la revisión""#);
}

#[test]
fn inner_quotes_followed_by_comma_or_colon() {
    let en =
        r#"{"answer": "Use "strict": true to enable it, "loose" otherwise.", "confidence": 0.9}"#;
    assert_eq!(
        text(en, "answer"),
        r#"Use "strict": true to enable it, "loose" otherwise."#
    );
    assert_eq!(rescue(en, "confidence").unwrap().value, json!(0.9));
    let es = r#"{"answer": "Dijo "hola", luego "adiós": fin", "ok": true}"#;
    assert_eq!(text(es, "answer"), r#"Dijo "hola", luego "adiós": fin"#);
    assert_eq!(rescue(es, "ok").unwrap().value, json!(true));
    let arr = r#"{"items": ["a "quoted", word", "b"]}"#;
    assert_eq!(
        rescue(arr, "items").unwrap().value,
        json!(["a \"quoted\", word", "b"])
    );
}

#[test]
fn inner_quote_before_a_brace_in_text() {
    let en = r#"{"answer": "use {"x"} here"}"#;
    assert_eq!(text(en, "answer"), r#"use {"x"} here"#);
    let es = r#"{"answer": "el conjunto {"a", "b"} tiene dos"}"#;
    assert_eq!(text(es, "answer"), r#"el conjunto {"a", "b"} tiene dos"#);
}

#[test]
fn raw_newlines_tabs_and_control_chars() {
    let en = "{\"answer\": \"line one\nline two\tindented\u{1}\"}";
    assert_eq!(text(en, "answer"), "line one\nline two\tindented\u{1}");
    assert!(repairs(en, "answer").contains(&Repair::EscapedControlChar));
    let es = "{\"answer\": \"Primera línea\r\nSegunda línea\"}";
    assert_eq!(text(es, "answer"), "Primera línea\r\nSegunda línea");
    let out = repair(en).unwrap().value.to_string();
    assert!(out.contains("\\n") && out.contains("\\u0001"), "{out}");
}

// ---------------------------------------------------------------- syntax

#[test]
fn lenient_syntax() {
    let en = "{answer: 'It\\'s fine', // comment\n 'done': True, \"n\": None, /* c */ \"list\": [1, 2,],}";
    let v = repair(en).unwrap().value;
    assert_eq!(
        v,
        json!({"answer": "It's fine", "done": true, "n": null, "list": [1, 2]})
    );
    let es = "{respuesta: 'Está bien', # comentario\n 'hecho': False,}";
    assert_eq!(
        repair(es).unwrap().value,
        json!({"respuesta": "Está bien", "hecho": false})
    );
    let r = repair(en).unwrap().repairs;
    for want in [
        Repair::QuotedKey,
        Repair::NormalizedQuotes,
        Repair::RemovedComment,
        Repair::ConvertedLiteral,
        Repair::RemovedTrailingComma,
    ] {
        assert!(r.contains(&want), "{want:?} missing from {r:?}");
    }
    assert_eq!(
        text("{'answer': 'l'avion décolle'}", "answer"),
        "l'avion décolle"
    );
    assert_eq!(
        text("{“answer”: “comillas curvas”}", "answer"),
        "comillas curvas"
    );
}

#[test]
fn missing_commas_and_colons() {
    assert_eq!(
        repair("{\"a\": \"x\"\n\"b\": \"y\"}").unwrap().value,
        json!({"a": "x", "b": "y"})
    );
    assert_eq!(
        repair("{\"nombre\" \"Ana\", \"edad\": 30}").unwrap().value,
        json!({"nombre": "Ana", "edad": 30})
    );
    assert_eq!(repair("[1 2 3]").unwrap().value, json!([1, 2, 3]));
}

// ---------------------------------------------------------------- truncation

#[test]
fn truncation_keeps_the_text() {
    let en = r#"{"answer": "The answer is long and was cut at the tok"#;
    assert_eq!(
        text(en, "answer"),
        "The answer is long and was cut at the tok"
    );
    assert!(repairs(en, "answer").contains(&Repair::ClosedTruncated));
    let es = r#"```json
{"answer": "La respuesta "importante" se cortó en mitad de la fra"#;
    assert_eq!(
        text(es, "answer"),
        r#"La respuesta "importante" se cortó en mitad de la fra"#
    );
    assert_eq!(
        repair(r#"{"a": [1, {"b": "c"#).unwrap().value,
        json!({"a": [1, {"b": "c"}]})
    );
    // Cut in an escape: the partial escape is left out.
    assert_eq!(text(r#"{"answer": "caf\u00"#, "answer"), "caf");
    assert_eq!(text(r#"{"answer": "a\"#, "answer"), "a");
    // Cut after the key: the key exists with null.
    assert_eq!(
        rescue(r#"{"answer":"#, "answer").unwrap().value,
        json!(null)
    );
}

// ---------------------------------------------------------------- nesting

#[test]
fn nested_key_rule() {
    assert_eq!(
        text(r#"{"response": {"answer": "nested"}}"#, "answer"),
        "nested"
    );
    assert_eq!(
        text(
            r#"{"respuesta": {"datos": [{"answer": "profundo"}]}}"#,
            "answer"
        ),
        "profundo"
    );
    // Shallowest wins, even if a deeper one comes first.
    assert_eq!(
        text(r#"{"meta": {"answer": "deep"}, "answer": "top"}"#, "answer"),
        "top"
    );
    // Same depth: the last complete object, as among top-level values
    // (drafts come before the final answer; issue 12 changed this rule
    // from the first in document order).
    assert_eq!(
        text(
            r#"{"a": {"answer": "first"}, "b": {"answer": "second"}}"#,
            "answer"
        ),
        "second"
    );
    // Duplicate key in one object: the last one, as JSON.parse does.
    assert_eq!(
        text(r#"{"answer": "borrador", "answer": "final"}"#, "answer"),
        "final"
    );
    // Non-string values.
    assert_eq!(
        rescue(r#"{"answer": {"text": "hi", "n": 2}}"#, "answer")
            .unwrap()
            .value,
        json!({"text": "hi", "n": 2})
    );
    assert_eq!(
        rescue(r#"{"answer": 3}"#, "answer").unwrap().as_text(),
        None
    );
}

// ---------------------------------------------------------------- decoding

#[test]
fn decoding() {
    assert_eq!(
        text(r#"{"answer": "caf\u00e9 \u260E"}"#, "answer"),
        "café ☎"
    );
    assert_eq!(
        text(r#"{"answer": "emoji \ud83d\ude00"}"#, "answer"),
        "emoji 😀"
    );
    assert_eq!(text(r#"{"answer": "a\/b"}"#, "answer"), "a/b");
    assert_eq!(
        text(r#"{"answer": "C:\Users\Ana"}"#, "answer"),
        r"C:\Users\Ana"
    );
    assert_eq!(
        text(r#"{"answer": "literal \\n here"}"#, "answer"),
        r"literal \n here"
    );
    assert_eq!(
        text(r#"{"answer": "tab\there\nnew"}"#, "answer"),
        "tab\there\nnew"
    );
    let raw = "{\"answer\": \"Ñandú, 中文, العربية, 😀, e\u{301}\"}";
    assert_eq!(text(raw, "answer"), "Ñandú, 中文, العربية, 😀, e\u{301}");
    assert!(repairs(r#"{"answer": "C:\Users"}"#, "answer").contains(&Repair::KeptInvalidEscape));
}

// ---------------------------------------------------------------- streaming

#[test]
fn streaming_prefixes() {
    let full = r#"{"answer": "Hola \"mundo\", ¿qué tal? 😀", "n": 1}"#;
    let want = "Hola \"mundo\", ¿qué tal? 😀";
    let mut last = String::new();
    for (i, _) in full.char_indices().chain([(full.len(), ' ')]) {
        if let Some(t) = partial_string(&full[..i], "answer") {
            assert!(want.starts_with(&t), "prefix {:?} gave {t:?}", &full[..i]);
            assert!(t.starts_with(&last), "went back: {last:?} -> {t:?}");
            last = t;
        }
    }
    assert_eq!(last, want);
    let mut ex = PartialExtractor::new("answer");
    let mut got = String::new();
    for chunk in full.as_bytes().chunks(5) {
        // chunk boundaries are byte-based here; build valid UTF-8 chunks
        let _ = chunk;
    }
    let mut start = 0;
    for (i, _) in full.char_indices().skip(1).step_by(3) {
        got.push_str(ex.push(&full[start..i]));
        start = i;
    }
    got.push_str(ex.push(&full[start..]));
    assert_eq!(got, want);
    assert_eq!(ex.text(), want);
    assert_eq!(partial_string("The answer is", "answer"), None);
    assert_eq!(partial_string(r#"{"answer": 12"#, "answer"), None);
}

// ---------------------------------------------------------------- errors

#[test]
fn errors_are_clear() {
    assert_eq!(
        rescue("Lo siento, no puedo ayudar.", "answer"),
        Err(RescueError::NoJson)
    );
    assert_eq!(repair("I cannot help with that."), Err(RescueError::NoJson));
    assert_eq!(repair(""), Err(RescueError::NoJson));
    assert_eq!(
        rescue(r#"{"respuesta": "sin la clave"}"#, "answer"),
        Err(RescueError::KeyNotFound {
            key: "answer".into()
        })
    );
    let opts = RescueOptions {
        max_input_bytes: 10,
        ..RescueOptions::default()
    };
    let e = rescue_with(r#"{"answer": "too long"}"#, "answer", &opts).unwrap_err();
    assert_eq!(
        e,
        RescueError::TooLarge {
            limit: 10,
            actual: 22
        }
    );
    assert!(e.to_string().contains("22 bytes"));
    let msg = RescueError::KeyNotFound {
        key: "answer".into(),
    }
    .to_string();
    assert!(msg.contains("answer"), "{msg}");
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = "[".repeat(100_000);
    assert_eq!(
        repair(&deep),
        Err(RescueError::TooDeep {
            limit: RescueOptions::default().max_depth
        })
    );
    let deep_obj = "{\"a\":".repeat(100_000);
    assert!(matches!(
        repair(&deep_obj),
        Err(RescueError::TooDeep { .. })
    ));
    // Within the limit it works, closed or truncated.
    let ok = format!("{}1{}", "[".repeat(500), "]".repeat(500));
    assert!(repair(&ok).is_ok());
    assert!(repair(&"[".repeat(500)).is_ok());
    // Closers only: nothing to rescue.
    assert_eq!(repair(&"]".repeat(100_000)), Err(RescueError::NoJson));
}

#[test]
fn default_depth_limit_is_usable_in_a_test_thread() {
    // Up to the default limit the value is built, printed and dropped
    // without overflowing a 2 MiB test-thread stack.
    let limit = RescueOptions::default().max_depth;
    let deep = format!("{}{}", "[".repeat(limit), "]".repeat(limit));
    let v = repair(&deep).unwrap().value;
    assert_eq!(v.to_string().len(), 2 * limit);
    let objs = "{\"a\":".repeat(limit) + "1";
    assert!(rescue(&objs, "a").is_ok());
    assert!(matches!(
        repair(&"[".repeat(limit + 1)),
        Err(RescueError::TooDeep { .. })
    ));
}

#[test]
fn unterminated_draft_does_not_swallow_the_final_object() {
    let en = "Draft: {\"answer\": \"foo  and then more reasoning.\nFinal: {\"answer\": \"bar\"}";
    assert_eq!(text(en, "answer"), "bar");
    let es =
        "Borrador: {\"answer\": \"sin cerrar\nDefinitiva: {\"answer\": \"la buena\", \"ok\": true}";
    assert_eq!(text(es, "answer"), "la buena");
    // A JSON example inside a closed answer stays part of the answer.
    let inner = r#"{"answer": "Ejemplo: {"answer": 1} y listo"}"#;
    assert_eq!(text(inner, "answer"), r#"Ejemplo: {"answer": 1} y listo"#);
}

#[test]
fn key_like_text_inside_a_value() {
    let es = r#"{"answer": "El campo "nombre": obligatorio, "edad": opcional.", "ok": true}"#;
    assert_eq!(
        text(es, "answer"),
        r#"El campo "nombre": obligatorio, "edad": opcional."#
    );
    let en = r#"{"answer": "Fields "name": required, "age": optional.", "ok": true}"#;
    assert_eq!(
        text(en, "answer"),
        r#"Fields "name": required, "age": optional."#
    );
    assert_eq!(rescue(en, "ok").unwrap().value, json!(true));
}

#[test]
fn double_encoded_reply() {
    let raw = r#"{\"answer\": \"Hola \\\"mundo\\\"\", \"n\": 1}"#;
    assert_eq!(text(raw, "answer"), "Hola \"mundo\"");
    assert!(repairs(raw, "answer").contains(&Repair::UnescapedDoubleEncoded));
}

#[test]
fn unusual_unicode_whitespace_never_splits_a_character() {
    for ws in [
        '\u{85}', '\u{2028}', '\u{2029}', '\u{3000}', '\u{200b}', '\u{feff}',
    ] {
        for raw in [
            format!("{{\"a\": {ws}}}"),
            format!("[{ws}1, {ws}]"),
            format!("{{{ws}\"a\"{ws}:{ws}\"x\"{ws}}}"),
            format!("{{\"a\": 1,{ws}"),
        ] {
            let _ = repair(&raw);
            let _ = rescue(&raw, "a");
        }
    }
    assert_eq!(repair("{\"a\": \u{85}}").unwrap().value, json!({"a": null}));
}

#[test]
fn hash_inside_text_is_not_a_comment() {
    let es = r#"{"answer": "Es el "mejor" #1 del mundo", "ok": true}"#;
    assert_eq!(text(es, "answer"), r#"Es el "mejor" #1 del mundo"#);
    let en = "{\"answer\": \"Intro \"x\"\n## Heading\nBody\"}";
    assert_eq!(text(en, "answer"), "Intro \"x\"\n## Heading\nBody");
}

#[test]
fn repair_keeps_the_models_key_order() {
    let raw = "{'zeta': 1, beta: [2,], 'alfa': {'y': True, 'x': None}, 'zeta': 3";
    let out = serde_json::to_string(&repair(raw).unwrap().value).unwrap();
    assert_eq!(out, r#"{"zeta":3,"beta":[2],"alfa":{"y":true,"x":null}}"#);
    // A revision with its keys reordered still replaces the draft.
    let raw = r#"Draft: {"b": 1, "a": 2} Final: {"a": 3, "b": 4}"#;
    let out = serde_json::to_string(&repair(raw).unwrap().value).unwrap();
    assert_eq!(out, r#"{"a":3,"b":4}"#);
}
