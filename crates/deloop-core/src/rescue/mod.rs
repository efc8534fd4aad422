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

pub use error::RescueError;

use serde::Serialize;
use serde_json::Value;

/// Limits applied to every call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RescueOptions {
    /// Inputs longer than this many bytes are refused with
    /// [`RescueError::TooLarge`]. Default: 16 MiB.
    pub max_input_bytes: usize,
    /// Deeper nesting is refused with [`RescueError::TooDeep`]. The parser
    /// uses an explicit stack, so any limit is safe. Default: 10 000.
    pub max_depth: usize,
}

impl Default for RescueOptions {
    fn default() -> Self {
        RescueOptions {
            max_input_bytes: 16 * 1024 * 1024,
            max_depth: 10_000,
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
pub fn rescue_with(raw: &str, key: &str, opts: &RescueOptions) -> Result<Rescued, RescueError> {
    let _ = (raw, key, opts);
    Err(RescueError::NoJson)
}

/// Repairs model output into one valid JSON document with default options.
pub fn repair(raw: &str) -> Result<Repaired, RescueError> {
    repair_with(raw, &RescueOptions::default())
}

/// Repairs model output into one valid JSON document.
pub fn repair_with(raw: &str, opts: &RescueOptions) -> Result<Repaired, RescueError> {
    let _ = (raw, opts);
    Err(RescueError::NoJson)
}

/// The value of `key` so far, as text, given a prefix of a streamed reply.
pub fn partial_string(prefix: &str, key: &str) -> Option<String> {
    let _ = (prefix, key);
    None
}

/// Stateful streaming extractor: feed chunks with [`PartialExtractor::push`],
/// get the new text of the key's value.
#[derive(Debug, Clone, Default)]
pub struct PartialExtractor {
    key: String,
    buf: String,
    emitted: usize,
}

impl PartialExtractor {
    /// A new extractor for `key`.
    pub fn new(key: &str) -> Self {
        PartialExtractor {
            key: key.to_owned(),
            buf: String::new(),
            emitted: 0,
        }
    }

    /// Appends a chunk and returns the text of the value added since the last call.
    pub fn push(&mut self, chunk: &str) -> String {
        self.buf.push_str(chunk);
        let _ = (&self.key, self.emitted);
        String::new()
    }
}
