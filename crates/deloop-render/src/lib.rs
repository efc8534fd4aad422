//! # deloop-render
//!
//! Every output format of deloop in one place (the role of ripgrep's
//! printer): the human text, the JSON values and the JSON lines that the
//! command line prints, and that the HTTP server and the MCP server answer
//! with. One function builds each value, so `deloop clamp --json` and
//! `POST /v1/clamp` give the same JSON value for the same input.
//!
//! * [`clamp`]: `deloop clamp` (guarded text, `--json` object, stream notes).
//! * [`rescue`]: `deloop rescue` and `deloop repair` (values, reports).
//! * [`check`]: `deloop check` (the JSON lines schema and the human
//!   timeline, as sinks of the check flow, `deloop_check::run`).
//!
//! No flow lives here, no async and no global state; the only I/O is
//! writing to the [`std::io::Write`] the caller hands in.
//!
//! ```
//! use deloop_core::repetition::{clamp, ClampConfig};
//! use deloop_core::rescue::repair;
//!
//! let text = format!("Intro sentence here. {}", "the cat sat on the mat ".repeat(20));
//! let out = clamp(&text, &ClampConfig::default());
//! let value = deloop_render::clamp::json_value(&out);
//! assert_eq!(value["clamped"], true);
//! assert_eq!(value["detector"], "word_period");
//! // The string form is the value plus a newline, as `deloop clamp --json` prints it.
//! assert_eq!(deloop_render::clamp::json(&out), format!("{value}\n"));
//!
//! let fixed = repair("```json\n{\"a\": [1, 2,]}\n```").unwrap();
//! let value = deloop_render::rescue::repair_value(&fixed.value, &fixed.repairs);
//! assert_eq!(value["value"], serde_json::json!({"a": [1, 2]}));
//! assert!(!value["repairs"].as_array().unwrap().is_empty());
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod check;
pub mod clamp;
pub mod rescue;
