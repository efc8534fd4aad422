//! Splitting markdown and plain text into retrieval chunks.
//!
//! Rules (documented in `docs/retrieval.md`):
//! - A markdown ATX heading (`#` to `######`, outside fenced code) starts a
//!   new chunk; a chunk that holds only headings so far absorbs the next
//!   section instead of standing alone.
//! - Inside a section, lines are packed into chunks of at most
//!   [`ChunkConfig::max_bytes`]; a chunk is preferably cut at a paragraph
//!   start (a line after a blank line, a fence, a heading) in its second half.
//! - Consecutive chunks of one section overlap by their trailing lines up to
//!   [`ChunkConfig::overlap_bytes`].
//! - A line longer than `max_bytes` is cut into pieces of about
//!   `overlap_bytes` at whitespace (or at a character boundary when there is
//!   none), so a huge paragraph still yields bounded, overlapping chunks.
//! - Each chunk's text is the exact slice of the source between its first and
//!   last line; lines are 1-based and inclusive.

/// Size limits for chunking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkConfig {
    /// Largest chunk, in bytes of UTF-8 text.
    pub max_bytes: usize,
    /// Overlap between consecutive chunks of a section, in bytes (at most).
    pub overlap_bytes: usize,
}

impl Default for ChunkConfig {
    fn default() -> Self {
        Self {
            max_bytes: 1200,
            overlap_bytes: 200,
        }
    }
}

/// One chunk of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The exact source text of the chunk.
    pub text: String,
    /// First line (1-based).
    pub start_line: usize,
    /// Last line (1-based, inclusive).
    pub end_line: usize,
    /// The headings in force, outermost first (empty for plain text).
    pub heading_trail: Vec<String>,
}

/// A contiguous piece of one line (usually the whole line).
#[derive(Debug, Clone, Copy)]
struct Unit {
    start: usize,
    end: usize,
    line: usize,
    /// First piece of a paragraph, fence or heading: a good place to cut.
    block_start: bool,
}

#[derive(Debug)]
struct Section {
    trail: Vec<String>,
    units: Vec<Unit>,
    /// Units that are heading lines and nothing else so far.
    only_headings: bool,
}

/// Splits `text` into chunks. With `markdown`, ATX headings start sections
/// and fenced code is not scanned for headings.
///
/// ```
/// use deloop_index::chunk::{chunk_text, ChunkConfig};
/// let doc = "# Guide\n\nIntro.\n\n## Install\n\nRun the script.\n";
/// let chunks = chunk_text(doc, true, ChunkConfig::default());
/// assert_eq!(chunks.len(), 2);
/// assert_eq!(chunks[1].heading_trail, vec!["Guide", "Install"]);
/// assert_eq!((chunks[1].start_line, chunks[1].end_line), (5, 7));
/// ```
pub fn chunk_text(text: &str, markdown: bool, cfg: ChunkConfig) -> Vec<Chunk> {
    let max = cfg.max_bytes.max(16);
    let overlap = cfg.overlap_bytes.min(max / 2);
    let piece = overlap.clamp(8, max);

    let mut sections: Vec<Section> = Vec::new();
    let mut trail: Vec<(usize, String)> = Vec::new();
    let mut fence: Option<(u8, usize)> = None;
    let mut prev_blank = true;
    let mut offset = 0usize;

    for (idx, raw) in text.split_inclusive('\n').enumerate() {
        let line_no = idx + 1;
        let start = offset;
        offset += raw.len();
        let content = raw.trim_end_matches(['\n', '\r']);
        let end = start + content.len();
        let blank = content.trim().is_empty();

        let mut heading = None;
        let mut block_start = prev_blank;
        if markdown {
            if let Some((ch, n)) = fence {
                if closes_fence(content, ch, n) {
                    fence = None;
                }
            } else if let Some(f) = opens_fence(content) {
                fence = Some(f);
                block_start = true;
            } else {
                heading = atx_heading(content);
            }
        }
        prev_blank = blank;
        if blank {
            continue;
        }

        if let Some((level, title)) = heading {
            while trail.last().is_some_and(|(l, _)| *l >= level) {
                trail.pop();
            }
            trail.push((level, title));
            let names: Vec<String> = trail.iter().map(|(_, t)| t.clone()).collect();
            match sections.last_mut() {
                Some(s) if s.only_headings => s.trail = names,
                _ => sections.push(Section {
                    trail: names,
                    units: Vec::new(),
                    only_headings: true,
                }),
            }
            if let Some(s) = sections.last_mut() {
                push_line(text, &mut s.units, (start, end), line_no, true, max, piece);
            }
            continue;
        }

        if sections.is_empty() {
            sections.push(Section {
                trail: Vec::new(),
                units: Vec::new(),
                only_headings: false,
            });
        }
        let Some(section) = sections.last_mut() else {
            continue;
        };
        section.only_headings = false;
        push_line(
            text,
            &mut section.units,
            (start, end),
            line_no,
            block_start,
            max,
            piece,
        );
    }

    let mut chunks = Vec::new();
    for s in &sections {
        pack(text, s, max, overlap, &mut chunks);
    }
    chunks
}

