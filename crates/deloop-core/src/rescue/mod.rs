//! Rescue JSON values from broken model output.
//!
//! Language models asked for `{"answer": "..."}` reply with code fences,
//! `<think>` blocks, drafts, unescaped inner quotes, raw newlines, Python
//! literals and replies cut at the token limit. This module holds a lenient,
//! linear-time parser with an explicit stack (no recursion) that recovers
//! what the model meant, and reports every repair it applied.
//!
//! * [`rescue`] returns the value of one key (searched at any depth);
//! * [`repair`] returns one valid JSON document;
//! * [`partial_string`] and [`PartialExtractor`] return the value of a key
//!   so far, from a prefix of a streamed reply.
//!
//! ```
//! use deloop_core::rescue::{rescue, Repair};
//! let raw = r#"{"answer": "**Auditoría Suprema** "la revisión final" y más texto"}"#;
//! let got = rescue(raw, "answer").unwrap();
//! assert_eq!(got.as_text(), Some(r#"**Auditoría Suprema** "la revisión final" y más texto"#));
//! assert!(got.repairs.contains(&Repair::EscapedInnerQuote));
//! ```

mod error;
mod number;
mod parser;
mod partial;
mod quote_rule;
mod repairs;
mod scan;
mod strings;
mod tail;
mod tree;

pub use error::RescueError;
pub use partial::{partial_string, PartialExtractor};

use serde::Serialize;
use serde_json::Value;

/// Limits applied to every call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RescueOptions {
    /// Inputs longer than this many bytes are refused with
    /// [`RescueError::TooLarge`]. Default: 16 MiB.
    pub max_input_bytes: usize,
    /// Deeper nesting is refused with [`RescueError::TooDeep`]. The parser
    /// itself uses an explicit stack and never recurses; the limit exists
    /// because the returned `serde_json::Value` is dropped and serialized
    /// recursively by serde_json. Default: 1 000 (safe on a 2 MiB thread).
    pub max_depth: usize,
}

impl Default for RescueOptions {
    fn default() -> Self {
        RescueOptions {
            max_input_bytes: 16 * 1024 * 1024,
            max_depth: 1_000,
        }
    }
}

/// One kind of repair applied to the input. Serialized as a snake_case string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Repair {
    /// A byte-order mark was removed.
    StrippedBom,
    /// Zero-width characters outside strings were ignored.
    StrippedZeroWidth,
    /// Markdown code fences were ignored.
    StrippedCodeFence,
    /// A `<think>…</think>` block was skipped.
    SkippedThinkBlock,
    /// Text before the JSON was skipped.
    SkippedLeadingText,
    /// Text after the JSON was skipped.
    SkippedTrailingText,
    /// Several JSON values were found; one was chosen (see the module docs).
    ChoseOneOfSeveral,
    /// Several top-level values were collected into one array.
    CollectedIntoArray,
    /// An unescaped quote inside a string was kept as text.
    EscapedInnerQuote,
    /// A raw newline, tab or control character inside a string was kept.
    EscapedControlChar,
    /// An invalid escape such as `\U` kept its backslash.
    KeptInvalidEscape,
    /// The input ended early: open strings and brackets were closed.
    ClosedTruncated,
    /// A trailing or doubled comma was removed.
    RemovedTrailingComma,
    /// A missing comma was inserted.
    InsertedMissingComma,
    /// A missing colon was inserted.
    InsertedMissingColon,
    /// A missing value was replaced by `null`.
    InsertedNull,
    /// An unquoted key was quoted.
    QuotedKey,
    /// An unquoted text value was quoted.
    QuotedValue,
    /// Single, curly or back quotes were replaced by double quotes.
    NormalizedQuotes,
    /// A comment was removed.
    RemovedComment,
    /// A Python or JavaScript literal (`True`, `None`, `undefined`…) was converted.
    ConvertedLiteral,
    /// A malformed number was fixed or kept as a string.
    FixedNumber,
    /// An ellipsis (`...`) placeholder was removed.
    RemovedEllipsis,
    /// A closing bracket without a matching opener, or a mismatched one, was fixed.
    FixedBracket,
    /// A stray character that fits nowhere was dropped.
    DroppedGarbage,
    /// Strings joined with `+` were concatenated.
    ConcatenatedStrings,
    /// The reply was JSON-encoded twice (`{\"a\": 1}`) and was decoded once.
    UnescapedDoubleEncoded,
}

/// The value of the requested key, rescued from model output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rescued {
    /// The value of the key (a string or any JSON value).
    pub value: Value,
    /// The repairs applied, each kind once, in the order first applied.
    pub repairs: Vec<Repair>,
}

impl Rescued {
    /// The value as text, when it is a JSON string.
    pub fn as_text(&self) -> Option<&str> {
        self.value.as_str()
    }
}

/// One valid JSON document recovered from model output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Repaired {
    /// The recovered document.
    pub value: Value,
    /// The repairs applied, each kind once, in the order first applied.
    pub repairs: Vec<Repair>,
}

