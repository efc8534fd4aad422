//! Retrieval: FTS5/BM25 lexical search, exact cosine vector search, and
//! reciprocal rank fusion of both, with a lexical fallback. A HyDE passage
//! may add its own ranking to the fusion ([`PassageRanking`]).

use std::collections::HashMap;

use crate::store::Index;
use crate::{Error, Result};

/// The usual RRF constant (Cormack et al. 2009).
pub const DEFAULT_RRF_K: f32 = 60.0;

/// Distinct terms kept from a query (question first, then expansion).
const MAX_QUERY_TERMS: usize = 64;
/// Candidates taken from each list before fusion: at least this many.
const MIN_FUSION_DEPTH: usize = 100;
/// How many of the best chunks of the passage's list and of the question's
/// list [`passage_agreement`] compares.
pub const AGREEMENT_DEPTH: usize = 10;

/// Which retrieval to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Retrieval {
    /// Lexical and vector results fused by reciprocal rank fusion.
    #[default]
    Hybrid,
    /// FTS5 BM25 only.
    Lexical,
    /// Exact cosine similarity only.
    Vector,
}

impl Retrieval {
    /// The lowercase name (`hybrid`, `lexical`, `vector`).
    pub fn name(self) -> &'static str {
        match self {
            Retrieval::Hybrid => "hybrid",
            Retrieval::Lexical => "lexical",
            Retrieval::Vector => "vector",
        }
    }

    /// Parses `hybrid`, `lexical` or `vector` (any case, surrounding
    /// spaces ignored).
    ///
    /// ```
    /// use deloop_index::Retrieval;
    /// assert_eq!(Retrieval::parse(" Lexical "), Some(Retrieval::Lexical));
    /// assert_eq!(Retrieval::parse("bm25"), None);
    /// ```
    pub fn parse(s: &str) -> Option<Retrieval> {
        match s.trim().to_ascii_lowercase().as_str() {
            "hybrid" => Some(Retrieval::Hybrid),
            "lexical" => Some(Retrieval::Lexical),
            "vector" => Some(Retrieval::Vector),
            _ => None,
        }
    }
}

/// A search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRequest {
    /// The query text (free text: it is never parsed as FTS syntax).
    pub text: String,
    /// The query vector, from the index's embedder; `None` makes hybrid and
    /// vector searches fall back to lexical.
    pub vector: Option<Vec<f32>>,
    /// Extra text for the lexical query (a HyDE passage): its terms are
    /// OR-ed with the question's.
    pub expansion: Option<String>,
    /// A HyDE passage ranked on its own and fused with the question's
    /// rankings by weighted RRF (HyDE `fused`), instead of changing them.
    pub passage: Option<PassageRanking>,
    /// How many matches to return.
    pub k: usize,
    /// Which retrieval to run.
    pub mode: Retrieval,
    /// The RRF constant for hybrid search.
    pub rrf_k: f32,
}

impl Default for SearchRequest {
    fn default() -> Self {
        Self {
            text: String::new(),
            vector: None,
            expansion: None,
            passage: None,
            k: 10,
            mode: Retrieval::Hybrid,
            rrf_k: DEFAULT_RRF_K,
        }
    }
}

