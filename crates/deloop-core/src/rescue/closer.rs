//! Closing a JSON document that a cut left unfinished.
//!
//! When a guard (the proxy, say) cuts a streamed reply to a request that asked for JSON,
//! the client already holds a prefix of the document and nothing can be
//! taken back. [`JsonCloser`] follows the forwarded text byte by byte (a
//! pushdown automaton with an explicit stack, O(1) per byte) and, at the
//! cut, gives the shortest text that, appended, makes the prefix a complete
//! JSON document: it finishes an open escape, string, number or literal,
//! fills a missing value with `null` (and a missing key with `""`), and
//! closes every open array and object.
//!
//! ```
//! use deloop_core::rescue::JsonCloser;
//! let mut c = JsonCloser::new();
//! c.push(r#"{"items": ["a", "b", "#);
//! assert_eq!(c.closing().as_deref(), Some("null]}"));
//! let mut c = JsonCloser::new();
//! c.push(r#"{"text": "lo\u00"#);
//! assert_eq!(c.closing().as_deref(), Some(r#"00"}"#)); // `\u0000`, then close
//! let mut c = JsonCloser::new();
//! c.push("```json\n{");
//! assert_eq!(c.closing(), None); // not a JSON prefix: nothing can close it
//! ```

/// Deepest nesting followed; deeper text counts as not closable.
pub const MAX_DEPTH: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Container {
    Object,
    Array,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A value must come (document start, after `:`, after `,` in an array).
    Value,
    /// Just after `[`: a value or `]`.
    ArrayStart,
    /// Just after `{`: a key or `}`.
    ObjectStart,
    /// After `,` in an object: a key.
    Key,
    /// After a key: `:`.
    Colon,
    /// After a value: `,` or a closer (or the end, at top level).
    AfterValue,
    /// Inside a string (`key`: it is an object key; `high`: a high
    /// surrogate escape was just read, so a low one must follow).
    Str { key: bool, high: bool },
    /// After a backslash in a string.
    Escape { key: bool, high: bool },
    /// Inside `\uXXXX`: the digits read so far (`read` of them, value
    /// `code`).
    Unicode {
        key: bool,
        high: bool,
        read: u8,
        code: u16,
    },
    /// Inside a number.
    Number(Num),
    /// Inside `true`, `false` or `null`: the literal and how much was read.
    Literal { word: &'static str, read: u8 },
    /// The top-level value is complete.
    Done,
    /// The text is not a prefix of a JSON document.
    Invalid,
}

/// Where a number is: after `-`, a lone `0`, integer digits, `.`,
/// fraction digits, `e`, the exponent's sign, exponent digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Num {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpDigits,
}

impl Num {
    /// The number cannot end here.
    fn needs_digit(self) -> bool {
        matches!(self, Num::Minus | Num::Dot | Num::Exp | Num::ExpSign)
    }
}

enum Surrogate {
    High,
    Low,
}

fn surrogate(code: u16) -> Option<Surrogate> {
    match code {
        0xD800..=0xDBFF => Some(Surrogate::High),
        0xDC00..=0xDFFF => Some(Surrogate::Low),
        _ => None,
    }
}

/// Follows a JSON prefix (see the module docs).
#[derive(Debug, Clone)]
pub struct JsonCloser {
    stack: Vec<Container>,
    state: State,
}

impl Default for JsonCloser {
    fn default() -> Self {
        Self::new()
    }
}

impl JsonCloser {
    /// At the start of a document.
    pub fn new() -> Self {
        JsonCloser {
            stack: Vec::new(),
            state: State::Value,
        }
    }

    /// True while the text read is a prefix of some JSON document.
    pub fn is_prefix(&self) -> bool {
        self.state != State::Invalid
    }

    /// True when the text read is a whole JSON document.
    pub fn is_complete(&self) -> bool {
        match self.state {
            State::Done => true,
            // A top-level number is complete once it can end.
            State::Number(phase) => self.stack.is_empty() && !phase.needs_digit(),
            _ => false,
        }
    }