/// Rescues the value of `key` from model output with default options.
pub fn rescue(raw: &str, key: &str) -> Result<Rescued, RescueError> {
    rescue_with(raw, key, &RescueOptions::default())
}

/// Rescues the value of `key` from model output.
///
/// The last complete object that holds the key wins (drafts come first,
/// the final answer or a correction last). In one value the key is
/// searched at any depth: the shallowest occurrence wins, then the last
/// complete object at that depth (a duplicate key in the same object
/// replaces the earlier one, as in `JSON.parse`). Among several top-level
/// values the last complete one that has the key wins; a truncated one is
/// used only when no complete one has the key, and a placeholder value
/// (`{"answer": ...}`, `"..."`, `"<your answer>"`) only when no value is
/// real. Text after the last `</think>` is searched first, then the whole
/// input.
///
/// ```
/// use deloop_core::rescue::rescue;
/// let drafts = r#"[{"answer": "draft"}, {"answer": "final"}]"#;
/// assert_eq!(rescue(drafts, "answer").unwrap().as_text(), Some("final"));
/// let mention = "{\"answer\": \"Paris\"}\nI used the {\"answer\": ...} format.";
/// assert_eq!(rescue(mention, "answer").unwrap().as_text(), Some("Paris"));
/// ```
pub fn rescue_with(raw: &str, key: &str, opts: &RescueOptions) -> Result<Rescued, RescueError> {
    check_size(raw, opts)?;
    let mut any = false;
    if let Some(from) = scan::after_think(raw) {
        let s = scan::scan(&raw[from..], opts.max_depth, Some(key))?;
        match scan::choose_key(s, &raw[from..], key, opts.max_depth) {
            Ok((value, mut rep, _)) => {
                rep.note(Repair::SkippedThinkBlock);
                return Ok(Rescued {
                    value,
                    repairs: ordered(rep),
                });
            }
            Err(found_json) => any |= found_json,
        }
    }
    let s = scan::scan(raw, opts.max_depth, Some(key))?;
    match scan::choose_key(s, raw, key, opts.max_depth) {
        Ok((value, rep, _)) => Ok(Rescued {
            value,
            repairs: ordered(rep),
        }),
        Err(found_json) if found_json || any => Err(RescueError::KeyNotFound {
            key: key.to_owned(),
        }),
        Err(_) => Err(RescueError::NoJson),
    }
}

/// The text of `key` as [`rescue`] reads it from `raw`, with the context
/// of the string value it came from (positions in `raw`), when there is
/// one. Follows the same path as [`rescue_with`] with default options,
/// except that after a `</think>` only the text after it is searched (a
/// stream may still bring the answer there).
pub(crate) fn rescue_located(raw: &str, key: &str) -> Option<(String, Option<quote_rule::StrCtx>)> {
    let opts = RescueOptions::default();
    check_size(raw, &opts).ok()?;
    let from = scan::after_think(raw).unwrap_or(0);
    let s = scan::scan(&raw[from..], opts.max_depth, Some(key)).ok()?;
    let (value, _, ctx) = scan::choose_key(s, &raw[from..], key, opts.max_depth).ok()?;
    let ctx = ctx.map(|mut c| {
        c.open += from;
        c
    });
    match value {
        Value::String(t) => Some((t, ctx)),
        _ => None,
    }
}

/// Repairs model output into one valid JSON document with default options.
pub fn repair(raw: &str) -> Result<Repaired, RescueError> {
    repair_with(raw, &RescueOptions::default())
}

/// Repairs model output into one valid JSON document.
///
/// A whole-document scalar (`"abc"`, `42`, `True`) is returned as is.
/// Otherwise every top-level object or array is found; empty ones are
/// dropped when others exist. Values embedded in prose: the last object
/// wins (earlier ones are drafts), else the last array. Values separated
/// only by whitespace or commas: consecutive values of the same shape are
/// revisions (the last is kept), the rest are collected into one array.
pub fn repair_with(raw: &str, opts: &RescueOptions) -> Result<Repaired, RescueError> {
    check_size(raw, opts)?;
    if let Some(from) = scan::after_think(raw) {
        let s = scan::scan(&raw[from..], opts.max_depth, None)?;
        if let Some((value, mut rep)) = scan::choose_document(s) {
            rep.note(Repair::SkippedThinkBlock);
            return Ok(Repaired {
                value,
                repairs: ordered(rep),
            });
        }
    }
    let s = scan::scan(raw, opts.max_depth, None)?;
    match scan::choose_document(s) {
        Some((value, rep)) => Ok(Repaired {
            value,
            repairs: ordered(rep),
        }),
        None => Err(RescueError::NoJson),
    }
}

fn check_size(raw: &str, opts: &RescueOptions) -> Result<(), RescueError> {
    if raw.len() > opts.max_input_bytes {
        return Err(RescueError::TooLarge {
            limit: opts.max_input_bytes,
            actual: raw.len(),
        });
    }
    Ok(())
}

fn ordered(rep: repairs::Repairs) -> Vec<Repair> {
    rep.list
}
