use super::*;
use proptest::prelude::*;

fn stream(text: &str, piece: usize) -> ToolArgsWatcher {
    let mut w = ToolArgsWatcher::new(ClampConfig::default());
    let mut at = 0;
    while at < text.len() {
        let mut end = (at + piece).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        if w.push(&text[at..end]).is_some() {
            return w;
        }
        at = end;
    }
    w.finish();
    w
}

fn closed(w: &ToolArgsWatcher) -> serde_json::Value {
    let text = format!("{}{}", w.kept(), w.closing().expect("closable"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn walls() -> Vec<(&'static str, String)> {
    vec![
        (
            "a word wall in a value",
            format!(
                r#"{{"path": "a.md", "content": "Intro. {}"#,
                "la continuación de un proceso ".repeat(200)
            ),
        ),
        (
            "a substring flood",
            format!(r#"{{"query": "{}"#, "resak-".repeat(400)),
        ),
        (
            "repeated lines written with escapes",
            format!(
                r#"{{"content": "fn main() {{\n{}"#,
                r#"    println!(\"again\");\n"#.repeat(200)
            ),
        ),
        (
            "a record repeated",
            format!(
                r#"{{"rows": [{}"#,
                r#"{"id": 1, "name": "same"}, "#.repeat(200)
            ),
        ),
        (
            "a value repeated",
            format!(r#"{{"tags": [{}"#, r#""ok", "#.repeat(300)),
        ),
    ]
}

#[test]
fn walls_are_cut_and_close_into_valid_json() {
    for (name, text) in walls() {
        for piece in [1, 7, 64, 4096] {
            let w = stream(&text, piece);
            let cut = w.cut().unwrap_or_else(|| panic!("{name}: not cut"));
            assert!(cut.keep <= cut.detected_at, "{name}");
            assert!(cut.start <= cut.keep, "{name}");
            assert!(text.starts_with(w.kept()), "{name}");
            // Seen within a few hundred bytes of the loop's start (a
            // piece is read whole, so only small pieces show it).
            assert!(
                piece > 64 || cut.detected_at - cut.start < 600,
                "{name}: seen {} bytes after its start",
                cut.detected_at - cut.start
            );
            closed(&w);
        }
    }
}

#[test]
fn the_marker_goes_inside_the_value_the_cut_falls_in() {
    let text = format!(
        r#"{{"path": "a.md", "content": "Intro. {}"#,
        "over and over again we go ".repeat(100)
    );
    let w = stream(&text, 11);
    let v = closed(&w);
    assert_eq!(v["path"], "a.md");
    let content = v["content"].as_str().unwrap();
    assert!(content.starts_with("Intro. over and over"), "{content}");
    assert!(content.ends_with(" […]"), "{content}");
}

#[test]
fn healthy_arguments_are_not_cut() {
    let code: String = (0..60)
        .map(|i| format!(r#"    let v{i} = compute({i}, \"k{}\");\n"#, i * 7 % 13))
        .collect();
    let records: String = (0..40)
        .map(|i| {
            format!(
                r#"{{"id": {i}, "name": "user{i}", "age": {}}}, "#,
                20 + i % 50
            )
        })
        .collect();
    let prose: String = (0..50)
        .map(|i| format!("Sentence number {i} says {} things. ", i * 3))
        .collect();
    for text in [
        r#"{"path": "/etc/hosts"}"#.to_string(),
        format!(r#"{{"path": "src/main.rs", "content": "fn main() {{\n{code}}}\n"}}"#),
        format!(r#"{{"rows": [{}{{"id": 99}}]}}"#, records),
        format!(r#"{{"text": "{prose}"}}"#),
        r#"{"command": "ls -la /tmp && echo done"}"#.to_string(),
    ] {
        for piece in [3, 50, 10_000] {
            let w = stream(&text, piece);
            assert!(w.cut().is_none(), "cut {:?} in {text}", w.cut());
            assert_eq!(w.kept(), text);
        }
        assert!(ToolArgsWatcher::check(&text, &ClampConfig::default())
            .cut()
            .is_none());
    }
}

#[test]
fn whole_arguments_get_the_streams_verdict() {
    for (name, text) in walls() {
        let w = ToolArgsWatcher::check(&text, &ClampConfig::default());
        assert!(w.cut().is_some(), "{name}");
        closed(&w);
    }
}

#[test]
fn a_cut_never_splits_an_escape_and_not_json_cannot_be_closed() {
    let text = format!(r#"{{"s": "{}"#, r"\u00e9\u00e9 ab ".repeat(300));
    for piece in [1, 5, 9] {
        let w = stream(&text, piece);
        assert!(w.cut().is_some());
        closed(&w);
    }
    let w = stream(&"nope nope ".repeat(100), 10);
    assert!(w.cut().is_some());
    assert_eq!(w.closing(), None);
}

#[test]
fn the_watch_is_bounded() {
    let mut w = ToolArgsWatcher::new(ClampConfig::default());
    let mut i = 0u64;
    w.push("{\"s\": \"");
    while w.text().len() < MAX_WATCHED_ARGS_BYTES - 64 {
        let piece = format!("w{i:x} z{:x} ", i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        i += 1;
        assert!(w.push(&piece).is_none());
    }
    for _ in 0..100 {
        w.push("more text here ");
    }
    assert!(w.text().len() <= MAX_WATCHED_ARGS_BYTES);
    assert!(w.cut().is_none());
}

proptest! {
    /// However a looping call is cut into pieces, the guard fires, the kept
    /// text is a prefix of what was sent, and kept + closing is valid JSON.
    #[test]
    fn any_chunking_of_a_wall_closes_into_json(
        which in 0usize..5,
        sizes in proptest::collection::vec(1usize..40, 1..200),
    ) {
        let (_, text) = walls().swap_remove(which);
        let mut w = ToolArgsWatcher::new(ClampConfig::default());
        let mut at = 0;
        let mut k = 0;
        while at < text.len() && w.cut().is_none() {
            let mut end = (at + sizes[k % sizes.len()]).min(text.len());
            k += 1;
            while !text.is_char_boundary(end) {
                end += 1;
            }
            w.push(&text[at..end]);
            at = end;
        }
        prop_assert!(w.cut().is_some());
        prop_assert!(text.starts_with(w.kept()));
        let closed = format!("{}{}", w.kept(), w.closing().unwrap());
        prop_assert!(serde_json::from_str::<serde_json::Value>(&closed).is_ok(), "{}", closed);
    }

    /// Hostile text never panics; whenever a closing is offered, it makes
    /// valid JSON.
    #[test]
    fn hostile_pieces_never_panic(
        pieces in proptest::collection::vec("[a-z \"\\\\{}\\[\\]:,u0-9\u{e9}]{0,30}", 0..60),
        repeat in 1usize..30,
    ) {
        let mut w = ToolArgsWatcher::new(ClampConfig::default());
        for _ in 0..repeat {
            for p in &pieces {
                w.push(p);
            }
        }
        w.finish();
        if let Some(c) = w.closing() {
            let closed = format!("{}{}", w.kept(), c);
            prop_assert!(serde_json::from_str::<serde_json::Value>(&closed).is_ok(), "{}", closed);
        }
    }
}
