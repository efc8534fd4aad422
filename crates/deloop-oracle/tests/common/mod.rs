//! Shared by the own-docs retrieval checks (`own_docs_retrieval.rs`, 30
//! questions of issue 12 §6; `own_docs_heldout.rs`, the held-out set of
//! issue 24 §4): the question files, the sections of the embedded docs and
//! the hit rule.
//!
//! **What counts as a hit.** An expected answer is a file (as named in
//! `EMBEDDED_DOCS`) and the exact text of a heading of level 2 or deeper
//! in it. Its section runs from that heading's line to the line before the
//! next heading of the same or a higher level (so its subsections belong to
//! it), or to the end of the file. Because the chunker merges a heading
//! that has no text of its own into the chunk of the heading after it, the
//! section also owns the heading-only lines directly above its heading
//! (`## Results` right above `### Speed`). A retrieved passage matches when
//! its source is the expected file and its whole line range lies inside
//! that (extended) section. A question is answered in the top 3 when one of
//! the first three passages matches one of its expected answers.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use std::io::Write;
use std::path::Path;

use deloop_index::{Embedder, Retrieval};
use deloop_oracle::embedded::EMBEDDED_DOCS;
use deloop_oracle::retrieve::{retrieve, HydeJoin, RetrieveOptions};
use deloop_oracle::Passage;

/// Passages looked at per question.
pub const TOP: usize = 3;

#[derive(Debug, serde::Deserialize)]
struct QuestionFile {
    questions: Vec<Question>,
}

/// A question and the sections that answer it.
#[derive(Debug, serde::Deserialize)]
pub struct Question {
    pub id: u32,
    pub lang: String,
    pub question: String,
    pub answers: Vec<Expected>,
}

/// One acceptable answer: a file and a heading in it.
#[derive(Debug, serde::Deserialize)]
pub struct Expected {
    pub source: String,
    pub heading: String,
}

/// A section of an embedded document: 1-based inclusive lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section {
    pub first: usize,
    pub last: usize,
}

/// The questions of `tests/data/<name>`.
pub fn questions(name: &str) -> Vec<Question> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let file: QuestionFile = serde_json::from_str(&text).unwrap();
    file.questions
}

fn is_fence(line: &str) -> Option<(u8, usize)> {
    let t = line.trim_start_matches(' ');
    if line.len() - t.len() > 3 {
        return None;
    }
    let ch = *t.as_bytes().first()?;
    if ch != b'`' && ch != b'~' {
        return None;
    }
    let n = t.bytes().take_while(|&b| b == ch).count();
    (n >= 3).then_some((ch, n))
}

/// ATX headings outside fenced code: `(line, level, text)`.
fn headings(doc: &str) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    let mut fence: Option<(u8, usize)> = None;
    for (i, line) in doc.lines().enumerate() {
        if let Some((ch, n)) = fence {
            let t = line.trim();
            if t.len() >= n && t.bytes().all(|b| b == ch) {
                fence = None;
            }
            continue;
        }
        if let Some(f) = is_fence(line) {
            fence = Some(f);
            continue;
        }
        let t = line.trim_start_matches(' ');
        if line.len() - t.len() > 3 {
            continue;
        }
        let level = t.bytes().take_while(|&b| b == b'#').count();
        let rest = &t[level..];
        if (1..=6).contains(&level) && (rest.is_empty() || rest.starts_with([' ', '\t'])) {
            let text = rest.trim().trim_end_matches('#').trim_end().to_string();
            out.push((i + 1, level, text));
        }
    }
    out
}

/// The section of `doc` headed `heading` (which must occur exactly once,
/// at level 2 or deeper), extended upwards over the heading-only lines
/// the chunker merges into it.
pub fn section(doc: &str, source: &str, heading: &str) -> Section {
    let hs = headings(doc);
    let found: Vec<usize> = (0..hs.len()).filter(|&i| hs[i].2 == heading).collect();
    assert_eq!(
        found.len(),
        1,
        "{source}: heading {heading:?} must occur exactly once"
    );
    let i = found[0];
    let (line, level, _) = hs[i];
    assert!(
        level >= 2,
        "{source}: {heading:?} is a title, not a section"
    );
    let last = hs[i + 1..]
        .iter()
        .find(|(_, l, _)| *l <= level)
        .map_or(doc.lines().count(), |(next, _, _)| next - 1);
    let lines: Vec<&str> = doc.lines().collect();
    let mut first = line;
    let mut j = i;
    loop {
        // Blank lines, then a heading directly above: the chunker puts that
        // heading (which has no text of its own) into this section's chunk.
        let mut above = first - 1;
        while above >= 1 && lines[above - 1].trim().is_empty() {
            above -= 1;
        }
        if above >= 1 && j > 0 && hs[j - 1].0 == above {
            first = above;
            j -= 1;
        } else {
            break;
        }
    }
    Section { first, last }
}

/// The text of an embedded document.
pub fn doc_text(source: &str) -> &'static str {
    EMBEDDED_DOCS
        .iter()
        .find(|(name, _)| *name == source)
        .map(|(_, text)| *text)
        .unwrap_or_else(|| panic!("{source} is not an embedded document"))
}

