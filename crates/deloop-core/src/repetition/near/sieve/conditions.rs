//! The necessary conditions the sieve follows per line, token and
//! segment (the module docs' *Necessary conditions*).

use super::*;

impl Sieve {
    /// A line outside fences and tables ends: the few-lines condition.
    #[inline]
    pub(super) fn few_lines(&mut self) {
        let w = self.plan.line_window;
        if w == 0 {
            return;
        }
        let n = self.ntok - self.line_tok0 - usize::from(self.line_marker);
        self.hot &= !HOT_LINES;
        let k = self.nflines;
        self.flines[k % LINE_RING] = (n, self.line_real);
        self.nflines = k + 1;
        if self.nflines < w {
            return;
        }
        let mut seen = [0usize; LINE_RING];
        let mut nseen = 0;
        let mut long = false;
        for t in self.nflines - w..self.nflines {
            let c = self.flines[t % LINE_RING].0;
            long |= c >= self.plan.line_min;
            if !seen[..nseen].contains(&c) {
                if nseen == self.plan.line_values {
                    return;
                }
                seen[nseen] = c;
                nseen += 1;
            }
        }
        if long {
            self.hot |= HOT_LINES;
            let first = self.flines[(self.nflines - w) % LINE_RING].1;
            self.lines_low = self.lines_low.min(first);
        }
    }

    /// A token outside fences and tables.
    #[inline]
    pub(super) fn counter_token(&mut self, key: Option<u64>) {
        let j = self.ntok;
        self.ntok = j + 1;
        if !self.real_recorded {
            self.real_recorded = true;
            self.reals[self.nreals % LINE_RING] = (j, self.real_line);
            self.nreals += 1;
        }
        if let Some(key) = key {
            self.marked_token(j, key);
        }
    }

    /// Counter token `j` is marked, with masked key `key`: for each
    /// period `p`, whether the token `p` back is marked with the same key
    /// (a hit at `p`) extends or ends the hits in a row at `p`.
    pub(super) fn marked_token(&mut self, j: usize, key: u64) {
        let k = self.nmarked;
        // Few codes: a window of `code_window` marked tokens in a row.
        if self.marked_next != j {
            self.marked_from = j;
        }
        self.marked_next = j + 1;
        let codes = j + 1 - self.marked_from >= self.plan.code_window;
        self.hot = self.hot & !HOT_CODES | if codes { HOT_CODES } else { 0 };
        let mut hits = 0u32;
        for m in k.saturating_sub(MASK_W)..k {
            let (t, other) = self.marked[m % MASK_W];
            if t + MASK_W >= j && other == key {
                hits |= 1 << (j - t - 1);
            }
        }
        self.marked[k % MASK_W] = (j, key);
        self.nmarked = k + 1;
        if hits == 0 {
            // No run goes through this token (the common case).
            self.streaks = [0; MASK_W];
            self.counter_from = [self.real_of(j.saturating_sub(MASK_W)); MASK_W];
            self.hot &= !HOT_COUNTER;
            return;
        }
        let mut best = 0;
        let mut from = None;
        for p in 0..MASK_W {
            if hits >> p & 1 != 0 {
                self.streaks[p] += 1;
                best = best.max(self.streaks[p]);
            } else {
                self.streaks[p] = 0;
                // No run at `p` goes through this token: one that fires
                // later has its first copy after `j - 8`.
                let at = *from.get_or_insert_with(|| self.real_of(j.saturating_sub(MASK_W)));
                self.counter_from[p] = at;
            }
        }
        if best >= self.plan.streak {
            self.hot |= HOT_COUNTER;
        } else {
            self.hot &= !HOT_COUNTER;
        }
    }

    /// A segment of `n` tokens outside fences and tables ends.
    pub(super) fn sentence(&mut self, n: usize) {
        let plan = &self.plan;
        let long = n >= plan.min_tokens;
        for p in 1..=2 {
            let near = long && self.nprev >= p && {
                let o = self.prev_n[(self.nprev - p) % 2];
                o >= plan.min_tokens && o.abs_diff(n) <= plan.max_edits
            };
            self.sent_runs[p - 1] = if near { self.sent_runs[p - 1] + 1 } else { 0 };
        }
        if self.sent_runs == [0, 0] {
            self.sentence_from = if self.nprev > 0 {
                self.prev_real[(self.nprev - 1) % 2]
            } else {
                self.seg_real
            };
        }
        let slot = self.nprev % 2;
        self.prev_n[slot] = n;
        self.prev_real[slot] = self.seg_real;
        self.nprev += 1;
        if self.sent_runs[0] + 1 >= plan.sent_need[0] || self.sent_runs[1] + 2 >= plan.sent_need[1]
        {
            self.hot |= HOT_SENTENCE;
        } else {
            self.hot &= !HOT_SENTENCE;
        }
    }
}
