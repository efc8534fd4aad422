//! Where a fresh exact detector may start (the module docs' *Restart
//! points*).

use super::*;

impl Sieve {
    /// Where a fresh detector may start (a line start) for the counter,
    /// sentence and list rules, and the fenced block open there. The
    /// few-lines rule is served by [`Sieve::take_lines_low`] (a region
    /// whose windows start earlier reads again from there).
    pub(super) fn restart(&self) -> (usize, Option<(u8, usize)>) {
        let mut at = self.counter_restart().min(self.sentence_from);
        // A few-codes window going on (the last token read is marked)
        // starts at the run's first token or at most `code_window - 1`
        // tokens before the next one.
        let w = self.plan.code_window;
        if w != usize::MAX && self.marked_next == self.ntok {
            at = at.min(self.real_of(self.marked_from.max(self.ntok.saturating_sub(w))));
        }
        if self.items > 0 {
            at = at.min(self.list_from);
        }
        (at, self.fence_at(at))
    }

    /// The earliest first line of the few-lines windows flagged since the
    /// last call (`usize::MAX` if none): the exact detector must have
    /// started there or before to see them whole.
    pub(super) fn take_lines_low(&mut self) -> usize {
        std::mem::replace(&mut self.lines_low, usize::MAX)
    }

    /// The fenced block open at `at`, a line start at or after which no
    /// line inside a fence was read up to here.
    pub(super) fn fence_at(&self, at: usize) -> Option<(u8, usize)> {
        // Between the restart point and here no line inside a fence was
        // read (each one flags), so the fence open now, if any, was
        // either open there too or opened at or after it.
        match self.lines.open_fence() {
            Some((_, line)) if line >= at => None,
            f => f,
        }
    }

    /// The few-lines rule's restart point: the first of the last lines
    /// read that a window firing here or later can start at. Such a
    /// window holds at most the last `line_window` lines read, and it
    /// holds every line from its first to the last one read, so at most
    /// `line_window_values` different counts among them: the earliest
    /// such line (a window starting before it would hold one count too
    /// many). With no such line, the line being read (or the next). Never
    /// earlier than it was (a line read only takes lines away), until a
    /// line inside a fence or table row empties the window.
    /// `usize::MAX` when the rule is off.
    pub(super) fn lines_restart(&self) -> usize {
        let (w, n) = (self.plan.line_window, self.nflines);
        if w == 0 || self.plan.line_values == 0 {
            return usize::MAX;
        }
        let here = if self.line_active {
            self.line_real
        } else {
            self.real_line
        };
        if n == 0 {
            return here;
        }
        let mut seen = [0usize; LINE_RING];
        let mut nseen = 0;
        let mut first = n;
        for t in (n.saturating_sub(w)..n).rev() {
            let c = self.flines[t % LINE_RING].0;
            if !seen[..nseen].contains(&c) {
                if nseen == self.plan.line_values {
                    break;
                }
                seen[nseen] = c;
                nseen += 1;
            }
            first = t;
        }
        self.flines[first % LINE_RING].1
    }

    /// The counter rule's restart point: for each period, 8 tokens
    /// before the last marked token without a hit at that period; or 8
    /// tokens back when none of the last 8 tokens is marked.
    pub(super) fn counter_restart(&self) -> usize {
        let j = self.ntok;
        let quiet = match self.nmarked {
            0 => true,
            k => self.marked[(k - 1) % MASK_W].0 + MASK_W < j,
        };
        if quiet {
            self.real_of(j.saturating_sub(MASK_W))
        } else {
            self.counter_from.iter().copied().min().unwrap_or(0)
        }
    }

    /// Start of the real line holding token `t` (`t` among the last
    /// tokens), or 0 before the first.
    pub(super) fn real_of(&self, t: usize) -> usize {
        let n = self.nreals;
        for k in (n.saturating_sub(LINE_RING)..n).rev() {
            let (first, start) = self.reals[k % LINE_RING];
            if first <= t {
                return start;
            }
        }
        0
    }
}