/// A HyDE passage's own ranking, one more list in the reciprocal rank
/// fusion. Its vector ranking joins hybrid and vector searches (the
/// question's lexical and vector rankings are left as they are); when the
/// search is lexical, or falls back to lexical, its lexical ranking joins
/// instead. Each list adds `weight / (rrf_k + rank)` to a chunk's score, so
/// the passage moves any chunk's score by at most `weight / (rrf_k + 1)`:
/// a bad passage can only reorder chunks whose scores from the question
/// are that close.
///
/// The weight is scaled, per search, by how far the question's own ranking
/// corroborates the passage's: `weight × agreementᵖ`, where `agreement` is
/// [`passage_agreement`] of the passage's list and the question's first
/// list (its lexical ranking in hybrid and lexical searches, its vector
/// ranking in vector searches) and `p` is [`PassageRanking::agreement_power`].
/// In hybrid search the passage's vector ranking is checked against the
/// question's lexical ranking: two independent kinds of evidence. A passage
/// whose best chunks the question does not find weighs (nearly) nothing; one
/// the question confirms counts up to `weight`. When the question's list is
/// empty (its words are in no chunk) the passage counts in full: it is the
/// only evidence, and plain search would return nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct PassageRanking {
    /// The passage text (for the lexical ranking).
    pub text: String,
    /// The passage's embedding (for the vector ranking); without it, hybrid
    /// and vector searches ignore the passage.
    pub vector: Option<Vec<f32>>,
    /// The list's largest weight in the fusion; the question's lists weigh 1.
    pub weight: f32,
    /// The exponent `p` of the agreement (`weight × agreementᵖ`); 0 keeps
    /// the weight fixed whatever the agreement.
    pub agreement_power: f32,
}

impl PassageRanking {
    /// The weight this passage's list gets next to the question's list
    /// `question`, given its own list `passage`: `weight ×
    /// passage_agreement(passage, question)^agreement_power` (just `weight`
    /// when the power is 0, or when the question's list is empty: then the
    /// passage is the only evidence, and plain search would find nothing).
    ///
    /// ```
    /// use deloop_index::PassageRanking;
    /// let p = PassageRanking { text: "p".into(), vector: None, weight: 1.0, agreement_power: 2.0 };
    /// let question: Vec<(i64, f32)> = (0..10).map(|id| (id, 0.0)).collect();
    /// let passage: Vec<(i64, f32)> = (5..15).map(|id| (id, 0.0)).collect();
    /// assert_eq!(p.effective_weight(&passage, &question), 0.25); // agreement 0.5
    /// ```
    pub fn effective_weight(&self, passage: &[(i64, f32)], question: &[(i64, f32)]) -> f32 {
        // A question that finds nothing by itself leaves nothing to
        // corroborate, and nothing the passage could push down: the passage
        // is the only evidence and counts in full.
        if self.agreement_power == 0.0 || question.is_empty() {
            return self.weight;
        }
        self.weight * passage_agreement(passage, question).powf(self.agreement_power)
    }
}

/// The share of the passage's best [`AGREEMENT_DEPTH`] chunks that are also
/// among the question's best [`AGREEMENT_DEPTH`]: `|top(passage) ∩
/// top(question)| / n`, with `n` = the depth, or the longer list's length
/// when both are shorter (so two complete rankings of a 3-chunk index agree
/// fully). 0 when either list is empty. Always in `0..=1`; linear.
///
/// ```
/// let question = [(1, 0.0), (2, 0.0), (3, 0.0)];
/// assert_eq!(deloop_index::passage_agreement(&[(3, 0.0), (2, 0.0), (1, 0.0)], &question), 1.0);
/// assert_eq!(deloop_index::passage_agreement(&[(7, 0.0)], &question), 0.0);
/// ```
pub fn passage_agreement(passage: &[(i64, f32)], question: &[(i64, f32)]) -> f32 {
    let p = &passage[..passage.len().min(AGREEMENT_DEPTH)];
    let q = &question[..question.len().min(AGREEMENT_DEPTH)];
    let n = p.len().max(q.len());
    if p.is_empty() || q.is_empty() {
        return 0.0;
    }
    let shared = p
        .iter()
        .filter(|(id, _)| q.iter().any(|(o, _)| o == id))
        .count();
    shared as f32 / n as f32
}

