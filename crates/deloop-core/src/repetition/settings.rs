//! Guard settings as the command line and the language packages take them:
//! the seed's rules, or the config file's tables (`[words]`, `[substring]`,
//! `[healthy]`, `[near]`) as a JSON object, checked against the one table
//! of bounds ([`super::bounds`]). One flow, so `deloop clamp`, the Python
//! package and the Node package refuse the same values with the same
//! message.

use serde_json::Value;

use super::bounds::OutOfBounds;
use super::config::ClampConfig;

/// Why guard settings were refused. The message names the key at fault and
/// what to do next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// Both `seed_compat` and tables were given.
    #[error("seed_compat and the guard tables both set the guard rules; use one of them")]
    Conflict,
    /// An unknown key, a value of the wrong type, or not an object.
    #[error("invalid guard config: {0} (keys are listed in docs/repetition.md)")]
    Invalid(String),
    /// A value outside its bound.
    #[error(
        "guard setting {0}; change the flag or config value \
         (the bounds are listed in docs/repetition.md)"
    )]
    OutOfBounds(#[from] OutOfBounds),
}

/// The guard settings from the seed's rules (`seed_compat`) or from
/// `tables` (a JSON object with any of the config file's tables; missing
/// keys take the defaults; `null` or `{}` is the default guard), checked
/// against [`super::bounds::BOUNDS`].
///
/// ```
/// use deloop_core::repetition::{settings, ClampConfig};
/// use serde_json::json;
///
/// let c = settings(false, json!({"words": {"max_period": 8}})).unwrap();
/// assert_eq!(c.words.max_period, 8);
/// assert_eq!(settings(true, json!(null)).unwrap(), ClampConfig::seed_compat());
/// let e = settings(false, json!({"words": {"max_period": 40}})).unwrap_err();
/// assert_eq!(
///     e.to_string(),
///     "guard setting words.max_period = 40 is out of range: expected 1 to 16 (short periods); \
///      change the flag or config value (the bounds are listed in docs/repetition.md)"
/// );
/// ```
pub fn settings(seed_compat: bool, tables: Value) -> Result<ClampConfig, SettingsError> {
    let empty = match &tables {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        _ => false,
    };
    let config = match (seed_compat, empty) {
        (true, false) => return Err(SettingsError::Conflict),
        (true, true) => ClampConfig::seed_compat(),
        (false, true) => ClampConfig::default(),
        (false, false) => {
            serde_json::from_value(tables).map_err(|e| SettingsError::Invalid(e.to_string()))?
        }
    };
    config.check_bounds()?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_error_names_its_cause() {
        assert_eq!(
            settings(true, json!({"words": {}})),
            Err(SettingsError::Conflict)
        );
        let e = settings(false, json!({"words": {"max_perod": 3}})).unwrap_err();
        assert!(matches!(e, SettingsError::Invalid(_)));
        assert!(e.to_string().contains("max_perod"), "{e}");
        let e = settings(false, json!([1])).unwrap_err();
        assert!(matches!(e, SettingsError::Invalid(_)), "{e}");
        let e = settings(false, json!({"substring": {"min_copies": 1}})).unwrap_err();
        assert!(e.to_string().contains("substring.min_copies = 1"), "{e}");
        assert_eq!(settings(false, json!({})).unwrap(), ClampConfig::default());
    }
}