/// Adds one line as a unit, or as pieces of about `piece` bytes when it is
/// longer than `max`.
fn push_line(
    text: &str,
    units: &mut Vec<Unit>,
    (start, end): (usize, usize),
    line: usize,
    block_start: bool,
    max: usize,
    piece: usize,
) {
    if end - start <= max {
        units.push(Unit {
            start,
            end,
            line,
            block_start,
        });
        return;
    }
    // A run of white space can make a piece of its own: it would make a
    // chunk with nothing to find, so it is left between its neighbours.
    let pieces = split_long(text, start, end, piece)
        .into_iter()
        .filter(|&(a, b)| !text[a..b].trim().is_empty());
    for (i, (a, b)) in pieces.enumerate() {
        units.push(Unit {
            start: a,
            end: b,
            line,
            block_start: block_start && i == 0,
        });
    }
}

/// Greedy packing of one section's units into bounded, overlapping chunks.
fn pack(text: &str, s: &Section, max: usize, overlap: usize, out: &mut Vec<Chunk>) {
    let units = &s.units;
    let mut first = 0usize;
    while first < units.len() {
        // Extend while the span fits.
        let mut last = first;
        while last + 1 < units.len() && units[last + 1].end - units[first].start <= max {
            last += 1;
        }
        let mut cut = last + 1; // exclusive end of this chunk
        if cut < units.len() {
            // Prefer cutting before a paragraph start in the second half.
            let half = units[first].start + max / 2;
            if let Some(i) = (first + 1..=last)
                .rev()
                .find(|&i| units[i].block_start && units[i].start >= half)
            {
                cut = i;
            }
        }
        out.push(Chunk {
            text: text[units[first].start..units[cut - 1].end].to_string(),
            start_line: units[first].line,
            end_line: units[cut - 1].line,
            heading_trail: s.trail.clone(),
        });
        if cut >= units.len() {
            break;
        }
        // Next chunk starts with the trailing units of this one that fit in
        // the overlap budget (never at or before this chunk's first unit).
        let end = units[cut - 1].end;
        let mut next = cut;
        while next - 1 > first
            && end - units[next - 1].start <= overlap
            && units[cut].end - units[next - 1].start <= max
        {
            next -= 1;
        }
        first = next;
    }
}

