//! The oracle's small data types: modes, retrieved passages and citations.

use serde::{Deserialize, Serialize};

/// How the oracle answers (seed `synthesizeAnswer` modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Mode {
    /// Rich markdown that cites its sources.
    #[default]
    Oracle,
    /// Short, plain answers.
    Help,
    /// Teaches step by step and ends with open questions.
    Tutor,
}

impl Mode {
    /// The mode's name: `oracle`, `help` or `tutor`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Oracle => "oracle",
            Mode::Help => "help",
            Mode::Tutor => "tutor",
        }
    }

    /// Parses `oracle`, `help` or `tutor` (any case).
    pub fn parse(s: &str) -> Option<Mode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "oracle" => Some(Mode::Oracle),
            "help" => Some(Mode::Help),
            "tutor" => Some(Mode::Tutor),
            _ => None,
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One retrieved chunk as the oracle sees it: what it says and where it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Passage {
    /// The source path (or document id) the chunk came from.
    pub source: String,
    /// First line of the chunk in the source (1-based).
    pub start_line: u32,
    /// Last line of the chunk in the source (1-based, inclusive).
    pub end_line: u32,
    /// The headings above the chunk, outermost first.
    pub heading_trail: Vec<String>,
    /// The chunk text.
    pub text: String,
    /// The retrieval score (higher is better; scale depends on the retriever).
    pub score: f64,
}

/// A source the answer cites: a retrieved chunk's path and lines.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Citation {
    /// The source path.
    pub source: String,
    /// First cited line (1-based).
    pub start_line: u32,
    /// Last cited line (1-based, inclusive).
    pub end_line: u32,
}
