//! End-to-end tests of `deloop clamp`.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn deloop(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_deloop"))
        .arg("clamp")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn deloop");
    {
        let mut pipe = child.stdin.take().expect("stdin");
        // The stream mode may stop reading early: ignore a broken pipe.
        let _ = pipe.write_all(stdin);
    }
    child.wait_with_output().expect("wait")
}

fn looping() -> String {
    format!(
        "El informe describe la migración del archivo y, en resumen, {}",
        "la continuación de un proceso de automatización automático o la de ".repeat(40)
    )
}

const KEPT: &str = "El informe describe la migración del archivo y, en resumen, \
                    la continuación de un proceso de automatización automático […]\n";

#[test]
fn batch_cuts_a_loop_and_exits_3() {
    let out = deloop(&[], looping().as_bytes());
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), KEPT);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("loop cut (word period, period 11 words"),
        "{err}"
    );
}

#[test]
fn healthy_text_passes_unchanged_and_exits_0() {
    let text = "| a | b |\n| --- | --- |\n| ✓ | ✓ |\n\nEl wifi se configura en 192.168.1.1.\n";
    let out = deloop(&["-"], text.as_bytes());
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, text.as_bytes());
    assert!(out.stderr.is_empty());
}

#[test]
fn json_output_has_text_clamped_and_report() {
    let out = deloop(&["--json"], looping().as_bytes());
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["clamped"], true);
    assert_eq!(v["text"], KEPT.trim_end_matches('\n'));
    assert_eq!(v["detector"], "word_period");
    assert_eq!(v["period"], 11);
    assert_eq!(v["start"], looping().find("la continuación").unwrap());
    assert!(v["removed_bytes"].as_u64().unwrap() > 2000);
    let out = deloop(&["--json"], b"nothing to see here");
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["clamped"], false);
    assert_eq!(v["text"], "nothing to see here");
}

#[test]
fn reads_a_file_argument() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("answer.txt");
    std::fs::write(&path, looping()).unwrap();
    let out = deloop(&[path.to_str().unwrap()], b"");
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), KEPT);
    let missing = dir.path().join("missing.txt");
    let out = deloop(&[missing.to_str().unwrap()], b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("cannot read"));
}

#[test]
fn seed_compat_switch() {
    // A divider line: the seed's substring rule cuts it, deloop's default
    // leaves it alone.
    let text = format!("Resultados del análisis final:\n{}\nFin.\n", "-".repeat(40));
    let out = deloop(&[], text.as_bytes());
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, text.as_bytes());
    let out = deloop(&["--seed-compat"], text.as_bytes());
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "Resultados del análisis final:\n"
    );
    // The resak JSON answer.
    let answer = format!("Claro: {}", "resak-".repeat(100));
    let out = deloop(&["--seed-compat"], answer.as_bytes());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "Claro:\n");
}

#[test]
fn invalid_utf8_is_a_clear_error_or_lossy() {
    let bytes = b"hello \xff world";
    let out = deloop(&[], bytes);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("not valid UTF-8") && err.contains("offset 6"),
        "{err}"
    );
    let out = deloop(&["--lossy"], bytes);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "hello \u{FFFD} world"
    );
    let out = deloop(&["--stream"], bytes);
    assert_eq!(out.status.code(), Some(2));
    let out = deloop(&["--stream", "--lossy"], bytes);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, bytes);
}

#[test]
fn stream_copies_and_stops_at_the_loop() {
    let text = looping();
    let out = deloop(&["--stream"], text.as_bytes());
    assert_eq!(out.status.code(), Some(3));
    // The whole input arrives in one chunk here, so nothing past the cut
    // was written before the loop was seen.
    assert_eq!(String::from_utf8(out.stdout).unwrap(), KEPT);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("loop cut") && err.contains("kept"), "{err}");
    let healthy = "Line one.\nLine two.\n";
    let out = deloop(&["--stream"], healthy.as_bytes());
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, healthy.as_bytes());
}

