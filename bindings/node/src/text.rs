//! The text guards: `clamp`, the seed's drop-ins, `StreamGuard`,
//! `rescueJson`, `repairJson`.

use std::borrow::Cow;

use deloop_core::repetition::{
    clamp as clamp_text, clamp_substring, clamp_words, ClampConfig, ClampReport, Clamped, Detector,
    Forward, GuardedStream,
};
use napi::bindgen_prelude::{Buffer, Either};
use napi_derive::napi;
use serde_json::{Map, Value};

use crate::{js_err, text_of, TextIn};

fn detector_name(d: Detector) -> String {
    match serde_json::to_value(d) {
        Ok(Value::String(s)) => s,
        _ => format!("{d:?}"),
    }
}

/// Guard settings: `seedCompat`, or the config file's tables (`words`,
/// `substring`, `healthy`, `near`, with the file's key names).
#[napi(object)]
#[derive(Default)]
pub struct ClampOptions {
    /// The seed's exact rules.
    pub seed_compat: Option<bool>,
    /// The `[words]` table.
    pub words: Option<Value>,
    /// The `[substring]` table.
    pub substring: Option<Value>,
    /// The `[healthy]` table.
    pub healthy: Option<Value>,
    /// The `[near]` table.
    pub near: Option<Value>,
    /// Replace invalid UTF-8 in a Buffer with U+FFFD instead of refusing it.
    pub lossy: Option<bool>,
    /// `StreamGuard` only: hold back what a later cut could remove (default true).
    pub exact: Option<bool>,
}

fn settings(o: &ClampOptions) -> napi::Result<Cow<'static, ClampConfig>> {
    let mut map = Map::new();
    for (name, table) in [
        ("words", &o.words),
        ("substring", &o.substring),
        ("healthy", &o.healthy),
        ("near", &o.near),
    ] {
        if let Some(t) = table {
            map.insert(name.to_string(), t.clone());
        }
    }
    deloop_bindings::clamp_settings_shared(o.seed_compat.unwrap_or(false), map).map_err(js_err)
}

/// One guard that fired.
#[napi(object)]
pub struct Report {
    /// `word_period`, `long_period`, `substring`, `near_duplicate`, `long_unit` or `code_block`.
    pub detector: String,
    /// The period (words, characters, items or lines, by detector).
    pub period: u32,
    /// One copy of the repeated unit.
    pub unit: String,
    /// Byte offset (UTF-8) where the loop starts.
    pub start: f64,
    /// Bytes of the input kept.
    pub keep_bytes: f64,
    /// Bytes of the input removed.
    pub removed_bytes: f64,
}

fn report(r: &ClampReport) -> Report {
    Report {
        detector: detector_name(r.detector),
        period: r.period as u32,
        unit: r.unit.clone(),
        start: r.start as f64,
        keep_bytes: r.keep_bytes as f64,
        removed_bytes: r.removed_bytes as f64,
    }
}

/// What `clamp` returns: the fields of `deloop clamp --json`, in camelCase.
#[napi(object)]
pub struct ClampResult {
    /// The guarded text.
    pub text: String,
    /// True when a loop was cut.
    pub clamped: bool,
    /// The first report's detector.
    pub detector: Option<String>,
    /// The first report's period.
    pub period: Option<u32>,
    /// The first report's unit.
    pub unit: Option<String>,
    /// The first report's start.
    pub start: Option<f64>,
    /// The first report's kept bytes.
    pub keep_bytes: Option<f64>,
    /// The first report's removed bytes.
    pub removed_bytes: Option<f64>,
    /// Every guard that fired, in order.
    pub reports: Vec<Report>,
}

fn result(out: Clamped) -> ClampResult {
    let first = out.report().map(report);
    ClampResult {
        clamped: out.is_clamped(),
        detector: first.as_ref().map(|r| r.detector.clone()),
        period: first.as_ref().map(|r| r.period),
        unit: first.as_ref().map(|r| r.unit.clone()),
        start: first.as_ref().map(|r| r.start),
        keep_bytes: first.as_ref().map(|r| r.keep_bytes),
        removed_bytes: first.as_ref().map(|r| r.removed_bytes),
        reports: out.reports.iter().map(report).collect(),
        text: out.text,
    }
}

