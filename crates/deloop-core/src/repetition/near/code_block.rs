//! The code-block rule: a block of lines repeated inside a fence.

use super::*;

impl Near {
    /// Lines inside a code fence.
    pub(super) fn code_line(&mut self, seg: &Line) {
        let j = self.ncode;
        let key = seg.whole;
        self.code[j % LINE_RING] = (key, seg.start, seg.end, seg.word);
        self.ncode = j + 1;
        for p in 2..=LINE_W {
            if j >= p && self.code[(j - p) % LINE_RING].0 == key {
                self.code_runs[p] += 1;
            } else {
                self.code_runs[p] = 0;
                continue;
            }
            let r = self.code_runs[p];
            if r < (self.cfg.code_block_copies.max(2) - 1) * p {
                continue;
            }
            // The block: lines j-p+1..=j; two different lines and a word.
            let first = self.code[(j + 1 - p) % LINE_RING].0;
            let mut varied = false;
            let mut word = false;
            for t in j + 1 - p..=j {
                let l = self.code[t % LINE_RING];
                varied |= l.0 != first;
                word |= l.3;
            }
            if !varied || !word {
                continue;
            }
            let a = j + 1 - r;
            let start = self.code[(a - p) % LINE_RING].1;
            let keep = self.code[(a - 1) % LINE_RING].2;
            self.fire(Detector::CodeBlock, p, start, keep, seg.preview.clone());
            return;
        }
    }
}
