//! Configuration of the repetition guards. Every number and list is a field;
//! [`ClampConfig::default`] is deloop's guard and [`ClampConfig::seed_compat`]
//! reproduces the seed's `clampRepetition` / `clampSubstringRepetition`.

use serde::{Deserialize, Serialize};

/// Configuration of both repetition guards and their false-positive
/// protections. Deserializes from TOML/JSON; missing keys take the defaults.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClampConfig {
    /// The word-period guard (seed `clampRepetition`).
    pub words: WordConfig,
    /// The substring guard (seed `clampSubstringRepetition`).
    pub substring: SubstringConfig,
    /// Protections for legitimate repetition (tables, rules, code, art).
    pub healthy: HealthyConfig,
    /// The near-duplicate guard (counted lists, near-duplicate sentences,
    /// counters, long units without white space, code blocks).
    pub near: NearConfig,
}

/// The near-duplicate guard: loops whose copies differ (a counter, a word
/// or two) or whose unit the other guards cannot see. See
/// docs/repetition.md for the rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NearConfig {
    /// Run this guard at all.
    pub enabled: bool,
    /// List items (`51. Anise`) whose bodies are equal once the counter
    /// is set aside fire at this many items in a row (6; a period of `p`
    /// items needs at least `3p + 1`).
    pub list_items: usize,
    /// Empty list markers (`76.`, `77.`, …) fire at this many in a row (10).
    pub empty_items: usize,
    /// A numbered list that starts counting again and copies its own
    /// earlier items, marker and body (`… 20. 20 / 2. 2 / 3. 3 …`), fires
    /// at this many copied items in a row (6; 0 turns the rule off).
    pub list_copy_items: usize,
    /// Lines going round a few values: this many lines in a row outside
    /// fences and tables (12, at most 16; 0 turns the rule off; blank
    /// lines do not count) ...
    pub line_window: usize,
    /// ... that hold at most this many different lines (4; tokens as the
    /// list rule compares them, a list marker set aside), each at least
    /// twice ...
    pub line_window_values: usize,
    /// ... one of them at least this many tokens long (3) and holding a
    /// word, fire.
    pub line_window_min_tokens: usize,
    /// Codes going round a few values (`802.11a, 802.11b, 802.11a+, …`):
    /// this many tokens in a row, each holding a digit and a letter (16,
    /// at most 16; 0 turns the rule off) ...
    pub token_window: usize,
    /// ... that hold at most this many different tokens, each at least
    /// twice, fire (4).
    pub token_window_values: usize,
    /// Segments shorter than this many tokens are not compared (8).
    pub sentence_min_tokens: usize,
    /// Token edits between near-duplicate segments: at most this many and
    /// a quarter of the segment (2).
    pub sentence_max_edits: usize,
    /// Near-duplicate segments in a row that fire (6).
    pub sentence_copies: usize,
    /// Tokens with digits masked repeating with period `p` (1..=8) fire at
    /// `max(masked_min_run, masked_run_per_period · p)` matching tokens
    /// (30 and 6).
    pub masked_min_run: usize,
    /// See `masked_min_run`.
    pub masked_run_per_period: usize,
    /// Shortest unit of the long-unit rule, in characters (13).
    pub chain_min_unit: usize,
    /// Longest unit of the long-unit rule, in characters (64, at most 64).
    pub chain_max_unit: usize,
    /// Copies back to back that fire the long-unit rule (4).
    pub chain_copies: usize,
    /// Copies of a block of 2–16 lines inside a code fence that fire (4).
    pub code_block_copies: usize,
}

impl Default for NearConfig {
    fn default() -> Self {
        NearConfig {
            enabled: true,
            list_items: 6,
            empty_items: 10,
            list_copy_items: 6,
            line_window: 12,
            line_window_values: 4,
            line_window_min_tokens: 3,
            token_window: 16,
            token_window_values: 4,
            sentence_min_tokens: 8,
            sentence_max_edits: 3,
            sentence_copies: 6,
            masked_min_run: 30,
            masked_run_per_period: 6,
            chain_min_unit: 13,
            chain_max_unit: 64,
            chain_copies: 4,
            code_block_copies: 4,
        }
    }
}