/// Cuts repetition loops out of `text`, as `deloop clamp` does.
#[napi]
pub fn clamp(text: TextIn, options: Option<ClampOptions>) -> napi::Result<ClampResult> {
    let options = options.unwrap_or_default();
    let config = settings(&options)?;
    let text = text_of(&text, options.lossy.unwrap_or(false))?;
    Ok(result(clamp_text(&text, &config)))
}

/// The seed's `clampRepetition`: with `seedCompat` exactly the seed's word
/// guard; without it deloop's whole guard (`deloop clamp`'s text).
#[napi]
pub fn clamp_repetition(text: TextIn, options: Option<ClampOptions>) -> napi::Result<String> {
    let options = options.unwrap_or_default();
    let config = settings(&options)?;
    let text = text_of(&text, options.lossy.unwrap_or(false))?;
    Ok(if options.seed_compat.unwrap_or(false) {
        clamp_words(&text, &config).text
    } else {
        clamp_text(&text, &config).text
    })
}

/// The seed's `clampSubstringRepetition`: the substring guard alone (with
/// `seedCompat`, exactly the seed's).
#[napi]
pub fn clamp_substring_repetition(
    text: TextIn,
    options: Option<ClampOptions>,
) -> napi::Result<String> {
    let options = options.unwrap_or_default();
    let config = settings(&options)?;
    let text = text_of(&text, options.lossy.unwrap_or(false))?;
    Ok(clamp_substring(&text, &config).text)
}

/// Where and why a `StreamGuard` cut its stream.
#[napi(object)]
#[derive(Clone)]
pub struct Cut {
    /// The detector that fired.
    pub detector: String,
    /// The period of the loop.
    pub period: u32,
    /// One copy of the repeated unit.
    pub unit: String,
    /// Byte offset in the stream where the loop starts.
    pub start: f64,
    /// Bytes of the stream kept before the marker.
    pub keep_bytes: f64,
    /// What was written after the kept bytes (the marker).
    pub marker: String,
    /// Characters received after the kept prefix, discarded by the cut.
    pub saved_chars: f64,
    /// Bytes of the loop already returned before the cut (0 when exact).
    pub late_bytes: f64,
}

/// A text stream under the loop guard: `push` each chunk and show what it
/// returns; once `cut` is set the stream is over (abort the request).
#[napi]
pub struct StreamGuard {
    stream: GuardedStream,
    bytes: Option<bool>,
    cut: Option<Cut>,
    finished: bool,
}

fn forward(step: Forward<'_>) -> (Vec<u8>, Option<Cut>) {
    let mut out = step.bytes.to_vec();
    let cut = step.cut.map(|c| {
        out.extend_from_slice(c.cut.replacement_tail.as_bytes());
        let r = c.report();
        Cut {
            detector: detector_name(c.detector),
            period: r.period as u32,
            unit: r.unit.clone(),
            start: c.start as f64,
            keep_bytes: c.cut.keep_bytes as f64,
            marker: c.cut.replacement_tail.clone(),
            saved_chars: c.saved_chars as f64,
            late_bytes: c.late_bytes() as f64,
        }
    });
    (out, cut)
}

fn bad_utf8(e: deloop_core::repetition::InvalidUtf8) -> napi::Error {
    js_err(deloop_bindings::Error::input(format!(
        "input is not valid UTF-8 (first invalid byte at offset {}); \
         fix the encoding or pass {{ lossy: true }} to let invalid bytes through",
        e.offset
    )))
}

fn out_value(bytes: Vec<u8>, is_bytes: bool) -> Either<String, Buffer> {
    if is_bytes {
        return Either::B(Buffer::from(bytes));
    }
    // A string stream forwards whole characters only.
    Either::A(
        String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
    )
}

