//! Python values to and from JSON values, and text inputs (`str` or
//! `bytes`) to Rust strings.

use std::borrow::Cow;

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use serde_json::Value;

use crate::py_err;

/// A text input: `str`, or `bytes` that must be UTF-8 (unless lossy).
/// Neither is copied on the way in: a `str` is held as its UTF-8 encoding,
/// `bytes` are read where they are.
#[derive(FromPyObject)]
pub enum TextIn<'py> {
    /// A Python string.
    Str(PyBackedStr),
    /// Raw bytes.
    Bytes(Bound<'py, PyBytes>),
}

impl TextIn<'_> {
    /// The text, decoding bytes with the command line's message on
    /// invalid UTF-8.
    pub fn text(&self, lossy: bool) -> PyResult<Cow<'_, str>> {
        match self {
            TextIn::Str(s) => Ok(Cow::Borrowed(s)),
            TextIn::Bytes(b) => {
                deloop_bindings::decode_slice(b.as_bytes(), lossy, "lossy=True").map_err(py_err)
            }
        }
    }

    /// The input's bytes (a `str` as UTF-8).
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            TextIn::Str(s) => s.as_bytes(),
            TextIn::Bytes(b) => b.as_bytes(),
        }
    }
}

/// A Python value (dicts, lists, strings, numbers, booleans, None) as
/// JSON, through the standard `json` module (cycles and unsupported types
/// are its errors; nesting deeper than serde_json's limit of 128 is an
/// [`crate::InputError`]).
pub fn to_json(what: &str, obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    let py = obj.py();
    let text: String = py
        .import("json")?
        .call_method1("dumps", (obj,))?
        .extract()?;
    serde_json::from_str(&text).map_err(|e| {
        py_err(deloop_bindings::Error::input(format!(
            "{what} is not JSON: {e}"
        )))
    })
}

/// A JSON value as Python objects (dict keys keep their order). The depth
/// is bounded by the value's producer (the rescue parser's `max_depth`).
pub fn from_json<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(from_json(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, item) in map {
                dict.set_item(k, from_json(py, item)?)?;
            }
            dict.into_any()
        }
    })
}
