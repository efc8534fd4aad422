//! The runs a finished token extends: short periods matched token by
//! token, long periods adopted through repeated shingles, and the
//! partial run of the token being read (the tail rule).

use super::*;

impl Words {
    /// Records a finished token and runs the detectors on it.
    #[inline]
    pub(super) fn finish_token(&mut self, t: Fin, lines: &mut LineCtx<'_>) {
        self.partial = None;
        let key = t.key;
        let end = t.end;
        let word = t.word;
        let connector = self.is_connector(key, t.folded_len);
        let j = self.j;
        if j >= self.ring.len() && self.ring.len() < self.max_cap {
            self.grow_ring();
        }
        self.ring[j & self.mask] = Tok {
            key,
            start: t.start,
            end,
            prev_end: self.last_end,
            connector,
            nl: std::mem::take(&mut self.nl),
            preview: t.preview,
            plen: t.plen,
            ptrunc: t.ptrunc,
        };
        self.last_end = end;
        if word {
            self.last_word = Some(j);
        }
        self.j = j + 1;

        // Short periods: which of the last W tokens equal this one (one
        // byte of each key compared together, then confirmed on the full
        // key).
        let f = (key >> 56) as u8;
        let [f0, f1] = self.fp;
        let mut m = (swar::eq_bits(f0, f) | swar::eq_bits(f1, f) << 8) & self.lane_mask;
        self.fp = [f0 << 8 | u64::from(f), f1 << 8 | f0 >> 56];
        let mut v = m;
        while v != 0 {
            let i = v.trailing_zeros() as usize;
            v &= v - 1;
            if j < i + 1 || self.tok(j - i - 1).key != key {
                m &= !(1 << i);
            }
        }
        let mut fresh = m & !self.m;
        while fresh != 0 {
            let i = fresh.trailing_zeros() as usize;
            fresh &= fresh - 1;
            self.since[i] = j;
        }
        self.m = m;
        let mut hot = false;
        let mut v = m;
        while v != 0 {
            let i = v.trailing_zeros() as usize;
            v &= v - 1;
            hot |= j + 1 - self.since[i] >= self.thr[i] as usize;
        }
        if hot {
            self.cold_short(end, lines);
        }
        if m & 1 != 0 && self.flood != usize::MAX {
            self.flood_token(end, lines);
        }

        // Long periods: extend the current candidate period, or adopt one
        // from the last occurrence of the current shingle.
        if self.long_max > 0 {
            if let Some(mut lr) = self.long {
                if self.tok(j - lr.d).key == key {
                    lr.run.len += 1;
                    if lr.run.len >= long_need(self.long_mult, self.long_pct, lr.d)
                        && !lr.run.accepted
                        && self.accept(lr.run.start, lr.d, end, lines)
                    {
                        lr.run.accepted = true;
                        let cand = self.candidate(Detector::LongPeriod, lr.d, lr.run, None);
                        self.offer(cand);
                    }
                    self.long = Some(lr);
                } else {
                    self.long = None;
                }
            }
            self.roll = self.roll.wrapping_mul(ROLL).wrapping_add(key);
            if j >= SHINGLE {
                let old = self.tok(j - SHINGLE).key;
                self.roll = self.roll.wrapping_sub(old.wrapping_mul(self.roll_pow));
            }
            if j + 1 >= SHINGLE {
                let sh = crate::repetition::text::fold::mix(self.roll);
                while j + self.token_base >= 4 * self.table.len() && self.table.len() < TABLE {
                    self.grow_table();
                }
                let tag = (sh >> 32) as u32;
                let slot = (tag as usize) & (self.table.len() - 1);
                let (old_tag, at) = self.table[slot];
                self.table[slot] = (tag, j as u32);
                if self.long.is_none() && old_tag == tag {
                    let d = (j as u32).wrapping_sub(at) as usize;
                    if d > self.max_p && d <= self.long_max {
                        self.adopt(j, d);
                    }
                }
            }
        }
        self.rearm();
    }