impl StreamGuard {
    fn step(
        &mut self,
        is_bytes: bool,
        f: impl FnOnce(&mut GuardedStream) -> napi::Result<(Vec<u8>, Option<Cut>)>,
    ) -> napi::Result<Either<String, Buffer>> {
        match self.bytes {
            None => self.bytes = Some(is_bytes),
            Some(b) if b == is_bytes => {}
            Some(_) => {
                return Err(js_err(deloop_bindings::Error::input(
                    "push either strings or Buffers to one StreamGuard, not both",
                )))
            }
        }
        if self.cut.is_some() || self.finished {
            return Ok(out_value(Vec::new(), is_bytes));
        }
        let (out, cut) = f(&mut self.stream)?;
        if cut.is_some() {
            self.cut = cut;
        }
        Ok(out_value(out, is_bytes))
    }
}

#[napi]
impl StreamGuard {
    /// A guard with the same settings as `clamp`; `exact` (default true)
    /// holds back what a later cut could still remove, so everything
    /// returned is safe to show.
    #[napi(constructor)]
    pub fn new(options: Option<ClampOptions>) -> napi::Result<Self> {
        let options = options.unwrap_or_default();
        let config = settings(&options)?;
        Ok(StreamGuard {
            stream: GuardedStream::new(config.into_owned())
                .exact(options.exact.unwrap_or(true))
                .lossy(options.lossy.unwrap_or(false)),
            bytes: None,
            cut: None,
            finished: false,
        })
    }

    /// Feeds one chunk (string or Buffer) and returns what may be shown now
    /// (of the same type), the marker included when the guard fires.
    #[napi]
    pub fn push(&mut self, chunk: TextIn) -> napi::Result<Either<String, Buffer>> {
        match chunk {
            Either::A(s) => self.step(false, |g| Ok(forward(g.push(&s)))),
            Either::B(b) => self.step(true, |g| g.push_bytes(&b).map(forward).map_err(bad_utf8)),
        }
    }

    /// Ends the stream: what was held back (and the marker when a loop at
    /// the very end is cut now).
    #[napi]
    pub fn finish(&mut self) -> napi::Result<Either<String, Buffer>> {
        let is_bytes = self.bytes.unwrap_or(false);
        let out = self.step(is_bytes, |g| g.finish().map(forward).map_err(bad_utf8))?;
        self.finished = true;
        Ok(out)
    }

    /// The cut, once the guard fired.
    #[napi(getter)]
    pub fn cut(&self) -> Option<Cut> {
        self.cut.clone()
    }

    /// Bytes received so far.
    #[napi(getter)]
    pub fn received(&self) -> f64 {
        self.stream.received() as f64
    }
}

/// Options of `rescueJson` and `repairJson`.
#[napi(object)]
#[derive(Default)]
pub struct RescueOptions {
    /// Replace invalid UTF-8 in a Buffer with U+FFFD instead of refusing it.
    pub lossy: Option<bool>,
}

/// The value of `key` from broken JSON model output (`deloop rescue`), or
/// with no key the whole repaired document, as compact JSON text:
/// `index.js` parses it with `JSON.parse`, which takes any depth and reads
/// numbers as the command line's JSON readers do.
#[napi]
pub fn rescue_json(
    text: TextIn,
    key: Option<String>,
    options: Option<RescueOptions>,
) -> napi::Result<String> {
    let lossy = options.and_then(|o| o.lossy).unwrap_or(false);
    let text = text_of(&text, lossy)?;
    deloop_bindings::rescue(&text, key.as_deref())
        .map(|v| v.to_string())
        .map_err(js_err)
}

/// One valid JSON document (compact text) recovered from broken model
/// output, as `deloop repair` prints it.
#[napi]
pub fn repair_json(text: TextIn, options: Option<RescueOptions>) -> napi::Result<String> {
    let lossy = options.and_then(|o| o.lossy).unwrap_or(false);
    let text = text_of(&text, lossy)?;
    deloop_bindings::repair(&text).map_err(js_err)
}
