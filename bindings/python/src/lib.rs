//! The Python package `deloop` (module `deloop._native`): deloop's guards
//! through PyO3. Each function converts Python values, calls the shared
//! flow in `deloop_bindings` (the command line's), and converts the answer
//! or the error back; nothing is judged here. Inputs over
//! [`RELEASE_LOCK_BYTES`] are guarded with the GIL released.
#![forbid(unsafe_code)]

mod convert;
mod loops;
mod text;

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use deloop_bindings::{ErrorKind, RELEASE_LOCK_BYTES};

create_exception!(
    deloop,
    DeloopError,
    PyValueError,
    "Base of deloop's errors (a ValueError): the message is the command line's."
);
create_exception!(
    deloop,
    InputError,
    DeloopError,
    "Bad input or settings: invalid UTF-8, out-of-range settings, inputs over a limit, malformed transcripts."
);
create_exception!(
    deloop,
    NotFoundError,
    DeloopError,
    "The input holds nothing to rescue (no JSON, or no such key)."
);

/// The shared error as the package's exception.
pub(crate) fn py_err(e: deloop_bindings::Error) -> PyErr {
    match e.kind {
        ErrorKind::Input => InputError::new_err(e.message),
        ErrorKind::NotFound => NotFoundError::new_err(e.message),
    }
}

/// Runs `f` without the GIL when the input is large, so other Python
/// threads run meanwhile; small inputs keep it (releasing costs more than
/// guarding them).
pub(crate) fn guarded<T: Send>(py: Python<'_>, len: usize, f: impl FnOnce() -> T + Send) -> T {
    if len > RELEASE_LOCK_BYTES {
        py.detach(f)
    } else {
        f()
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("DeloopError", py.get_type::<DeloopError>())?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("RELEASE_GIL_BYTES", RELEASE_LOCK_BYTES)?;
    m.add_class::<text::Clamp>()?;
    m.add_class::<text::Report>()?;
    m.add_class::<text::StreamGuard>()?;
    m.add_class::<text::Cut>()?;
    m.add_class::<loops::Verdict>()?;
    m.add_class::<loops::ToolLoopGuard>()?;
    m.add_function(wrap_pyfunction!(text::clamp, m)?)?;
    m.add_function(wrap_pyfunction!(text::rescue_json, m)?)?;
    m.add_function(wrap_pyfunction!(text::repair_json, m)?)?;
    m.add_function(wrap_pyfunction!(loops::check, m)?)?;
    Ok(())
}