/// One retrieved chunk.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ChunkMatch {
    /// The chunk's id in the index.
    pub chunk_id: i64,
    /// The BEIR document id, for BEIR corpora.
    pub doc_id: Option<String>,
    /// The chunk text.
    pub text: String,
    /// The source file path (or BEIR doc id).
    pub source: String,
    /// The score: `-bm25` for lexical, cosine for vector, the RRF sum for
    /// hybrid and for any search with a [`PassageRanking`]. Higher is better.
    pub score: f32,
    /// First line in the source (1-based).
    pub start_line: usize,
    /// Last line in the source (1-based, inclusive).
    pub end_line: usize,
    /// Headings in force, outermost first (the title for BEIR).
    pub heading_trail: Vec<String>,
}

/// The result of a search.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SearchOutcome {
    /// Best first.
    pub matches: Vec<ChunkMatch>,
    /// The retrieval that actually ran.
    pub retrieval_used: Retrieval,
    /// Why the requested retrieval fell back to lexical, if it did.
    pub fallback_reason: Option<String>,
}

impl Index {
    /// Runs a search. Hybrid and vector searches fall back to lexical (and
    /// say why in [`SearchOutcome::fallback_reason`]) when there is no query
    /// vector or the index holds no vectors. A query vector whose length is
    /// not the index's is an error.
    pub fn search(&self, req: &SearchRequest) -> Result<SearchOutcome> {
        let k = req.k;
        let mut fallback = None;
        let mut mode = req.mode;
        if mode != Retrieval::Lexical {
            let have = self.backend.vector_dim()?;
            if let Some(dim) = have.filter(|_| req.vector.is_some()) {
                let v = req.vector.as_ref().expect("checked");
                let passage = req.passage.as_ref().and_then(|p| p.vector.as_ref());
                for (what, v) in
                    std::iter::once(("query", v)).chain(passage.map(|p| ("passage", p)))
                {
                    if v.len() != dim {
                        return Err(Error::BadInput(format!(
                            "{what} vector has {} dimensions, the index's vectors have {dim}",
                            v.len(),
                        )));
                    }
                }
            } else if have.is_none() {
                fallback = Some(match self.embedder_info()? {
                    Some(e) if e.is_none() => {
                        "the index holds no vectors (built with --embedder none)".to_string()
                    }
                    _ => "the index holds no vectors".to_string(),
                });
            } else {
                fallback = Some("no query vector (no embedder available)".to_string());
            }
            if fallback.is_some() {
                mode = Retrieval::Lexical;
            }
        }
        if let Some(p) = &req.passage {
            if !(p.weight.is_finite() && p.weight >= 0.0) {
                return Err(Error::BadInput(format!(
                    "the passage ranking's weight {} is not a finite number >= 0",
                    p.weight
                )));
            }
            if !(p.agreement_power.is_finite() && p.agreement_power >= 0.0) {
                return Err(Error::BadInput(format!(
                    "the passage ranking's agreement power {} is not a finite number >= 0",
                    p.agreement_power
                )));
            }
        }
        let depth = k.max(MIN_FUSION_DEPTH);
        // The passage's own list, when it joins this search.
        let passage = match (&req.passage, mode) {
            (None, _) => None,
            (Some(p), Retrieval::Lexical) => Some((self.lexical(&p.text, None, depth)?, p)),
            (Some(p), _) => match &p.vector {
                Some(v) => Some((self.vector(v, depth)?, p)),
                None => None,
            },
        };
        let ranked: Vec<(i64, f32)> = match (mode, passage) {
            (Retrieval::Lexical, None) => self.lexical(&req.text, req.expansion.as_deref(), k)?,
            (Retrieval::Vector, None) => self.vector(req.vector.as_deref().unwrap_or(&[]), k)?,
            (mode, passage) => {
                let query_vector = req.vector.as_deref().unwrap_or(&[]);
                let (question, vec) = match mode {
                    Retrieval::Vector => (self.vector(query_vector, depth)?, None),
                    Retrieval::Hybrid => {
                        let (lex, vec) = self.backend.lexical_and_vector(
                            &query_terms(&req.text, req.expansion.as_deref()),
                            query_vector,
                            depth,
                        )?;
                        (lex, Some(vec))
                    }
                    Retrieval::Lexical => (
                        self.lexical(&req.text, req.expansion.as_deref(), depth)?,
                        None,
                    ),
                };
                let mut lists = vec![(question.as_slice(), 1.0)];
                if let Some(vec) = &vec {
                    lists.push((vec.as_slice(), 1.0));
                }
                if let Some((list, p)) = &passage {
                    // The passage weighs as much as the question's first
                    // list corroborates it (`PassageRanking`).
                    let weight = p.effective_weight(list, &question);
                    if weight > 0.0 {
                        lists.push((list.as_slice(), weight));
                    }
                }
                let mut fused = weighted_reciprocal_rank_fusion(&lists, req.rrf_k);
                fused.truncate(k);
                fused
            }
        };
        Ok(SearchOutcome {
            matches: self.load_matches(&ranked)?,
            retrieval_used: mode,
            fallback_reason: fallback,
        })
    }

