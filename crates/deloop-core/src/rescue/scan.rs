//! Locating the JSON in model output: `<think>` blocks, prose, fences,
//! several top-level values, and the choice among them.

use memchr::{memchr2, memmem};
use serde_json::Value;

use super::error::RescueError;
use super::parser::Parser;
use super::quote_rule::StrCtx;
use super::repairs::Repairs;
use super::Repair;

/// One top-level value found in the text.
#[derive(Debug)]
pub(crate) struct Candidate {
    pub(crate) value: Value,
    pub(crate) complete: bool,
    pub(crate) found: Option<Value>,
    pub(crate) rep: Repairs,
    /// Text other than whitespace comes before it.
    pub(crate) lead: bool,
    /// Text other than whitespace comes after it.
    pub(crate) trail: bool,
    /// Byte range of the candidate in the scanned text.
    pub(crate) start: usize,
    pub(crate) end: usize,
    /// Text mode: the value as compact JSON (`value` is then `null`).
    pub(crate) json: Option<String>,
}

impl Candidate {
    fn notes(&self, rep: &mut Repairs) {
        if self.lead {
            rep.note(Repair::SkippedLeadingText);
        }
        rep.extend(&self.rep);
        if self.trail {
            rep.note(Repair::SkippedTrailingText);
        }
    }
}

/// Everything found in one region of the text.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub(crate) candidates: Vec<Candidate>,
    /// A whole-document scalar (`"abc"`, `42`, `true`).
    pub(crate) scalar: Option<Candidate>,
    /// Prose (not whitespace, commas, comments or fences) was skipped.
    pub(crate) prose: bool,
    /// Repairs of the preprocessing (BOM, fences, think block).
    pub(crate) rep: Repairs,
    /// The text the candidates' positions refer to, when it is not the
    /// input (a double-encoded reply decoded once).
    pub(crate) decoded: Option<String>,
    /// Context of the last string value of the wanted key met by the
    /// parser (positions in the scanned text; `None` when decoded).
    pub(crate) want_string: Option<StrCtx>,
    /// Text mode: the scan stopped at a second candidate.
    pub(crate) more: bool,
}

/// Start of the text after the last `</think>` (or `</thinking>`), if any.
pub(crate) fn after_think(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let at = memmem::find_iter(b, b"</think").last()?;
    let rest = &b[at + 7..];
    if rest.starts_with(b">") {
        Some(at + 8)
    } else if rest.starts_with(b"ing>") {
        Some(at + 11)
    } else {
        None
    }
}

/// Whether a whole-document scalar may start at `pos`.
fn scalar_start(b: &[u8], pos: usize) -> bool {
    let c = b[pos];
    if c.is_ascii_digit() || matches!(c, b'-' | b'.' | b'"' | b'\'') {
        return true;
    }
    if super::strings::opening_quote(b, pos).is_some() {
        return true;
    }
    let w: Vec<u8> = b[pos..]
        .iter()
        .take_while(|c| c.is_ascii_alphabetic())
        .copied()
        .collect();
    matches!(
        w.as_slice(),
        b"true" | b"false" | b"null" | b"True" | b"False" | b"None" | b"undefined"
    )
}

/// Scans `text` for top-level JSON values.
pub(crate) fn scan(text: &str, max_depth: usize, want: Option<&str>) -> Result<Scan, RescueError> {
    scan_mode(text, max_depth, want, false)
}

/// Scans `text` in text mode (see [`choose_document_text`]): each value is
/// written as JSON text instead of being built, and the scan stops at a
/// second candidate.
pub(crate) fn scan_text(text: &str, max_depth: usize) -> Result<Scan, RescueError> {
    scan_mode(text, max_depth, None, true)
}