/// Cuts `text[start..end]` into pieces of about `piece` bytes, at whitespace
/// when possible, always at character boundaries.
fn split_long(text: &str, start: usize, end: usize, piece: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut a = start;
    while a < end {
        if end - a <= piece {
            out.push((a, end));
            break;
        }
        let mut b = a + piece;
        while !text.is_char_boundary(b) {
            b -= 1;
        }
        // Back up to the last whitespace in the window's second half.
        let window = &text[a..b];
        if let Some(ws) = window.rfind(char::is_whitespace) {
            if ws >= piece / 2 {
                b = a + ws + 1;
            }
        }
        if b <= a {
            // A single character longer than the piece: take it whole.
            b = a + text[a..].chars().next().map_or(1, char::len_utf8);
        }
        out.push((a, b));
        a = b;
    }
    out
}

/// An ATX heading: 0-3 spaces, 1-6 `#`, then a space or end of line.
fn atx_heading(line: &str) -> Option<(usize, String)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let level = rest.bytes().take_while(|&b| b == b'#').count();
    if level == 0 || level > 6 {
        return None;
    }
    let after = &rest[level..];
    if !(after.is_empty() || after.starts_with([' ', '\t'])) {
        return None;
    }
    let title = after.trim().trim_end_matches('#').trim_end().to_string();
    Some((level, title))
}

