//! The long-unit rule: a unit of `chain_min_unit` to `chain_max_unit`
//! characters repeated back to back inside one run of non-white-space.

use super::*;

/// Longest unit of the flood form, in characters (two copies, the head
/// of a third and the 17 characters the data test reads fit the ring).
pub(crate) const CHAIN_FLOOD_MAX: usize = 200;
/// Characters of the third copy the flood form needs (the word guard's
/// preview of a token).
pub(crate) const CHAIN_FLOOD_HEAD: usize = 24;

/// The flood form's units for `cfg` and the flood threshold `flood`
/// (`usize::MAX`: off): `lo..=hi`, empty when off.
pub(crate) fn flood_units(cfg: &crate::repetition::NearConfig, flood: usize) -> (usize, usize) {
    if flood == usize::MAX {
        return (1, 0);
    }
    let hi = cfg
        .chain_max_unit
        .min(crate::repetition::bounds::MAX_CHAIN_UNIT);
    (cfg.chain_min_unit.max(hi + 1), CHAIN_FLOOD_MAX)
}

impl Near {
    pub(super) fn chain_reset(&mut self) {
        self.chain_base += self.chain_len as u64;
        self.lazy = false;
        self.chain_len = 0;
        self.chain_roll = 0;
        self.chain_d = 0;
        self.chain_run = 0;
    }

    /// Whether a loop starting at character `s` of the run starts inside
    /// a data token: the substring guard's test, replayed on the 17
    /// characters before it (all it looks at).
    pub(super) fn chain_data_at(&self, s: usize) -> bool {
        let from = s.saturating_sub(17);
        let mut d = if from == 0 {
            crate::repetition::substring::DataScan::after_space()
        } else {
            crate::repetition::substring::DataScan::NONE
        };
        for t in from..s {
            d.push(char::from_u32(self.chain_chars[t % CHAIN_RING].0).unwrap_or('\u{FFFD}'));
        }
        d.data_here()
    }

    /// The longest unit of the long-unit rule proper.
    fn chain_hi(&self) -> usize {
        self.cfg
            .chain_max_unit
            .min(crate::repetition::bounds::MAX_CHAIN_UNIT)
    }

    /// Units longer than the long-unit rule's that the flood form reads:
    /// `lo..=hi` (empty when `healthy.token_flood_bytes` is off).
    pub(crate) fn chain_flood_units(&self) -> (usize, usize) {
        flood_units(&self.cfg, self.flood)
    }

    /// The flood form of the rule (a unit longer than `chain_max_unit`,
    /// the word guard's token flood without white space): two whole
    /// copies and [`CHAIN_FLOOD_HEAD`] characters of a third, covering
    /// `healthy.token_flood_bytes` characters, outside fences and tables,
    /// while the run and the 17 characters before it are in the ring (a
    /// larger threshold waits for the other rules).
    fn chain_flood(&self, d: usize) -> bool {
        self.chain_run >= d + CHAIN_FLOOD_HEAD
            && d + self.chain_run >= self.flood
            && d + self.chain_run + 17 < CHAIN_RING
            && !self.line.fence
            && !self.line.table
    }

    /// Long units inside one run of non-white-space.
    pub(super) fn chain_push(&mut self, c: char, pos: usize) {
        let k = self.chain_len;
        let cu = c as u32;
        self.chain_chars[k % CHAIN_RING] = (cu, pos);
        self.chain_len = k + 1;
        if k + 1 < CHAIN_START {
            return;
        }
        if k + 1 == CHAIN_START {
            let mut roll = 0u64;
            for t in k + 1 - CHAIN_SHINGLE..=k {
                roll = roll
                    .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    .wrapping_add(u64::from(self.chain_chars[t % CHAIN_RING].0));
            }
            self.chain_roll = roll;
        } else {
            let old = u64::from(self.chain_chars[(k - CHAIN_SHINGLE) % CHAIN_RING].0);
            self.chain_roll = self
                .chain_roll
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .wrapping_add(u64::from(cu))
                .wrapping_sub(old.wrapping_mul(self.chain_pow));
        }
        if self.chain_d > 0 {
            let d = self.chain_d;
            if self.chain_chars[(k - d) % CHAIN_RING].0 == cu {
                self.chain_run += 1;
                let fire = if d <= self.chain_hi() {
                    self.chain_run >= (self.cfg.chain_copies.max(2) - 1) * d
                } else {
                    self.chain_flood(d)
                };
                if fire {
                    let a = k + 1 - self.chain_run;
                    let s = a - d;
                    let unit: Vec<u32> = (k + 1 - d..=k)
                        .map(|t| self.chain_chars[t % CHAIN_RING].0)
                        .collect();
                    if !(crate::repetition::substring::data_unit(&unit) && self.chain_data_at(s)) {
                        let start = self.chain_chars[s % CHAIN_RING].1;
                        let keep = self.chain_chars[(a - 1) % CHAIN_RING].1
                            + char::from_u32(self.chain_chars[(a - 1) % CHAIN_RING].0)
                                .map_or(1, char::len_utf8);
                        let unit: String = (k + 1 - d..=k)
                            .filter_map(|t| char::from_u32(self.chain_chars[t % CHAIN_RING].0))
                            .collect();
                        self.fire(Detector::LongUnit, d, start, keep, unit);
                    }
                    // Data: stop following this period.
                    self.chain_d = 0;
                    self.chain_run = 0;
                }
                return;
            }
            self.chain_d = 0;
            self.chain_run = 0;
        }
        let h = crate::repetition::text::fold::mix(self.chain_roll);
        let tag = (h >> 32) as u32;
        let slot = (tag as usize) % CHAIN_TABLE;
        let here = self.chain_base + k as u64;
        let (old_tag, at) = self.chain_table[slot];
        self.chain_table[slot] = (tag, here);
        // An entry of an earlier run (below `chain_base`) is empty.
        if old_tag != tag || at < self.chain_base || at >= here {
            return;
        }
        let d = (here - at) as usize;
        let (lo, hi) = self.chain_flood_units();
        if d < self.cfg.chain_min_unit
            || (d > self.chain_hi() && !(lo..=hi).contains(&d))
            || k < d + CHAIN_SHINGLE - 1
        {
            return;
        }
        // Verify the shingle and count the matches behind it.
        let mut run = 0;
        while run < k - d + 1 && run < 3 * d && run < CHAIN_RING - 1 - d && {
            let t = k - run;
            self.chain_chars[t % CHAIN_RING].0 == self.chain_chars[(t - d) % CHAIN_RING].0
        } {
            run += 1;
        }
        if run >= CHAIN_SHINGLE {
            self.chain_d = d;
            self.chain_run = run;
        }
    }
}
