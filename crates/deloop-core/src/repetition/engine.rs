//! The shared engine: batch guards and the streaming watcher drive the same
//! detectors, so they reach the same verdict.
//!
//! Text that is valid UTF-8 goes through the fast paths: the word detector
//! reads tokens from bytes ([`Words::feed`]) and the substring detector runs
//! behind its byte pre-filter ([`SubScan`]). Single characters (the
//! replacement characters of invalid UTF-8 in a stream) go through
//! [`Engine::push_char`], which also serves as the reference the tests
//! compare the fast paths with.

use crate::repetition::near::sieve::NearStream;
use crate::repetition::substring::prefilter::SubScan;
use crate::repetition::substring::Candidate;
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

/// Runs the near-duplicate detector over `text`: the first loop it
/// completes (behind its pre-filter, [`crate::repetition::near::sieve`]).
pub(crate) fn scan_near(text: &str, config: &ClampConfig) -> Option<Candidate> {
    crate::repetition::near::sieve::scan(text, config)
}

/// Runs one batch detector over `text`: the leftmost loop of the whole
/// text (the seed's semantics).
pub(crate) fn scan(text: &str, config: &ClampConfig, mode: Mode) -> Option<Candidate> {
    let (w, s) = scan_pair(text, config, mode);
    match mode {
        Mode::Words => w,
        Mode::Substring => s,
        Mode::Both => w.or(s),
    }
}

/// Runs the detectors of `mode`. The word verdict is exact; the substring
/// verdict is computed only when there is no word verdict (the substring
/// guard then runs on the word guard's output instead).
pub(crate) fn scan_pair(
    text: &str,
    config: &ClampConfig,
    mode: Mode,
) -> (Option<Candidate>, Option<Candidate>) {
    let src = Src {
        bytes: text.as_bytes(),
        base: 0,
    };
    let mut words = None;
    if mode != Mode::Substring && config.words.enabled && has_chars(text, config.words.min_chars) {
        let mut lines = Lines::default();
        let mut lx = LineCtx {
            lines: &mut lines,
            src,
        };
        words = crate::repetition::words::sieve::scan_words(text, config, &mut lx);
    }
    if mode == Mode::Words || words.is_some() {
        return (words, None);
    }
    let mut sub = None;
    if config.substring.enabled && has_chars(text, config.substring.min_chars) {
        let mut s = SubScan::new(config, true);
        let mut lines = Lines::default();
        let mut lx = LineCtx {
            lines: &mut lines,
            src,
        };
        s.read(text, 0, text.len(), 0, &mut lx, Stop::Settled);
        sub = s.best().cloned();
    }
    (None, sub)
}

#[cfg(test)]
mod tests {
    //! The fast paths (byte loop, pre-filter, lazy line tracking) against
    //! the engine fed one character at a time with the filter off.

    use super::*;
    use crate::repetition::{ClampConfig, StreamWatcher};
    use proptest::prelude::*;

    fn key(c: &Candidate) -> (usize, usize, usize, u64, String) {
        (c.start, c.keep, c.period, c.keep_tokens, c.unit.clone())
    }

    /// The batch verdicts, one character at a time, filter off.
    fn reference_batch(text: &str, config: &ClampConfig) -> (Option<Candidate>, Option<Candidate>) {
        let mut e = Engine::new(config, Mode::Both, false);
        for c in text.chars() {
            e.push_char(c, c.len_utf8());
        }
        e.finish();
        let w = e.words_verdict(false).cloned();
        let s = if w.is_none() {
            e.substring_verdict().cloned()
        } else {
            None
        };
        (w, s)
    }

    /// The first prefix with a verdict, one character at a time.
    fn reference_stream(text: &str, config: &ClampConfig) -> Option<(usize, Candidate)> {
        let mut e = Engine::new(config, Mode::Both, false);
        for c in text.chars() {
            e.push_char(c, c.len_utf8());
            if let Some(v) = e.verdict(true) {
                return Some((e.pos, v.clone()));
            }
        }
        e.finish();
        e.verdict(true).map(|v| (e.pos, v.clone()))
    }

