//! The Node package `deloop` (the native part, loaded by `index.js`):
//! deloop's guards through napi-rs. Each function converts JavaScript
//! values, calls the shared flow in `deloop_bindings` (the command
//! line's), and converts the answer or the error back; nothing is judged
//! here. Errors are thrown with `code` `InvalidArg` (bad input or
//! settings) or `GenericFailure` (nothing to rescue), which `index.js`
//! turns into `InputError` and `NotFoundError`.
#![deny(unsafe_code)]
// napi-derive registers the exports only outside `cfg(test)`, so a test
// build (clippy --all-targets) sees them unused.
#![cfg_attr(test, allow(dead_code))]

mod loops;
mod text;

use std::borrow::Cow;

use napi::bindgen_prelude::{Buffer, Either};
use napi::{Error, Status};

use deloop_bindings::ErrorKind;

/// The shared error as a JavaScript error.
pub(crate) fn js_err(e: deloop_bindings::Error) -> Error {
    match e.kind {
        ErrorKind::Input => Error::new(Status::InvalidArg, e.message),
        ErrorKind::NotFound => Error::new(Status::GenericFailure, e.message),
    }
}

/// A text input: a string, or a Buffer that must be UTF-8 (unless lossy).
pub(crate) type TextIn = Either<String, Buffer>;

/// The text, decoding a Buffer with the command line's message on invalid
/// UTF-8.
pub(crate) fn text_of(input: &TextIn, lossy: bool) -> napi::Result<Cow<'_, str>> {
    match input {
        Either::A(s) => Ok(Cow::Borrowed(s)),
        // A Buffer is read where it is, not copied.
        Either::B(b) => deloop_bindings::decode_slice(b, lossy, "{ lossy: true }").map_err(js_err),
    }
}
