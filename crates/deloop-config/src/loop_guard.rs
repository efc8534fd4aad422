//! The tool-loop guard a service judges calls with: a profile, and
//! OpenClaw's `tools.loopDetection` block read from a file (JSON5 or JSON,
//! per-agent overrides included, as `deloop check --config` reads it).
//! `[server.sessions]` and `[proxy]` each name their own; this reads either.

use std::path::Path;

use deloop_core::loops::{LoopConfig, Profile};

use crate::server::SettingsError;

/// A profile and loop config, read and checked.
#[derive(Debug, Clone)]
pub struct LoopGuardSettings {
    /// The profile: the setting's, else the loop config's `profile`, else
    /// `default`.
    pub profile: Profile,
    /// The loop config (the defaults without a file).
    pub config: LoopConfig,
    /// The values the loader adjusted, one line each
    /// (`FILE: KEY FROM adjusted to TO (why)`), for the caller to log.
    pub adjustments: Vec<String>,
}

/// Reads a profile name; an unknown one is an error naming `key` and the
/// profiles there are.
pub fn parse_profile(key: &'static str, name: &str) -> Result<Profile, SettingsError> {
    name.parse().map_err(|_| SettingsError {
        key,
        message: format!("{name:?} is not one of {}", Profile::names_list()),
    })
}

impl LoopGuardSettings {
    /// Reads the settings `profile` and `file`, each given as (key, value);
    /// errors name the key.
    pub fn load(
        profile: (&'static str, Option<&str>),
        file: (&'static str, Option<&Path>),
    ) -> Result<Self, SettingsError> {
        let (config, adjustments) = match file.1 {
            None => (LoopConfig::default(), Vec::new()),
            Some(path) => read(file.0, path)?,
        };
        let profile = match profile.1 {
            Some(name) => parse_profile(profile.0, name)?,
            None => config.base().profile.unwrap_or_default(),
        };
        Ok(LoopGuardSettings {
            profile,
            config,
            adjustments,
        })
    }
}

fn read(key: &'static str, path: &Path) -> Result<(LoopConfig, Vec<String>), SettingsError> {
    let text = std::fs::read_to_string(path).map_err(|e| SettingsError {
        key,
        message: format!("cannot read {}: {e}", path.display()),
    })?;
    let (config, adjustments) = LoopConfig::from_json5(&text).map_err(|e| SettingsError {
        key,
        message: format!(
            "{}: {e} (the keys are listed in docs/loops.md)",
            path.display()
        ),
    })?;
    let notes = adjustments
        .into_iter()
        .map(|a| {
            format!(
                "{}: {} {} adjusted to {} ({})",
                path.display(),
                a.key,
                a.from,
                a.to,
                a.reason
            )
        })
        .collect();
    Ok((config, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROFILE: &str = "proxy.loop_profile";
    const FILE: &str = "proxy.loop_config";

    #[test]
    fn defaults_without_settings() {
        let s = LoopGuardSettings::load((PROFILE, None), (FILE, None)).unwrap();
        assert_eq!(s.profile, Profile::Default);
        assert!(s.adjustments.is_empty());
    }

    #[test]
    fn the_file_gives_the_profile_unless_the_setting_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("loops.json5");
        std::fs::write(
            &path,
            "{ tools: { loopDetection: { profile: 'strict', criticalThreshold: 2, warningThreshold: 5 } } }",
        )
        .unwrap();
        let s = LoopGuardSettings::load((PROFILE, None), (FILE, Some(&path))).unwrap();
        assert_eq!(s.profile, Profile::Strict);
        let s = LoopGuardSettings::load((PROFILE, Some("openclaw")), (FILE, Some(&path))).unwrap();
        assert_eq!(s.profile, Profile::OpenClaw);
        assert!(
            s.adjustments.iter().any(|a| a.contains("adjusted")),
            "{:?}",
            s.adjustments
        );
    }

    #[test]
    fn errors_name_the_key() {
        let err = LoopGuardSettings::load((PROFILE, Some("lenient")), (FILE, None)).unwrap_err();
        assert_eq!(err.key, PROFILE);
        assert!(err.message.contains("default, openclaw, strict"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("absent.json5");
        let err = LoopGuardSettings::load((PROFILE, None), (FILE, Some(&missing))).unwrap_err();
        assert_eq!(err.key, FILE);
        let bad = dir.path().join("bad.json5");
        std::fs::write(&bad, "{ tools: { loopDetection: { nope: 1 } } }").unwrap();
        let err = LoopGuardSettings::load((PROFILE, None), (FILE, Some(&bad))).unwrap_err();
        assert_eq!(err.key, FILE);
        assert!(err.message.contains("docs/loops.md"), "{err}");
    }
}