    /// Long texts: varied filler (so the filter stays quiet) between
    /// loops, near-loops and structure, often far apart.
    fn long_text() -> impl Strategy<Value = String> {
        let filler = (1..160usize, any::<u64>()).prop_map(|(n, seed)| {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut out = String::new();
            for _ in 0..n {
                let x = rng.u64(..);
                let w = [
                    "alpha", "Beta", "gamma,", "délta", "eps", "zeta.", "éta", "θeta", "高", "io",
                ][(x % 10) as usize];
                out.push_str(&format!("{w}{} ", x % 997));
            }
            out
        });
        let unit = "[ab é高\\-|=]{1,6}";
        let piece = prop_oneof![
            4 => filler,
            2 => (unit, 2..16usize).prop_map(|(u, n)| u.repeat(n)),
            1 => (prop::sample::select(vec!["de la ", "the cat ", "Ab ab, ", "| x ", "高 ", "-- "]), 2..30usize)
                .prop_map(|(u, n)| u.repeat(n)),
            1 => prop::sample::select(vec!["\n```\n", "\n| a | a | a |\n", "\n", "          ", "\n\t~~~ ", "----------------------"])
                .prop_map(|s| s.to_string()),
            1 => (1..40usize).prop_map(|n| "word ".repeat(n)),
            // Long periods: a sentence of 14..45 distinct words, 1..5 times.
            1 => (14..45usize, any::<u16>(), 1..5usize, 0..3usize).prop_map(|(n, seed, times, tail)| {
                // Some units end in connectors, or are nothing else, so a
                // cut can fall back to the first copy's start.
                let connectors = crate::repetition::DEFAULT_CONNECTORS;
                let sentence: String = (0..n)
                    .map(|i| match tail {
                        1 if i + 4 >= n => format!("{} ", connectors[i % connectors.len()]),
                        2 => format!("{} ", connectors[i % connectors.len()]),
                        _ => format!("w{}x{i} ", seed % 7),
                    })
                    .collect();
                sentence.repeat(times)
            }),
        ];
        // Shapes of the near-duplicate guard and the floods: counted
        // items, empty markers, long units, counters, code blocks,
        // sentences with a word changed, emoji and escaped newlines.
        let near = (0..8usize, 1..24usize, 0..90usize).prop_map(|(kind, n, k0)| {
            let mut out = String::new();
            for k in k0..k0 + n {
                match kind {
                    0 => out.push_str(&format!("{k}. Anise\n")),
                    1 => out.push_str(&format!("{k}.\n")),
                    2 => out.push_str("resak-kasra-tomo-"),
                    3 => out.push_str(&format!("{k}:00 PM: ")),
                    4 => out.push_str(if k % 2 == 0 {
                        "```\nfoo(bar)\n"
                    } else {
                        "baz qux\n"
                    }),
                    5 => out.push_str(if k % 3 == 0 {
                        "The unit uses a small fan to keep the air cool and dry. "
                    } else {
                        "The unit also uses a small fan to keep the air cool and dry. "
                    }),
                    6 => out.push_str("😂😂😂😂😂"),
                    _ => out.push_str("Network down.\\n"),
                }
            }
            out
        });
        let piece = prop_oneof![6 => piece, 1 => near];
        prop::collection::vec(piece, 0..24).prop_map(|v| v.concat())
    }

    /// Long tails: varied filler (enough tokens for the stream's sieve
    /// to warm up and park its detector), then 2–3 copies of a unit of
    /// 17–60 words, the last one cut at a random byte (inside a word or
    /// not), sometimes followed by other text.
    fn tail_text() -> impl Strategy<Value = String> {
        (
            (0..1200usize, any::<u64>()),
            (17..60usize, any::<u64>(), 2..4usize, 0..1000usize),
            prop::option::of("[xyz ]{1,12}"),
        )
            .prop_map(|((n, seed), (k, useed, copies, cut), after)| {
                let mut rng = fastrand::Rng::with_seed(seed);
                let mut out = String::new();
                for _ in 0..n {
                    let x = rng.u64(..);
                    out.push_str(&format!("f{} ", x % 100_000));
                }
                let unit: String = (0..k)
                    .map(|i| {
                        let w = ["the", "Cat", "sat,", "on", "mat."][(useed as usize + i) % 5];
                        format!("{w}{} ", (useed >> (i % 32)) % 7)
                    })
                    .collect();
                out.push_str(&unit.repeat(copies - 1));
                let mut cut = cut * unit.len() / 1000;
                while !unit.is_char_boundary(cut) {
                    cut -= 1;
                }
                out.push_str(&unit[..cut]);
                out.push_str(&after.unwrap_or_default());
                out
            })
    }

