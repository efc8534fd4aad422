//! The shared engine: batch guards and the streaming watcher drive the same
//! detectors, so they reach the same verdict.
//!
//! Text that is valid UTF-8 goes through the fast paths: the word detector
//! reads tokens from bytes ([`Words::feed`]) and the substring detector runs
//! behind its byte pre-filter ([`SubScan`]). Single characters (the
//! replacement characters of invalid UTF-8 in a stream) go through
//! [`Engine::push_char`], which also serves as the reference the tests
//! compare the fast paths with.

mod batch;
#[cfg(test)]
mod tests;

pub(crate) use batch::{clamp, report, tail, Guards};

use crate::repetition::candidate::Candidate;
use crate::repetition::near::sieve::NearStream;
use crate::repetition::substring::prefilter::SubScan;
use crate::repetition::text::healthy::{LineCtx, Lines, Src};
use crate::repetition::words::sieve::SieveStream;
use crate::repetition::words::{Stop, Words};
use crate::repetition::ClampConfig;

/// Which detectors an engine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Words,
    Substring,
    Both,
}

/// Byte offset in `s` just after its `n`-th character (`Some(0)` for
/// `n == 0`), or `None` when `s` has fewer than `n` characters.
fn after_chars(s: &str, n: usize) -> Option<usize> {
    if n == 0 {
        return Some(0);
    }
    s.char_indices().nth(n - 1).map(|(i, c)| i + c.len_utf8())
}

/// At least `n` characters in `s`?
fn has_chars(s: &str, n: usize) -> bool {
    s.len() >= 4 * n || s.chars().count() >= n
}

/// A streaming engine: both detectors, fed as the stream arrives.
#[derive(Debug, Clone)]
pub(crate) struct Engine {
    wlines: Lines,
    slines: Lines,
    /// The exact word detector, while one runs (always, unless the sieve
    /// reads the stream).
    words: Option<Words>,
    /// The word sieve (streaming, filter on), until the stream is read
    /// exactly for good.
    stream: Option<Box<SieveStream>>,
    /// The word guard is on.
    words_on: bool,
    sub: Option<SubScan>,
    /// The near-duplicate detector (both guards only).
    near: Option<Box<NearStream>>,
    words_min: usize,
    substring_min: usize,
    /// Recent input, for the substring filter's regions: the stream from
    /// `hist_base` to `pos` (valid UTF-8 only).
    hist: String,
    hist_base: usize,
    /// End of the last non-whitespace character before `hist_base`.
    nonws_floor: usize,
    pub(crate) pos: usize,
    /// Characters read: exact up to the largest minimum length, not
    /// counted further (nothing else reads it).
    chars: usize,
    /// What fired in the last [`Engine::feed_str`] that returned `true`.
    fired: Option<Candidate>,
}

impl Engine {
    /// A streaming engine; `filter` turns the substring pre-filter on.
    pub(crate) fn new(config: &ClampConfig, mode: Mode, filter: bool) -> Self {
        let words_on = mode != Mode::Substring && config.words.enabled;
        let words = words_on.then(|| Words::new(config, true));
        let stream = match &words {
            Some(w) if filter => SieveStream::new(config, w).map(Box::new),
            _ => None,
        };
        let sub =
            (mode != Mode::Words && config.substring.enabled).then(|| SubScan::new(config, filter));
        let near = (mode == Mode::Both && config.near.enabled)
            .then(|| Box::new(NearStream::new(config, filter)));
        Engine {
            near,
            wlines: Lines::default(),
            slines: Lines::default(),
            words,
            stream,
            words_on,
            sub,
            words_min: config.words.min_chars,
            substring_min: config.substring.min_chars,
            hist: String::new(),
            hist_base: 0,
            nonws_floor: 0,
            pos: 0,
            chars: 0,
            fired: None,
        }
    }

