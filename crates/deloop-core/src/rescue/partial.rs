//! Streaming: the value of a key so far, from a prefix of a reply.
//!
//! [`PartialExtractor`] is incremental: it locates the key's string value
//! once (re-running the batch parser only while it has not been found, at
//! geometrically spaced buffer lengths), then decodes only the new bytes.
//! At an unescaped quote it asks the batch parser's own closing-quote rule
//! ([`QuoteRule::final_verdict`]) and waits while that rule's look-ahead still
//! reaches the end of the buffer, so batch and streaming cannot drift.
//! Text that the batch parser could still drop when the input ends (a
//! trailing run of whitespace, commas or closers, and text after an inner
//! quote that still looks like structure) is held back until it is certain;
//! [`PartialExtractor::finish`] flushes it by running the batch parser once.

use super::quote_rule::{Kind, QuoteRule, StrCtx, Verdict};
use super::repairs::Repairs;
use super::rescue;

/// The text of `key` so far, given a prefix of a streamed JSON reply.
///
/// Returns `None` until the key's value has started, or when the value is
/// not a string. A cut escape (`\`, `\u00`) at the end is left out. This is
/// the batch parser run on the prefix (linear in its length); to follow a
/// stream chunk by chunk use [`PartialExtractor`].
///
/// ```
/// use deloop_core::rescue::partial_string;
/// assert_eq!(partial_string(r#"{"answer": "Hola, mu"#, "answer").as_deref(), Some("Hola, mu"));
/// assert_eq!(partial_string(r#"{"ans"#, "answer"), None);
/// ```
pub fn partial_string(prefix: &str, key: &str) -> Option<String> {
    let got = rescue(prefix, key).ok()?;
    match got.value {
        serde_json::Value::String(s) => Some(s),
        _ => None,
    }
}

/// Smallest growth (bytes) between two attempts to locate the value.
const LOCATE_STEP: usize = 32;
/// Bytes after a backslash that make any escape complete (`\uD83D\uDE00`).
const ESCAPE_LOOKAHEAD: usize = 12;

/// Stateful streaming extractor: push chunks as they arrive, get back the
/// text of the key's value added since the previous call.
///
/// Cost: amortised linear in the stream length (each byte is decoded once;
/// the value is located by re-parsing at geometrically growing lengths,
/// and an undecided quote is re-examined when its look-ahead has doubled).
/// Memory: the buffered reply plus the decoded text.
///
/// Guarantee: everything returned by [`push`](PartialExtractor::push) is a
/// prefix of what [`rescue`](super::rescue) returns for the whole reply,
/// provided the whole reply's chosen value is the one being streamed (a
/// later draft or a later `</think>` can make the batch parser pick another
/// value; streamed text cannot be taken back). Call
/// [`finish`](PartialExtractor::finish) at the end of the stream to get
/// the held-back rest, so that the concatenation equals the batch result.
///
/// ```
/// use deloop_core::rescue::PartialExtractor;
/// let mut ex = PartialExtractor::new("answer");
/// let mut got = String::new();
/// for chunk in [r#"{"answer": "Hel"#, r#"lo\nwor"#, r#"ld", "n": 1}"#] {
///     got.push_str(ex.push(chunk));
/// }
/// got.push_str(ex.finish());
/// assert_eq!(got, "Hello\nworld");
/// assert_eq!(ex.text(), "Hello\nworld");
/// ```
#[derive(Debug, Clone, Default)]
pub struct PartialExtractor {
    key: String,
    buf: String,
    /// Decoded text of the located string so far; `dec[..emitted]` has
    /// been returned.
    dec: String,
    emitted: usize,
    /// The located string value.
    ctx: Option<StrCtx>,
    /// For a value nested below the root: the same string read as if its
    /// object were the root (the batch parser does so when it picks the
    /// inner object of a truncated reply). Both readings must agree.
    alt: Option<StrCtx>,
    /// The two readings disagreed: nothing more is streamed before
    /// [`finish`](PartialExtractor::finish).
    stalled: bool,
    /// Buffer length at which to try locating again.
    next_locate: usize,
    /// Next raw byte of `buf` to decode.
    pos: usize,
    /// An unescaped quote waiting for its decision, and the buffer length
    /// at which to look at it again.
    pending: Option<(usize, usize)>,
    /// Where the trailing run of whitespace/commas/closers in `dec` starts.
    run_start: usize,
    /// The last inner quote, while the text after it could still be judged
    /// structure at the end of input: (raw position, `dec` length before it).
    risk: Option<Risk>,
    /// The string has ended; nothing more is decoded.
    closed: bool,
    /// Depth of objects written into the text ([`QuoteRule::nesting`])
    /// after the raw bytes before `nest_from`.
    nest: u32,
    nest_from: usize,
    /// An escape of the string kept its backslash (then `\b` and `\f`
    /// do too, see [`super::strings::RegexEscapes`]).
    invalid_escape: bool,
}