/// The word-period guard: whitespace tokens compared case-insensitively.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WordConfig {
    /// Run this guard at all.
    pub enabled: bool,
    /// Texts with fewer characters (Unicode scalar values) are untouched (80).
    pub min_chars: usize,
    /// Largest short period, in tokens (16).
    pub max_period: usize,
    /// A loop of period `p` needs `max(min_run, run_per_period * p)` tokens
    /// equal to the token `p` places before (18 and 3).
    pub min_run: usize,
    /// See `min_run`.
    pub run_per_period: usize,
    /// Long periods: periods from `max_period + 1` up to this many tokens are
    /// found through shingles (0 turns the long-period rule off).
    pub long_max_period: usize,
    /// Long periods need `long_run_per_period * p` matching tokens (2: three
    /// copies of the unit back to back).
    pub long_run_per_period: usize,
    /// Percent of the last of those copies that must be there (1–100,
    /// default 100: the whole copy). 66 fires at two copies and two
    /// thirds, so a loop of a long unit that runs to the end of a
    /// generation and stops mid-copy (a *long tail*) is caught; it is not
    /// the default because it also moves cuts earlier on real answers
    /// (docs/repetition.md).
    pub long_last_copy_percent: usize,
    /// The long tail at the end (1–100, default 66; 100 turns it off): a
    /// long-period run that reaches the end of the text fires with
    /// `long_run_per_period - 1` whole copies after the first and this
    /// percent of one more. Only where the text ends (`clamp`, and
    /// [`crate::repetition::StreamWatcher::finish`]), so a generation stopped by its
    /// token limit mid-copy is cut, while the same copies followed by
    /// other text are not. The last token may be cut off mid-word (a
    /// prefix of the token it stands for).
    pub tail_last_copy_percent: usize,
    /// Tokens that compare equal after dropping trailing punctuation
    /// (`de,` = `de`), see docs/repetition.md.
    pub ignore_trailing_punctuation: bool,
    /// Dangling connectors trimmed from the end of the kept text (folded).
    pub connectors: Vec<String>,
    /// Appended after the kept text when the guard cuts.
    pub marker: String,
    /// Re-join the kept tokens with single spaces (the seed's output) instead
    /// of cutting the source text at a byte position.
    pub rejoin_tokens: bool,
    /// Each CJK character (Han, kana, CJK punctuation, fullwidth forms) is a
    /// token of its own, so loops in text written without spaces have word
    /// periods too.
    pub split_cjk: bool,
}

/// The substring guard: a short unit of characters repeated back to back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SubstringConfig {
    /// Run this guard at all.
    pub enabled: bool,
    /// Texts with fewer characters are untouched (40).
    pub min_chars: usize,
    /// Shortest unit, in characters (2).
    pub min_unit: usize,
    /// Longest unit, in characters (12).
    pub max_unit: usize,
    /// Copies of the unit back to back needed to fire (10).
    pub min_copies: usize,
    /// Appended after the kept text when the guard cuts (empty in the seed).
    pub marker: String,
    /// Trim leading whitespace of the kept text too (the seed's `trim()`).
    pub trim_start: bool,
    /// Keep one copy of the unit before the marker, like the word guard
    /// (the seed cuts just before the loop).
    pub keep_one_copy: bool,
}

