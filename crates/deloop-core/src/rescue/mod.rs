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

mod closer;
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

pub use closer::{JsonCloser, MAX_DEPTH as MAX_CLOSER_DEPTH};
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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

/// One valid JSON document recovered from model output, as compact JSON
/// text: what [`repair`] returns, serialized.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepairedJson {
    /// The recovered document as compact JSON (`Value`'s `Display`).
    pub json: String,
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
    if let Some(value) = strict_json(raw, opts) {
        return Ok(Repaired {
            value,
            repairs: Vec::new(),
        });
    }
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

/// serde_json's own nesting limit: deeper valid JSON takes the lenient path.
const SERDE_DEPTH: usize = 128;

/// The fast path of [`repair_with`]: valid JSON, read by serde_json
/// directly. The lenient parser reads valid JSON to the same value with no
/// repair (checked by the `fast_path_*` tests), except where this returns
/// `None` and the lenient parser runs:
/// * the input is not strict JSON (the usual case for model output; most
///   broken replies fail in their first bytes, and a reply that does not
///   end like a JSON value is not tried at all);
/// * it holds the number `-0` outside a string (serde_json reads `-0.0`,
///   the lenient parser the integer `0`);
/// * `max_depth` is below serde_json's limit of 128 levels.
///
/// Valid JSON holds a `</think>` only inside a string, where it is text: the
/// document is returned as it is, so repairing a repaired document changes
/// nothing. (The lenient path would read the text after that `</think>` as
/// the reply; found by fuzzing, docs/fuzzing.md.)
///
/// Numbers agree because serde_json is built with `float_roundtrip`
/// (correctly rounded, like `str::parse::<f64>`), and duplicate keys
/// because both replace the earlier value in place.
fn strict_json(raw: &str, opts: &RescueOptions) -> Option<Value> {
    if opts.max_depth < SERDE_DEPTH {
        return None;
    }
    let b = raw.as_bytes();
    let last = *b.trim_ascii_end().last()?;
    if !(matches!(last, b'}' | b']' | b'"') || last.is_ascii_alphanumeric()) {
        return None;
    }
    if has_minus_zero(b) {
        return None;
    }
    serde_json::from_str(raw).ok()
}