#[derive(Debug, Clone, Copy)]
struct Risk {
    /// Raw bytes after the quote scanned so far.
    scanned: usize,
    dec_len: usize,
    /// 0: only whitespace so far; 1: a first byte seen; 2: then whitespace;
    /// 3: at risk until the string ends (the tail starts with `,` or `:`).
    state: u8,
}

impl PartialExtractor {
    /// A new extractor for `key`.
    pub fn new(key: &str) -> Self {
        PartialExtractor {
            key: key.to_owned(),
            ..PartialExtractor::default()
        }
    }

    /// Appends a chunk and returns the text added to the value since the
    /// last call (possibly empty: text is held back while it is uncertain).
    pub fn push(&mut self, chunk: &str) -> &str {
        self.buf.push_str(chunk);
        let before = self.emitted;
        if self.ctx.is_none() {
            if self.buf.len() >= self.next_locate {
                self.locate();
            }
        } else if !self.closed && !self.stalled {
            self.advance();
        }
        &self.dec[before..self.emitted]
    }

    /// Ends the stream: runs the batch parser once on the whole reply and
    /// returns the text it has beyond what was already returned (held-back
    /// text, or everything when the value was never located). Returns
    /// nothing when the batch result does not extend the returned text.
    pub fn finish(&mut self) -> &str {
        let before = self.emitted;
        if let Some(t) = partial_string(&self.buf, &self.key) {
            if t.len() > before && t.starts_with(&self.dec[..before]) {
                self.dec = t;
                self.emitted = self.dec.len();
                self.run_start = self.emitted;
            }
        }
        &self.dec[before..self.emitted]
    }

    /// The text returned so far.
    pub fn text(&self) -> &str {
        &self.dec[..self.emitted]
    }

    /// Tries to find the key's string value in the buffer.
    fn locate(&mut self) {
        let len = self.buf.len();
        self.next_locate = (len + LOCATE_STEP).max(len + len / 4);
        if inside_think(&self.buf) {
            // A `<think>` block still open: drafts inside it are not the
            // answer (the batch parser prefers the text after `</think>`).
            return;
        }
        let Some((batch, Some(ctx))) = super::rescue_located(&self.buf, &self.key) else {
            return;
        };
        self.pos = ctx.open + 1;
        self.nest_from = ctx.open + 1;
        if ctx.kinds.len() > 1 {
            self.alt = Some(StrCtx {
                kinds: vec![Kind::Obj],
                ..ctx.clone()
            });
        }
        self.ctx = Some(ctx);
        self.advance();
        if !batch.starts_with(&self.dec[..self.emitted]) {
            // Not the value the batch parser reads: forget it, retry later.
            let key = std::mem::take(&mut self.key);
            let buf = std::mem::take(&mut self.buf);
            let next = self.next_locate;
            *self = PartialExtractor::new(&key);
            self.buf = buf;
            self.next_locate = next;
        }
    }

    /// Decodes the new bytes of the located string.
    fn advance(&mut self) {
        let Some(ctx) = self.ctx.take() else {
            return;
        };
        let buf = std::mem::take(&mut self.buf);
        let alt = self.alt.take();
        self.decode(&buf, &ctx, alt.as_ref());
        self.alt = alt;
        self.buf = buf;
        self.ctx = Some(ctx);
        self.scan_risk();
        // Emit what is certain.
        let mut limit = if self.closed {
            self.dec.len()
        } else {
            self.run_start
        };
        if let (Some(r), false) = (self.risk, self.closed) {
            if r.state != 4 {
                limit = limit.min(r.dec_len);
            }
        }
        if limit > self.emitted && !self.stalled {
            self.emitted = limit;
        }
    }