fn scan_mode(
    text: &str,
    max_depth: usize,
    want: Option<&str>,
    text_mode: bool,
) -> Result<Scan, RescueError> {
    let mut p = Parser::new(text, max_depth, want);
    let b = text.as_bytes();
    let mut out = Scan::default();
    let pos = p.skip_ws(0, false);
    out.rep.extend(&p.rep);
    // A reply JSON-encoded twice: `{\"answer\": \"...\"}`.
    let rest = &b[pos..];
    if rest.starts_with(b"\\\"") || rest.starts_with(b"{\\\"") || rest.starts_with(b"[\\\"") {
        let mut rep = Repairs::default();
        let decoded = super::strings::unescape_all(&text[pos..], &mut rep);
        let mut inner = scan_plain(&decoded, max_depth, want, text_mode)?;
        out.rep.note(Repair::UnescapedDoubleEncoded);
        inner.rep.extend(&out.rep);
        inner.decoded = Some(decoded);
        inner.want_string = None;
        return Ok(inner);
    }
    drop(p);
    scan_plain(text, max_depth, want, text_mode).map(|mut s| {
        let mut rep = out.rep;
        rep.extend(&s.rep);
        s.rep = rep;
        s
    })
}

fn scan_plain(
    text: &str,
    max_depth: usize,
    want: Option<&str>,
    text_mode: bool,
) -> Result<Scan, RescueError> {
    let mut p = Parser::new(text, max_depth, want);
    let b = text.as_bytes();
    let len = p.len();
    let mut out = Scan::default();
    let mut pos = p.skip_ws(0, false);
    let first = pos;
    out.rep.extend(&p.rep);
    p.rep = Repairs::default();
    if pos < len && !matches!(b[pos], b'{' | b'[') && scalar_start(b, pos) {
        let parsed = p.parse_at(pos)?;
        let mut after = p.skip_ws(parsed.end, true);
        while after < len && b[after] == b',' {
            after = p.skip_ws(after + 1, true);
        }
        let is_text = !matches!(b[pos], b'"' | b'\'') && parsed.value.is_string();
        let quoted = super::strings::opening_quote(b, pos).is_some();
        if after >= len && (quoted || !is_text) {
            out.scalar = Some(Candidate {
                value: parsed.value,
                complete: parsed.complete,
                found: None,
                rep: std::mem::take(&mut p.rep),
                lead: false,
                trail: false,
                start: pos,
                end: parsed.end,
                json: None,
            });
            return Ok(out);
        }
        p.rep = Repairs::default();
    }
    p.text_mode(text_mode);
    loop {
        let Some(k) = memchr2(b'{', b'[', &b[pos..]) else {
            if p.skip_ws(pos, true) < len {
                out.prose = true;
            }
            break;
        };
        let cand = pos + k;
        if text_mode && !out.candidates.is_empty() {
            out.more = true;
            break;
        }
        // Anything but separators between values is prose.
        let mut q = pos;
        loop {
            q = p.skip_ws(q, true);
            if q < cand && b[q] == b',' {
                q += 1;
            } else {
                break;
            }
        }
        if q < cand {
            out.prose = true;
        }
        out.rep.extend(&p.rep);
        p.rep = Repairs::default();
        let parsed = p.parse_at(cand)?;
        let rep = std::mem::take(&mut p.rep);
        let trail = p.skip_ws(parsed.end, true) < len;
        p.rep = Repairs::default();
        out.candidates.push(Candidate {
            value: parsed.value,
            complete: parsed.complete,
            found: parsed.found,
            rep,
            lead: cand > first,
            trail,
            start: cand,
            end: parsed.end,
            json: parsed.json,
        });
        pos = parsed.end.max(cand + 1);
    }
    out.want_string = p.want_string.take();
    Ok(out)
}

/// Same shape: a later value that revises an earlier one.
fn same_shape(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            // Key order does not matter: a revision may reorder its keys.
            x.len() == y.len() && x.keys().all(|k| y.contains_key(k))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len()
                && match (x.first(), y.first()) {
                    (Some(p), Some(q)) => same_shape(p, q),
                    (None, None) => true,
                    _ => false,
                }
        }
        _ => false,
    }
}