    /// Feeds one character that occupies `len` bytes of the input (the
    /// replacement for an invalid sequence, or any character when the
    /// tests drive the engine one character at a time).
    pub(crate) fn push_char(&mut self, c: char, len: usize) {
        let pos = self.pos;
        if let Some(st) = self.stream.take() {
            // Not UTF-8: the word detector reads the rest exactly.
            st.into_exact(pos, &mut self.words, &mut self.wlines);
        }
        let ascii = [c as u8];
        let other = [0x80u8; 4];
        let bytes: &[u8] = if c.is_ascii() {
            &ascii
        } else {
            &other[..len.min(4)]
        };
        let src = Src { bytes, base: pos };
        if let Some(w) = &mut self.words {
            let mut lx = LineCtx {
                lines: &mut self.wlines,
                src,
            };
            w.push(c, pos, len, &mut lx);
        }
        if let Some(s) = &mut self.sub {
            if !s.is_exact() {
                let hsrc = Src {
                    bytes: self.hist.as_bytes(),
                    base: self.hist_base,
                };
                let mut lx = LineCtx {
                    lines: &mut self.slines,
                    src: hsrc,
                };
                s.go_exact(&self.hist, self.hist_base, self.nonws_floor, &mut lx);
                if self.slines.done() < pos && self.hist_base <= self.slines.done() {
                    self.slines
                        .advance(self.hist.as_bytes(), self.hist_base, pos);
                }
            }
            let mut lx = LineCtx {
                lines: &mut self.slines,
                src,
            };
            s.push_char(c, pos, len, &mut lx);
        }
        if let Some(n) = &mut self.near {
            n.push(c, pos, len);
        }
        self.pos = pos + len;
        self.chars += 1;
        self.catch_up_lines(src);
        self.hist.clear();
        self.hist_base = self.pos;
    }

    /// Brings the line trackers to `self.pos` over `src`. Behind the
    /// filter, the substring detector's tracker stays behind: a region may
    /// start up to the filter's margin back, and it is advanced when the
    /// history is trimmed.
    fn catch_up_lines(&mut self, src: Src<'_>) {
        let exact = self.sub.as_ref().is_none_or(|s| s.is_exact());
        let words = self.stream.as_ref().is_none_or(|st| !st.started());
        for (lines, go) in [(&mut self.wlines, words), (&mut self.slines, exact)] {
            if go && lines.done() < self.pos && src.base <= lines.done() {
                lines.advance(src.bytes, src.base, self.pos);
            }
        }
    }