/// Whether passage `p` lies inside section `s` of `source`.
pub fn matches(p: &Passage, source: &str, s: Section) -> bool {
    p.source == source && p.start_line as usize >= s.first && p.end_line as usize <= s.last
}

/// The expected sections of a question.
pub fn expected(q: &Question) -> Vec<(&str, Section)> {
    q.answers
        .iter()
        .map(|e| {
            (
                e.source.as_str(),
                section(doc_text(&e.source), &e.source, &e.heading),
            )
        })
        .collect()
}

/// Checks a question file: every expected section exists exactly once and
/// is not empty, every question has an answer, both languages are there.
pub fn check_question_file(qs: &[Question]) {
    assert!(qs.iter().any(|q| q.lang == "es") && qs.iter().any(|q| q.lang == "en"));
    for (i, q) in qs.iter().enumerate() {
        assert_eq!(q.id as usize, i + 1, "ids run from 1");
        assert!(q.lang == "es" || q.lang == "en", "question {}", q.id);
        assert!(!q.answers.is_empty(), "question {} has no answer", q.id);
        for (e, (_, s)) in q.answers.iter().zip(expected(q)) {
            assert!(s.first < s.last, "{}: {:?}", e.source, e.heading);
        }
    }
}

/// The figure for one retrieval mode, and a line per question.
pub struct Evaluation {
    pub total: usize,
    pub answered: usize,
    pub answered_es: usize,
    pub total_es: usize,
    /// Per question (in file order): the passages retrieved.
    pub passages: Vec<Vec<Passage>>,
    pub lines: Vec<String>,
}

/// Asks every question of `qs` through the oracle's own retrieval
/// (`retrieve::retrieve`, what `ask`, the server and MCP use), `TOP`
/// passages each.
pub fn evaluate(
    qs: &[Question],
    index: &deloop_index::Index,
    embedder: Option<&dyn Embedder>,
    root: &Path,
    mode: Retrieval,
) -> Evaluation {
    let mut ev = Evaluation {
        total: qs.len(),
        answered: 0,
        answered_es: 0,
        total_es: 0,
        passages: Vec::new(),
        lines: Vec::new(),
    };
    for q in qs {
        let expected = expected(q);
        let got = retrieve(
            index,
            embedder,
            &q.question,
            None,
            &RetrieveOptions {
                mode,
                k: TOP,
                hyde: HydeJoin::default(),
            },
            Some(root),
        )
        .unwrap();
        assert_eq!(got.used, mode, "{:?}", got.fallback_reason);
        let rank = got
            .passages
            .iter()
            .position(|p| expected.iter().any(|(src, s)| matches(p, src, *s)));
        let es = q.lang == "es";
        ev.total_es += usize::from(es);
        if rank.is_some() {
            ev.answered += 1;
            ev.answered_es += usize::from(es);
        }
        let top: Vec<String> = got
            .passages
            .iter()
            .map(|p| format!("{}:{}-{}", p.source, p.start_line, p.end_line))
            .collect();
        ev.lines.push(format!(
            "  {:>2} {} {:<5} {}  [{}]",
            q.id,
            q.lang,
            rank.map_or("miss".to_string(), |r| format!("#{}", r + 1)),
            q.question,
            top.join(", ")
        ));
        ev.passages.push(got.passages);
    }
    ev
}

/// Prints the figure and the per-question lines on stderr.
pub fn report(set: &str, name: &str, ev: &Evaluation, target: usize) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "{set}, {name}: {}/{} questions with the right section in the top {TOP} \
         (Spanish {}/{}, English {}/{}); target {target}",
        ev.answered,
        ev.total,
        ev.answered_es,
        ev.total_es,
        ev.answered - ev.answered_es,
        ev.total - ev.total_es
    );
    for l in &ev.lines {
        let _ = writeln!(err, "{l}");
    }
}

/// The MiniLM (candle) embedder when its files are installed; `None`
/// (after one line on stderr) otherwise, unless real components are
/// required (`CI=true`, `DELOOP_REQUIRE_REAL=1`).
pub fn minilm(what: &str) -> Option<deloop_index::MiniLm> {
    let dir = deloop_index::find_minilm_dir(None);
    if !deloop_testdata::real_component(
        dir.is_ok(),
        what,
        "run scripts/setup-model.sh for the MiniLM model files",
    ) {
        return None;
    }
    Some(deloop_index::MiniLm::load(&dir.unwrap()).unwrap())
}

/// The `minilm-onnx` embedder, on the same terms as [`minilm`].
pub fn minilm_onnx(what: &str) -> Option<deloop_index::MiniLmOnnx> {
    let present =
        deloop_index::find_minilm_dir(None).is_ok() && deloop_index::find_onnx_dir(None).is_ok();
    if !deloop_testdata::real_component(
        present,
        what,
        "run scripts/setup-model.sh for the MiniLM and ONNX embedder files",
    ) {
        return None;
    }
    Some(deloop_index::load_onnx(None, None).unwrap())
}