    /// True inside a string value (not a key), between two characters (not
    /// in an escape): a marker written here stays part of that value.
    pub fn in_value_string(&self) -> bool {
        matches!(
            self.state,
            State::Str {
                key: false,
                high: false
            }
        )
    }

    /// Reads more of the text.
    pub fn push(&mut self, text: &str) {
        for &b in text.as_bytes() {
            if self.state == State::Invalid {
                return;
            }
            self.byte(b);
        }
    }

    fn after_value(&mut self) {
        self.state = if self.stack.is_empty() {
            State::Done
        } else {
            State::AfterValue
        };
    }

    fn open(&mut self, c: Container) {
        if self.stack.len() >= MAX_DEPTH {
            self.state = State::Invalid;
            return;
        }
        self.stack.push(c);
        self.state = match c {
            Container::Object => State::ObjectStart,
            Container::Array => State::ArrayStart,
        };
    }

    fn close(&mut self, c: Container) {
        if self.stack.pop() == Some(c) {
            self.after_value();
        } else {
            self.state = State::Invalid;
        }
    }

    /// A byte where a value may start.
    fn value_start(&mut self, b: u8) {
        self.state = match b {
            b'{' => return self.open(Container::Object),
            b'[' => return self.open(Container::Array),
            b'"' => State::Str {
                key: false,
                high: false,
            },
            b'-' => State::Number(Num::Minus),
            b'0' => State::Number(Num::Zero),
            b'1'..=b'9' => State::Number(Num::Int),
            b't' => State::Literal {
                word: "true",
                read: 1,
            },
            b'f' => State::Literal {
                word: "false",
                read: 1,
            },
            b'n' => State::Literal {
                word: "null",
                read: 1,
            },
            _ => State::Invalid,
        };
    }