    /// Feeds valid text. Returns `true` when a verdict exists after some
    /// character of `s` (the engine then stops right after it: `pos` is
    /// the end of the first prefix with a verdict).
    pub(crate) fn feed_str(&mut self, s: &str) -> bool {
        let base = self.pos;
        let src = Src {
            bytes: s.as_bytes(),
            base,
        };
        // The word detector first, up to the first prefix where it fires:
        // the exact detector (if one runs), then the sieve (if it reads).
        if let Some(st) = &mut self.stream {
            st.push(s);
        }
        let wsrc = match &self.stream {
            Some(st) if st.started() => st.src(),
            _ => src,
        };
        let mut wfire = match &mut self.words {
            Some(w) => {
                let mut lx = LineCtx {
                    lines: &mut self.wlines,
                    src: wsrc,
                };
                feed_words(w, s, base, self.chars, self.words_min, &mut lx)
            }
            None => None,
        };
        if let (None, Some(st)) = (wfire, &mut self.stream) {
            let past_min = self.chars >= self.words_min;
            wfire = st
                .advance(s, base, &mut self.words, &mut self.wlines, past_min)
                .map(|at| at.saturating_sub(base));
        }
        let limit = wfire.unwrap_or(s.len());
        // The substring detector up to there: it wins only if it fires
        // strictly earlier.
        let mut fire = wfire;
        if let Some(sub) = &mut self.sub {
            let sfire = if sub.is_exact() {
                let mut lx = LineCtx {
                    lines: &mut self.slines,
                    src,
                };
                let need = self.substring_min.saturating_sub(self.chars);
                read_sub(sub, s, base, base + limit, need, 0, 0, &mut lx).map(|at| at - base)
            } else {
                self.hist.push_str(s);
                let hsrc = Src {
                    bytes: self.hist.as_bytes(),
                    base: self.hist_base,
                };
                let mut lx = LineCtx {
                    lines: &mut self.slines,
                    src: hsrc,
                };
                let need = self.substring_min.saturating_sub(self.chars);
                let before = base - self.hist_base;
                read_sub(
                    sub,
                    &self.hist,
                    self.hist_base,
                    base + limit,
                    need,
                    before,
                    self.nonws_floor,
                    &mut lx,
                )
                .map(|at| at - base)
            };
            if let Some(sf) = sfire {
                if wfire.is_none_or(|wf| sf < wf) {
                    fire = Some(sf);
                }
            }
        }
        // The near-duplicate detector up to there: it wins only if it
        // fires strictly earlier.
        let mut near_fired = false;
        if let Some(n) = &mut self.near {
            let limit = fire.unwrap_or(s.len());
            if let Some(nf) = n.feed(&s[..limit], base) {
                if fire.is_none_or(|f| nf < f) {
                    fire = Some(nf);
                    near_fired = true;
                }
            }
        }
        let read = fire.unwrap_or(s.len());
        // Only the minimum lengths read the count: past the largest one it
        // need not grow (a pass over every chunk saved).
        if self.chars < self.words_min.max(self.substring_min) {
            self.chars += s[..read].chars().count();
        }
        self.pos = base + read;
        if let Some(f) = fire {
            // The detector that fired first; the other one may have read
            // further, so its state says nothing about this prefix.
            self.fired = if near_fired {
                self.near.as_ref().and_then(|n| n.best().cloned())
            } else if wfire == Some(f) {
                self.verdict(true).cloned()
            } else {
                self.sub.as_ref().and_then(|s| s.best().cloned())
            };
        }
        self.catch_up_lines(src);
        if fire.is_none() {
            self.trim_history();
            if self.stream.as_ref().is_some_and(|st| st.over_cap()) {
                if let Some(st) = self.stream.take() {
                    st.into_exact(self.pos, &mut self.words, &mut self.wlines);
                }
            }
        }
        fire.is_some()
    }

    /// Drops history the substring filter can no longer need.
    fn trim_history(&mut self) {
        let Some(sub) = &self.sub else {
            self.hist.clear();
            return;
        };
        if sub.is_exact() {
            self.hist.clear();
            self.hist_base = self.pos;
            return;
        }
        let keep = sub.history();
        if self.hist.len() <= 2 * keep + 4096 {
            return;
        }
        let mut cut = self.hist.len() - keep;
        while !self.hist.is_char_boundary(cut) {
            cut += 1;
        }
        let cut_at = self.hist_base + cut;
        if self.slines.done() < cut_at && self.hist_base <= self.slines.done() {
            self.slines
                .advance(self.hist.as_bytes(), self.hist_base, cut_at);
        }
        if let Some((i, c)) = self.hist[..cut]
            .char_indices()
            .rev()
            .find(|(_, c)| !c.is_whitespace())
        {
            self.nonws_floor = self.hist_base + i + c.len_utf8();
        }
        self.hist.drain(..cut);
        self.hist_base += cut;
    }

    /// Ends the input: the last token becomes final.
    pub(crate) fn finish(&mut self) {
        // Once the sieve reads the stream, the line tracker is read from
        // its history; before, it is up to date.
        let mut src = Src::EMPTY;
        if let Some(st) = self.stream.as_deref_mut().filter(|st| st.started()) {
            st.read_to_end(self.pos, &mut self.words, &mut self.wlines);
            src = st.src();
        }
        if let Some(w) = &mut self.words {
            let mut lx = LineCtx {
                lines: &mut self.wlines,
                src,
            };
            w.end_text(self.pos, &mut lx);
        }
    }