/// False-positive protections (all off in seed-compat mode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HealthyConfig {
    /// Turn every protection below on or off at once.
    pub enabled: bool,
    /// A word loop must repeat a word: a token with at least this many
    /// letters (alphabetic characters, any script). Dot leaders, `| --- |`
    /// rows, `2 x 2 x` products and art made of symbols never fire.
    pub min_word_letters: usize,
    /// A substring loop must repeat a unit with at least this many letters
    /// (letters of LaTeX control words such as `\quad` do not count).
    pub min_unit_letters: usize,
    /// Repetition that starts inside a fenced code block (```/~~~) is data.
    pub skip_code_fences: bool,
    /// Repetition that stays within one line that starts with `|` (a table
    /// row) is exempt; rows repeated over many lines are still loops.
    pub skip_table_rows: bool,
    /// An exempt repetition (layout-only unit, no word, code fence, table
    /// row) still fires once its run covers this many bytes: nobody pads
    /// a table cell with 4 KiB of dashes on purpose.
    pub max_exempt_run_bytes: usize,
    /// Inside a code fence, a word loop whose run stays on one line and
    /// holds a word still fires once it covers this many bytes (256; 0
    /// turns it off): a model repeating ` - INTERVAL '1 YEAR'` to the
    /// token limit inside a SQL fence. Arrays of numbers have no word.
    pub code_line_run_bytes: usize,
    /// Outside code fences and table rows, a substring run whose unit has
    /// fewer than `min_unit_letters` letters (symbols, emoji, digits,
    /// escapes such as `\ud83d\ude02`) still fires once it covers this
    /// many characters: a flood longer than about one line (100).
    pub flood_chars: usize,
    /// A run made only of layout symbols (dividers `-----`, `═══`, dot
    /// leaders `. . .`, see docs/repetition.md) may reach this many
    /// characters before it counts as a flood (256).
    pub max_layout_chars: usize,
    /// Outside code fences and table rows, one token of 13 bytes or more
    /// (a URL, a path, an identifier, base64) repeated back to back, or a
    /// unit without white space longer than `near.chain_max_unit`, fires
    /// once its copies cover this many bytes (200; 0 turns it off): three
    /// copies at least, the third of which may be its first 24 bytes.
    pub token_flood_bytes: usize,
}

/// The seed's connector list: Spanish and English function words.
pub const DEFAULT_CONNECTORS: &[&str] = &[
    "o", "u", "y", "e", "ni", "la", "las", "el", "los", "lo", "un", "una", "de", "del", "a", "al",
    "en", "con", "por", "para", "que", "se", "su", "sus", "and", "or", "the", "an", "of", "to",
    "in", "on", "with", "for", "by", "at", "as", "but", "nor", "that",
];

impl Default for WordConfig {
    fn default() -> Self {
        WordConfig {
            enabled: true,
            min_chars: 80,
            max_period: 16,
            min_run: 18,
            run_per_period: 3,
            long_max_period: 256,
            long_run_per_period: 2,
            long_last_copy_percent: 100,
            tail_last_copy_percent: 66,
            ignore_trailing_punctuation: true,
            connectors: DEFAULT_CONNECTORS.iter().map(|s| s.to_string()).collect(),
            marker: " […]".to_string(),
            rejoin_tokens: false,
            split_cjk: true,
        }
    }
}

impl Default for SubstringConfig {
    fn default() -> Self {
        SubstringConfig {
            enabled: true,
            min_chars: 40,
            min_unit: 2,
            max_unit: 12,
            min_copies: 10,
            marker: " […]".to_string(),
            trim_start: false,
            keep_one_copy: true,
        }
    }
}

impl Default for HealthyConfig {
    fn default() -> Self {
        HealthyConfig {
            enabled: true,
            min_word_letters: 2,
            min_unit_letters: 2,
            skip_code_fences: true,
            skip_table_rows: true,
            max_exempt_run_bytes: 4096,
            code_line_run_bytes: 256,
            flood_chars: 100,
            max_layout_chars: 256,
            token_flood_bytes: 200,
        }
    }
}

impl HealthyConfig {
    /// `token_flood_bytes` as the rules read it: `usize::MAX` when the
    /// rule is off (the protections off, or 0).
    pub(crate) fn token_flood(&self) -> usize {
        if self.enabled && self.token_flood_bytes > 0 {
            self.token_flood_bytes
        } else {
            usize::MAX
        }
    }
}

impl ClampConfig {
    /// The seed's exact rules: periods 1–16, run `max(18, 3p)`, tokens
    /// re-joined with spaces, substring `(.{2,12}?)\1{9,}` cut and trimmed,
    /// no long periods, no false-positive protections.
    pub fn seed_compat() -> Self {
        ClampConfig {
            words: WordConfig {
                long_max_period: 0,
                ignore_trailing_punctuation: false,
                rejoin_tokens: true,
                split_cjk: false,
                ..WordConfig::default()
            },
            substring: SubstringConfig {
                marker: String::new(),
                trim_start: true,
                keep_one_copy: false,
                ..SubstringConfig::default()
            },
            healthy: HealthyConfig {
                enabled: false,
                ..HealthyConfig::default()
            },
            near: NearConfig {
                enabled: false,
                ..NearConfig::default()
            },
        }
    }
}
