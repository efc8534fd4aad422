//! Token floods: one long token (a URL, a path, an identifier, base64)
//! repeated back to back. The period-1 run needs `min_run` (18) matches,
//! 19 copies, which for a token of 20 characters or more is 400
//! characters and up; a flood of one long token fires instead once its
//! copies cover `healthy.token_flood_bytes` (200) bytes, as floods of
//! symbols fire once they cover `flood_chars`, and it has
//! * three copies on one line ([`FLOOD_COPIES`]): a token written twice
//!   (a URL repeated once) never fires, and no healthy source repeats a
//!   long token more than twice on a line;
//! * five copies when a line break lies between two of them
//!   ([`FLOOD_LINE_COPIES`]): logs repeat a line (pytest lists the same
//!   89-character `path:line` of a warning four times in a row, three
//!   times a 51-character test id, in the resolved trajectories).
//!
//! The last copy may be the first [`PREVIEW`] bytes of the token (the
//! token being read in a stream, or the text's last token, cut off).
//! The protections are a word loop's, stricter: the token holds a word
//! (two letters: `0.000000000000000000e+00` rows pass) and the run starts
//! outside code fences and table rows.

use super::*;

/// Tokens shorter than this many bytes are left to the period-1 run's
/// `min_run` (a token of 13 bytes and its space, 19 times, is 266 bytes).
pub(crate) const FLOOD_TOKEN_MIN: usize = 13;
/// Copies of a flood on one line.
const FLOOD_COPIES: usize = 3;
/// Copies of a flood with a line break between two of them.
const FLOOD_LINE_COPIES: usize = 5;

/// The period-1 run the flood rule follows.
#[derive(Debug, Clone, Copy)]
pub(super) struct FloodRun {
    /// Its first matching token (`since[0]`; `usize::MAX`: none).
    since: usize,
    /// Where its loop starts and what a cut keeps.
    run: Run,
    /// A line break lies between two of its copies.
    lines: bool,
    /// It fired, or its token is too short.
    done: bool,
}

impl Default for FloodRun {
    fn default() -> Self {
        FloodRun {
            since: usize::MAX,
            run: Run::default(),
            lines: false,
            done: true,
        }
    }
}

impl Words {
    /// The token just finished extends a period-1 run (`r >= 1`
    /// matches): follow the run, and fire once it has the copies and
    /// covers the threshold.
    #[cold]
    #[inline(never)]
    pub(super) fn flood_token(&mut self, end: usize, lines: &mut LineCtx<'_>) {
        let r = self.run_len(0);
        let j = self.j - 1;
        let t = *self.tok(j);
        if self.flood_run.since != self.since[0] {
            // A new run: its first copy is token `j - r`, in the ring.
            let short = t.end - t.start < FLOOD_TOKEN_MIN || r + 1 > self.ring.len();
            self.flood_run = FloodRun {
                since: self.since[0],
                run: self.run_info(self.since[0], 1),
                lines: false,
                done: short,
            };
        }
        self.flood_run.lines |= t.nl;
        let f = self.flood_run;
        if f.done || r + 1 < flood_copies(f.lines) || end - f.run.start < self.flood {
            return;
        }
        let word = self.last_word.is_some_and(|w| w + 1 >= self.j);
        if self.flood_accept(word, f.run.start, end, lines) {
            self.flood_run.done = true;
            let cand = self.candidate(Detector::WordPeriod, 1, Run { len: r, ..f.run }, None);
            self.offer(cand);
        }
    }

    /// The token being read, if the text ended now, as the last copy of
    /// a flood: equal to the copy before, or its first [`PREVIEW`] bytes
    /// (ASCII case folded).
    pub(super) fn flood_partial(
        &mut self,
        end: usize,
        lines: &mut LineCtx<'_>,
    ) -> Option<Candidate> {
        let r = self.run_len(0);
        let f = self.flood_run;
        if self.flood == usize::MAX || r < 1 || !self.build.active {
            return None;
        }
        if f.since != self.since[0] || f.done {
            return None;
        }
        let b = &self.build;
        let last = self.tok(self.j - 1);
        let same = b.key(self.ignore_punct) == last.key;
        let head = b.plen as usize == PREVIEW
            && !b.ptrunc
            && last.plen as usize == PREVIEW
            && b.preview.eq_ignore_ascii_case(&last.preview);
        if !same && !head {
            return None;
        }
        // Copies: the run's `r + 1` and this one.
        if r + 2 < flood_copies(f.lines || self.nl) || end - f.run.start < self.flood {
            return None;
        }
        let word = self.build.letters >= self.min_word_letters
            || self.last_word.is_some_and(|w| w + 1 > self.j);
        if !self.flood_accept(word, f.run.start, end, lines) {
            return None;
        }
        let run = Run {
            len: r + 1,
            ..f.run
        };
        Some(self.candidate(Detector::WordPeriod, 1, run, Some(&self.build)))
    }

    /// The protections, stricter than a word loop's: the token holds a
    /// word and the run starts outside fences and table rows (inside, a
    /// flood waits for the period-1 run's own rules: `min_run`, the code
    /// line's 256 bytes, the 4 KiB cap).
    fn flood_accept(&self, word: bool, start: usize, end: usize, lines: &mut LineCtx<'_>) -> bool {
        word && !lines.exempt_at(end, start, self.fences, self.tables)
    }

    /// The end of the text: its last token may be a cut-off copy.
    pub(super) fn flood_at_end(
        &mut self,
        pos: usize,
        lines: &mut LineCtx<'_>,
    ) -> Option<Candidate> {
        if self.build.active {
            self.flood_partial(pos, lines)
        } else {
            None
        }
    }

    /// A flood is going on that the token being read may complete.
    #[inline]
    pub(super) fn flood_armed(&self) -> bool {
        self.flood != usize::MAX
            && self.m & 1 != 0
            && self.flood_run.since == self.since[0]
            && !self.flood_run.done
    }
}

/// Copies a flood needs, with or without a line break between two.
fn flood_copies(lines: bool) -> usize {
    if lines {
        FLOOD_LINE_COPIES
    } else {
        FLOOD_COPIES
    }
}
