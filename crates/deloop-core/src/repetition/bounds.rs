//! The one table of the repetition settings' bounds. Every front door
//! (the CLI, `POST /v1/clamp`, the MCP `clamp` tool, the config loader)
//! rejects a value outside it through [`ClampConfig::check_bounds`], and
//! the engine reads its limits from the same constants, so no bound is
//! written twice.

use crate::repetition::config::ClampConfig;

/// Longest short word period, in tokens (`words.max_period`): the width of
/// the engine's per-period tables.
pub const MAX_PERIOD: usize = crate::repetition::words::W;
/// Largest run and long period, in words (`words.min_run`,
/// `words.long_max_period`).
pub const MAX_RUN_WORDS: usize = 4096;
/// Most copies a rule may ask for (`words.long_run_per_period`,
/// `substring.min_copies`).
pub const MAX_COPIES: usize = 1000;
/// Longest substring unit, in characters (`substring.max_unit`).
pub const MAX_UNIT: usize = crate::repetition::substring::MAX_UNIT_LIMIT;
/// Longest unit of the long-unit rule, in characters (`near.chain_max_unit`).
pub const MAX_CHAIN_UNIT: usize = 64;
/// Largest `healthy.token_flood_bytes`, in bytes.
pub const MAX_FLOOD_BYTES: usize = 65536;
/// Widest few-lines and few-codes windows (`near.line_window`,
/// `near.token_window`): the size of the engine's rings.
pub const MAX_WINDOW: usize = crate::repetition::near::TOKEN_WINDOW;

/// The range one numeric setting must lie in.
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    /// Full key, e.g. `words.max_period`.
    pub key: &'static str,
    /// Smallest value allowed (besides 0 when `zero_turns_off`).
    pub min: usize,
    /// Largest value allowed.
    pub max: usize,
    /// 0 is allowed too and turns the rule off.
    pub zero_turns_off: bool,
    /// The value must be above this key's value (unless 0 and off).
    pub above: Option<&'static str>,
    /// The value must be at most this key's value.
    pub at_most: Option<&'static str>,
    /// What the range means, for the error message.
    pub why: &'static str,
    get: fn(&ClampConfig) -> usize,
}

/// Every bounded setting of [`ClampConfig`], in the order they are checked.
pub const BOUNDS: &[Bound] = &[
    bound("words.max_period", 1, MAX_PERIOD, "short periods", |c| {
        c.words.max_period
    }),
    bound("words.min_run", 1, MAX_RUN_WORDS, "a run in words", |c| {
        c.words.min_run
    }),
    Bound {
        zero_turns_off: true,
        above: Some("words.max_period"),
        ..bound(
            "words.long_max_period",
            1,
            MAX_RUN_WORDS,
            "long periods in words",
            |c| c.words.long_max_period,
        )
    },
    bound("words.long_run_per_period", 1, MAX_COPIES, "copies", |c| {
        c.words.long_run_per_period
    }),
    bound(
        "words.long_last_copy_percent",
        1,
        100,
        "a percent of one copy",
        |c| c.words.long_last_copy_percent,
    ),
    bound(
        "words.tail_last_copy_percent",
        1,
        100,
        "a percent of one copy",
        |c| c.words.tail_last_copy_percent,
    ),
    bound(
        "substring.max_unit",
        1,
        MAX_UNIT,
        "units in characters",
        |c| c.substring.max_unit,
    ),
    Bound {
        at_most: Some("substring.max_unit"),
        ..bound(
            "substring.min_unit",
            1,
            MAX_UNIT,
            "units in characters",
            |c| c.substring.min_unit,
        )
    },
    bound("substring.min_copies", 2, MAX_COPIES, "copies", |c| {
        c.substring.min_copies
    }),
    bound(
        "near.chain_max_unit",
        0,
        MAX_CHAIN_UNIT,
        "long units in characters",
        |c| c.near.chain_max_unit,
    ),
    bound("near.chain_copies", 2, usize::MAX, "copies", |c| {
        c.near.chain_copies
    }),
    bound("near.code_block_copies", 2, usize::MAX, "copies", |c| {
        c.near.code_block_copies
    }),
    Bound {
        zero_turns_off: true,
        ..bound(
            "healthy.token_flood_bytes",
            1,
            MAX_FLOOD_BYTES,
            "bytes a flood of one token covers",
            |c| c.healthy.token_flood_bytes,
        )
    },
    bound(
        "near.line_window",
        0,
        MAX_WINDOW,
        "lines in the window (0: off)",
        |c| c.near.line_window,
    ),
    bound(
        "near.token_window",
        0,
        MAX_WINDOW,
        "tokens in the window (0: off)",
        |c| c.near.token_window,
    ),
];

const fn bound(
    key: &'static str,
    min: usize,
    max: usize,
    why: &'static str,
    get: fn(&ClampConfig) -> usize,
) -> Bound {
    Bound {
        key,
        min,
        max,
        zero_turns_off: false,
        above: None,
        at_most: None,
        why,
        get,
    }
}

/// A setting outside its [`Bound`]: names the key, the value and the range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key} = {value} is out of range: expected {expected}")]
pub struct OutOfBounds {
    /// Full key, e.g. `words.max_period`.
    pub key: &'static str,
    /// The value given.
    pub value: usize,
    /// The range allowed, in words: `1 to 16 (short periods)`.
    pub expected: String,
}

