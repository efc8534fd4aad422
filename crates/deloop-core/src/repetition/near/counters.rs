//! The rules on tokens: counters (digit runs masked, short periods) and
//! codes going round a few values.

use super::*;

impl Near {
    /// The counter rule: masked tokens repeating with a short period.
    pub(super) fn counter_token(&mut self, tok: Tok) {
        let j = self.ntok;
        self.toks[j % TOK_RING] = tok;
        self.ntok = j + 1;
        if tok.word {
            self.last_word_tok = Some(j);
        }
        if tok.digits {
            self.last_digit_tok = Some(j);
        }
        if tok.digits && tok.letter {
            self.code_run += 1;
            let w = self.cfg.token_window.min(TOKEN_WINDOW);
            if w >= 2 && self.code_run >= w {
                self.few_tokens(j);
                if self.best.is_some() {
                    return;
                }
            }
        } else {
            self.code_run = 0;
        }
        // Bit p - 1: token j - p has the same masked key. The low bytes
        // of the last eight keys give the candidates in one compare; the
        // full keys confirm them. Runs not extended end.
        let valid = if j >= MASK_W { 0xff } else { (1u32 << j) - 1 };
        let mut hits = swar::eq_bits(self.mask_tags, tok.masked as u8) & valid;
        self.mask_tags = self.mask_tags << 8 | (tok.masked & 0xff);
        let mut c = hits;
        while c != 0 {
            let i = c.trailing_zeros() as usize;
            c &= c - 1;
            if self.toks[(j - i - 1) % TOK_RING].masked != tok.masked {
                hits &= !(1 << i);
            }
        }
        let mut ended = self.mask_active & !hits;
        while ended != 0 {
            self.mask_runs[ended.trailing_zeros() as usize] = 0;
            ended &= ended - 1;
        }
        self.mask_active = hits;
        let cfg = &self.cfg;
        while hits != 0 {
            let i = hits.trailing_zeros() as usize;
            hits &= hits - 1;
            let p = i + 1;
            self.mask_runs[i] += 1;
            let need = cfg.masked_min_run.max(cfg.masked_run_per_period * p);
            let r = self.mask_runs[i];
            if r < need || r + p >= TOK_RING {
                continue;
            }
            let has_word = self.last_word_tok.is_some_and(|w| w + p > j);
            let has_digit = self.last_digit_tok.is_some_and(|w| w + p > j);
            if !has_word || !has_digit {
                continue;
            }
            // One counter: at most one token of the unit differs from its
            // copy before once digits count (`Week 1: 5 km` has two).
            let differs = (j + 1 - p..=j)
                .filter(|&t| self.toks[t % TOK_RING].raw != self.toks[(t - p) % TOK_RING].raw)
                .count();
            // And something besides the counter repeats: a run of tokens that
            // each change (`palabra0 palabra1 …`, sequential ids) is content.
            if differs > 1 || differs >= p {
                continue;
            }
            // And the counter counts: every token that changed did so by
            // one constant step (`assistant57`, `assistant58`); numbers
            // that jump about are ids, not a counter.
            if !self.counts(j + 1 - r, j, p) {
                continue;
            }
            // First matching token a; the loop starts at a - p.
            let a = j + 1 - r;
            let start = self.toks[(a - p) % TOK_RING].start;
            let keep = self.toks[(a - 1) % TOK_RING].end;
            let preview = self.token_preview(p);
            self.fire(Detector::NearDuplicate, p, start, keep, preview);
            return;
        }
    }

    /// Codes going round a few values (`802.11a, 802.11b, 802.11g,
    /// 802.11a, 802.11a+, …`): the last `token_window` tokens, in a row,
    /// each holding a digit and a letter, hold at most
    /// `token_window_values` different tokens (as read, case-folded), each
    /// at least twice, and one of them a letter that is not a hex digit
    /// (nor the `x` of `0x`): hex dumps are data. The loop starts at the window's first token; the
    /// cut keeps the window up to the first copy of its last new value.
    /// Token `j` was just read.
    pub(super) fn few_tokens(&mut self, j: usize) {
        let w = self.cfg.token_window.min(TOKEN_WINDOW);
        if w < 2 || j + 1 < w {
            return;
        }
        let mut seen = [(0u64, 0usize); TOKEN_WINDOW];
        let mut nseen = 0;
        let mut keep = 0;
        let mut non_hex = false;
        for t in j + 1 - w..=j {
            let tok = self.toks[t % TOK_RING];
            non_hex |= tok.non_hex;
            match seen[..nseen].iter().position(|&(k, _)| k == tok.raw) {
                Some(i) => seen[i].1 += 1,
                None => {
                    if nseen == self.cfg.token_window_values {
                        return;
                    }
                    seen[nseen] = (tok.raw, 1);
                    nseen += 1;
                    keep = tok.end;
                }
            }
        }
        // Hex dumps (`0x00 0x1f 0x00 …`, `1f 00 a3`) are data.
        if !non_hex || seen[..nseen].iter().any(|&(_, c)| c < 2) {
            return;
        }
        // A window with a fixed period (`Am7 D7 Gmaj7 Cmaj7` four times)
        // is the word guard's to judge, with its own thresholds.
        let first = j + 1 - w;
        let periodic = (1..=nseen).any(|p| {
            (first + p..=j)
                .all(|t| self.toks[t % TOK_RING].raw == self.toks[(t - p) % TOK_RING].raw)
        });
        if periodic {
            return;
        }
        let start = self.toks[(j + 1 - w) % TOK_RING].start;
        let preview = self.line.preview.clone();
        self.fire(Detector::NearDuplicate, nseen, start, keep, preview);
    }

    /// Whether the tokens `from..=to` that differ from the token `p`
    /// before them all differ by the same step, in the first digit run
    /// that changed.
    fn counts(&self, from: usize, to: usize, p: usize) -> bool {
        let mut step = None;
        for t in from..=to {
            let (a, b) = (self.toks[(t - p) % TOK_RING], self.toks[t % TOK_RING]);
            if a.raw == b.raw {
                continue;
            }
            let (x, y) = if a.num.0 != b.num.0 {
                (a.num.0, b.num.0)
            } else {
                (a.num.1, b.num.1)
            };
            let d = i128::from(y) - i128::from(x);
            if *step.get_or_insert(d) != d {
                return false;
            }
        }
        true
    }

    pub(super) fn token_preview(&self, _p: usize) -> String {
        self.line.preview.clone()
    }
}
