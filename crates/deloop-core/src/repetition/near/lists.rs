//! The rules on lines: counted list items, restarted lists and lines
//! going round a few values.

use super::*;

impl Near {
    /// Counted list items.
    pub(super) fn list_item(&mut self, seg: &Line) {
        if !seg.marker {
            self.end_list();
            return;
        }
        let k = self.nitems;
        if self.list_copy(seg, k) {
            return;
        }
        let cur = (seg.body, seg.body_len, seg.start, seg.end);
        for p in 1..=ITEM_W {
            let i = p - 1;
            let same = k >= p && {
                let o = self.items[(k - p) % ITEM_RING];
                o.0 == cur.0 && o.1 == cur.1
            };
            if !same {
                self.item_runs[i] = Run::default();
                continue;
            }
            if self.item_runs[i].len == 0 {
                // The loop starts at item k - p; one copy is items
                // k-p..k-1.
                self.item_runs[i].start = self.items[(k - p) % ITEM_RING].2;
                self.item_runs[i].keep = self.items[(k - 1) % ITEM_RING].3;
            }
            self.item_runs[i].len += 1;
            let items = self.item_runs[i].len + p;
            let need = if seg.body_len == 0 {
                self.cfg.empty_items
            } else {
                self.cfg.list_items.max(3 * p + 1)
            };
            if (p == 1 || seg.body_len > 0) && items >= need {
                let r = self.item_runs[i];
                self.fire(
                    Detector::NearDuplicate,
                    p,
                    r.start,
                    r.keep,
                    seg.preview.clone(),
                );
                return;
            }
        }
        self.items[k % ITEM_RING] = cur;
        self.nitems = k + 1;
    }

    /// The list going on ends (a line without a list marker).
    pub(super) fn end_list(&mut self) {
        if self.list_used {
            self.list_gen = self.list_gen.wrapping_add(1);
            if self.list_gen == 0 {
                self.list_table.fill((0, 0, 0));
                self.list_gen = 1;
            }
            self.list_used = false;
            self.list_count = 0;
        }
        self.nitems = 0;
        self.item_runs = [Run::default(); ITEM_W];
        self.copy = Run::default();
    }

    /// A restarted list: item `k` of the list going on, whole (marker
    /// and body), equal to an earlier item of the same list, and the
    /// items since then copied in order: the last `d` items come again,
    /// whole, right after themselves (`… 19. 19 / 20. 20 / 2. 2 / 3. 3
    /// … 20. 20`: a count that starts again and copies itself; or the
    /// whole list again under its old numbers). It fires once the copy
    /// holds all `d` items and at least `list_copy_items`. Numbered items
    /// come back whole only when the numbering went back, so a list that
    /// keeps counting never matches; the same sub-steps under two parent
    /// items (`1. dev / 1. build … / 2. staging / 1. build …`) are not a
    /// copy of the items right before them. The loop starts at the
    /// copy's first item; the cut keeps the text before it. True when it
    /// fires.
    pub(super) fn list_copy(&mut self, seg: &Line, k: usize) -> bool {
        let need = self.cfg.list_copy_items;
        if need == 0 {
            return false;
        }
        let whole = mix(mix(seg.body, seg.marker_key), seg.body_len as u64);
        let d = self.copy_d;
        let goes_on = self.copy.len > 0
            && k >= d
            && d <= LIST_BACK
            && self.list_keys[(k - d) % LIST_BACK] == whole;
        let gen = self.list_gen;
        if goes_on {
            self.copy.len += 1;
        } else {
            self.copy = Run::default();
            // The latest earlier item with this whole key, if any.
            let mut slot = (whole as usize) % LIST_TABLE;
            for _ in 0..LIST_TABLE {
                let (key, at, g) = self.list_table[slot];
                if at == 0 || g != gen {
                    break;
                }
                if key == whole {
                    // Entries are items of this list before `k`.
                    let d = k.saturating_sub(at as usize - 1);
                    if (1..=LIST_BACK).contains(&d) {
                        self.copy_d = d;
                        let prev = self.items[(k - 1) % ITEM_RING];
                        self.copy = Run {
                            len: 1,
                            start: seg.start,
                            keep: prev.3,
                        };
                    }
                    break;
                }
                slot = (slot + 1) % LIST_TABLE;
            }
        }
        // Record item k: the table keeps each key's latest index, for the
        // first `LIST_BACK` different items of the list.
        self.list_keys[k % LIST_BACK] = whole;
        self.list_used = true;
        let mut slot = (whole as usize) % LIST_TABLE;
        for _ in 0..LIST_TABLE {
            let (key, at, g) = self.list_table[slot];
            if at == 0 || g != gen {
                if self.list_count < LIST_BACK {
                    self.list_table[slot] = (whole, k as u32 + 1, gen);
                    self.list_count += 1;
                }
                break;
            }
            if key == whole {
                self.list_table[slot].1 = k as u32 + 1;
                break;
            }
            slot = (slot + 1) % LIST_TABLE;
        }
        if self.copy.len >= need.max(self.copy_d) {
            let r = self.copy;
            self.fire(
                Detector::NearDuplicate,
                self.copy_d,
                r.start,
                r.keep,
                seg.preview.clone(),
            );
            return true;
        }
        false
    }

    /// Lines going round a few values: the last `line_window` lines in a
    /// row outside fences and tables (the one just read included; blank
    /// lines do not count) hold at most `line_window_values` different
    /// lines (tokens compared as read, a list marker set aside), each of
    /// them at least twice, one of them of `line_window_min_tokens`
    /// tokens or more with a word (two letters; rows of ASCII art in
    /// blank braille have none). The loop starts at the
    /// window's first line; the cut keeps the window up to the first line
    /// of its last new value (one of each).
    pub(super) fn few_lines(&mut self, seg: &Line) {
        let k = self.nlines;
        self.line_ring[k % ITEM_RING] = (seg.body, seg.body_len, seg.start, seg.end, seg.word);
        self.nlines = k + 1;
        let w = self.cfg.line_window.min(ITEM_RING);
        let n = self.nlines;
        if w == 0 || n < w {
            return;
        }
        // (key, tokens, copies in the window)
        let mut seen = [(0u64, 0usize, 0usize); ITEM_RING];
        let mut nseen = 0;
        let mut keep = 0;
        let mut long = false;
        for t in n - w..n {
            let (body, len, _, end, word) = self.line_ring[t % ITEM_RING];
            long |= word && len >= self.cfg.line_window_min_tokens;
            match seen[..nseen]
                .iter()
                .position(|&(b, l, _)| (b, l) == (body, len))
            {
                Some(i) => seen[i].2 += 1,
                None => {
                    if nseen == self.cfg.line_window_values {
                        return;
                    }
                    seen[nseen] = (body, len, 1);
                    nseen += 1;
                    keep = end;
                }
            }
        }
        // Every value comes back: a line seen once (an introduction
        // before rows of art) is not part of a loop.
        if seen[..nseen].iter().any(|&(_, _, c)| c < 2) {
            return;
        }
        if !long {
            return;
        }
        let start = self.line_ring[(n - w) % ITEM_RING].2;
        self.fire(
            Detector::NearDuplicate,
            nseen,
            start,
            keep,
            seg.preview.clone(),
        );
    }
}