/// Whether `b`, read as JSON, holds the number `-0` (not `-0.5`, `-0e1`)
/// outside a string. Strings are skipped by their quotes and escapes, which
/// is exact for valid JSON (the only text whose answer matters: serde_json
/// refuses the rest).
fn has_minus_zero(b: &[u8]) -> bool {
    let mut in_string = false;
    let mut i = 0;
    while let Some(off) = memchr::memchr3(b'"', b'\\', b'-', &b[i..]) {
        let at = i + off;
        i = at + 1;
        match b[at] {
            b'"' => in_string = !in_string,
            b'\\' if in_string => i = (i + 1).min(b.len()),
            b'-' if !in_string && b.get(at + 1) == Some(&b'0') => {
                let next = b.get(at + 2);
                if !next.is_some_and(|&c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E')) {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

/// Repairs model output into one valid JSON document, returned as compact
/// JSON text, with default options.
pub fn repair_json(raw: &str) -> Result<RepairedJson, RescueError> {
    repair_json_with(raw, &RescueOptions::default())
}

/// Repairs model output into one valid JSON document, returned as compact
/// JSON text: the same text and repairs as [`repair_with`] followed by
/// `value.to_string()`, faster. Valid JSON goes through serde_json; a
/// reply with one JSON value is written as text while it is parsed,
/// without building the value; anything else (several values, a
/// `<think>` block, a duplicate key, a whole-document scalar) is built
/// with [`repair_with`] and serialized.
///
/// ```
/// use deloop_core::rescue::repair_json;
/// let r = repair_json("Here: {'a': 1, b: [1, 2,], c: None").unwrap();
/// assert_eq!(r.json, r#"{"a":1,"b":[1,2],"c":null}"#);
/// ```
pub fn repair_json_with(raw: &str, opts: &RescueOptions) -> Result<RepairedJson, RescueError> {
    check_size(raw, opts)?;
    if let Some(value) = strict_json(raw, opts) {
        return Ok(RepairedJson {
            json: value.to_string(),
            repairs: Vec::new(),
        });
    }
    if scan::after_think(raw).is_none() {
        let s = scan::scan_text(raw, opts.max_depth)?;
        if let Some((json, rep)) = scan::choose_document_text(s) {
            return Ok(RepairedJson {
                json,
                repairs: ordered(rep),
            });
        }
    }
    let r = repair_with(raw, opts)?;
    Ok(RepairedJson {
        json: r.value.to_string(),
        repairs: r.repairs,
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The lenient path alone (no fast path).
    fn lenient(raw: &str) -> Option<(Value, Vec<Repair>)> {
        let s = scan::scan(raw, 1_000, None).ok()?;
        scan::choose_document(s).map(|(v, r)| (v, ordered(r)))
    }

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
                .map(Value::Number)),
            (-1e6f64..1e6).prop_map(Value::from),
            any::<String>().prop_map(Value::String),
            "[ -~]{0,12}".prop_map(Value::String),
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        leaf().prop_recursive(5, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(("[a-c]{0,2}", inner), 0..6).prop_map(|kv| {
                    Value::Object(kv.into_iter().collect::<serde_json::Map<_, _>>())
                }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// The fast path and the lenient parser give the same value, with
        /// no repair, for any valid JSON (compact, pretty, and written by
        /// hand with duplicate keys and odd numbers).
        #[test]
        fn fast_path_agrees_with_the_lenient_parser(v in value(), dup in any::<bool>()) {
            let mut texts = vec![serde_json::to_string(&v).unwrap(), serde_json::to_string_pretty(&v).unwrap()];
            if dup {
                let t = serde_json::to_string(&v).unwrap();
                texts.push(format!("{{\"a\": {t}, \"b\": 1, \"a\": 2.50e-3}}"));
            }
            for text in texts {
                let fast = strict_json(&text, &RescueOptions::default());
                let slow = lenient(&text);
                // The fast path steps aside only by its documented byte
                // rules (`-0` anywhere, even inside a string, or `</think`);
                // the lenient parser then answers, so only speed differs.
                let stepped_aside = text.contains("-0") || text.contains("</think");
                prop_assert!(fast.is_some() || stepped_aside, "fast path refused {text}");
                if fast.is_some() {
                    prop_assert_eq!(fast.as_ref(), slow.as_ref().map(|(v, _)| v), "{}", text);
                }
                prop_assert_eq!(slow.map(|(_, r)| r), Some(vec![]), "{}", text);
            }
        }
    }

    /// Valid JSON is returned as it is, even with `</think>` or `-0`
    /// inside a string (fuzz finding: the lenient path read the text after
    /// such a `</think>` as the reply, so repair was not idempotent).
    #[test]
    fn valid_json_with_think_tags_or_minus_zero_in_strings_is_kept() {
        for raw in [
            r#"{"a": "x</think>{\"b\": 1}"}"#,
            r#"{"answer":"fina\u0005}</think>"}"#,
            r#"["</thinking>", "-0", "\\", "a\"-0"]"#,
            r#"{"a": "-0", "b": -0.5, "c": -0e1}"#,
        ] {
            let want: Value = serde_json::from_str(raw).unwrap();
            assert_eq!(
                strict_json(raw, &RescueOptions::default()).as_ref(),
                Some(&want),
                "{raw}"
            );
            let r = repair(raw).unwrap();
            assert_eq!(r.value, want, "{raw}");
            assert!(r.repairs.is_empty(), "{raw}");
            assert_eq!(repair_json(raw).unwrap().json, want.to_string(), "{raw}");
        }
        assert!(has_minus_zero(br#"{"a": [1, -0]}"#));
        assert!(!has_minus_zero(br#"{"a": "\"-0"}"#));
        assert!(!has_minus_zero(b"\"\\"));
    }

    #[test]
    fn fast_path_leaves_the_differences_to_the_lenient_parser() {
        let opts = RescueOptions::default();
        for raw in [
            "[-0]",
            r#"{"a": -0, "b": 1}"#,
            "<think>x</think>{\"a\": 1}",
            r#"{"a": 1"#,
            r#"{"a": 1} trailing"#,
            "[1e400]",
            "\u{feff}{\"a\": 1}",
        ] {
            assert_eq!(strict_json(raw, &opts), None, "{raw}");
        }
        assert_eq!(repair("[-0]").unwrap().value, serde_json::json!([0]));
        let shallow = RescueOptions {
            max_depth: 3,
            ..RescueOptions::default()
        };
        assert_eq!(strict_json("[[[[1]]]]", &shallow), None);
        assert!(matches!(
            repair_with("[[[[1]]]]", &shallow),
            Err(RescueError::TooDeep { .. })
        ));
        // Numbers that serde_json without `float_roundtrip` rounds wrongly.
        for raw in [
            "[0.1]",
            "[2.2250738585072011e-308]",
            "[9007199254740993]",
            "[1.7976931348623157e308]",
            "[18446744073709551616]",
            "[-9223372036854775809]",
            "[5e-324]",
        ] {
            assert_eq!(
                strict_json(raw, &opts),
                lenient(raw).map(|(v, _)| v),
                "{raw}"
            );
        }
    }
}
