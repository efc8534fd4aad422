//! Errors of the rescue guard.

use serde::Serialize;

/// Why nothing could be rescued or repaired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RescueError {
    /// The input holds no JSON value at all (only prose, or nothing).
    #[error("no JSON object or array found in the input")]
    NoJson,
    /// JSON was found, but no object in it has the requested key.
    #[error("JSON found, but no object in it has the key {key:?}")]
    KeyNotFound {
        /// The key that was looked for.
        key: String,
    },
    /// The input is larger than [`RescueOptions::max_input_bytes`](super::RescueOptions).
    #[error("input is {actual} bytes, over the limit of {limit} bytes; raise max_input_bytes or cut the input")]
    TooLarge {
        /// The configured limit in bytes.
        limit: usize,
        /// The size of the input in bytes.
        actual: usize,
    },
    /// Brackets are nested deeper than [`RescueOptions::max_depth`](super::RescueOptions).
    #[error(
        "JSON nested deeper than the limit of {limit} levels; raise the limit (`--max-depth` on the command line, `RescueOptions::max_depth` in the library) if this is intended"
    )]
    TooDeep {
        /// The configured depth limit.
        limit: usize,
    },
}

impl RescueError {
    /// Whether the input broke a limit (too large, too deep): the caller's
    /// input is at fault, rather than there being nothing to rescue. The CLI
    /// exits 2 on it, the server answers 422.
    pub fn is_input_limit(&self) -> bool {
        matches!(
            self,
            RescueError::TooLarge { .. } | RescueError::TooDeep { .. }
        )
    }
}