impl Bound {
    /// This setting's value in `c`.
    pub fn value(&self, c: &ClampConfig) -> usize {
        (self.get)(c)
    }

    /// The range allowed, given the values `c` has for the keys this one
    /// depends on.
    fn range(&self, c: &ClampConfig) -> (usize, usize) {
        let of = |key: &str| BOUNDS.iter().find(|b| b.key == key).map(|b| b.value(c));
        let lo = match self.above.and_then(of) {
            Some(v) => self.min.max(v.saturating_add(1)),
            None => self.min,
        };
        let hi = match self.at_most.and_then(of) {
            Some(v) => self.max.min(v),
            None => self.max,
        };
        (lo, hi)
    }

    fn check(&self, c: &ClampConfig) -> Result<(), OutOfBounds> {
        let value = self.value(c);
        let (lo, hi) = self.range(c);
        if (self.zero_turns_off && value == 0) || (lo..=hi).contains(&value) {
            return Ok(());
        }
        let mut expected = if hi == usize::MAX {
            format!("at least {lo}")
        } else {
            format!("{lo} to {hi}")
        };
        if self.zero_turns_off {
            expected = format!("0 (off) or {expected}");
        }
        let mut why = self.why.to_string();
        if let Some(k) = self.above {
            why = format!("{why}, above {k}");
        }
        if let Some(k) = self.at_most {
            why = format!("{why}, at most {k}");
        }
        Err(OutOfBounds {
            key: self.key,
            value,
            expected: format!("{expected} ({why})"),
        })
    }
}

impl ClampConfig {
    /// Checks every setting against [`BOUNDS`]; the first one outside its
    /// range is the error (the defaults and [`ClampConfig::seed_compat`]
    /// pass).
    ///
    /// ```
    /// use deloop_core::repetition::ClampConfig;
    /// let mut c = ClampConfig::default();
    /// assert!(c.check_bounds().is_ok());
    /// c.words.max_period = 40;
    /// let e = c.check_bounds().unwrap_err();
    /// assert_eq!((e.key, e.value), ("words.max_period", 40));
    /// assert_eq!(e.to_string(), "words.max_period = 40 is out of range: expected 1 to 16 (short periods)");
    /// ```
    pub fn check_bounds(&self) -> Result<(), OutOfBounds> {
        BOUNDS.iter().try_for_each(|b| b.check(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_seed_pass_and_each_bound_rejects_both_sides() {
        ClampConfig::default().check_bounds().unwrap();
        ClampConfig::seed_compat().check_bounds().unwrap();
        let mut c = ClampConfig::default();
        c.words.long_max_period = 0;
        c.check_bounds().expect("0 turns long periods off");
        c.words.long_max_period = 16;
        let e = c.check_bounds().unwrap_err();
        assert_eq!(e.key, "words.long_max_period");
        assert!(e.expected.starts_with("0 (off) or 17 to 4096"), "{e}");
        c.words.long_max_period = 4097;
        assert_eq!(c.check_bounds().unwrap_err().key, "words.long_max_period");

        let mut c = ClampConfig::default();
        c.substring.max_unit = 4;
        c.substring.min_unit = 5;
        let e = c.check_bounds().unwrap_err();
        assert_eq!((e.key, e.value), ("substring.min_unit", 5));
        assert!(e.to_string().contains("1 to 4"), "{e}");

        let mut c = ClampConfig::default();
        c.substring.min_copies = 1;
        let e = c.check_bounds().unwrap_err();
        assert_eq!(e.key, "substring.min_copies");
        assert!(e.to_string().contains("2 to 1000"), "{e}");
        c.substring.min_copies = 1001;
        assert_eq!(c.check_bounds().unwrap_err().key, "substring.min_copies");

        let mut c = ClampConfig::default();
        c.near.chain_copies = 1;
        assert!(c
            .check_bounds()
            .unwrap_err()
            .to_string()
            .contains("at least 2"));
        let mut c = ClampConfig::default();
        c.near.line_window = 17;
        assert_eq!(c.check_bounds().unwrap_err().key, "near.line_window");
        let mut c = ClampConfig::default();
        c.healthy.token_flood_bytes = 0;
        c.check_bounds().expect("0 turns token floods off");
        c.healthy.token_flood_bytes = MAX_FLOOD_BYTES + 1;
        assert_eq!(
            c.check_bounds().unwrap_err().key,
            "healthy.token_flood_bytes"
        );
        let mut c = ClampConfig::default();
        c.words.tail_last_copy_percent = 0;
        assert_eq!(
            c.check_bounds().unwrap_err().key,
            "words.tail_last_copy_percent"
        );
    }

    #[test]
    fn every_key_in_the_table_is_a_real_setting_and_listed_once() {
        let json = serde_json::to_value(ClampConfig::default()).unwrap();
        let mut seen = std::collections::HashSet::new();
        for b in BOUNDS {
            assert!(seen.insert(b.key), "{} twice", b.key);
            let (table, field) = b.key.split_once('.').unwrap();
            assert_eq!(
                json[table][field].as_u64(),
                Some(b.value(&ClampConfig::default()) as u64),
                "{}",
                b.key
            );
        }
    }
}