fn non_empty(v: &Value) -> bool {
    match v {
        Value::Object(m) => !m.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => true,
    }
}

/// The document `repair` returns for one scan, or `None`.
pub(crate) fn choose_document(scan: Scan) -> Option<(Value, Repairs)> {
    let mut rep = scan.rep;
    if let Some(c) = scan.scalar {
        rep.extend(&c.rep);
        return Some((c.value, rep));
    }
    let total = scan.candidates.len();
    let mut keep: Vec<Candidate> = Vec::new();
    let mut last_empty: Option<Candidate> = None;
    for c in scan.candidates {
        if non_empty(&c.value) {
            keep.push(c);
        } else {
            last_empty = Some(c);
        }
    }
    if keep.is_empty() {
        let c = last_empty?;
        c.notes(&mut rep);
        if total > 1 {
            rep.note(Repair::ChoseOneOfSeveral);
        }
        return Some((c.value, rep));
    }
    if keep.len() == 1 {
        let c = keep.pop()?;
        c.notes(&mut rep);
        if total > 1 {
            rep.note(Repair::ChoseOneOfSeveral);
        }
        return Some((c.value, rep));
    }
    if scan.prose {
        // Values embedded in prose: the last object is the final answer
        // (earlier ones are drafts); without objects, the last array.
        let idx = keep
            .iter()
            .rposition(|c| c.value.is_object())
            .unwrap_or(keep.len() - 1);
        let c = keep.swap_remove(idx);
        c.notes(&mut rep);
        rep.note(Repair::ChoseOneOfSeveral);
        return Some((c.value, rep));
    }
    // Values separated only by whitespace or commas: a run of revisions of
    // the same shape keeps the last; otherwise they form one array.
    let mut items: Vec<Candidate> = Vec::new();
    for c in keep {
        if let Some(prev) = items.last() {
            if same_shape(&prev.value, &c.value) {
                rep.note(Repair::ChoseOneOfSeveral);
                items.pop();
            }
        }
        items.push(c);
    }
    if items.len() == 1 {
        let c = items.pop()?;
        c.notes(&mut rep);
        return Some((c.value, rep));
    }
    rep.note(Repair::CollectedIntoArray);
    let mut arr = Vec::with_capacity(items.len());
    for c in items {
        rep.extend(&c.rep);
        arr.push(c.value);
    }
    Some((Value::Array(arr), rep))
}

/// What [`choose_document`] returns for a text-mode scan, as JSON text:
/// `None` unless the scan found exactly one candidate written as text (a
/// whole-document scalar, several candidates or a duplicate key need the
/// built values; the caller then scans again without text mode).
pub(crate) fn choose_document_text(scan: Scan) -> Option<(String, Repairs)> {
    if scan.more || scan.scalar.is_some() || scan.candidates.len() != 1 {
        return None;
    }
    let mut rep = scan.rep;
    let c = scan.candidates.into_iter().next()?;
    c.notes(&mut rep);
    Some((c.json?, rep))
}

/// The start of the last `{ "key":` strictly inside `start..end`.
fn last_key_object(text: &str, start: usize, end: usize, key: &str) -> Option<usize> {
    let b = text.as_bytes();
    if start >= end || end > b.len() {
        return None;
    }
    let needle = format!("\"{key}\"");
    let mut best = None;
    for q in memmem::find_iter(&b[start + 1..end], needle.as_bytes()) {
        let q = start + 1 + q;
        let mut p = q;
        while p > start + 1 && super::strings::is_ascii_ws(b[p - 1]) {
            p -= 1;
        }
        if p <= start + 1 || b[p - 1] != b'{' {
            continue;
        }
        let mut n = q + needle.len();
        while n < end && super::strings::is_ascii_ws(b[n]) {
            n += 1;
        }
        if n < end && b[n] == b':' {
            best = Some(p - 1);
        }
    }
    best
}