    /// Doubles the token ring (every token so far still fits).
    #[cold]
    pub(super) fn grow_ring(&mut self) {
        let cap = self.ring.len() * 2;
        let mut ring = vec![Tok::default(); cap];
        for t in self.j.saturating_sub(self.ring.len())..self.j {
            ring[t & (cap - 1)] = self.ring[t & self.mask];
        }
        self.ring = ring;
        self.mask = cap - 1;
    }

    /// Doubles the shingle table, every entry to its new slot.
    #[cold]
    pub(super) fn grow_table(&mut self) {
        let size = self.table.len() * 2;
        let mut table = vec![(0, 0); size];
        for &(tag, at) in &self.table {
            table[(tag as usize) & (size - 1)] = (tag, at);
        }
        self.table = table;
    }

    /// Some short run reached its threshold: record where it starts (the
    /// first time) and apply the protections.
    #[cold]
    #[inline(never)]
    pub(super) fn cold_short(&mut self, end: usize, lines: &mut LineCtx<'_>) {
        let j = self.j - 1;
        for i in 0..self.max_p {
            let r = self.run_len(i);
            let thr = self.thr[i] as usize;
            if r < thr {
                continue;
            }
            let p = i + 1;
            if r == thr {
                if j + 1 < r + p {
                    continue;
                }
                self.info[i] = self.run_info(j + 1 - r, p);
            }
            let info = self.info[i];
            if !info.accepted && self.accept(info.start, p, end, lines) {
                self.info[i].accepted = true;
                let cand = self.candidate(Detector::WordPeriod, p, info, None);
                self.offer(cand);
            }
        }
    }

    /// Starts tracking long period `d` at token `j`, counting the matches
    /// that already precede it (at most `3d` back, within the ring).
    pub(super) fn adopt(&mut self, j: usize, d: usize) {
        let limit = (self.long_mult * d + d).min(self.max_cap - d - 1);
        let mut m = 0;
        while m < limit && j >= d + m && self.tok(j - m).key == self.tok(j - m - d).key {
            m += 1;
        }
        // A whole shingle must repeat: a tag that collides without its
        // tokens matching adopts nothing. (So a run going on at token `q`
        // always repeats the shingle that ends at `q`, which the sieve
        // relies on.)
        if m < SHINGLE || j + 1 < m + d {
            return;
        }
        let a = j + 1 - m;
        let mut run = self.run_info(a, d);
        run.len = m;
        self.long = Some(LongRun { d, run });
    }

    /// Matching tokens in the run of period `i + 1` that ends with the
    /// last finished token (0 when it does not match).
    #[inline]
    pub(super) fn run_len(&self, i: usize) -> usize {
        if self.m >> i & 1 == 1 {
            self.j - self.since[i]
        } else {
            0
        }
    }

    pub(super) fn rearm(&mut self) {
        // With a threshold of 1 a lane with no run is one token away too.
        let mut armed = self.min_thr <= 1;
        let mut v = self.m;
        while v != 0 && !armed {
            let i = v.trailing_zeros() as usize;
            v &= v - 1;
            let r = self.run_len(i);
            let thr = self.thr[i] as usize;
            armed = r + 1 >= thr && !(r >= thr && self.info[i].accepted);
        }
        if let Some(lr) = &self.long {
            if !lr.run.accepted && lr.run.len + 1 >= long_need(self.long_mult, self.long_pct, lr.d)
            {
                armed = true;
            }
        }
        self.armed = armed || self.flood_armed();
    }

