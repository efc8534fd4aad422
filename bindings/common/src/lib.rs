//! # deloop-bindings
//!
//! What the Python package (`bindings/python`) and the Node package
//! (`bindings/node`) share: each entry point calls the same flow as the
//! command line (`deloop_core`, `deloop_check`, `deloop_sessions`) and
//! fails with the command line's message. No Python or Node types here;
//! each package only converts values and errors.
//!
//! ```
//! use deloop_bindings::{clamp_settings, rescue, repair};
//! use serde_json::json;
//!
//! let config = clamp_settings(false, json!({"words": {"min_run": 20}})).unwrap();
//! assert_eq!(config.words.min_run, 20);
//! assert_eq!(rescue("Sure! {\"answer\": \"yes\",}", Some("answer")).unwrap(), json!("yes"));
//! assert_eq!(repair("```json\n[1, 2,]\n```").unwrap(), "[1,2]");
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod loops;

use std::borrow::Cow;
use std::sync::OnceLock;

use deloop_core::repetition::{settings, ClampConfig};
use deloop_core::rescue::{repair_json_with, rescue_with, RescueError, RescueOptions};
use serde_json::Value;

pub use loops::{check, loop_config, CheckRequest, LoopGuard};

/// Inputs longer than this many bytes are guarded without holding the
/// interpreter's lock (Python's GIL), so other threads run meanwhile.
pub const RELEASE_LOCK_BYTES: usize = 64 * 1024;

/// What kind of failure an [`Error`] is; each package maps it to its own
/// exception or error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The caller's input or settings are at fault (the command line's exit
    /// code 2).
    Input,
    /// The input holds nothing to rescue (the command line's exit code 1).
    NotFound,
}

/// A failure with the command line's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// Input or nothing found.
    pub kind: ErrorKind,
    /// What is wrong and what to do next.
    pub message: String,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl Error {
    /// Bad input or settings.
    pub fn input(message: impl Into<String>) -> Self {
        Error {
            kind: ErrorKind::Input,
            message: message.into(),
        }
    }
}

/// Bytes as text: invalid UTF-8 is refused with the offset of the first
/// invalid byte, unless `lossy`, which replaces each invalid sequence with
/// U+FFFD. `lossy_hint` names the option in the caller's language
/// (`lossy=True`, `{ lossy: true }`).
pub fn decode(bytes: Vec<u8>, lossy: bool, lossy_hint: &str) -> Result<String, Error> {
    match String::from_utf8(bytes) {
        Ok(s) => Ok(s),
        Err(e) if lossy => Ok(String::from_utf8_lossy(e.as_bytes()).into_owned()),
        Err(e) => Err(not_utf8(e.utf8_error(), lossy_hint)),
    }
}

/// [`decode`] without a copy when the bytes are valid UTF-8.
pub fn decode_slice<'a>(
    bytes: &'a [u8],
    lossy: bool,
    lossy_hint: &str,
) -> Result<Cow<'a, str>, Error> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(Cow::Borrowed(s)),
        Err(_) if lossy => Ok(String::from_utf8_lossy(bytes)),
        Err(e) => Err(not_utf8(e, lossy_hint)),
    }
}

fn not_utf8(e: std::str::Utf8Error, lossy_hint: &str) -> Error {
    Error::input(format!(
        "input is not valid UTF-8 (first invalid byte at offset {}); \
         fix the encoding or pass {lossy_hint} to replace invalid bytes with U+FFFD",
        e.valid_up_to()
    ))
}

/// The guard settings: the seed's rules, or the config file's tables
/// (`words`, `substring`, `healthy`, `near`) as a JSON object, refused
/// out of bounds with `deloop clamp`'s message.
pub fn clamp_settings(seed_compat: bool, tables: Value) -> Result<ClampConfig, Error> {
    settings(seed_compat, tables).map_err(|e| Error::input(e.to_string()))
}

/// [`clamp_settings`] for a call with no tables (`tables` empty) answered
/// by reference to one shared configuration per rule set, built on first
/// use: a call on a short text costs a few microseconds, and building and
/// copying the configuration (its word lists and markers) was a quarter
/// of that.
pub fn clamp_settings_shared(
    seed_compat: bool,
    tables: serde_json::Map<String, Value>,
) -> Result<Cow<'static, ClampConfig>, Error> {
    static DEFAULT: OnceLock<ClampConfig> = OnceLock::new();
    static SEED: OnceLock<ClampConfig> = OnceLock::new();
    if !tables.is_empty() {
        return clamp_settings(seed_compat, Value::Object(tables)).map(Cow::Owned);
    }
    let cell = if seed_compat { &SEED } else { &DEFAULT };
    if let Some(config) = cell.get() {
        return Ok(Cow::Borrowed(config));
    }
    let config = clamp_settings(seed_compat, Value::Object(tables))?;
    Ok(Cow::Borrowed(cell.get_or_init(|| config)))
}

/// The value of `key` (found at any depth, as `deloop rescue`), or with no
/// key the whole repaired document (as `deloop repair`).
pub fn rescue(text: &str, key: Option<&str>) -> Result<Value, Error> {
    let opts = RescueOptions::default();
    match key {
        Some(key) => rescue_with(text, key, &opts)
            .map(|r| r.value)
            .map_err(|e| rescue_error(e, RescueCall::Rescue)),
        None => deloop_core::rescue::repair_with(text, &opts)
            .map(|r| r.value)
            .map_err(|e| rescue_error(e, RescueCall::Repair)),
    }
}

/// One valid JSON document recovered from `text`, compact, as
/// `deloop repair` prints it (without the final newline).
pub fn repair(text: &str) -> Result<String, Error> {
    repair_json_with(text, &RescueOptions::default())
        .map(|r| r.json)
        .map_err(|e| rescue_error(e, RescueCall::Repair))
}

#[derive(Clone, Copy)]
enum RescueCall {
    Rescue,
    Repair,
}

/// The command line's messages for `rescue` and `repair`.
fn rescue_error(e: RescueError, call: RescueCall) -> Error {
    if e.is_input_limit() {
        return Error::input(e.to_string());
    }
    let message = match call {
        RescueCall::Rescue => {
            format!("{e}; nothing rescued (check the key, or use `deloop repair` to see the JSON)")
        }
        RescueCall::Repair => {
            format!("{e}: the input holds no JSON value to repair (is this the model's reply?)")
        }
    };
    Error {
        kind: ErrorKind::NotFound,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_the_command_line_messages() {
        let e = decode(b"ab\xffcd".to_vec(), false, "lossy=True").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Input);
        assert!(e.message.contains("offset 2"), "{e}");
        assert!(e.message.contains("lossy=True"), "{e}");
        assert_eq!(decode(b"ab\xff".to_vec(), true, "").unwrap(), "ab\u{fffd}");

        let e = rescue("no json here", Some("answer")).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound);
        assert!(e.message.contains("nothing rescued"), "{e}");
        let e = repair("just prose").unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound);
        let deep = "[".repeat(5000);
        assert_eq!(repair(&deep).unwrap_err().kind, ErrorKind::Input);

        let e = clamp_settings(false, serde_json::json!({"words": {"max_period": 0}})).unwrap_err();
        assert!(
            e.message.starts_with("guard setting words.max_period = 0"),
            "{e}"
        );
    }
}
