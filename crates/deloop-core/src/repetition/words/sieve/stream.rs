//! The sieve in front of the streaming word detector ([`SieveStream`]).

use super::*;

/// History kept for restarts beyond which the stream is read exactly for
/// good (a stretch with no quiet token, or no token boundary, this long).
pub(super) const STREAM_CAP: usize = 256 * 1024;

/// Streams shorter than this are read by the exact detector alone (the
/// sieve's tables cost more to set up than it saves); the tests start
/// the sieve early, so both phases and the switch are exercised.
pub(super) const STREAM_MIN: usize = if cfg!(test) { 100 } else { 4096 };

/// The sieve in front of the streaming word detector.
///
/// The stream's text is kept from the last restart point on. The sieve
/// reads complete tokens only (up to the last white space or CJK
/// character seen). While no exact detector runs, it flags one match
/// earlier than in batch mode, so an exact detector is running before any
/// token in which a loop could complete, partially read or not; the
/// exact detector is started at the restart point and catches up on the
/// history. A stretch without a restart point or token boundary longer
/// than [`STREAM_CAP`] ends the sieve: the exact detector then reads the
/// rest of the stream.
#[derive(Debug, Clone)]
pub(crate) struct SieveStream {
    plan: Plan,
    /// The sieve, once the stream is long enough ([`STREAM_MIN`]): it
    /// starts at a token boundary, `t0` tokens into the stream, and the
    /// exact detector that reads the stream from its start runs on until
    /// the sieve has read `warm` tokens (its window is then full).
    sieve: Option<Sieve>,
    t0: usize,
    warm: usize,
    /// A fresh exact detector, cloned for each region.
    proto: Words,
    /// The stream from `base` to the engine's position.
    hist: String,
    base: usize,
    /// The sieve has read the tokens before this offset.
    sieved: usize,
    /// The last token boundary seen: every token before it is complete.
    cut: usize,
    /// Where an exact detector may start (offset, token index).
    anchor: (usize, usize),
    /// Tokens the anchor search has looked at.
    anchored: usize,
    /// While an exact detector runs: where it started (a bound for
    /// [`SieveStream::settled`]).
    region_from: usize,
    /// The last region's detector and its position.
    last: Option<(Words, usize)>,
}

impl SieveStream {
    /// `None` when the configuration cannot be sieved in a stream.
    pub(crate) fn new(config: &ClampConfig, first: &Words) -> Option<Self> {
        let mut plan = Sieve::plan(config)?;
        // A loop can complete inside the token being read: flag one
        // match earlier.
        if plan.fixed.streak_flag < 2 {
            return None;
        }
        plan.fixed.streak_flag -= 1;
        let warm = plan.win + plan.fixed.lookback + SHINGLE;
        Some(SieveStream {
            plan,
            sieve: None,
            t0: 0,
            warm,
            proto: first.clone(),
            hist: String::new(),
            base: 0,
            sieved: 0,
            cut: 0,
            anchor: (0, 0),
            anchored: 0,
            region_from: 0,
            last: None,
        })
    }

    /// Takes the next text `s` (at stream offset `base`), after `words`
    /// (the exact detector, if one runs) has read it. Reads the complete
    /// tokens with the sieve, starting and stopping exact detectors, and
    /// returns the end of the first prefix with a verdict when a started
    /// detector finds one while catching up. `past_min`: the stream has
    /// enough characters for the word guard.
    pub(crate) fn advance(
        &mut self,
        s: &str,
        base: usize,
        words: &mut Option<Words>,
        lines: &mut Lines,
        past_min: bool,
    ) -> Option<usize> {
        let end = base + s.len();
        let split_cjk = self.plan.fixed.split_cjk;
        let Some((i, c)) = s
            .char_indices()
            .rev()
            .find(|&(_, c)| c.is_whitespace() || (split_cjk && is_cjk(c)))
        else {
            return self.read(end, words, lines, past_min, false);
        };
        self.cut = base + i + c.len_utf8();
        if self.sieve.is_none() {
            // Start the sieve at this boundary once the stream is long
            // enough: the exact detector has read every token before it.
            let w = words.as_ref().filter(|_| end >= STREAM_MIN)?;
            self.sieve = Some(Sieve::from_plan(self.plan.clone()));
            self.t0 = w.tokens_read();
            // From here on the line tracker is read lazily from the
            // history, which starts at the boundary.
            lines.advance(s.as_bytes(), base, self.cut);
            self.hist = s[self.cut - base..].to_string();
            self.base = self.cut;
            self.sieved = self.cut;
            self.anchor = (self.cut, self.t0);
            self.anchored = self.warm;
            return None;
        }
        self.read(end, words, lines, past_min, false)
    }