    /// BM25 over the query's words: `(chunk id, -bm25)`, best first.
    fn lexical(&self, text: &str, expansion: Option<&str>, k: usize) -> Result<Vec<(i64, f32)>> {
        self.backend.lexical(&query_terms(text, expansion), k)
    }

    /// Cosine over the stored (unit-length) vectors, best first.
    fn vector(&self, query: &[f32], k: usize) -> Result<Vec<(i64, f32)>> {
        self.backend.vector(query, k)
    }

    fn load_matches(&self, ranked: &[(i64, f32)]) -> Result<Vec<ChunkMatch>> {
        self.backend.load_matches(ranked)
    }
}

/// Builds a safe FTS5 query from free text: every run of letters and digits
/// becomes a quoted term, and the distinct terms (question first, then
/// `expansion`, at most 64) are OR-ed. English and Spanish function words
/// ([`crate::is_stopword`]) and the fragments of English contractions and
/// possessives (the `s` of `model's`, the `t` of `don't`) are left out,
/// unless nothing else is left. Returns `None` when there is no term. No
/// user text can inject FTS5 syntax: quotes, operators, column filters and
/// parentheses are separators.
///
/// ```
/// assert_eq!(
///     deloop_index::fts_query("NEAR(\"x\" AND z*)", None).as_deref(),
///     Some("\"near\" OR \"x\" OR \"z\"")
/// );
/// assert_eq!(
///     deloop_index::fts_query("How do I stop a looping stream?", None).as_deref(),
///     Some("\"stop\" OR \"looping\" OR \"stream\"")
/// );
/// assert_eq!(deloop_index::fts_query("how do I", None).as_deref(), Some("\"how\" OR \"do\" OR \"i\""));
/// assert_eq!(deloop_index::fts_query("  ?!  ", None), None);
/// ```
pub fn fts_query(text: &str, expansion: Option<&str>) -> Option<String> {
    let terms: Vec<String> = query_terms(text, expansion)
        .into_iter()
        .map(|w| format!("\"{w}\""))
        .collect();
    (!terms.is_empty()).then(|| terms.join(" OR "))
}

/// The distinct query words of [`fts_query`], unquoted, in order: what
/// every backend ranks by BM25.
pub(crate) fn query_terms(text: &str, expansion: Option<&str>) -> Vec<String> {
    let words: Vec<(String, bool)> = std::iter::once(text)
        .chain(expansion)
        .flat_map(query_words)
        .collect();
    let kept: Vec<&str> = words
        .iter()
        .filter(|(_, content)| *content)
        .map(|(w, _)| w.as_str())
        .collect();
    let chosen: Vec<&str> = if kept.is_empty() {
        words.iter().map(|(w, _)| w.as_str()).collect()
    } else {
        kept
    };
    let mut seen = std::collections::HashSet::new();
    chosen
        .into_iter()
        .filter(|w| seen.insert(*w))
        .take(MAX_QUERY_TERMS)
        .map(str::to_string)
        .collect()
}

