//! The text guards: `clamp`, `StreamGuard`, `rescue_json`, `repair_json`.

use std::borrow::Cow;

use deloop_core::repetition::{
    clamp as clamp_text, ClampConfig, ClampReport, Detector, GuardedStream,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use serde_json::{Map, Value};

use crate::convert::{from_json, to_json, TextIn};
use crate::{guarded, py_err};

fn detector_name(d: Detector) -> String {
    match serde_json::to_value(d) {
        Ok(Value::String(s)) => s,
        _ => format!("{d:?}"),
    }
}

/// The guard settings from the keyword arguments: the seed's rules, or the
/// config file's tables; the defaults are built once.
fn settings(
    seed_compat: bool,
    tables: [(&str, Option<&Bound<'_, PyDict>>); 4],
) -> PyResult<Cow<'static, ClampConfig>> {
    let mut map = Map::new();
    for (name, table) in tables {
        if let Some(t) = table {
            map.insert(name.to_string(), to_json(name, t.as_any())?);
        }
    }
    deloop_bindings::clamp_settings_shared(seed_compat, map).map_err(py_err)
}

/// One guard that fired: what it found and what it removed.
#[pyclass(frozen, get_all, module = "deloop")]
#[derive(Clone)]
pub struct Report {
    /// `word_period`, `long_period`, `substring`, `near_duplicate`,
    /// `long_unit` or `code_block`.
    detector: String,
    /// The period (words, characters, items or lines, by detector).
    period: usize,
    /// One copy of the repeated unit.
    unit: String,
    /// Byte offset (UTF-8) where the loop starts.
    start: usize,
    /// Bytes of the input kept.
    keep_bytes: usize,
    /// Bytes of the input removed.
    removed_bytes: usize,
}

impl Report {
    fn new(r: &ClampReport) -> Self {
        Report {
            detector: detector_name(r.detector),
            period: r.period,
            unit: r.unit.clone(),
            start: r.start,
            keep_bytes: r.keep_bytes,
            removed_bytes: r.removed_bytes,
        }
    }
}

#[pymethods]
impl Report {
    fn __repr__(&self) -> String {
        format!(
            "Report(detector={:?}, period={}, start={}, removed_bytes={})",
            self.detector, self.period, self.start, self.removed_bytes
        )
    }
}

/// What `clamp` returns: the fields of `deloop clamp --json`.
#[pyclass(frozen, get_all, module = "deloop")]
pub struct Clamp {
    text: String,
    clamped: bool,
    detector: Option<String>,
    period: Option<usize>,
    unit: Option<String>,
    start: Option<usize>,
    keep_bytes: Option<usize>,
    removed_bytes: Option<usize>,
    reports: Vec<Report>,
}

#[pymethods]
impl Clamp {
    fn __repr__(&self) -> String {
        match (&self.detector, self.removed_bytes) {
            (Some(d), Some(n)) => format!("Clamp(clamped=True, detector={d:?}, removed_bytes={n})"),
            _ => "Clamp(clamped=False)".to_string(),
        }
    }
}

/// Cuts repetition loops out of `text`, as `deloop clamp` does.
#[pyfunction]
#[pyo3(signature = (text, *, seed_compat=false, words=None, substring=None, healthy=None, near=None, lossy=false))]
#[allow(clippy::too_many_arguments)]
pub fn clamp(
    py: Python<'_>,
    text: TextIn<'_>,
    seed_compat: bool,
    words: Option<&Bound<'_, PyDict>>,
    substring: Option<&Bound<'_, PyDict>>,
    healthy: Option<&Bound<'_, PyDict>>,
    near: Option<&Bound<'_, PyDict>>,
    lossy: bool,
) -> PyResult<Clamp> {
    let config = settings(
        seed_compat,
        [
            ("words", words),
            ("substring", substring),
            ("healthy", healthy),
            ("near", near),
        ],
    )?;
    let text = text.text(lossy)?;
    let out = guarded(py, text.len(), || clamp_text(&text, &config));
    let first = out.report();
    Ok(Clamp {
        clamped: out.is_clamped(),
        detector: first.map(|r| detector_name(r.detector)),
        period: first.map(|r| r.period),
        unit: first.map(|r| r.unit.clone()),
        start: first.map(|r| r.start),
        keep_bytes: first.map(|r| r.keep_bytes),
        removed_bytes: first.map(|r| r.removed_bytes),
        reports: out.reports.iter().map(Report::new).collect(),
        text: out.text,
    })
}

/// Where and why a `StreamGuard` cut its stream.
#[pyclass(frozen, get_all, module = "deloop")]
#[derive(Clone)]
pub struct Cut {
    /// The detector that fired.
    detector: String,
    /// The period of the loop.
    period: usize,
    /// One copy of the repeated unit.
    unit: String,
    /// Byte offset in the stream where the loop starts.
    start: usize,
    /// Bytes of the stream kept before the marker.
    keep_bytes: usize,
    /// What was written after the kept bytes (the marker).
    marker: String,
    /// Characters received after the kept prefix, discarded by the cut.
    saved_chars: usize,
    /// Bytes of the loop already returned before the cut (0 when exact).
    late_bytes: usize,
}

#[pymethods]
impl Cut {
    fn __repr__(&self) -> String {
        format!(
            "Cut(detector={:?}, period={}, start={}, saved_chars={})",
            self.detector, self.period, self.start, self.saved_chars
        )
    }
}

/// A text stream under the loop guard: `push` each chunk and show what it
/// returns; once `cut` is set the stream is over (stop reading it).
#[pyclass(module = "deloop")]
pub struct StreamGuard {
    stream: GuardedStream,
    /// Set by the first push: the stream is `bytes` (else `str`).
    bytes: Option<bool>,
    cut: Option<Cut>,
    finished: bool,
}

impl StreamGuard {
    fn check_kind(&mut self, is_bytes: bool) -> PyResult<()> {
        match self.bytes {
            None => {
                self.bytes = Some(is_bytes);
                Ok(())
            }
            Some(b) if b == is_bytes => Ok(()),
            Some(_) => Err(py_err(deloop_bindings::Error::input(
                "push either str or bytes chunks to one StreamGuard, not both",
            ))),
        }
    }

    /// The bytes to show from one step, with the marker on the cut.
    fn step(
        &mut self,
        is_bytes: bool,
        step: impl FnOnce(&mut GuardedStream) -> Result<(Vec<u8>, Option<Cut>), deloop_bindings::Error>,
    ) -> PyResult<Vec<u8>> {
        self.check_kind(is_bytes)?;
        if self.cut.is_some() || self.finished {
            return Ok(Vec::new());
        }
        let (out, cut) = step(&mut self.stream).map_err(py_err)?;
        if cut.is_some() {
            self.cut = cut;
        }
        Ok(out)
    }
}

fn forward(step: deloop_core::repetition::Forward<'_>) -> (Vec<u8>, Option<Cut>) {
    let mut out = step.bytes.to_vec();
    let cut = step.cut.map(|c| {
        out.extend_from_slice(c.cut.replacement_tail.as_bytes());
        let r = c.report();
        Cut {
            detector: detector_name(c.detector),
            period: r.period,
            unit: r.unit.clone(),
            start: c.start,
            keep_bytes: c.cut.keep_bytes,
            marker: c.cut.replacement_tail.clone(),
            saved_chars: c.saved_chars,
            late_bytes: c.late_bytes(),
        }
    });
    (out, cut)
}

fn bad_utf8(e: deloop_core::repetition::InvalidUtf8) -> deloop_bindings::Error {
    deloop_bindings::Error::input(format!(
        "input is not valid UTF-8 (first invalid byte at offset {}); \
         fix the encoding or pass lossy=True to let invalid bytes through",
        e.offset
    ))
}

fn out_text(py: Python<'_>, bytes: Vec<u8>, is_bytes: bool) -> PyResult<Py<PyAny>> {
    if is_bytes {
        return Ok(PyBytes::new(py, &bytes).into_any().unbind());
    }
    // A str stream forwards whole characters only.
    let s = String::from_utf8(bytes)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    Ok(s.into_pyobject(py)?.into_any().unbind())
}

#[pymethods]
impl StreamGuard {
    /// A guard with the same settings as `clamp`. `exact` (the default)
    /// holds back what a later cut could still remove, so everything
    /// returned is safe to show; `exact=False` returns text as it comes.
    #[new]
    #[pyo3(signature = (*, exact=true, seed_compat=false, words=None, substring=None, healthy=None, near=None, lossy=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        exact: bool,
        seed_compat: bool,
        words: Option<&Bound<'_, PyDict>>,
        substring: Option<&Bound<'_, PyDict>>,
        healthy: Option<&Bound<'_, PyDict>>,
        near: Option<&Bound<'_, PyDict>>,
        lossy: bool,
    ) -> PyResult<Self> {
        let config = settings(
            seed_compat,
            [
                ("words", words),
                ("substring", substring),
                ("healthy", healthy),
                ("near", near),
            ],
        )?;
        Ok(StreamGuard {
            stream: GuardedStream::new(config.into_owned())
                .exact(exact)
                .lossy(lossy),
            bytes: None,
            cut: None,
            finished: false,
        })
    }

    /// Feeds one chunk (`str` or `bytes`) and returns what may be shown
    /// now (of the same type), the cut's marker included when the guard
    /// fires on this chunk.
    fn push(&mut self, py: Python<'_>, chunk: TextIn<'_>) -> PyResult<Py<PyAny>> {
        let (is_bytes, out) = match chunk {
            TextIn::Str(s) => (
                false,
                self.step(false, |g| Ok(forward(guarded(py, s.len(), || g.push(&s)))))?,
            ),
            TextIn::Bytes(b) => {
                let data = b.as_bytes();
                (
                    true,
                    self.step(true, |g| {
                        guarded(py, data.len(), || g.push_bytes(data).map(forward))
                            .map_err(bad_utf8)
                    })?,
                )
            }
        };
        out_text(py, out, is_bytes)
    }

    /// Ends the stream: returns what was held back (and the marker when a
    /// loop at the very end is cut now). Later pushes return nothing.
    fn finish(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let is_bytes = self.bytes.unwrap_or(false);
        let out = self.step(is_bytes, |g| g.finish().map(forward).map_err(bad_utf8))?;
        self.finished = true;
        out_text(py, out, is_bytes)
    }

    /// The cut, once the guard fired (else None).
    #[getter]
    fn cut(&self) -> Option<Cut> {
        self.cut.clone()
    }

    /// Bytes received so far.
    #[getter]
    fn received(&self) -> usize {
        self.stream.received()
    }
}

/// The value of `key` from broken JSON model output (as `deloop rescue`),
/// or with no key the whole repaired document as Python objects.
#[pyfunction]
#[pyo3(signature = (text, key=None, *, lossy=false))]
pub fn rescue_json<'py>(
    py: Python<'py>,
    text: TextIn<'_>,
    key: Option<String>,
    lossy: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let text = text.text(lossy)?;
    let value = guarded(py, text.len(), || {
        deloop_bindings::rescue(&text, key.as_deref())
    });
    from_json(py, &value.map_err(py_err)?)
}

/// One valid JSON document (compact text) recovered from broken model
/// output, as `deloop repair` prints it.
#[pyfunction]
#[pyo3(signature = (text, *, lossy=false))]
pub fn repair_json(py: Python<'_>, text: TextIn<'_>, lossy: bool) -> PyResult<String> {
    let text = text.text(lossy)?;
    guarded(py, text.len(), || deloop_bindings::repair(&text)).map_err(py_err)
}