/// Runs `deloop clamp ARGS` writing `text` in `piece`-byte writes with the
/// pipe kept open (a pause after each), stopping early when deloop exits.
/// Returns the output and how many bytes were written.
fn slow_writer(args: &[&str], text: &str, piece: usize) -> (Output, usize) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_deloop"))
        .arg("clamp")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let mut sent = 0;
    for chunk in text.as_bytes().chunks(piece) {
        if pipe.write_all(chunk).and_then(|_| pipe.flush()).is_err() {
            break;
        }
        sent += chunk.len();
        std::thread::sleep(std::time::Duration::from_millis(2));
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
    }
    drop(pipe);
    (child.wait_with_output().unwrap(), sent)
}

#[test]
fn stream_from_a_slow_writer_stops_early() {
    // Feed the loop in small pieces with the pipe kept open: deloop must
    // stop by itself once the loop is seen.
    let text = looping();
    let (out, sent) = slow_writer(&["--stream"], &text, 64);
    assert_eq!(out.status.code(), Some(3));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.starts_with(KEPT.trim_end_matches(" […]\n")),
        "{stdout}"
    );
    assert!(stdout.ends_with(" […]\n"));
    assert!(stdout.len() < 1200, "stopped late: {} bytes", stdout.len());
    assert!(sent <= text.len());
}

/// `--stream --exact` holds back what a cut could still remove: fed in
/// small pieces, the output is exactly the batch output, even though the
/// loop started chunks before it was recognised.
#[test]
fn stream_exact_equals_batch_whatever_the_chunking() {
    let intro: String = (0..200).map(|i| format!("palabra{i} ")).collect();
    let text = format!("{intro}{}", looping());
    let batch = deloop(&[], text.as_bytes());
    assert_eq!(batch.status.code(), Some(3));
    let (out, _) = slow_writer(&["--stream", "--exact"], &text, 37);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(batch.stdout).unwrap()
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!err.contains("already written"), "{err}");
    // Without a loop everything comes out.
    let out = deloop(&["--stream", "--exact"], intro.as_bytes());
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, intro.as_bytes());
    // --exact needs --stream.
    let out = deloop(&["--exact"], b"x");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn flags_override_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("guards.toml");
    std::fs::write(
        &cfg,
        "[words]\nmarker = \" <cut>\"\n[substring]\nmin_copies = 50\n",
    )
    .unwrap();
    let out = deloop(&["--config", cfg.to_str().unwrap()], looping().as_bytes());
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .ends_with("automático <cut>\n"));
    let out = deloop(
        &["--config", cfg.to_str().unwrap(), "--marker", " (…)"],
        looping().as_bytes(),
    );
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .ends_with("automático (…)\n"));
    // 30 copies of `resak-` are under min_copies = 50.
    let resak = format!("La respuesta correcta es {}", "resak-".repeat(30));
    let out = deloop(&["--config", cfg.to_str().unwrap()], resak.as_bytes());
    assert_eq!(out.status.code(), Some(0));
    let out = deloop(&["--min-copies", "10"], resak.as_bytes());
    assert_eq!(out.status.code(), Some(3));
    std::fs::write(&cfg, "[wrods]\n").unwrap();
    let out = deloop(&["--config", cfg.to_str().unwrap()], b"x");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("invalid guard config"));
}

#[test]
fn out_of_range_settings_exit_2_naming_key_and_bounds() {
    let out = deloop(&["--max-period", "40"], looping().as_bytes());
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("words.max_period = 40"), "{err}");
    assert!(err.contains("1 to 16"), "{err}");
    assert!(
        out.stdout.is_empty(),
        "nothing guarded with a wrong setting"
    );
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("guards.toml");
    std::fs::write(&cfg, "[substring]\nmin_copies = 1\n").unwrap();
    let out = deloop(&["--config", cfg.to_str().unwrap()], b"x");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("substring.min_copies = 1"), "{err}");
    assert!(err.contains("2 to 1000"), "{err}");
    let out = deloop(&["--max-period", "16"], looping().as_bytes());
    assert_eq!(out.status.code(), Some(3), "16 is in range");
}

#[test]
fn usage_errors_exit_2() {
    let out = deloop(&["--json", "--stream"], b"x");
    assert_eq!(out.status.code(), Some(2));
    let out = deloop(&["--bogus"], b"x");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn empty_input_is_fine() {
    let out = deloop(&[], b"");
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
}