/// The lowercase words of `text` (runs of letters and digits), each with
/// whether it is a content word: not a function word, and not the tail of
/// an English contraction or possessive (`'s`, `'t`, `'d`, `'m`, `'ll`,
/// `'re`, `'ve` right after a letter).
fn query_words(text: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut prev: [Option<char>; 2] = [None, None];
    let mut word = String::new();
    let mut after_apostrophe = false;
    let mut flush = |word: &mut String, after_apostrophe: bool| {
        if word.is_empty() {
            return;
        }
        let w = word.to_lowercase();
        let clitic =
            after_apostrophe && matches!(w.as_str(), "s" | "t" | "d" | "m" | "ll" | "re" | "ve");
        let content = !clitic && !crate::stopwords::is_stopword(&w);
        out.push((w, content));
        word.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            if word.is_empty() {
                after_apostrophe =
                    matches!(prev, [Some('\'' | '\u{2019}'), Some(p)] if p.is_alphanumeric());
            }
            word.push(c);
        } else {
            flush(&mut word, after_apostrophe);
        }
        prev = [Some(c), prev[0]];
    }
    flush(&mut word, after_apostrophe);
    out
}

/// Reciprocal rank fusion: each list contributes `1 / (rrf_k + rank)` (rank
/// from 1) to the ids it holds. Returns ids by fused score, best first (ties
/// by smaller id).
///
/// ```
/// let a = [(1, 9.0), (2, 8.0)];
/// let b = [(2, 0.9), (3, 0.8)];
/// let fused = deloop_index::reciprocal_rank_fusion(&[&a, &b], 60.0);
/// assert_eq!(fused[0].0, 2);
/// ```
pub fn reciprocal_rank_fusion(lists: &[&[(i64, f32)]], rrf_k: f32) -> Vec<(i64, f32)> {
    let weighted: Vec<(&[(i64, f32)], f32)> = lists.iter().map(|l| (*l, 1.0)).collect();
    weighted_reciprocal_rank_fusion(&weighted, rrf_k)
}