    fn decode(&mut self, buf: &str, ctx: &StrCtx, alt: Option<&StrCtx>) {
        let b = buf.as_bytes();
        let len = b.len();
        let q = ctx.q;
        let mut scratch = Repairs::default();
        loop {
            if let Some((j, next_eval)) = self.pending {
                if len < next_eval {
                    return;
                }
                let rule = QuoteRule::new(buf);
                match rule.nesting(self.nest_from, j, q, self.nest, None) {
                    Ok(n) => {
                        self.nest = n;
                        self.nest_from = j;
                    }
                    Err((n, x)) => {
                        // A `{` whose reading needs more input.
                        self.nest = n;
                        self.nest_from = x;
                        let tail = (len - x).max(8);
                        self.pending = Some((j, x + 2 * tail));
                        return;
                    }
                }
                let mut verdict = if self.nest > 0 {
                    Some(Verdict::Inner)
                } else {
                    rule.final_verdict(j, ctx)
                };
                if let (true, Some(v), Some(alt)) = (self.nest == 0, verdict, alt) {
                    match rule.final_verdict(j, alt) {
                        Some(w) if w != v => {
                            self.stalled = true;
                            return;
                        }
                        w => verdict = w,
                    }
                }
                match verdict {
                    None => {
                        let tail = (len - j).max(8);
                        self.pending = Some((j, j + 2 * tail));
                        return;
                    }
                    Some(Verdict::Close) => {
                        self.closed = true;
                        return;
                    }
                    Some(Verdict::CloseBefore(comma)) => {
                        let cut = j - comma;
                        self.dec.truncate(self.dec.len().saturating_sub(cut));
                        self.closed = true;
                        return;
                    }
                    Some(Verdict::Inner) => {
                        // A quote of an object written into the text is not
                        // a rejected closing quote: the batch parser keeps
                        // checking the tail of the last rejected one.
                        if self.nest == 0 {
                            self.risk = Some(Risk {
                                scanned: j + 1,
                                dec_len: self.dec.len(),
                                state: 0,
                            });
                        }
                        self.dec.push(q as char);
                        self.run_start = self.dec.len();
                        self.pos = j + 1;
                        self.pending = None;
                    }
                }
            }
            let Some(k) = memchr::memchr2(q, b'\\', &b[self.pos..]) else {
                self.push_plain(&buf[self.pos..]);
                self.pos = len;
                return;
            };
            let j = self.pos + k;
            self.push_plain(&buf[self.pos..j]);
            self.pos = j;
            if b[j] == b'\\' {
                if len - j < ESCAPE_LOOKAHEAD {
                    return;
                }
                let d0 = self.dec.len();
                let next = super::strings::decode_escape(b, j, len, &mut self.dec, &mut scratch);
                if next == j + 1 {
                    self.invalid_escape = true;
                } else if next == j + 2 && matches!(b[j + 1], b'b' | b'f') {
                    if !self.invalid_escape {
                        // A backspace, or a regular expression's `\b` if an
                        // invalid escape comes later: only the end can tell.
                        self.dec.truncate(d0);
                        self.stalled = true;
                        return;
                    }
                    self.dec.truncate(d0);
                    self.dec
                        .push_str(if b[j + 1] == b'b' { "\\b" } else { "\\f" });
                }
                self.pos = next;
                self.note_run(d0);
            } else {
                self.pending = Some((j, 0));
            }
        }
    }

    /// Copies raw text (cut at ASCII bytes) into `dec`.
    fn push_plain(&mut self, seg: &str) {
        if seg.is_empty() {
            return;
        }
        let d0 = self.dec.len();
        self.dec.push_str(seg);
        self.note_run(d0);
    }

    /// Updates the start of the trailing run after `dec[d0..]` was added.
    fn note_run(&mut self, d0: usize) {
        if let Some((i, c)) = self.dec[d0..].char_indices().rev().find(|&(_, c)| !held(c)) {
            self.run_start = d0 + i + c.len_utf8();
        }
    }

    /// Advances the check of the text after the last inner quote: it is
    /// safe once it cannot be read as structure at the end of the input
    /// (the batch rule `structural_tail`): it starts with something other
    /// than `,`/`:`, then has whitespace, then a byte that is neither
    /// whitespace, a closer nor a backtick.
    fn scan_risk(&mut self) {
        let Some(mut r) = self.risk else {
            return;
        };
        let end = if self.closed { r.scanned } else { self.pos };
        let b = self.buf.as_bytes();
        while r.scanned < end && r.state < 3 {
            let c = b[r.scanned];
            let ws = c.is_ascii_whitespace();
            r.state = match r.state {
                0 if ws => 0,
                0 if c == b',' || c == b':' => 3,
                0 => 1,
                1 if ws => 2,
                1 => 1,
                _ if ws || matches!(c, b'}' | b']' | b'`') => 2,
                _ => 4,
            };
            if r.state == 4 {
                break;
            }
            r.scanned += 1;
        }
        r.scanned = r.scanned.max(end);
        self.risk = Some(r);
    }
}

/// Whether the buffer is inside a `<think>` block, or at a think tag not
/// yet complete: the batch parser prefers the text after the last
/// `</think>`, so drafts there are not the answer.
fn inside_think(buf: &str) -> bool {
    let b = buf.as_bytes();
    let open = memchr::memmem::rfind(b, b"<think");
    if open.is_none() && memchr::memmem::rfind(b, b"</think").is_none() {
        return false;
    }
    match super::scan::after_think(buf) {
        None => true,
        Some(after) => open.is_some_and(|o| o >= after),
    }
}

/// Characters the batch parser may drop from the end of a string cut by
/// the end of input (or before a comma it decides to close at).
fn held(c: char) -> bool {
    c.is_whitespace() || matches!(c, ',' | '}' | ']' | '`')
}