    /// The sieve's loop over `sieved..cut`; `end` is the engine's
    /// position. With `at_end`, a detector that starts reads to the end
    /// without stopping at a verdict (the stream is finishing).
    pub(super) fn read(
        &mut self,
        end: usize,
        words: &mut Option<Words>,
        lines: &mut Lines,
        past_min: bool,
        at_end: bool,
    ) -> Option<usize> {
        self.sieve.as_ref()?;
        while self.sieved < self.cut {
            let Some(sieve) = self.sieve.as_mut() else {
                break;
            };
            let text = &self.hist[self.sieved - self.base..self.cut - self.base];
            sieve.tables.base = self.sieved;
            let mut i = 0;
            if words.is_some() {
                let hit = sieve.run::<QUIET>(text, &mut i);
                self.sieved = (self.sieved + i).min(self.cut);
                if hit.is_none() {
                    break;
                }
                if past_min && sieve.hot.j > self.warm {
                    // In step with the whole-stream detector again.
                    self.last = words.take().map(|w| (w, end));
                    self.anchored = sieve.hot.j - 1;
                    if let Some((at, t)) = sieve.restart() {
                        self.anchor = (at, self.t0 + t);
                    }
                }
                continue;
            }
            let hit = sieve.run::<FLAG>(text, &mut i);
            self.sieved = (self.sieved + i).min(self.cut);
            if hit.is_none() {
                break;
            }
            if let Some(at) = self.start_exact(end, words, lines, at_end) {
                return Some(at);
            }
        }
        if words.is_none() {
            self.find_anchor();
            lines.advance(self.hist.as_bytes(), self.base, self.sieved);
        }
        self.trim(lines);
        None
    }

    /// Starts an exact detector at the last restart point (or goes on with
    /// the last region's) and catches it up to `end`.
    pub(super) fn start_exact(
        &mut self,
        end: usize,
        words: &mut Option<Words>,
        lines: &mut Lines,
        at_end: bool,
    ) -> Option<usize> {
        self.find_anchor();
        let (from, first) = self.anchor;
        let (mut w, from) = match self.last.take() {
            Some((w, at)) if from < at => (w, at),
            _ => (self.proto.clone().at_token(first), from),
        };
        self.region_from = self.anchor.0;
        let mut lx = LineCtx {
            lines,
            src: self.src(),
        };
        let stop = if at_end { Stop::Never } else { Stop::Verdict };
        let fired = w
            .feed(
                &self.hist[from - self.base..end - self.base],
                from,
                &mut lx,
                stop,
            )
            .map(|k| from + k);
        *words = Some(w);
        fired
    }

    /// Moves the anchor to the last quiet token read since the last look.
    pub(super) fn find_anchor(&mut self) {
        let Some(sieve) = &self.sieve else {
            return;
        };
        let j = sieve.hot.j;
        if j > self.anchored {
            if let Some((at, t)) = sieve.restart_since(self.anchored) {
                self.anchor = (at, self.t0 + t);
            }
            self.anchored = j;
        }
    }

    /// Drops history no restart can need.
    pub(super) fn trim(&mut self, lines: &Lines) {
        let mut need = self.anchor.0;
        if let Some((_, at)) = &self.last {
            need = need.max(*at);
        }
        let need = need.min(lines.done()).min(self.sieved);
        if need > self.base + 4096 && need - self.base > self.hist.len() / 2 {
            let mut k = need - self.base;
            while !self.hist.is_char_boundary(k) {
                k -= 1;
            }
            self.hist.drain(..k);
            self.base += k;
        }
    }

    /// True when the history outgrew [`STREAM_CAP`]: the caller then
    /// reads exactly for good ([`SieveStream::into_exact`]).
    pub(crate) fn over_cap(&self) -> bool {
        self.hist.len() > STREAM_CAP
    }

    /// Ends the sieve: an exact detector caught up to `end` (the engine's
    /// position), with the line tracker caught up too.
    pub(crate) fn into_exact(mut self, end: usize, words: &mut Option<Words>, lines: &mut Lines) {
        if words.is_none() {
            // Nothing can fire before the next flag: catching up finds no
            // verdict.
            self.start_exact(end, words, lines, true);
        }
        lines.advance(self.hist.as_bytes(), self.base, end);
    }

    /// True once the sieve reads the stream (before, the exact detector
    /// reads it alone and the engine keeps the line tracker).
    pub(crate) fn started(&self) -> bool {
        self.sieve.is_some()
    }

    /// The stream ends at `end`: the last token is complete, so the sieve
    /// reads it (an exact detector may start on it). The caller then ends
    /// the exact detector, if one runs, reading lines from [`Self::src`].
    /// A detector parked on the last token (a quiet one) is handed back:
    /// it read the whole stream in step with a whole-stream detector, and
    /// the tail rule ([`Words::end_text`]) looks at the run before a last
    /// token cut off mid-word.
    pub(crate) fn read_to_end(&mut self, end: usize, words: &mut Option<Words>, lines: &mut Lines) {
        self.cut = end;
        self.read(end, words, lines, true, true);
        if words.is_none() && self.last.as_ref().is_some_and(|(_, at)| *at == end) {
            *words = self.last.take().map(|(w, _)| w);
        }
    }

    /// Text the exact detector reads through the line tracker while it
    /// runs (the history, from the tracker's position on).
    pub(crate) fn src(&self) -> Src<'_> {
        Src {
            bytes: self.hist.as_bytes(),
            base: self.base,
        }
    }

    /// Appends the next text to the history (kept once the sieve runs).
    pub(crate) fn push(&mut self, s: &str) {
        if self.sieve.is_some() {
            self.hist.push_str(s);
        }
    }

    /// A byte offset no future word cut can fall before: a loop found
    /// later starts after the last quiet token, at most
    /// `long_max_period` tokens before the next one (see the module docs).
    pub(crate) fn settled(&self, words: Option<&Words>) -> usize {
        match words {
            Some(w) if self.sieve.is_none() => w.settled(),
            Some(w) => self.region_from.max(w.settled()),
            None => self.anchor.0,
        }
    }
}