/// Weighted reciprocal rank fusion: each list contributes
/// `weight / (rrf_k + rank)` (rank from 1) to the ids it holds; with every
/// weight 1 it is [`reciprocal_rank_fusion`]. Returns ids by fused score,
/// best first (ties by smaller id).
///
/// ```
/// let question = [(1, 9.0), (2, 8.0)];
/// let passage = [(2, 0.9), (3, 0.8)];
/// let fused = deloop_index::weighted_reciprocal_rank_fusion(&[(&question, 1.0), (&passage, 0.5)], 60.0);
/// assert_eq!(fused.iter().map(|f| f.0).collect::<Vec<_>>(), [2, 1, 3]);
/// ```
pub fn weighted_reciprocal_rank_fusion(
    lists: &[(&[(i64, f32)], f32)],
    rrf_k: f32,
) -> Vec<(i64, f32)> {
    let mut scores: HashMap<i64, f32> = HashMap::new();
    for &(list, weight) in lists {
        for (rank, &(id, _)) in list.iter().enumerate() {
            *scores.entry(id).or_insert(0.0) += weight / (rrf_k + rank as f32 + 1.0);
        }
    }
    let mut fused: Vec<(i64, f32)> = scores.into_iter().collect();
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    fused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contraction_and_possessive_tails_are_dropped() {
        assert_eq!(
            fts_query("What happens when the model's JSON is cut off?", None).as_deref(),
            Some("\"happens\" OR \"model\" OR \"json\" OR \"cut\"")
        );
        assert_eq!(
            fts_query("it doesn’t work, I'd say we've Ollama's", None).as_deref(),
            Some("\"work\" OR \"say\" OR \"ollama\"")
        );
        // Not after a letter, or a whole word: kept.
        assert_eq!(
            fts_query("'s vitamin d 's t", None).as_deref(),
            Some("\"s\" OR \"vitamin\" OR \"d\" OR \"t\"")
        );
    }

    #[test]
    fn rrf_orders_by_fused_rank() {
        let lex = [(10, 5.0), (20, 4.0), (30, 3.0)];
        let vec = [(20, 0.9), (40, 0.8), (30, 0.7)];
        let f = reciprocal_rank_fusion(&[&lex, &vec], 60.0);
        let ids: Vec<i64> = f.iter().map(|x| x.0).collect();
        // 20: 1/62+1/61, 30: 2/63, 10: 1/61, 40: 1/62.
        assert_eq!(ids, vec![20, 30, 10, 40]);
        assert!((f[0].1 - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-6);
        assert!((f[1].1 - 2.0 / 63.0).abs() < 1e-6);
        assert!(reciprocal_rank_fusion(&[], 60.0).is_empty());
    }

    #[test]
    fn weighted_rrf_scales_each_list() {
        let q = [(1, 0.0), (2, 0.0)];
        let p = [(3, 0.0), (2, 0.0)];
        let f = weighted_reciprocal_rank_fusion(&[(&q, 1.0), (&p, 0.5)], 60.0);
        assert_eq!(f.iter().map(|x| x.0).collect::<Vec<_>>(), [2, 1, 3]);
        assert!((f[0].1 - (1.0 / 62.0 + 0.5 / 62.0)).abs() < 1e-7);
        assert!((f[2].1 - 0.5 / 61.0).abs() < 1e-7);
        // Weight 0: the list changes nothing (but its ids are kept, last).
        let f = weighted_reciprocal_rank_fusion(&[(&q, 1.0), (&p, 0.0)], 60.0);
        assert_eq!(f.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 2, 3]);
        // All weights 1: plain RRF.
        assert_eq!(
            weighted_reciprocal_rank_fusion(&[(&q, 1.0), (&p, 1.0)], 60.0),
            reciprocal_rank_fusion(&[&q, &p], 60.0)
        );
    }

    /// Distinct ids, in a random order: one ranked list.
    fn ranking() -> impl proptest::strategy::Strategy<Value = Vec<(i64, f32)>> {
        use proptest::prelude::*;
        proptest::sample::subsequence((0..40i64).collect::<Vec<_>>(), 0..40)
            .prop_shuffle()
            .prop_map(|ids| ids.into_iter().map(|id| (id, 0.0)).collect())
    }

    proptest::proptest! {
        /// Agreement is a share (0 to 1), symmetric, 1 for a list against
        /// itself, 0 against disjoint chunks, and reads only the top
        /// [`AGREEMENT_DEPTH`] of each list.
        #[test]
        fn agreement_is_a_share_of_the_top_chunks(a in ranking(), b in ranking(), tail in ranking()) {
            let ab = passage_agreement(&a, &b);
            proptest::prop_assert!((0.0..=1.0).contains(&ab), "{}", ab);
            proptest::prop_assert_eq!(ab, passage_agreement(&b, &a));
            if !a.is_empty() {
                proptest::prop_assert_eq!(passage_agreement(&a, &a), 1.0);
            }
            let shifted: Vec<(i64, f32)> = a.iter().map(|&(id, s)| (id + 1000, s)).collect();
            proptest::prop_assert_eq!(passage_agreement(&shifted, &b), 0.0);
            // Chunks past the depth never count.
            if a.len() >= AGREEMENT_DEPTH && b.len() >= AGREEMENT_DEPTH {
                let mut longer = a[..AGREEMENT_DEPTH].to_vec();
                longer.extend(tail.iter().map(|&(id, s)| (id + 2000, s)));
                proptest::prop_assert_eq!(passage_agreement(&longer, &b), ab);
            }
        }

        /// The passage's weight never exceeds its `weight`, grows with the
        /// agreement, is `weight` itself at power 0 and nothing when the
        /// question's list shares none of the passage's top chunks.
        #[test]
        fn the_passage_weighs_what_the_question_corroborates(
            question in ranking(),
            passage in ranking(),
            weight in 0.0f32..=4.0,
            power in 0.0f32..=8.0,
        ) {
            let p = PassageRanking { text: String::new(), vector: None, weight, agreement_power: power };
            let w = p.effective_weight(&passage, &question);
            proptest::prop_assert!(w >= 0.0 && w <= weight + 1e-6, "{} > {}", w, weight);
            let fixed = PassageRanking { agreement_power: 0.0, ..p.clone() };
            proptest::prop_assert_eq!(fixed.effective_weight(&passage, &question), weight);
            if question.is_empty() {
                // Nothing to corroborate, nothing to push down: full weight.
                proptest::prop_assert_eq!(w, weight);
            } else if power > 0.0 {
                let stranger: Vec<(i64, f32)> =
                    passage.iter().map(|&(id, s)| (id + 1000, s)).collect();
                proptest::prop_assert_eq!(p.effective_weight(&stranger, &question), 0.0);
                // Agreeing with the question's whole top can only weigh more.
                proptest::prop_assert!(p.effective_weight(&question, &question) >= w);
            }
        }

        /// The invariant that makes HyDE `fused` safe: a passage list of
        /// weight `w` adds at most `w / (rrf_k + 1)` to any score, so whatever
        /// it ranks, it cannot reorder two chunks whose scores from the
        /// question's lists differ by more than that. In particular, with
        /// `w < 1`, no chunk that only the passage finds can outrank the
        /// question's best chunk.
        #[test]
        fn a_passage_list_reorders_only_close_scores(
            lex in ranking(),
            vec in ranking(),
            passage in ranking(),
            w in 0.0f32..=1.0,
            rrf_k in 1.0f32..100.0,
        ) {
            let plain = weighted_reciprocal_rank_fusion(&[(&lex, 1.0), (&vec, 1.0)], rrf_k);
            let fused = weighted_reciprocal_rank_fusion(
                &[(&lex, 1.0), (&vec, 1.0), (&passage, w)],
                rrf_k,
            );
            let plain_score: HashMap<i64, f32> = plain.iter().copied().collect();
            let fused_rank: HashMap<i64, usize> =
                fused.iter().enumerate().map(|(r, &(id, _))| (id, r)).collect();
            let bound = w / (rrf_k + 1.0);
            let eps = 1e-5;
            for &(d, sd) in &plain {
                for &(e, se) in &plain {
                    if sd - se > bound + eps {
                        proptest::prop_assert!(fused_rank[&d] < fused_rank[&e],
                            "{} (score {}) fell below {} (score {}), bound {}", d, sd, e, se, bound);
                    }
                }
            }
            if let Some(&(best, best_score)) = plain.first() {
                for &(id, _) in &passage {
                    if !plain_score.contains_key(&id) && w < 1.0 - eps
                        && best_score >= 1.0 / (rrf_k + 1.0) - eps
                    {
                        proptest::prop_assert!(fused_rank[&best] < fused_rank[&id]);
                    }
                }
            }
        }
    }

    #[test]
    fn fts_query_quotes_and_caps_terms() {
        assert_eq!(
            fts_query("Contraseña: \"olvidé\" -x", Some("reset OR contraseña")).as_deref(),
            Some("\"contraseña\" OR \"olvidé\" OR \"x\" OR \"reset\"")
        );
        // Function words go, unless nothing else is left.
        assert_eq!(
            fts_query("¿Qué significa el código de salida?", None).as_deref(),
            Some("\"significa\" OR \"código\" OR \"salida\"")
        );
        assert_eq!(
            fts_query("what is it", Some("the")).as_deref(),
            Some("\"what\" OR \"is\" OR \"it\" OR \"the\"")
        );
        assert_eq!(
            fts_query("what is it", Some("the stream")).as_deref(),
            Some("\"stream\"")
        );
        let many: String = (0..500).map(|i| format!("w{i} ")).collect();
        assert_eq!(fts_query(&many, None).unwrap().matches(" OR ").count(), 63);
    }
}