    fn configs() -> Vec<ClampConfig> {
        let mut long = ClampConfig::default();
        long.words.long_max_period = 40;
        // Each guard alone, so neither one's bounds hide the other's.
        let mut words_only = long.clone();
        words_only.substring.enabled = false;
        let mut substring_only = ClampConfig::default();
        substring_only.words.enabled = false;
        substring_only.near.enabled = false;
        let mut near_only = ClampConfig::default();
        near_only.words.enabled = false;
        near_only.substring.enabled = false;
        vec![
            ClampConfig::default(),
            ClampConfig::seed_compat(),
            long,
            words_only,
            substring_only,
            near_only,
        ]
    }

    proptest! {
        // PROPTEST_CASES raises the count for a longer hunt.
        #![proptest_config(ProptestConfig::with_cases(
            crate::repetition::test_cases::cases(64)
        ))]

        #[test]
        fn batch_fast_paths_equal_the_reference(text in long_text()) {
            for config in configs() {
                let (rw, rs) = reference_batch(&text, &config);
                let (w, s) = scan_pair(&text, &config, Mode::Both);
                prop_assert_eq!(w.as_ref().map(key), rw.as_ref().map(key));
                prop_assert_eq!(s.as_ref().map(key), rs.as_ref().map(key));
                let s_only = scan(&text, &config, Mode::Substring);
                let mut e = Engine::new(&config, Mode::Substring, false);
                for c in text.chars() {
                    e.push_char(c, c.len_utf8());
                }
                prop_assert_eq!(s_only.as_ref().map(key), e.substring_verdict().map(key));
            }
        }

        #[test]
        fn stream_fast_paths_equal_the_reference(text in long_text(), size in 1..300usize) {
            for config in configs() {
                let expected = reference_stream(&text, &config);
                let mut w = StreamWatcher::new(config.clone());
                let mut got = None;
                for chunk in text.as_bytes().chunks(size) {
                    if let Some(cut) = w.feed(chunk) {
                        got = Some(cut);
                        break;
                    }
                }
                if got.is_none() {
                    got = w.finish();
                }
                match (expected, got) {
                    (None, None) => {}
                    (Some((at, c)), Some(cut)) => {
                        prop_assert_eq!(cut.detected_at, at);
                        prop_assert_eq!(
                            (cut.report.start, cut.keep_bytes, cut.report.period, cut.report.unit.clone()),
                            (c.start, c.keep, c.period, c.unit.clone())
                        );
                    }
                    (e, g) => prop_assert!(false, "reference {:?} vs stream {:?}", e, g),
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            crate::repetition::test_cases::cases(64)
        ))]

        /// What the watcher calls settled is never cut later, and never
        /// runs ahead of the input.
        #[test]
        fn settled_prefix_is_never_cut(text in long_text(), size in 1..300usize) {
            for config in configs() {
                let (seen, cut, _) = watch_settled(&text, size, &config);
                for &(s, position) in &seen {
                    prop_assert!(s <= position);
                    prop_assert!(text.is_char_boundary(s));
                }
                if let Some(c) = cut {
                    for (s, _) in seen {
                        prop_assert!(s <= c.keep_bytes, "settled {} > cut {}", s, c.keep_bytes);
                    }
                }
            }
        }
    }

    /// The settled-prefix rule, and batch against reference and stream,
    /// where the tail rule fires at `finish()` (see [`tail_text`]). A
    /// stream cut only at the end equals the whole text's batch verdict.
    fn check_tail(text: &str, size: usize, config: &ClampConfig) -> Result<(), TestCaseError> {
        let (rw, rs) = reference_batch(text, config);
        let (w, s) = scan_pair(text, config, Mode::Both);
        prop_assert_eq!(w.as_ref().map(key), rw.as_ref().map(key));
        prop_assert_eq!(s.as_ref().map(key), rs.as_ref().map(key));
        let expected = reference_stream(text, config);
        let (seen, cut, at_end) = watch_settled(text, size, config);
        match (&expected, &cut) {
            (None, None) => {}
            (Some((at, c)), Some(cut)) => {
                prop_assert_eq!(cut.detected_at, *at);
                prop_assert_eq!((cut.report.start, cut.keep_bytes), (c.start, c.keep));
            }
            (e, g) => prop_assert!(false, "reference {:?} vs stream {:?}", e, g),
        }
        if at_end {
            let batch = w.or(s);
            prop_assert_eq!(
                cut.as_ref().map(|c| (c.report.start, c.keep_bytes)),
                batch.as_ref().map(|b| (b.start, b.keep))
            );
        }
        if let Some(c) = cut {
            for (s, _) in seen {
                prop_assert!(s <= c.keep_bytes, "settled {} > cut {}", s, c.keep_bytes);
            }
        }
        Ok(())
    }

    /// Feeds `text` to a watcher in chunks of `size` bytes: `settled()`
    /// and `position()` after each chunk that did not cut, the cut (from
    /// `feed`, else from `finish`), and whether it came from `finish`.
    fn watch_settled(
        text: &str,
        size: usize,
        config: &ClampConfig,
    ) -> (
        Vec<(usize, usize)>,
        Option<crate::repetition::StreamCut>,
        bool,
    ) {
        let mut watcher = StreamWatcher::new(config.clone());
        let mut seen = Vec::new();
        for chunk in text.as_bytes().chunks(size) {
            if let Some(c) = watcher.feed(chunk) {
                return (seen, Some(c), false);
            }
            seen.push((watcher.settled(), watcher.position()));
        }
        (seen, watcher.finish(), true)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            crate::repetition::test_cases::cases(64)
        ))]

        #[test]
        fn long_tails_agree_and_keep_the_settled_prefix(
            text in tail_text(),
            size in 1..300usize,
            pct in prop::sample::select(vec![1usize, 50, 66, 100]),
        ) {
            for mut config in configs() {
                config.words.tail_last_copy_percent = pct;
                check_tail(&text, size, &config)?;
            }
        }
    }

    /// The tail rule fires where [`tail_text`]'s cases are meant to: a
    /// long filler (the stream's sieve parks its detector on the quiet
    /// last token) and a last word cut off mid-word.
    #[test]
    fn a_long_tail_after_a_long_filler_fires_in_batch_and_stream() {
        let filler: String = (0..1500).map(|i| format!("f{i} ")).collect();
        let mut config = ClampConfig::default();
        config.near.enabled = false;
        // The sieve's filter may call the cut-off word's shingle seen (a
        // collision), so several words and cuts.
        for name in ["word", "item", "línea"] {
            let unit: String = (0..30).map(|i| format!("{name}{i} ")).collect();
            let next = unit.find(&format!("{name}23")).expect("in the unit");
            for len in 1..name.len() + 2 {
                let mut cut = next + len;
                while !unit.is_char_boundary(cut) {
                    cut += 1;
                }
                let text = format!("{filler}{unit}{unit}{}", &unit[..cut]);
                let (w, _) = scan_pair(&text, &config, Mode::Both);
                let w = w.expect("the tail fires");
                assert_eq!((w.period, w.keep), (30, filler.len() + unit.len() - 1));
                for size in [1, 5, 64, 4096] {
                    let mut watcher = StreamWatcher::new(config.clone());
                    for chunk in text.as_bytes().chunks(size) {
                        assert!(watcher.feed(chunk).is_none());
                    }
                    let cut = watcher.finish().expect("finish cuts");
                    assert_eq!((cut.report.start, cut.keep_bytes), (w.start, w.keep));
                }
                if let Err(e) = check_tail(&text, 7, &config) {
                    panic!("{e}");
                }
            }
        }
    }

    /// Texts with invalid UTF-8 sprinkled in (as U+FFFD of their length).
    fn long_bytes() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            6 => long_text().prop_map(String::into_bytes),
            1 => prop::collection::vec(0x80u8..=0xff, 1..4),
            1 => prop::sample::select(vec![
                b"\xe9\xab".to_vec(),
                b"\xf0\x9f\x98".to_vec(),
                b"ab\xffab\xffab\xffab\xffab\xffab\xffab\xffab\xffab\xffab\xff".to_vec(),
            ]),
        ];
        prop::collection::vec(piece, 0..6).prop_map(|v| v.concat())
    }

    fn watch(
        config: &ClampConfig,
        bytes: &[u8],
        size: usize,
    ) -> Option<crate::repetition::StreamCut> {
        let mut w = StreamWatcher::new(config.clone());
        for chunk in bytes.chunks(size.max(1)) {
            if let Some(c) = w.feed(chunk) {
                return Some(c);
            }
        }
        w.finish()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            crate::repetition::test_cases::cases(64)
        ))]

        /// With invalid bytes anywhere (the watcher then leaves the filter
        /// for good), any chunking gives the verdict of one whole chunk,
        /// and the one-character-at-a-time reference agrees.
        #[test]
        fn invalid_utf8_streams_agree_whatever_the_chunking(bytes in long_bytes(), size in 1..200usize) {
            for config in configs() {
                let whole = watch(&config, &bytes, bytes.len());
                let chunked = watch(&config, &bytes, size);
                prop_assert_eq!(&whole, &chunked);
                // Reference: decode as the watcher does, one char at a time.
                let mut e = Engine::new(&config, Mode::Both, false);
                let mut rest: &[u8] = &bytes;
                let mut expected = None;
                'outer: while !rest.is_empty() {
                    let (valid, bad) = match std::str::from_utf8(rest) {
                        Ok(s) => (s, 0),
                        Err(err) => (
                            std::str::from_utf8(&rest[..err.valid_up_to()]).unwrap_or_default(),
                            err.error_len().unwrap_or(rest.len() - err.valid_up_to()),
                        ),
                    };
                    for c in valid.chars() {
                        e.push_char(c, c.len_utf8());
                        if let Some(v) = e.verdict(true) {
                            expected = Some((e.pos, v.clone()));
                            break 'outer;
                        }
                    }
                    if bad > 0 {
                        e.push_char('\u{FFFD}', bad);
                        if let Some(v) = e.verdict(true) {
                            expected = Some((e.pos, v.clone()));
                            break 'outer;
                        }
                    }
                    rest = &rest[valid.len() + bad..];
                }
                if expected.is_none() {
                    e.finish();
                    expected = e.verdict(true).map(|v| (e.pos, v.clone()));
                }
                match (expected, whole) {
                    (None, None) => {}
                    (Some((at, c)), Some(cut)) => {
                        prop_assert_eq!(cut.detected_at, at);
                        prop_assert_eq!((cut.report.start, cut.keep_bytes), (c.start, c.keep));
                    }
                    (e, g) => prop_assert!(false, "reference {:?} vs stream {:?}", e, g),
                }
            }
        }
    }

    /// Regression: an invalid byte (U+FFFD, three bytes of preview for one
    /// byte of input) at the end of a 22-byte token overran the preview.
    /// A stretch longer than the sieve's history cap with no token
    /// boundary hands the stream to the exact detector for good (memory
    /// stays bounded), and the verdict is still the reference's.
    #[test]
    fn a_huge_token_ends_the_stream_sieve() {
        let mut config = ClampConfig::default();
        config.substring.enabled = false;
        // `word0 word1 …` is a counter loop for the near-duplicate guard.
        config.near.enabled = false;
        let mut text: String = (0..400).map(|i| format!("word{i} ")).collect();
        text.push_str(&"x".repeat(300 * 1024));
        text.push(' ');
        text.push_str(&"then the same three words ".repeat(12));
        let mut e = Engine::new(&config, Mode::Both, true);
        assert!(e.stream.is_some());
        let mut fired = None;
        for chunk in text.as_bytes().chunks(4096) {
            let s = std::str::from_utf8(chunk).expect("ASCII");
            if e.feed_str(s) {
                fired = Some(e.pos);
                break;
            }
            if let Some(st) = &e.stream {
                assert!(!st.over_cap());
            }
        }
        assert!(e.stream.is_none(), "the sieve gave up");
        let expected = reference_stream(&text, &config).map(|(at, _)| at);
        assert!(expected.is_some());
        assert_eq!(fired, expected);
    }

    /// With a minimum length longer than the sieve's warm-up, the first
    /// exact detector runs until the stream is that long: a loop that
    /// starts earlier is reported where the reference reports it (at the
    /// minimum length), not where it starts.
    #[test]
    fn a_long_minimum_length_keeps_the_first_detector() {
        let mut config = ClampConfig::default();
        config.substring.enabled = false;
        config.words.min_chars = 20_000;
        let mut text: String = (0..1200).map(|i| format!("t{i} ")).collect();
        text.push_str(&"de la casa grande ".repeat(1500));
        let expected = reference_stream(&text, &config).map(|(at, _)| at);
        assert!(expected.is_some_and(|at| at >= 20_000));
        let mut w = StreamWatcher::new(config);
        let mut got = None;
        for chunk in text.as_bytes().chunks(64) {
            if let Some(cut) = w.feed(chunk) {
                got = Some(cut.detected_at);
                break;
            }
        }
        assert_eq!(got, expected);
    }

    #[test]
    fn invalid_byte_after_a_long_token_does_not_panic() {
        for n in 20..26 {
            let mut bytes = b"abcdefghijklmnopqrstuvwxyz"[..n].to_vec();
            bytes.extend_from_slice(b"\xff\xfe more words here");
            let mut w = StreamWatcher::new(ClampConfig::default());
            assert!(w.feed(&bytes).is_none());
            assert!(w.finish().is_none());
        }
    }

    /// A long unit made only of connectors is cut back to its first
    /// copy's start: before the shingles adopt its period, only the run
    /// going on at that distance says how far back the cut can fall.
    #[test]
    fn settled_accounts_for_long_runs_not_yet_adopted() {
        let mut config = ClampConfig::default();
        config.words.long_max_period = 40;
        // The substring guard's margin would hide the word guard's bound.
        config.substring.enabled = false;
        let connectors = crate::repetition::DEFAULT_CONNECTORS;
        let unit: String = (0..38).map(|i| format!("{} ", connectors[i])).collect();
        let intro: String = (0..60).map(|i| format!("w{i} ")).collect();
        let text = format!("{intro}{}", unit.repeat(4));
        let mut w = StreamWatcher::new(config);
        let mut seen = Vec::new();
        let mut cut = None;
        for b in text.as_bytes().chunks(1) {
            if let Some(c) = w.feed(b) {
                cut = Some(c);
                break;
            }
            seen.push(w.settled());
        }
        let cut = cut
            .or_else(|| w.finish())
            .expect("the connector loop is cut");
        assert_eq!(cut.report.period, 38);
        for s in seen {
            assert!(s <= cut.keep_bytes, "settled {s} > cut {}", cut.keep_bytes);
        }
    }

    /// Loops far apart, after long clean stretches: the filter's regions
    /// open and close several times.
    #[test]
    fn distant_regions() {
        let clean: String = (0..400).map(|i| format!("w{i} ")).collect();
        let text = format!(
            "{clean}| -- | -- | -- | -- |\n{clean}```\n0000000000000000000000000\n```\n{clean}xy{}{clean}",
            "ab".repeat(30)
        );
        for config in configs() {
            let (rw, rs) = reference_batch(&text, &config);
            let (w, s) = scan_pair(&text, &config, Mode::Both);
            assert_eq!(w.as_ref().map(key), rw.as_ref().map(key));
            assert_eq!(s.as_ref().map(key), rs.as_ref().map(key));
        }
    }
}
#[cfg(test)]
mod dbg_tests {
    use super::*;
    #[test]
    fn debug_ref() {
        let mut text = String::from("Beta339 zeta.989 θeta742 zeta.354 ");
        for _ in 0..3 {
            for k in 0..39 {
                text.push_str(&format!("w0x{k} "));
            }
        }
        let config = ClampConfig::default();
        let mut e = Engine::new(&config, Mode::Both, false);
        for c in text.chars() {
            e.push_char(c, c.len_utf8());
        }
        e.finish();
        let r = e.words_verdict(false).cloned();
        let (w, _) = scan_pair(&text, &config, Mode::Both);
        let mut e2 = Engine::new(&config, Mode::Both, true);
        e2.feed_str(&text);
        e2.finish();
        let r2 = e2.words_verdict(false).cloned();
        assert_eq!(r, w, "stream-feed: {:?}", r2);
    }
}
