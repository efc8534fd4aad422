//! Citations as data, checked against the retrieved passages.
//!
//! The model is asked for `citations: [{"source", "start_line",
//! "end_line"}]`. A citation is kept only when it names the source of a
//! retrieved passage and its lines overlap that passage; the kept range is
//! narrowed to the retrieved lines, so a citation never points at text the
//! model was not shown. Everything else is dropped and counted.

use serde_json::Value;

use crate::types::{Citation, Passage};

/// At most this many citations are read from one reply.
pub const MAX_CITATIONS: usize = 64;

/// The outcome of checking the model's citations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckedCitations {
    /// Citations of retrieved passages, deduplicated, in the model's order.
    pub kept: Vec<Citation>,
    /// How many cited items were dropped: not retrieved, malformed, or beyond
    /// [`MAX_CITATIONS`].
    pub dropped: usize,
}

fn normalise_source(s: &str) -> &str {
    let s = s.trim();
    s.strip_prefix("./").unwrap_or(s)
}

fn as_line(v: Option<&Value>) -> Option<u32> {
    match v? {
        Value::Number(n) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Checks one cited `(source, lines)` against `passages`: the narrowed
/// citation, or `None` when nothing retrieved matches.
pub fn check_one(
    source: &str,
    start: Option<u32>,
    end: Option<u32>,
    passages: &[Passage],
) -> Option<Citation> {
    let source = normalise_source(source);
    if source.is_empty() {
        return None;
    }
    let (lo, hi) = match (start, end) {
        (Some(a), Some(b)) => (a.min(b), a.max(b)),
        (Some(a), None) | (None, Some(a)) => (a, a),
        (None, None) => (0, u32::MAX),
    };
    passages
        .iter()
        .filter(|p| normalise_source(&p.source) == source)
        .find(|p| lo <= p.end_line && hi >= p.start_line)
        .map(|p| Citation {
            source: p.source.clone(),
            start_line: lo.max(p.start_line),
            end_line: hi.min(p.end_line),
        })
}

/// Checks the `citations` array of a reply (any JSON value; a non-array
/// counts nothing) against the retrieved `passages`.
///
/// ```
/// use deloop_oracle::citations::check_citations;
/// use deloop_oracle::Passage;
/// let p = Passage { source: "docs/a.md".into(), start_line: 10, end_line: 20,
///     heading_trail: vec![], text: String::new(), score: 1.0 };
/// let cited = serde_json::json!([
///     {"source": "docs/a.md", "start_line": 12, "end_line": 30},
///     {"source": "docs/invented.md", "start_line": 1, "end_line": 2}
/// ]);
/// let checked = check_citations(&cited, &[p]);
/// assert_eq!(checked.kept.len(), 1);
/// assert_eq!((checked.kept[0].start_line, checked.kept[0].end_line), (12, 20));
/// assert_eq!(checked.dropped, 1);
/// ```
pub fn check_citations(cited: &Value, passages: &[Passage]) -> CheckedCitations {
    let mut out = CheckedCitations::default();
    let Value::Array(items) = cited else {
        return out;
    };
    for (i, item) in items.iter().enumerate() {
        if i >= MAX_CITATIONS {
            out.dropped += items.len() - MAX_CITATIONS;
            break;
        }
        let checked = match item {
            Value::Object(obj) => obj
                .get("source")
                .and_then(Value::as_str)
                .and_then(|source| {
                    check_one(
                        source,
                        as_line(obj.get("start_line")),
                        as_line(obj.get("end_line")),
                        passages,
                    )
                }),
            Value::String(source) => check_one(source, None, None, passages),
            _ => None,
        };
        match checked {
            Some(c) if out.kept.contains(&c) => {}
            Some(c) => out.kept.push(c),
            None => out.dropped += 1,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(source: &str, a: u32, b: u32) -> Passage {
        Passage {
            source: source.into(),
            start_line: a,
            end_line: b,
            heading_trail: vec![],
            text: String::new(),
            score: 0.0,
        }
    }

    #[test]
    fn keeps_retrieved_drops_the_rest() {
        let ps = [p("docs/a.md", 1, 10), p("docs/b.md", 40, 50)];
        let cited = json!([
            {"source": "docs/a.md", "start_line": 2, "end_line": 4},
            {"source": "./docs/b.md", "start_line": "45", "end_line": 60},
            {"source": "docs/b.md", "start_line": 1, "end_line": 5},
            {"source": "docs/zzz.md", "start_line": 1, "end_line": 5},
            {"start_line": 1},
            42,
            "docs/a.md",
            {"source": "docs/a.md", "start_line": 2, "end_line": 4}
        ]);
        let c = check_citations(&cited, &ps);
        assert_eq!(
            c.kept,
            vec![
                Citation {
                    source: "docs/a.md".into(),
                    start_line: 2,
                    end_line: 4
                },
                Citation {
                    source: "docs/b.md".into(),
                    start_line: 45,
                    end_line: 50
                },
                Citation {
                    source: "docs/a.md".into(),
                    start_line: 1,
                    end_line: 10
                },
            ]
        );
        assert_eq!(c.dropped, 4);
    }

    #[test]
    fn reversed_and_missing_lines() {
        let ps = [p("a", 5, 9)];
        assert_eq!(check_one("a", Some(8), Some(6), &ps).unwrap().start_line, 6);
        assert_eq!(check_one("a", Some(7), None, &ps).unwrap().end_line, 7);
        assert!(check_one("a", Some(10), Some(12), &ps).is_none());
        assert!(check_one("", None, None, &ps).is_none());
    }

    #[test]
    fn huge_lists_are_bounded() {
        let ps = [p("a", 1, 2)];
        let items: Vec<_> = (0..1000).map(|_| json!({"source": "nope"})).collect();
        let c = check_citations(&Value::Array(items), &ps);
        assert_eq!(c.dropped, 1000);
        assert!(c.kept.is_empty());
        assert_eq!(
            check_citations(&json!({"a": 1}), &ps),
            CheckedCitations::default()
        );
    }
}
