//! Numbers: the strict JSON grammar, and the lenient forms models write
//! (`2.`, `.5`, `1e`, `-`).

use serde_json::{Number, Value};

/// Parses a strict JSON number.
pub(crate) fn strict_number(tok: &str) -> Option<Value> {
    let b = tok.as_bytes();
    let mut i = 0;
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
        }
        _ => return None,
    }
    let mut int = true;
    if b.get(i) == Some(&b'.') {
        int = false;
        i += 1;
        let s = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == s {
            return None;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        int = false;
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let s = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == s {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    if int {
        if let Ok(v) = tok.parse::<i64>() {
            return Some(Value::from(v));
        }
        if let Ok(v) = tok.parse::<u64>() {
            return Some(Value::from(v));
        }
    }
    let f: f64 = tok.parse().ok()?;
    Number::from_f64(f).map(Value::Number)
}

/// Parses a number token leniently: a strict JSON number, or one of the
/// forms `2.`, `.3`, `-.3`, `2e`, `2e+`, `-` completed. Returns the value
/// and whether it had to be fixed; `None` if it is not a number.
pub(crate) fn lenient_number(tok: &str) -> Option<(Value, bool)> {
    if let Some(v) = strict_number(tok) {
        return Some((v, false));
    }
    let neg = tok.as_bytes().first() == Some(&b'-');
    let body = if neg { &tok[1..] } else { tok };
    if body.is_empty() {
        return Some((Value::from(-0.0), true));
    }
    let mut fixed = String::with_capacity(tok.len() + 2);
    if neg {
        fixed.push('-');
    }
    if body.starts_with('.') {
        fixed.push('0');
    }
    fixed.push_str(body);
    if fixed.ends_with('.') {
        fixed.push('0');
    }
    if fixed.ends_with(['e', 'E', '+', '-']) {
        fixed.push('0');
    }
    strict_number(&fixed).map(|v| (v, true))
}