    /// Would the token being read, if the text ended now, complete a loop?
    #[cold]
    pub(super) fn check_partial(&mut self, end: usize, lines: &mut LineCtx<'_>) {
        self.partial = None;
        let key = self.build.key(self.ignore_punct);
        let j = self.j;
        let mut best: Option<Candidate> = None;
        for i in 0..self.max_p.min(j) {
            let p = i + 1;
            let r = self.run_len(i);
            let thr = self.thr[i] as usize;
            if r + 1 < thr || self.tok(j - p).key != key || j < r + p {
                continue;
            }
            if r >= thr && self.info[i].accepted {
                continue;
            }
            let mut info = if r >= thr {
                self.info[i]
            } else {
                // The run would reach its threshold with this token.
                self.run_info(j - r, p)
            };
            info.len = r + 1;
            if self.accept_partial(info.start, p, end, lines) {
                let cand = self.candidate(Detector::WordPeriod, p, info, Some(&self.build));
                if best.as_ref().is_none_or(|b| cand.better_than(b)) {
                    best = Some(cand);
                }
            }
        }
        if let Some(lr) = self.long {
            if !lr.run.accepted
                && lr.run.len + 1 >= long_need(self.long_mult, self.long_pct, lr.d)
                && self.tok(j - lr.d).key == key
                && self.accept_partial(lr.run.start, lr.d, end, lines)
            {
                let cand = self.candidate(Detector::LongPeriod, lr.d, lr.run, Some(&self.build));
                if best.as_ref().is_none_or(|b| cand.better_than(b)) {
                    best = Some(cand);
                }
            }
        }
        if let Some(cand) = self.flood_partial(end, lines) {
            if best.as_ref().is_none_or(|b| cand.better_than(b)) {
                best = Some(cand);
            }
        }
        self.partial = best;
    }

    /// Ends the text at `pos`: [`Words::finish`], then the tail rule.
    /// A long run that reaches the end fires with `long_run_per_period -
    /// 1` copies after the first and `tail_pct` percent of one more
    /// (`long_need` at `tail_pct`). When the text stops inside a token
    /// that breaks the run but is a prefix of the token it stands for
    /// (compared on the first [`PREVIEW`] bytes, ASCII case folded), the
    /// generation was cut off mid-word: the token counts as a match.
    /// O(1): one run is looked at.
    pub(crate) fn end_text(&mut self, pos: usize, lines: &mut LineCtx<'_>) {
        let tail = self.long_max > 0 && self.tail_pct < self.long_pct;
        let mut cut_off = None;
        if tail && self.build.active {
            if let Some(lr) = self.long {
                let need = long_need(self.long_mult, self.tail_pct, lr.d);
                let mut run = lr.run;
                run.len += 1;
                if !run.accepted
                    && run.len >= need
                    && self.j >= lr.d
                    && self.tok(self.j - lr.d).key != self.build.key(self.ignore_punct)
                    && self.build_is_prefix_of(self.j - lr.d)
                    && self.accept_partial(run.start, lr.d, pos, lines)
                {
                    cut_off =
                        Some(self.candidate(Detector::LongPeriod, lr.d, run, Some(&self.build)));
                }
            }
        }
        let flood = self.flood_at_end(pos, lines);
        self.finish(pos, lines);
        if let Some(cand) = flood {
            self.offer(cand);
        }
        if let Some(cand) = cut_off {
            self.offer(cand);
            return;
        }
        if !tail {
            return;
        }
        if let Some(lr) = self.long {
            let need = long_need(self.long_mult, self.tail_pct, lr.d);
            if !lr.run.accepted
                && lr.run.len >= need
                && self.accept(lr.run.start, lr.d, self.last_end, lines)
            {
                let cand = self.candidate(Detector::LongPeriod, lr.d, lr.run, None);
                self.offer(cand);
            }
        }
    }

    /// The token being read is a prefix of token `t` (its first bytes,
    /// ASCII case folded; a token longer than the preview never is).
    fn build_is_prefix_of(&self, t: usize) -> bool {
        let b = &self.build;
        let k = self.tok(t);
        let n = b.plen as usize;
        !b.ptrunc && n <= k.plen as usize && b.preview[..n].eq_ignore_ascii_case(&k.preview[..n])
    }
}
