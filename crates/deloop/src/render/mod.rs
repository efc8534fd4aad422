//! Rendering: every human and machine (JSON) output format of the CLI lives
//! here, one module per command family. Library crates never format text.

pub mod check;
pub mod clamp;
pub mod oracle;
pub mod rescue;
pub mod search;
