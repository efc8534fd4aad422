//! Optional API-key auth. Keys come from `DELOOP_API_KEYS` (comma
//! separated) and a key file (`server.api_keys_file`,
//! `proxy.api_keys_file`: one per line, `#` comments). Keys are compared in
//! constant time (as SHA-256 digests, so neither the content nor the length
//! of a key leaks through timing) and never logged.

use std::path::Path;

use deloop_config::SettingsError;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The accepted keys, as digests.
#[derive(Clone, Default)]
pub struct ApiKeys {
    digests: Vec<[u8; 32]>,
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print keys, not even their digests.
        write!(f, "ApiKeys({} keys)", self.digests.len())
    }
}

/// What a request's credentials are worth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Auth is off, or the key is accepted.
    Granted,
    /// No key was sent (401).
    Missing,
    /// A key was sent and is not accepted (403).
    Denied,
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

impl ApiKeys {
    /// Keys from a comma-separated list and the lines of a key file.
    pub fn parse(list: Option<&str>, file_text: Option<&str>) -> Self {
        let from_list = list.into_iter().flat_map(|l| l.split(','));
        let from_file = file_text
            .into_iter()
            .flat_map(str::lines)
            .filter(|l| !l.trim_start().starts_with('#'));
        let digests = from_list
            .chain(from_file)
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(digest)
            .collect();
        ApiKeys { digests }
    }

    /// Keys from a comma-separated list (`DELOOP_API_KEYS`) and the key
    /// file named by the setting `key` (`server.api_keys_file`, …); an
    /// unreadable file is an error naming that setting.
    pub fn load(
        list: Option<&str>,
        file: Option<&Path>,
        key: &'static str,
    ) -> Result<Self, SettingsError> {
        let text = match file {
            None => None,
            Some(p) => Some(std::fs::read_to_string(p).map_err(|e| SettingsError {
                key,
                message: format!("cannot read {}: {e}", p.display()),
            })?),
        };
        Ok(ApiKeys::parse(list, text.as_deref()))
    }

    /// True when no key is configured (auth off).
    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.digests.len()
    }

    /// Checks a presented key (`None`: none was sent).
    pub fn check(&self, presented: Option<&str>) -> Access {
        if self.digests.is_empty() {
            return Access::Granted;
        }
        let Some(key) = presented.map(str::trim).filter(|k| !k.is_empty()) else {
            return Access::Missing;
        };
        let d = digest(key);
        // Compare with every key, without stopping at a match.
        let mut ok = subtle::Choice::from(0);
        for k in &self.digests {
            ok |= k.ct_eq(&d);
        }
        if bool::from(ok) {
            Access::Granted
        } else {
            Access::Denied
        }
    }
}

/// The bearer token of an `Authorization` header value.
pub fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_from_list_and_file() {
        let k = ApiKeys::parse(Some("a, b"), Some("# comment\nc\n\n"));
        assert_eq!(k.len(), 3);
        assert_eq!(k.check(Some("c")), Access::Granted);
        assert_eq!(k.check(Some("d")), Access::Denied);
        assert_eq!(k.check(None), Access::Missing);
        assert_eq!(k.check(Some("  ")), Access::Missing);
    }

    #[test]
    fn no_keys_means_open() {
        assert_eq!(ApiKeys::default().check(None), Access::Granted);
    }

    #[test]
    fn bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("abc"), None);
    }

    #[test]
    fn load_reads_the_file_and_names_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("keys");
        std::fs::write(&file, "# team\nfile-key\n").unwrap();
        let k = ApiKeys::load(Some("env-key"), Some(&file), "proxy.api_keys_file").unwrap();
        assert_eq!(k.check(Some("file-key")), Access::Granted);
        assert_eq!(k.check(Some("env-key")), Access::Granted);
        let err = ApiKeys::load(
            None,
            Some(&dir.path().join("absent")),
            "proxy.api_keys_file",
        )
        .unwrap_err();
        assert_eq!(err.key, "proxy.api_keys_file");
        assert!(err.to_string().contains("cannot read"), "{err}");
    }

    #[test]
    fn debug_never_shows_keys() {
        let k = ApiKeys::parse(Some("secret-key"), None);
        assert!(!format!("{k:?}").contains("secret"));
    }
}
