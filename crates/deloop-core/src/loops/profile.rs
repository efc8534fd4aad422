//! Profiles: which rules the guard applies.

use std::fmt;
use std::str::FromStr;

/// A detection profile: `default`, `openclaw` or `strict`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(
    feature = "openapi",
    derive(utoipa::ToSchema),
    schema(as = LoopProfile, rename_all = "lowercase")
)]
pub enum Profile {
    /// deloop's own rules: everything OpenClaw does, plus back-to-back
    /// streaks and cycles, content-based hashing of plain results, sticky
    /// blocks for every detector. Never critical while results change.
    #[default]
    Default,
    /// Reproduces OpenClaw's shipped detector verdict for verdict (level,
    /// detector and count), weaknesses included.
    OpenClaw,
    /// The anti-loop protocol (seed 002) on top of `default`: the same
    /// procedure with the same result twice in a row terminates the run.
    Strict,
}

impl Profile {
    /// The profile's name as used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Default => "default",
            Profile::OpenClaw => "openclaw",
            Profile::Strict => "strict",
        }
    }

    /// All profiles.
    pub const ALL: [Profile; 3] = [Profile::Default, Profile::OpenClaw, Profile::Strict];
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Profile {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "default" => Ok(Profile::Default),
            "openclaw" => Ok(Profile::OpenClaw),
            "strict" => Ok(Profile::Strict),
            other => Err(format!(
                "unknown profile {other:?}; expected default, openclaw or strict"
            )),
        }
    }
}