    /// The word loop the batch guard reports on the input seen so far.
    /// With `partial`, the token being read counts as the text's last
    /// token (the prefix ends here); without, only finished tokens count.
    pub(crate) fn words_verdict(&self, partial: bool) -> Option<&Candidate> {
        let w = self.words.as_ref()?;
        if self.chars < self.words_min {
            return None;
        }
        if !partial {
            return w.best.as_ref();
        }
        match (&w.best, &w.partial) {
            (Some(b), Some(p)) => Some(if p.better_than(b) { p } else { b }),
            (Some(b), None) => Some(b),
            (None, p) => p.as_ref(),
        }
    }

    /// The substring loop the batch guard reports on the input seen so far.
    pub(crate) fn substring_verdict(&self) -> Option<&Candidate> {
        let s = self.sub.as_ref()?;
        if self.chars < self.substring_min {
            return None;
        }
        s.best()
    }

    /// A byte offset no future cut can fall before: output up to here is
    /// final whatever the stream brings next.
    pub(crate) fn settled(&self) -> usize {
        let need = match (self.words_on, &self.sub) {
            (true, Some(_)) => self.words_min.max(self.substring_min),
            (true, None) => self.words_min,
            (false, Some(_)) => self.substring_min,
            (false, None) => 0,
        };
        if self.chars < need {
            // A loop already seen fires once the text is long enough.
            return 0;
        }
        let mut bound = self.pos;
        if let Some(st) = &self.stream {
            bound = bound.min(st.settled(self.words.as_ref()));
        } else if let Some(w) = &self.words {
            bound = bound.min(w.settled());
        }
        if let Some(s) = &self.sub {
            bound = bound.min(s.settled(&self.hist, self.hist_base, self.nonws_floor));
        }
        if let Some(n) = &self.near {
            bound = bound.min(n.settled(self.pos));
        }
        bound
    }

    /// What fired at the end of the prefix where [`Engine::feed_str`]
    /// stopped.
    pub(crate) fn fired(&self) -> Option<&Candidate> {
        self.fired.as_ref()
    }

    /// The verdict of word-then-substring on the input seen so far: the
    /// word guard wins (the substring guard then runs on its output, which
    /// ends before any substring loop completed at this point).
    pub(crate) fn verdict(&self, partial: bool) -> Option<&Candidate> {
        self.words_verdict(partial)
            .or_else(|| self.substring_verdict())
            .or_else(|| self.near.as_ref().and_then(|n| n.best()))
    }
}

/// Feeds `s` to the word detector until the first prefix on which it has
/// a verdict and the text has `min` characters (`chars` were read before
/// `s`). Returns the end of that prefix in `s`.
fn feed_words(
    w: &mut Words,
    s: &str,
    base: usize,
    chars: usize,
    min: usize,
    lx: &mut LineCtx<'_>,
) -> Option<usize> {
    let need = min.saturating_sub(chars);
    let Some(k) = after_chars(s, need) else {
        w.feed(s, base, lx, Stop::Never);
        return None;
    };
    if k > 0 {
        w.feed(&s[..k], base, lx, Stop::Never);
        if w.best.is_some() || w.partial.is_some() {
            return Some(k);
        }
    }
    w.feed(&s[k..], base + k, lx, Stop::Verdict).map(|i| i + k)
}

/// Reads `buf` (the stream from `buf_base`, of which `before` bytes were
/// read already) with the substring detector up to offset `end`, until the
/// first prefix with a verdict and `need` more characters. `floor` is the
/// end of the last non-whitespace character before `buf_base`. Returns the
/// offset of the end of that prefix.
#[allow(clippy::too_many_arguments)]
fn read_sub(
    sub: &mut SubScan,
    buf: &str,
    buf_base: usize,
    end: usize,
    need: usize,
    before: usize,
    floor: usize,
    lx: &mut LineCtx<'_>,
) -> Option<usize> {
    let new = &buf[before..end - buf_base];
    let Some(k) = after_chars(new, need) else {
        sub.read(buf, buf_base, end, floor, lx, Stop::Never);
        return None;
    };
    let split = buf_base + before + k;
    if k > 0 {
        sub.read(buf, buf_base, split, floor, lx, Stop::Never);
        if sub.best().is_some() {
            return Some(split);
        }
    }
    sub.read(buf, buf_base, end, floor, lx, Stop::Verdict)
}
