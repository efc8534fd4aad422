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

    /// One line on what the profile does (`deloop check --help`).
    pub fn summary(self) -> &'static str {
        match self {
            Profile::Default => {
                "deloop's own rules (streaks, cycles, content hashing, sticky blocks)"
            }
            Profile::OpenClaw => "OpenClaw's shipped detector, verdict for verdict",
            Profile::Strict => "the anti-loop protocol: same procedure + same result twice = stop",
        }
    }

    /// All profiles: the one list every parser, message and schema reads.
    pub const ALL: [Profile; 3] = [Profile::Default, Profile::OpenClaw, Profile::Strict];

    /// The profiles' names, in [`Profile::ALL`] order, for schemas.
    pub fn names() -> [&'static str; 3] {
        Profile::ALL.map(Profile::name)
    }

    /// The profiles' names joined for a message: `default, openclaw, strict`.
    ///
    /// ```
    /// use deloop_core::loops::Profile;
    /// assert_eq!(Profile::names_list(), "default, openclaw, strict");
    /// ```
    pub fn names_list() -> String {
        Profile::names().join(", ")
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Profile {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        Profile::ALL
            .into_iter()
            .find(|p| p.name() == wanted)
            .ok_or_else(|| {
                format!(
                    "unknown profile {wanted:?}; expected one of {}",
                    Profile::names_list()
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::Profile;

    #[test]
    fn every_name_parses_back_and_unknown_names_list_them_all() {
        for p in Profile::ALL {
            assert_eq!(p.name().parse::<Profile>(), Ok(p));
            assert_eq!(p.name().to_uppercase().parse::<Profile>(), Ok(p));
            assert!(!p.summary().is_empty());
        }
        let err = "lenient".parse::<Profile>().unwrap_err();
        for name in Profile::names() {
            assert!(err.contains(name), "{err}");
        }
    }
}
