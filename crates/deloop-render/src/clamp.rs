//! Output formats (human and JSON) of `deloop clamp`, in batch and `--stream`.

use deloop_core::repetition::{ClampReport, Clamped, Detector, StreamCut};
use serde::Serialize;
use serde_json::Value;

fn detector_name(d: Detector) -> &'static str {
    match d {
        Detector::WordPeriod => "word period",
        Detector::LongPeriod => "long word period",
        Detector::Substring => "substring",
        Detector::NearDuplicate => "near duplicate",
        Detector::LongUnit => "long unit",
        Detector::CodeBlock => "code block",
    }
}

fn unit_label(r: &ClampReport) -> &'static str {
    match r.detector {
        Detector::Substring | Detector::LongUnit => "characters",
        Detector::CodeBlock => "lines",
        Detector::NearDuplicate => "units",
        Detector::WordPeriod | Detector::LongPeriod => "words",
    }
}

/// The guarded text as printed by `deloop clamp`: the text itself, with a
/// final newline added after the marker when a loop was cut.
pub fn text(out: &Clamped) -> String {
    let mut s = out.text.clone();
    if out.is_clamped() && !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

/// One line for stderr when a loop was cut (human mode).
pub fn note(out: &Clamped) -> Option<String> {
    let r = out.report()?;
    Some(format!(
        "deloop: loop cut ({}, period {} {}, starts at byte {}, {} bytes removed)\n",
        detector_name(r.detector),
        r.period,
        unit_label(r),
        r.start,
        r.removed_bytes
    ))
}

/// The `--json` object of `deloop clamp` (and the answer of `POST /v1/clamp`):
/// the guarded text, whether a loop was cut, the first report's fields
/// (null when nothing was cut) and every report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClampJson<'a> {
    /// The guarded text (the input itself when nothing was cut; after a cut
    /// it ends with the marker).
    pub text: &'a str,
    /// True when some guard cut the text.
    pub clamped: bool,
    /// The first guard that fired, or null.
    #[cfg_attr(feature = "openapi", schema(required))]
    pub detector: Option<Detector>,
    /// Its period: words for the word detectors, characters for
    /// `substring` and `long_unit`, items for `near_duplicate`, lines for
    /// `code_block`; null when nothing was cut.
    #[cfg_attr(feature = "openapi", schema(required))]
    pub period: Option<usize>,
    /// One copy of the repeated unit, or null.
    #[cfg_attr(feature = "openapi", schema(required))]
    pub unit: Option<&'a str>,
    /// Byte offset where the loop starts, or null.
    #[cfg_attr(feature = "openapi", schema(required))]
    pub start: Option<usize>,
    /// Bytes of the input kept, or null.
    #[cfg_attr(feature = "openapi", schema(required))]
    pub keep_bytes: Option<usize>,
    /// Bytes of the input removed, or null.
    #[cfg_attr(feature = "openapi", schema(required))]
    pub removed_bytes: Option<usize>,
    /// One report per guard that fired, in the order they ran.
    pub reports: &'a [ClampReport],
}

impl<'a> ClampJson<'a> {
    /// The object for a guard's output.
    pub fn new(out: &'a Clamped) -> Self {
        let first = out.report();
        ClampJson {
            text: &out.text,
            clamped: out.is_clamped(),
            detector: first.map(|r| r.detector),
            period: first.map(|r| r.period),
            unit: first.map(|r| r.unit.as_str()),
            start: first.map(|r| r.start),
            keep_bytes: first.map(|r| r.keep_bytes),
            removed_bytes: first.map(|r| r.removed_bytes),
            reports: &out.reports,
        }
    }
}

/// [`ClampJson`] as a JSON value: `text`, `clamped`, `detector`, `period`,
/// `unit`, `start`, `keep_bytes`, `removed_bytes`, `reports`.
pub fn json_value(out: &Clamped) -> Value {
    serde_json::to_value(ClampJson::new(out)).unwrap_or(Value::Null)
}

/// [`json_value`] as `deloop clamp --json` prints it: compact, one line.
pub fn json(out: &Clamped) -> String {
    format!("{}\n", json_value(out))
}

/// What `--stream` writes after the kept bytes: the marker and a newline.
pub fn stream_tail(cut: &StreamCut) -> String {
    format!("{}\n", cut.replacement_tail)
}

/// One line for stderr when `--stream` cut the stream. `written` is how
/// many bytes had been copied before the chunk that revealed the loop.
pub fn stream_note(cut: &StreamCut, written: usize) -> String {
    let r = &cut.report;
    let late = written.saturating_sub(cut.keep_bytes);
    let mut s = format!(
        "deloop: loop cut ({}, period {} {}, starts at byte {}, kept {} bytes, seen at byte {})",
        detector_name(r.detector),
        r.period,
        unit_label(r),
        r.start,
        cut.keep_bytes,
        cut.detected_at
    );
    if late > 0 {
        s.push_str(&format!(
            "; {late} bytes after the cut were already written in earlier chunks"
        ));
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use deloop_core::repetition::{clamp, ClampConfig};

    #[test]
    fn json_has_text_clamped_and_report_fields() {
        let input = format!("Intro line here. {}", "again and again ".repeat(30));
        let out = clamp(&input, &ClampConfig::default());
        let v: Value = serde_json::from_str(&json(&out)).unwrap();
        assert_eq!(v["clamped"], true);
        assert_eq!(v["detector"], "word_period");
        // "again and again again and again ...": the unit is three words.
        assert_eq!(v["period"], 3);
        assert!(v["text"].as_str().unwrap().ends_with("[…]"));
        assert_eq!(v["reports"].as_array().unwrap().len(), 1);
        let calm = clamp("short", &ClampConfig::default());
        let v: Value = serde_json::from_str(&json(&calm)).unwrap();
        assert_eq!(v["clamped"], false);
        assert!(v["detector"].is_null());
        assert_eq!(v["text"], "short");
        assert!(note(&calm).is_none());
        assert_eq!(text(&calm), "short");
    }
}
