//! The rule on segments: near-duplicate sentences (a banded token edit
//! distance).

use super::*;

impl Near {
    /// Near-duplicate segments.
    pub(super) fn sentence(&mut self, seg: &Seg) {
        let cfg = &self.cfg;
        let long = seg.n >= cfg.sentence_min_tokens;
        for p in 1..=2 {
            let i = p - 1;
            let near = long && self.nprev >= p && {
                let o = &self.prev[(self.nprev - p) % 2];
                o.n >= cfg.sentence_min_tokens
                    && o.n.abs_diff(seg.n) <= cfg.sentence_max_edits
                    && within_edits(&o.keys, &seg.keys, cfg.sentence_max_edits.min(seg.n / 4))
            };
            if !near {
                self.sent_runs[i] = Run::default();
                continue;
            }
            if self.sent_runs[i].len == 0 {
                self.sent_runs[i].start = self.prev[(self.nprev - p) % 2].start;
                self.sent_runs[i].keep = self.prev[(self.nprev - 1) % 2].end;
            }
            self.sent_runs[i].len += 1;
            let need = self.cfg.sentence_copies.max(3 * p);
            if self.sent_runs[i].len + p >= need {
                let r = self.sent_runs[i];
                let preview = self.line.preview.clone();
                self.fire(Detector::NearDuplicate, p, r.start, r.keep, preview);
                return;
            }
        }
        let slot = self.nprev % 2;
        let old = std::mem::take(&mut self.prev[slot]);
        let mut keys = old.keys;
        keys.clear();
        keys.extend_from_slice(&seg.keys);
        self.prev[slot] = Seg {
            start: seg.start,
            end: seg.end,
            keys,
            n: seg.n,
        };
        self.nprev += 1;
    }
}

/// Whether token sequences `a` and `b` (at most `SEG_TOKENS` each) are
/// within `k` edits (insert, delete, substitute): a dynamic program on
/// the band `|i - j| <= k`, O(len · (2k + 1)), stopping once every cell
/// of a row exceeds `k`.
pub(super) fn within_edits(a: &[u64], b: &[u64], k: usize) -> bool {
    let (n, m) = (a.len().min(SEG_TOKENS), b.len().min(SEG_TOKENS));
    if n.abs_diff(m) > k {
        return false;
    }
    const INF: usize = usize::MAX / 4;
    let mut prev = [INF; SEG_TOKENS + 1];
    let mut cur = [INF; SEG_TOKENS + 1];
    for (j, v) in prev.iter_mut().enumerate().take(m.min(k) + 1) {
        *v = j;
    }
    for i in 1..=n {
        let lo = i.saturating_sub(k);
        let hi = (i + k).min(m);
        let mut best = INF;
        if lo == 0 {
            cur[0] = i;
            best = i;
        } else {
            cur[lo - 1] = INF;
        }
        for j in lo.max(1)..=hi {
            let v = (prev[j - 1] + usize::from(a[i - 1] != b[j - 1]))
                .min(prev[j] + 1)
                .min(cur[j - 1] + 1);
            cur[j] = v;
            best = best.min(v);
        }
        if best > k {
            return false;
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[m] <= k
}
