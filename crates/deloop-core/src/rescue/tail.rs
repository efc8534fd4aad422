//! What to do with the end of an unterminated string: the bytes at the end
//! of a cut string that belong to the structure (closers, fences) rather
//! than to the text.

use super::number::strict_number;
use super::quote_rule::Kind;
use super::strings::{is_ascii_ws, is_ident};

/// Whether the text after a rejected quote, at the end of the input, is
/// structure rather than text: closers (and whitespace or fences), possibly
/// after one stray literal (` true}`), a comma or a colon.
pub(crate) fn structural_tail(tail: &[u8]) -> bool {
    let mut end = tail.len();
    let mut closers = 0;
    while end > 0 {
        let c = tail[end - 1];
        if is_ascii_ws(c) || c == b'`' {
            end -= 1;
        } else if matches!(c, b'}' | b']') {
            closers += 1;
            end -= 1;
        } else {
            break;
        }
    }
    if closers == 0 {
        return false;
    }
    let rest = tail[..end].trim_ascii();
    rest.is_empty()
        || matches!(rest[0], b',' | b':')
        || rest.iter().all(|&c| is_ident(c))
        || matches!(rest, b"true" | b"false" | b"null")
        || strict_number(std::str::from_utf8(rest).unwrap_or("x")).is_some()
}

/// Number of bytes at the end of an unterminated string's content that are
/// structure (closers of open brackets, whitespace, fences) rather than text.
pub(crate) fn strip_structural_tail(content: &[u8], kinds: &[Kind]) -> usize {
    let mut open_obj = 0i64;
    let mut open_arr = 0i64;
    for &c in content {
        match c {
            b'{' => open_obj += 1,
            b'}' => open_obj -= 1,
            b'[' => open_arr += 1,
            b']' => open_arr -= 1,
            _ => {}
        }
    }
    // Closers available to strip: those with no opener inside the string.
    let mut extra_obj = (-open_obj).max(0);
    let mut extra_arr = (-open_arr).max(0);
    // The run of closers at the end (read backwards), at most one per
    // open bracket.
    let mut run: Vec<(usize, Kind)> = Vec::new();
    let mut end = content.len();
    while end > 0 && run.len() < kinds.len() {
        let c = content[end - 1];
        if is_ascii_ws(c) || c == b'`' {
            end -= 1;
            continue;
        }
        let kind = match c {
            b'}' if extra_obj > 0 => {
                extra_obj -= 1;
                Kind::Obj
            }
            b']' if extra_arr > 0 => {
                extra_arr -= 1;
                Kind::Arr
            }
            _ => break,
        };
        if end >= 2 && content[end - 2] == b'\\' {
            break;
        }
        run.push((end - 1, kind));
        end -= 1;
    }
    // Forward order must close the innermost brackets first: the longest
    // such suffix of the run is structure.
    run.reverse();
    let mut cut = content.len();
    for s in 0..run.len() {
        let part = &run[s..];
        if part
            .iter()
            .zip(kinds.iter().rev())
            .all(|((_, k), w)| k == w)
        {
            cut = part[0].0;
            break;
        }
    }
    if cut == content.len() {
        // Only fences/whitespace at the end: strip a trailing fence.
        let t = content.len()
            - content
                .iter()
                .rev()
                .take_while(|&&c| is_ascii_ws(c) || c == b'`')
                .count();
        if content[t..].windows(3).any(|w| w == b"```") {
            return content.len() - t;
        }
        return 0;
    }
    content.len() - cut
}