fn opens_fence(line: &str) -> Option<(u8, usize)> {
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

fn closes_fence(line: &str, ch: u8, n: usize) -> bool {
    let t = line.trim();
    t.len() >= n && t.bytes().all(|b| b == ch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(max: usize, overlap: usize) -> ChunkConfig {
        ChunkConfig {
            max_bytes: max,
            overlap_bytes: overlap,
        }
    }

    fn line_slice(text: &str, a: usize, b: usize) -> String {
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        lines[a - 1..b].concat()
    }

    #[test]
    fn a_run_of_spaces_inside_a_long_line_makes_no_chunk_of_its_own() {
        // Pieces of 8 bytes: the first chunk takes 16 letters, the spaces
        // that end the line would make the second one alone.
        let doc = format!("abcdefghijklmnop{}\n", " ".repeat(10));
        let chunks = chunk_text(&doc, false, cfg(16, 0));
        assert!(!chunks.is_empty());
        for ch in &chunks {
            assert!(!ch.text.trim().is_empty(), "{chunks:?}");
        }
        assert_eq!(chunks.len(), 1, "{chunks:?}");
        assert_eq!(chunks[0].text, "abcdefghijklmnop");
    }

    #[test]
    fn empty_and_blank_give_no_chunks() {
        assert!(chunk_text("", true, ChunkConfig::default()).is_empty());
        assert!(chunk_text("\n\n  \n\t\n", true, ChunkConfig::default()).is_empty());
    }

    #[test]
    fn headings_make_sections_with_trails() {
        let doc = "Preamble line.\n\n# Top\n\nText A.\n\n## Sub\n\nText B.\n\n# Other\nText C.\n";
        let c = chunk_text(doc, true, ChunkConfig::default());
        assert_eq!(c.len(), 4);
        assert_eq!(c[0].heading_trail, Vec::<String>::new());
        assert_eq!((c[0].start_line, c[0].end_line), (1, 1));
        assert_eq!(c[1].heading_trail, vec!["Top"]);
        assert_eq!((c[1].start_line, c[1].end_line), (3, 5));
        assert_eq!(c[1].text, "# Top\n\nText A.");
        assert_eq!(c[2].heading_trail, vec!["Top", "Sub"]);
        assert_eq!((c[2].start_line, c[2].end_line), (7, 9));
        assert_eq!(c[3].heading_trail, vec!["Other"]);
        assert_eq!((c[3].start_line, c[3].end_line), (11, 12));
    }

    #[test]
    fn heading_only_sections_merge_into_the_next() {
        let doc = "# Title\n\n## Part\n\nBody.\n";
        let c = chunk_text(doc, true, ChunkConfig::default());
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].heading_trail, vec!["Title", "Part"]);
        assert_eq!((c[0].start_line, c[0].end_line), (1, 5));
    }

    #[test]
    fn headings_in_fences_and_plain_text_are_ignored() {
        let doc = "# Real\n\n```sh\n# not a heading\n```\n";
        let c = chunk_text(doc, true, ChunkConfig::default());
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].heading_trail, vec!["Real"]);
        let c = chunk_text(doc, false, ChunkConfig::default());
        assert_eq!(c.len(), 1);
        assert!(c[0].heading_trail.is_empty());
        assert!(atx_heading("#hashtag").is_none());
        assert_eq!(atx_heading("### Closed ###").unwrap(), (3, "Closed".into()));
    }

    #[test]
    fn long_sections_split_with_overlap_and_exact_lines() {
        let mut doc = String::from("# S\n");
        for i in 0..60 {
            doc.push_str(&format!("line number {i} with some words\n"));
        }
        let c = chunk_text(&doc, true, cfg(300, 80));
        assert!(c.len() > 3);
        for w in c.windows(2) {
            assert!(w[1].start_line <= w[0].end_line, "overlap expected: {w:?}");
            assert!(w[1].start_line > w[0].start_line, "progress expected");
        }
        for ch in &c {
            assert!(ch.text.len() <= 300);
            assert_eq!(
                ch.text,
                line_slice(&doc, ch.start_line, ch.end_line).trim_end_matches('\n')
            );
        }
        assert_eq!(c.last().unwrap().end_line, 61);
    }

    #[test]
    fn huge_single_paragraph_is_bounded() {
        let word = "palabra ";
        let doc = word.repeat(10_000);
        let c = chunk_text(&doc, false, cfg(1000, 200));
        assert!(c.len() >= 80);
        for ch in &c {
            assert!(ch.text.len() <= 1000);
            assert_eq!((ch.start_line, ch.end_line), (1, 1));
        }
        // Every byte is covered.
        let total: usize = doc.trim_end().len();
        assert!(c.iter().map(|x| x.text.len()).sum::<usize>() >= total);
    }

    #[test]
    fn huge_line_without_spaces_respects_char_boundaries() {
        let doc = "ñ".repeat(5000);
        let c = chunk_text(&doc, false, cfg(500, 100));
        assert!(!c.is_empty());
        for ch in &c {
            assert!(ch.text.len() <= 500);
            assert!(ch.text.chars().all(|x| x == 'ñ'));
        }
    }

    #[test]
    fn crlf_lines_are_handled() {
        let doc = "# A\r\n\r\nuno\r\ndos\r\n";
        let c = chunk_text(doc, true, ChunkConfig::default());
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].text, "# A\r\n\r\nuno\r\ndos");
        assert_eq!((c[0].start_line, c[0].end_line), (1, 4));
    }

    #[test]
    fn prefers_paragraph_boundaries() {
        let para = "word ".repeat(20); // 100 bytes
        let doc = format!("{para}\n{para}\n\n{para}\n{para}\n{para}\n");
        // Without the preference the first chunk would be lines 1-4.
        let c = chunk_text(&doc, false, cfg(400, 0));
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].start_line, c[0].end_line), (1, 2));
        assert_eq!((c[1].start_line, c[1].end_line), (4, 6));
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn chunks_are_bounded_exact_and_ordered(
                doc in "([#]{0,3}[ a-zñé]{0,90}\n{0,2}){0,40}",
                max in 40usize..400,
                overlap in 0usize..100,
            ) {
                let c = chunk_text(&doc, true, cfg(max, overlap));
                let lines = doc.split_inclusive('\n').count();
                for ch in &c {
                    prop_assert!(ch.text.len() <= max.max(16));
                    prop_assert!(ch.start_line >= 1 && ch.start_line <= ch.end_line);
                    prop_assert!(ch.end_line <= lines);
                    prop_assert!(!ch.text.trim().is_empty());
                }
                for w in c.windows(2) {
                    prop_assert!(w[1].start_line >= w[0].start_line);
                }
            }
        }
    }
}