/// An unterminated string in a draft can swallow the final object
/// (`{"answer": "dra… Final: {"answer": "x"}`). When the chosen candidate
/// holds a complete `{"key": …}` that ends where the candidate ends (both
/// closed by the same brace) or the candidate was truncated, that inner
/// object is the intended one.
pub(crate) fn refine_key(
    text: &str,
    key: &str,
    max_depth: usize,
    chosen: &Candidate,
) -> Option<(Value, Repairs)> {
    let p = last_key_object(text, chosen.start, chosen.end, key)?;
    let mut parser = Parser::new(&text[p..], max_depth, Some(key));
    let parsed = parser.parse_at(0).ok()?;
    if !(parsed.complete && (p + parsed.end == chosen.end || !chosen.complete)) {
        return None;
    }
    let v = parsed.found?;
    let mut rep = std::mem::take(&mut parser.rep);
    rep.note(Repair::ChoseOneOfSeveral);
    rep.note(Repair::SkippedLeadingText);
    Some((v, rep))
}

/// Whether the value of the key is a placeholder rather than an answer:
/// `null` written by a repair (`{"answer": ...}`, `{"answer": }`), or a
/// string that is only an ellipsis, empty, or one `<…>` slot
/// (`"<your answer>"`).
fn placeholder(v: &Value, rep: &Repairs) -> bool {
    match v {
        Value::Null => rep.has(Repair::RemovedEllipsis) || rep.has(Repair::InsertedNull),
        Value::String(t) => {
            let t = t.trim();
            matches!(t, "" | "..." | "…")
                || (t.len() <= 40
                    && t.starts_with('<')
                    && t.ends_with('>')
                    && t[1..t.len() - 1].chars().all(|c| c != '<' && c != '>'))
        }
        _ => false,
    }
}

/// The value of the wanted key for one scan: the last complete candidate
/// that has the key, else the last (truncated) one that has it. Also
/// returns the context of the chosen candidate's string value of the key,
/// as its own parse met it (for the streaming extractor; when the value
/// was refined from an inner object, the streaming extractor checks the
/// texts agree before using it).
pub(crate) fn choose_key(
    scan: Scan,
    text: &str,
    key: &str,
    max_depth: usize,
) -> Result<(Value, Repairs, Option<StrCtx>), bool> {
    let any = !scan.candidates.is_empty();
    let mut rep = scan.rep;
    let decoded = scan.decoded;
    let want_string = scan.want_string;
    let ctx_of = |c: &Candidate| want_string.filter(|w| (c.start..c.end).contains(&w.open));
    let text = decoded.as_deref().unwrap_or(text);
    let with_key: Vec<Candidate> = scan
        .candidates
        .into_iter()
        .filter(|c| c.found.is_some())
        .collect();
    let n = with_key.len();
    // The last complete candidate with a real value, then the last
    // truncated one with a real value; placeholders (`{"answer": ...}`
    // mentioned in prose) only when nothing else has the key.
    let real = |c: &Candidate| !c.found.as_ref().is_some_and(|v| placeholder(v, &c.rep));
    let idx = with_key
        .iter()
        .rposition(|c| c.complete && real(c))
        .or_else(|| with_key.iter().rposition(real))
        .or_else(|| with_key.iter().rposition(|c| c.complete))
        .or_else(|| n.checked_sub(1));
    let Some(idx) = idx else {
        return Err(any);
    };
    let c = with_key.into_iter().nth(idx).ok_or(any)?;
    if c.rep.has(Repair::EscapedInnerQuote) || !c.complete {
        if let Some((v, r)) = refine_key(text, key, max_depth, &c) {
            rep.extend(&r);
            return Ok((v, rep, ctx_of(&c)));
        }
    }
    if n > 1 {
        rep.note(Repair::ChoseOneOfSeveral);
    }
    c.notes(&mut rep);
    let ctx = ctx_of(&c);
    let v = c.found.ok_or(any)?;
    Ok((v, rep, ctx))
}
