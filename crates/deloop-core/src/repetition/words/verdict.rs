//! From a run to a verdict: the protections a run must pass (exempt
//! structure, text words), the candidate it makes, the best one kept,
//! and how far back a later verdict can still cut.

use super::*;

impl Words {
    /// The false-positive protections for a loop of period `p` ending with
    /// the last finalized token.
    pub(super) fn accept(
        &self,
        start: usize,
        p: usize,
        end: usize,
        lines: &mut LineCtx<'_>,
    ) -> bool {
        if !self.protect || end - start >= self.max_exempt {
            return true;
        }
        let has_word = self.last_word.is_some_and(|w| w + p >= self.j);
        has_word && self.not_exempt(start, p, end, lines)
    }

    /// Not structure: outside fences and table rows, or a loop of
    /// period `p` inside a fence that stays on one line for `code_line`
    /// bytes and holds a word that is not hexadecimal (`de ad be ef`
    /// rows of a hex dump are data).
    pub(super) fn not_exempt(
        &self,
        start: usize,
        p: usize,
        end: usize,
        lines: &mut LineCtx<'_>,
    ) -> bool {
        !lines.exempt_at(end, start, self.fences, self.tables)
            || (end - start >= self.code_line
                && lines.fenced_line(start)
                && self.text_word_among(p))
    }

    /// One of the last `p` complete tokens (as far as their previews
    /// go) holds a letter that is not a hexadecimal digit.
    pub(super) fn text_word_among(&self, p: usize) -> bool {
        let n = p.min(self.j).min(self.max_p.max(self.long_max));
        (self.j - n..self.j).any(|t| {
            let k = self.tok(t);
            let text = String::from_utf8_lossy(&k.preview[..k.plen as usize]);
            text.chars()
                .any(|c| c.is_alphabetic() && !c.is_ascii_hexdigit() && c != 'x')
        })
    }

    /// Same, when the last token of the loop is still being read.
    pub(super) fn accept_partial(
        &self,
        start: usize,
        p: usize,
        end: usize,
        lines: &mut LineCtx<'_>,
    ) -> bool {
        if !self.protect || end - start >= self.max_exempt {
            return true;
        }
        let has_word = self.build.letters >= self.min_word_letters
            || self.last_word.is_some_and(|w| w + p > self.j);
        has_word && self.not_exempt(start, p, end, lines)
    }

    pub(super) fn candidate(
        &self,
        detector: Detector,
        p: usize,
        r: Run,
        partial: Option<&Build>,
    ) -> Candidate {
        // Preview of the unit as it last appeared: the last p tokens.
        let mut unit = String::new();
        let last = if partial.is_some() {
            self.j
        } else {
            self.j - 1
        };
        let first = last + 1 - p;
        let shown = p.min(16);
        for t in first..first + shown {
            let (bytes, trunc) = if t == self.j {
                let b = partial.expect("partial token");
                (&b.preview[..b.plen as usize], b.ptrunc)
            } else {
                let k = self.tok(t);
                (&k.preview[..k.plen as usize], k.ptrunc)
            };
            if !unit.is_empty() {
                unit.push(' ');
            }
            unit.push_str(&String::from_utf8_lossy(bytes));
            if trunc {
                unit.push('…');
            }
        }
        if shown < p {
            unit.push_str(" …");
        }
        Candidate {
            detector,
            period: p,
            start: r.start,
            keep: r.keep,
            keep_tokens: r.keep_tokens,
            unit,
        }
    }

    pub(super) fn offer(&mut self, cand: Candidate) {
        if self.best.as_ref().is_none_or(|b| cand.better_than(b)) {
            self.best = Some(cand);
        }
    }

    /// A byte offset no future cut of this detector can fall before: a
    /// cut keeps at least the text before the loop's first token, and
    /// every loop still to come starts
    /// * within `max_period` tokens of the next one (a short run not yet
    ///   begun), or at the start of a short run going on now;
    /// * within `long_max_period` tokens of the next one (a long run not
    ///   yet begun), or `d` tokens before a run at distance `d` going on
    ///   now (counted back at most as far as adoption ever counts);
    /// * or it is the tracked long run, or an exempt run waiting for the
    ///   4 KiB rule, whose cut is already known.
    pub(crate) fn settled(&self) -> usize {
        let j = self.j;
        let back = self.max_p.max(self.long_max);
        if j <= back {
            return 0;
        }
        let mut bound = self.tok(j - back).prev_end;
        for i in 0..self.max_p {
            let r = self.run_len(i);
            if r == 0 {
                continue;
            }
            if r >= self.thr[i] as usize {
                if !self.info[i].accepted {
                    bound = bound.min(self.info[i].keep);
                }
            } else {
                match j.checked_sub(r + i + 1) {
                    Some(t) => bound = bound.min(self.tok(t).prev_end),
                    None => return 0,
                }
            }
        }
        if let Some(lr) = &self.long {
            if !lr.run.accepted {
                bound = bound.min(lr.run.keep);
            }
        }
        // Long runs going on now, at every distance the shingles could
        // adopt later.
        let cap = (self.long_mult + 1) * self.long_max;
        for d in self.max_p + 1..=self.long_max {
            let mut len = 0;
            while len < cap && j >= len + 1 + d && {
                let t = j - 1 - len;
                self.tok(t).key == self.tok(t - d).key
            } {
                len += 1;
            }
            if len > 0 {
                match j.checked_sub(len + d) {
                    Some(t) => bound = bound.min(self.tok(t).prev_end),
                    None => return 0,
                }
            }
        }
        bound
    }

    /// True when more text could still produce a loop starting before
    /// byte `start` (batch mode stops scanning once this is false).
    pub(crate) fn could_improve(&self, start: usize) -> bool {
        let reach = self.max_p.max((self.long_mult + 1) * self.long_max) + 1;
        if self.j <= reach || self.tok(self.j - reach).start < start {
            return true;
        }
        for i in 0..self.max_p {
            let r = self.run_len(i);
            if r == 0 {
                continue;
            }
            let run_start = if r >= self.thr[i] as usize {
                if self.info[i].accepted {
                    continue;
                }
                self.info[i].start
            } else {
                match self.j.checked_sub(r + i + 1) {
                    Some(t) => self.tok(t).start,
                    None => return true,
                }
            };
            if run_start < start {
                return true;
            }
        }
        self.long
            .is_some_and(|lr| !lr.run.accepted && lr.run.start < start)
    }
}