    fn byte(&mut self, b: u8) {
        let ws = matches!(b, b' ' | b'\t' | b'\n' | b'\r');
        match self.state {
            State::Invalid => {}
            State::Value => {
                if !ws {
                    self.value_start(b);
                }
            }
            State::ArrayStart => {
                if b == b']' {
                    self.close(Container::Array);
                } else if !ws {
                    self.value_start(b);
                }
            }
            State::ObjectStart | State::Key => {
                if b == b'}' && self.state == State::ObjectStart {
                    self.close(Container::Object);
                } else if b == b'"' {
                    self.state = State::Str {
                        key: true,
                        high: false,
                    };
                } else if !ws {
                    self.state = State::Invalid;
                }
            }
            State::Colon => {
                if b == b':' {
                    self.state = State::Value;
                } else if !ws {
                    self.state = State::Invalid;
                }
            }
            State::AfterValue => match (b, self.stack.last()) {
                (b',', Some(Container::Object)) => self.state = State::Key,
                (b',', Some(Container::Array)) => self.state = State::Value,
                (b'}', _) => self.close(Container::Object),
                (b']', _) => self.close(Container::Array),
                _ if ws => {}
                _ => self.state = State::Invalid,
            },
            State::Done => {
                if !ws {
                    self.state = State::Invalid;
                }
            }
            State::Str { key, high } => match b {
                _ if high && b != b'\\' => self.state = State::Invalid,
                b'"' => {
                    if key {
                        self.state = State::Colon;
                    } else {
                        self.after_value();
                    }
                }
                b'\\' => self.state = State::Escape { key, high },
                0x00..=0x1F => self.state = State::Invalid,
                _ => {}
            },
            State::Escape { key, high } => {
                self.state = match b {
                    b'u' => State::Unicode {
                        key,
                        high,
                        read: 0,
                        code: 0,
                    },
                    _ if high => State::Invalid,
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                        State::Str { key, high: false }
                    }
                    _ => State::Invalid,
                }
            }
            State::Unicode {
                key,
                high,
                read,
                code,
            } => {
                let Some(d) = (b as char).to_digit(16) else {
                    self.state = State::Invalid;
                    return;
                };
                let code = code << 4 | d as u16;
                self.state = if read < 3 {
                    State::Unicode {
                        key,
                        high,
                        read: read + 1,
                        code,
                    }
                } else {
                    match (high, surrogate(code)) {
                        (true, Some(Surrogate::Low)) => State::Str { key, high: false },
                        (false, Some(Surrogate::High)) => State::Str { key, high: true },
                        (false, None) => State::Str { key, high: false },
                        _ => State::Invalid,
                    }
                };
            }
            State::Number(phase) => {
                let next = match (phase, b) {
                    (Num::Minus, b'0') => Some(Num::Zero),
                    (Num::Minus, b'1'..=b'9') => Some(Num::Int),
                    (Num::Int, b'0'..=b'9') => Some(Num::Int),
                    (Num::Zero | Num::Int, b'.') => Some(Num::Dot),
                    (Num::Dot | Num::Frac, b'0'..=b'9') => Some(Num::Frac),
                    (Num::Zero | Num::Int | Num::Frac, b'e' | b'E') => Some(Num::Exp),
                    (Num::Exp, b'+' | b'-') => Some(Num::ExpSign),
                    (Num::Exp | Num::ExpSign | Num::ExpDigits, b'0'..=b'9') => Some(Num::ExpDigits),
                    _ => None,
                };
                match next {
                    Some(p) => self.state = State::Number(p),
                    None if phase.needs_digit() || b.is_ascii_digit() => {
                        self.state = State::Invalid
                    }
                    None => {
                        // The number ended; this byte follows a value.
                        self.after_value();
                        self.byte(b);
                    }
                }
            }
            State::Literal { word, read } => {
                let w = word.as_bytes();
                if w[read as usize] == b {
                    if read as usize + 1 == w.len() {
                        self.after_value();
                    } else {
                        self.state = State::Literal {
                            word,
                            read: read + 1,
                        };
                    }
                } else {
                    self.state = State::Invalid;
                }
            }
        }
    }

    /// The text that completes the document (empty when it is complete),
    /// or `None` when the text read is not a JSON prefix or holds no value
    /// yet.
    pub fn closing(&self) -> Option<String> {
        let mut out = String::new();
        let mut need_value = false;
        match self.state {
            State::Invalid => return None,
            State::Done | State::AfterValue | State::ArrayStart | State::ObjectStart => {}
            State::Value => {
                if self.stack.is_empty() {
                    return None;
                }
                need_value = true;
            }
            State::Key => out.push_str("\"\":null"),
            State::Colon => out.push_str(":null"),
            State::Str { key, high } => {
                if high {
                    out.push_str("\\uDC00");
                }
                out.push('"');
                if key {
                    out.push_str(":null");
                }
            }
            State::Escape { key, high } => {
                // After a high surrogate the escape must be a low one;
                // otherwise `\\` is a whole escape (the backslash is text).
                out.push_str(if high { "uDC00" } else { "\\" });
                out.push('"');
                if key {
                    out.push_str(":null");
                }
            }
            State::Unicode {
                key,
                high,
                read,
                code,
            } => {
                // Pad the code point so that it is valid where it stands:
                // zeros, or the low surrogate `DC00` a high one needs.
                let pads: &[&str] = if high {
                    &["DC00", "C00", "00", "0"]
                } else {
                    &["0000", "000", "00", "0"]
                };
                let pad = &pads[read as usize][..4 - read as usize];
                let mut full = code;
                for c in pad.chars() {
                    full = full << 4 | c.to_digit(16).unwrap_or(0) as u16;
                }
                match (high, surrogate(full)) {
                    (true, Some(Surrogate::Low)) | (false, None) => out.push_str(pad),
                    (false, Some(Surrogate::High)) => {
                        out.push_str(pad);
                        out.push_str("\\uDC00");
                    }
                    _ => return None,
                }
                out.push('"');
                if key {
                    out.push_str(":null");
                }
            }
            State::Number(phase) => {
                if phase.needs_digit() {
                    out.push('0');
                }
            }
            State::Literal { word, read } => out.push_str(&word[read as usize..]),
        }
        if need_value {
            out.push_str("null");
        }
        for c in self.stack.iter().rev() {
            out.push(match c {
                Container::Object => '}',
                Container::Array => ']',
            });
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn close(prefix: &str) -> Option<String> {
        let mut c = JsonCloser::new();
        c.push(prefix);
        c.closing()
    }

    #[test]
    fn each_state_closes() {
        for (prefix, tail) in [
            ("{", "}"),
            ("[", "]"),
            (r#"{"a"#, r#"":null}"#),
            (r#"{"a""#, ":null}"),
            (r#"{"a":"#, "null}"),
            (r#"{"a": 1,"#, r#""":null}"#),
            ("[1,", "null]"),
            ("[-", "0]"),
            ("[1.", "0]"),
            ("[1e", "0]"),
            ("[1e+", "0]"),
            ("[12", "]"),
            ("[tr", "ue]"),
            ("[f", "alse]"),
            ("[n", "ull]"),
            (r#"["a\"#, r#"\"]"#),
            (r#"["\u1"#, r#"000"]"#),
            (r#"{"a": [{"b": "c"}, {"#, "}]}"),
            (r#"{"a": 1}"#, ""),
            ("12", ""),
            ("  [ ] ", ""),
        ] {
            let got = close(prefix).unwrap_or_else(|| panic!("{prefix:?} not closable"));
            assert_eq!(got, tail, "{prefix:?}");
            let whole = format!("{prefix}{got}");
            assert!(
                serde_json::from_str::<serde_json::Value>(&whole).is_ok(),
                "{whole:?} is not JSON"
            );
        }
    }

    #[test]
    fn not_prefixes() {
        for text in [
            "",
            "  ",
            "```json",
            "{a",
            "[1 2",
            "{\"a\" 1",
            "[}",
            "{]",
            "[01x",
            "[1.e",
            "tru e",
            "{\"a\":1}x",
            "\"a\nb\"",
            "[\"\\x\"]",
        ] {
            assert_eq!(close(text), None, "{text:?}");
        }
    }

    #[test]
    fn complete_documents() {
        for (text, complete) in [("{}", true), ("[1", false), ("1", true), ("1.", false)] {
            let mut c = JsonCloser::new();
            c.push(text);
            assert_eq!(c.is_complete(), complete, "{text:?}");
        }
    }

    #[test]
    fn depth_is_bounded() {
        let mut c = JsonCloser::new();
        c.push(&"[".repeat(MAX_DEPTH + 1));
        assert!(!c.is_prefix());
        let mut c = JsonCloser::new();
        c.push(&"[".repeat(1000));
        assert_eq!(c.closing().unwrap().len(), 1000);
    }

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::Value;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(Value::from),
            (-1e6f64..1e6).prop_map(Value::from),
            "[a-z\"\\\\é\u{1F600}\n]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 40, 5, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z\"]{0,4}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Every prefix (on a character boundary) of a JSON document,
        /// pretty or compact, closes into valid JSON.
        #[test]
        fn every_prefix_closes(v in json_value(), pretty in any::<bool>()) {
            let text = if pretty { serde_json::to_string_pretty(&v).unwrap() } else { v.to_string() };
            for (i, _) in text.char_indices().skip(1) {
                let prefix = &text[..i];
                let mut c = JsonCloser::new();
                c.push(prefix);
                prop_assert!(c.is_prefix(), "{:?}", prefix);
                let tail = c.closing();
                prop_assert!(tail.is_some(), "{:?}", prefix);
                let whole = format!("{prefix}{}", tail.unwrap());
                prop_assert!(serde_json::from_str::<serde_json::Value>(&whole).is_ok(), "{:?}", whole);
            }
            let mut c = JsonCloser::new();
            c.push(&text);
            prop_assert_eq!(c.closing(), Some(String::new()));
        }

        /// Arbitrary text never panics, and whatever it closes is JSON.
        #[test]
        fn hostile_text(text in "[\\[\\]{}\",:0-9a-z\\\\. -]{0,60}") {
            let mut c = JsonCloser::new();
            c.push(&text);
            if let Some(tail) = c.closing() {
                let whole = format!("{text}{tail}");
                prop_assert!(serde_json::from_str::<serde_json::Value>(&whole).is_ok(), "{:?}", whole);
            }
        }
    }
}
