//! The rule on segments: near-duplicate sentences (a banded token edit
//! distance).

use super::*;

impl Near {
    /// Near-duplicate segments.
    ///
    /// Two rules keep regular healthy text out (issue 22 §3):
    /// * a segment that is not mostly words (a row of a matrix, a line of
    ///   numbers) matches only an equal copy (the rows of an identity
    ///   matrix differ), and a run of rows holding one value (zeros,
    ///   ones) needs more copies than the row has tokens: a square
    ///   matrix of zeros has as many equal rows as columns;
    /// * a copy that fills two slots with new values carries new
    ///   content — an enumeration or a record, not a loop: two slots
    ///   where one value is a number, a name or a quoted value (`The term
    ///   number 6 of the sequence is 36.`, `- Ana pidió 2 cajas` / `-
    ///   Luis pidió 3 cajas`), or two words the copy before does not hold
    ///   (`The first step is to prepare the dough.` / `The second step is
    ///   to make the dough.`). A loop changes one slot (a counter: `the
    ///   twenty-first term is 1`) or swaps words it already used
    ///   (`superior` / `inferior`, `a year … a month` / `a month … a
    ///   year`).
    pub(super) fn sentence(&mut self, seg: &Seg) {
        let cfg = &self.cfg;
        let long = seg.n >= cfg.sentence_min_tokens;
        let data = !reads_as_text(seg);
        for p in 1..=2 {
            let i = p - 1;
            let near = long && self.nprev >= p && {
                let o = &self.prev[(self.nprev - p) % 2];
                let edits = if data || !reads_as_text(o) {
                    0
                } else {
                    cfg.sentence_max_edits.min(seg.n / 4)
                };
                o.n >= cfg.sentence_min_tokens
                    && o.n.abs_diff(seg.n) <= edits
                    && within_edits(&o.keys, &seg.keys, edits)
                    && !new_values(o, seg)
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
            let mut need = self.cfg.sentence_copies.max(3 * p);
            if data && constant(seg) {
                need = need.max(seg.n + 1);
            }
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
        let mut slots = old.slots;
        slots.clear();
        slots.extend_from_slice(&seg.slots);
        self.prev[slot] = Seg {
            start: seg.start,
            end: seg.end,
            keys,
            slots,
            n: seg.n,
            words: seg.words,
            alnum: seg.alnum,
        };
        self.nprev += 1;
    }
}

/// Whether a segment reads as text: words (two letters or more) make at
/// least half of its tokens with a letter or a digit. Rows of numbers
/// (`0 & 0 & 1 \\`, `[0, 1, 0]`) are data.
fn reads_as_text(seg: &Seg) -> bool {
    2 * seg.words >= seg.alnum
}

/// Whether a row of data holds one value: at most three different
/// tokens with digits (`[0,`, `0,`, `0]`).
fn constant(seg: &Seg) -> bool {
    let mut seen = [0u64; 3];
    let mut n = 0;
    for (k, &slot) in seg.keys.iter().zip(&seg.slots) {
        if slot & SLOT_DIGIT == 0 || seen[..n].contains(k) {
            continue;
        }
        if n == seen.len() {
            return false;
        }
        seen[n] = *k;
        n += 1;
    }
    true
}

/// Whether `new` fills two slots of `old` with other values, one of them
/// a number, a name (a capital) or a quoted value, or both words `old`
/// does not hold: same length, compared token by token, the list marker
/// set aside.
fn new_values(old: &Seg, new: &Seg) -> bool {
    if old.n != new.n || old.keys.len() != new.keys.len() {
        return false;
    }
    let mut changed = 0;
    let mut fresh = 0;
    let mut valued = false;
    for (t, (a, b)) in old.keys.iter().zip(&new.keys).enumerate() {
        let slot = new.slots[t] & old.slots[t];
        if a == b || slot & SLOT_MARKER != 0 {
            continue;
        }
        changed += 1;
        fresh += usize::from(!old.keys.contains(b));
        valued |= new.slots[t] & SLOT_DIGIT != 0 || slot & (SLOT_CAP | SLOT_QUOTE) != 0;
    }
    changed >= 2 && (valued || fresh >= 2)
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
