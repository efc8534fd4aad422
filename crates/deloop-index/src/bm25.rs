//! BM25 exactly as SQLite's FTS5 `bm25()` computes it, for backends that
//! rank lexical candidates themselves (PostgreSQL).
//!
//! For a query of phrases `q₁…qₙ` (each one term) and a chunk `D`:
//!
//! ```text
//! score(D) = Σᵢ idf(qᵢ) · f(qᵢ,D)·(k1+1) / (f(qᵢ,D) + k1·(1 − b + b·|D|/avgdl))
//! idf(q)   = ln((N − n(q) + 0.5) / (n(q) + 0.5)), or 1e-6 when that is ≤ 0
//! ```
//!
//! with `k1 = 1.2`, `b = 0.75`, `f` the occurrences of the term weighted by
//! column (heading [`HEADING_WEIGHT`], body [`BODY_WEIGHT`]), `|D|` the
//! chunk's tokens in both columns, `N` the chunks in the index, `avgdl`
//! their mean length and `n(q)` the chunks holding `q`. A term named by two
//! phrases counts twice, as in FTS5. Sums run in phrase order in `f64`, so
//! the scores are FTS5's to the last bit.

use std::collections::HashMap;

/// BM25 weight of the heading column (the heading trail; a BEIR title):
/// a query word in a heading counts twice as much as one in the body.
pub const HEADING_WEIGHT: f64 = 2.0;
/// BM25 weight of the body column.
pub const BODY_WEIGHT: f64 = 1.0;
/// FTS5's term-frequency saturation.
const K1: f64 = 1.2;
/// FTS5's length normalisation.
const B: f64 = 0.75;

/// One candidate chunk: its length and the frequencies of the query terms
/// it holds (`term → (heading, body)` occurrences).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Candidate {
    /// Tokens in the heading and the body.
    pub length: u64,
    /// Occurrences of each query term it holds, per column.
    pub terms: HashMap<String, (u32, u32)>,
}

/// Ranks `candidates` (every chunk holding at least one of the terms) for
/// the query `phrases`, in an index of `chunks` chunks and `tokens` tokens:
/// `(chunk id, score)` best first (ties by smaller id), at most `k`. The
/// score is FTS5's `-bm25()`, as a `f32`.
pub fn rank(
    phrases: &[String],
    candidates: &HashMap<i64, Candidate>,
    chunks: u64,
    tokens: u64,
    k: usize,
) -> Vec<(i64, f32)> {
    if phrases.is_empty() || candidates.is_empty() || k == 0 || chunks == 0 {
        return Vec::new();
    }
    let n = chunks as f64;
    let avgdl = tokens as f64 / n;
    let idf: Vec<f64> = phrases
        .iter()
        .map(|p| {
            let hits = candidates
                .values()
                .filter(|c| c.terms.contains_key(p))
                .count() as f64;
            let idf = ((n - hits + 0.5) / (hits + 0.5)).ln();
            if idf <= 0.0 {
                1e-6
            } else {
                idf
            }
        })
        .collect();
    let mut scored: Vec<(i64, f64)> = candidates
        .iter()
        .map(|(&id, c)| {
            let d = c.length as f64;
            let mut score = 0.0;
            for (p, idf) in phrases.iter().zip(&idf) {
                let (h, b) = c.terms.get(p).copied().unwrap_or((0, 0));
                let f = h as f64 * HEADING_WEIGHT + b as f64 * BODY_WEIGHT;
                score += idf * ((f * (K1 + 1.0)) / (f + K1 * (1.0 - B + B * d / avgdl)));
            }
            (id, score)
        })
        .collect();
    let better = |a: &(i64, f64), b: &(i64, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if scored.len() > k {
        scored.select_nth_unstable_by(k - 1, better);
        scored.truncate(k);
    }
    scored.sort_by(better);
    // FTS5 returns -score, negated back by the caller: the same f32.
    scored.into_iter().map(|(id, s)| (id, s as f32)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(length: u64, terms: &[(&str, u32, u32)]) -> Candidate {
        Candidate {
            length,
            terms: terms
                .iter()
                .map(|&(t, h, b)| (t.to_string(), (h, b)))
                .collect(),
        }
    }

    #[test]
    fn heading_counts_twice_and_rare_terms_weigh_more() {
        let phrases = vec!["loop".to_string(), "guard".to_string()];
        let c: HashMap<i64, Candidate> = [
            (1, cand(10, &[("loop", 0, 1)])),
            (2, cand(10, &[("loop", 1, 0)])),
            (3, cand(10, &[("guard", 0, 1)])),
            (4, cand(10, &[("loop", 0, 1)])),
        ]
        .into();
        // 10 chunks in all, 100 tokens: `guard` (1 chunk) is rarer than
        // `loop` (3 chunks).
        let r = rank(&phrases, &c, 10, 100, 10);
        let ids: Vec<i64> = r.iter().map(|x| x.0).collect();
        assert_eq!(ids, [3, 2, 1, 4]);
        assert!(r[1].1 > r[2].1);
        assert_eq!(r[2].1, r[3].1); // a tie goes to the smaller id
        assert_eq!(rank(&phrases, &c, 10, 100, 2).len(), 2);
    }

    #[test]
    fn common_terms_keep_a_tiny_positive_idf() {
        let phrases = vec!["the".to_string()];
        let c: HashMap<i64, Candidate> = (1..=3).map(|i| (i, cand(5, &[("the", 0, 1)]))).collect();
        let r = rank(&phrases, &c, 3, 15, 10);
        assert!(r.iter().all(|&(_, s)| s > 0.0 && s < 1e-5), "{r:?}");
    }

    #[test]
    fn a_term_named_twice_counts_twice() {
        let one = vec!["model".to_string()];
        let two = vec!["model".to_string(), "model".to_string()];
        let c: HashMap<i64, Candidate> = [(1, cand(8, &[("model", 0, 2)]))].into();
        let a = rank(&one, &c, 20, 160, 1)[0].1;
        let b = rank(&two, &c, 20, 160, 1)[0].1;
        assert!((b - 2.0 * a).abs() < 1e-5, "{a} {b}");
    }
}
