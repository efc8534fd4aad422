//! The sieve in front of the exact detector: the batch scan ([`scan`])
//! and the stream ([`NearStream`]).

use super::*;

/// Runs the near-duplicate detector over `text` behind the sieve: the
/// first loop it completes, as [`Near`] reading every character finds it.
pub(crate) fn scan(text: &str, config: &ClampConfig) -> Option<Candidate> {
    let Some(plan) = Plan::of(config) else {
        if !config.near.enabled {
            return None;
        }
        let mut n = Near::new(config);
        n.feed(text, 0);
        return n.best;
    };
    let mut sieve = Sieve::new(plan);
    let mut i = 0;
    // The detector of the last region, in step with a whole-text scan up
    // to where the region ended, and where it started.
    let mut last: Option<(Box<Near>, usize, usize)> = None;
    loop {
        sieve.run::<FLAG>(text, 0, &mut i)?;
        let (at, fence) = sieve.restart();
        let (mut near, mut from, mut start) = match last.take() {
            Some((near, end, start)) if at < end => (near, end, start),
            Some((mut near, _, _)) => {
                near.restart(at, fence);
                (near, at, at)
            }
            None => {
                let mut near = Box::new(Near::new(config));
                near.restart(at, fence);
                (near, at, at)
            }
        };
        // The region runs to the next quiet point; the sieve looks for it
        // a window at a time, so a loop is reported without the sieve
        // reading the rest of the text first.
        loop {
            let lim = window_end(text, i);
            let quiet = sieve.run::<QUIET>(&text[..lim], 0, &mut i);
            // A few-lines window flagged since the detector last read
            // starts before the detector did: it reads again from there.
            let low = sieve.take_lines_low();
            if low < start {
                near.restart(low, sieve.fence_at(low));
                (from, start) = (low, low);
            }
            let upto = quiet.unwrap_or(lim).max(from);
            if near.feed(&text[from..upto], from).is_some() {
                return near.best;
            }
            from = upto;
            if quiet.is_some() {
                last = Some((near, upto, start));
                break;
            }
            if lim >= text.len() {
                return None;
            }
        }
    }
}

/// History kept for restarts beyond which the stream is read exactly
/// for good (a line this long, or a list or a loop going on this long).
pub(super) const STREAM_CAP: usize = 256 * 1024;

/// The near-duplicate detector of a stream, behind the sieve.
///
/// The stream is kept from the sieve's restart point on. The sieve reads
/// complete spans (up to the last ASCII white space); the unread rest is
/// a token in the making, which can complete nothing before white space
/// follows unless it holds a character outside ASCII or a backslash (a
/// CJK token, Unicode white space, `\n`), or is long enough for a long
/// unit: then, as on a flag, an exact detector starts at the restart
/// point (or the last region's goes on) and catches up on the kept
/// stream. It reads every chunk as it comes until the sieve finds a quiet
/// point. Invalid UTF-8, or more than [`STREAM_CAP`] bytes kept, hands the
/// rest of the stream to the exact detector.
#[derive(Debug, Clone)]
pub(crate) struct NearStream {
    config: ClampConfig,
    /// The sieve, until the stream is read exactly for good.
    pub(super) sieve: Option<Sieve>,
    /// The exact detector: running (reading the stream as far as the
    /// sieve has, up to the next quiet point), parked where its region
    /// ended, or reading the stream for good.
    near: Option<Box<Near>>,
    running: bool,
    /// Where the exact detector has read to, and where it started.
    parked: usize,
    started: usize,
    /// The stream from `base` to `pos`.
    hist: String,
    base: usize,
    /// The sieve has read the stream up to here.
    sieved: usize,
    /// Just after the last ASCII white space of the stream (the sieve
    /// reads up to here), and how far the unread rest was looked at for
    /// bytes that can complete a token.
    cut: usize,
    tail_seen: usize,
    /// The unread rest holds a byte outside ASCII or a backslash.
    tail_risky: bool,
    pos: usize,
}

impl NearStream {
    /// `filter` puts the sieve in front (the tests' reference reads every
    /// character exactly).
    pub(crate) fn new(config: &ClampConfig, filter: bool) -> Self {
        let sieve = if filter {
            Plan::of(config).map(Sieve::new)
        } else {
            None
        };
        let exact = sieve.is_none();
        NearStream {
            config: config.clone(),
            near: exact.then(|| Box::new(Near::new(config))),
            running: exact,
            sieve,
            parked: 0,
            started: 0,
            hist: String::new(),
            base: 0,
            sieved: 0,
            cut: 0,
            tail_seen: 0,
            tail_risky: false,
            pos: 0,
        }
    }

    /// The loop found, if any.
    pub(crate) fn best(&self) -> Option<&Candidate> {
        self.near.as_ref().and_then(|n| n.best.as_ref())
    }

    /// Feeds valid text whose first byte is at stream offset `base`;
    /// stops after the first character that gives a verdict and returns
    /// the offset in `s` just after it.
    pub(crate) fn feed(&mut self, s: &str, base: usize) -> Option<usize> {
        self.pos = base + s.len();
        if self.sieve.is_none() {
            return self.near.as_mut().and_then(|n| n.feed(s, base));
        }
        self.hist.push_str(s);
        if let Some(k) = s.bytes().rposition(|c| matches!(c, b'\t'..=b'\r' | b' ')) {
            self.cut = base + k + 1;
            self.tail_seen = self.cut;
            self.tail_risky = false;
        }
        let cut = self.cut - self.base;
        while self.sieved - self.base < cut {
            let Some(sieve) = self.sieve.as_mut() else {
                break;
            };
            let mut i = self.sieved - self.base;
            let text = &self.hist[..cut];
            if self.running {
                let quiet = sieve.run::<QUIET>(text, self.base, &mut i);
                self.sieved = self.base + i;
                let Some(q) = quiet else {
                    break;
                };
                // The region ends: its detector reads up to here and
                // waits.
                if let Some(k) = self.catch_up(q, base) {
                    return Some(k);
                }
                self.running = false;
            } else {
                let flag = sieve.run::<FLAG>(text, self.base, &mut i);
                self.sieved = self.base + i;
                if flag.is_none() {
                    break;
                }
                if let Some(k) = self.start(base) {
                    return Some(k);
                }
            }
        }
        if self.running {
            if let Some(k) = self.catch_up(self.pos, base) {
                return Some(k);
            }
        }
        // The unread rest (only its new bytes are looked at).
        let seen = self.tail_seen.max(self.cut);
        self.tail_risky |= self.hist.as_bytes()[seen - self.base..]
            .iter()
            .any(|&c| c >= 0x80 || c == b'\\');
        self.tail_seen = self.pos;
        if !self.running {
            let long = self.sieve.as_ref().map_or(0, |sv| sv.plan.long_span);
            if self.pos - self.cut >= long || self.tail_risky {
                if let Some(k) = self.start(base) {
                    return Some(k);
                }
                if let Some(k) = self.catch_up(self.pos, base) {
                    return Some(k);
                }
            }
        }
        self.trim();
        if self.hist.len() > STREAM_CAP {
            self.read_exactly();
        }
        None
    }

    /// Starts an exact detector at the sieve's restart point (or goes on
    /// with the parked one) and catches it up with what the sieve read;
    /// returns where it fires, as an offset in the chunk that starts at
    /// `base`.
    pub(super) fn start(&mut self, base: usize) -> Option<usize> {
        let (at, fence) = self.sieve.as_ref()?.restart();
        match self.near.as_mut() {
            Some(_) if at < self.parked => {}
            Some(near) => {
                near.restart(at, fence);
                self.parked = at;
                self.started = at;
            }
            None => {
                let mut near = Box::new(Near::new(&self.config));
                near.restart(at, fence);
                self.near = Some(near);
                self.parked = at;
                self.started = at;
            }
        }
        self.running = true;
        self.catch_up(self.sieved, base)
    }

    /// The exact detector reads the kept stream from where it stopped
    /// (`parked`) to `to`; returns where it fires, as an offset in the
    /// chunk that starts at `base`.
    pub(super) fn catch_up(&mut self, to: usize, base: usize) -> Option<usize> {
        let near = self.near.as_mut()?;
        if let Some(sieve) = self.sieve.as_mut() {
            // A few-lines window flagged since the detector last read
            // starts before the detector did: it reads again from there
            // (the kept stream reaches back to it, see `needed`). Past
            // what the sieve read (the unread rest, one token in the
            // making) no window is flagged: a line can end there only at
            // a `\n` escape, and then the detector starts where any
            // window may.
            let mut low = sieve.take_lines_low();
            let rest = self.sieved.max(self.parked)..to;
            if !rest.is_empty()
                && self.hist.as_bytes()[rest.start - self.base..rest.end - self.base]
                    .contains(&b'\\')
            {
                low = low.min(sieve.lines_restart());
            }
            if low < self.started {
                near.restart(low, sieve.fence_at(low));
                self.parked = low;
                self.started = low;
            }
        }
        let from = self.parked;
        if to <= from {
            return None;
        }
        self.parked = to;
        let fired = near.feed(&self.hist[from - self.base..to - self.base], from);
        fired.map(|k| (from + k).saturating_sub(base))
    }

    /// Where the sieve or an exact detector may need the stream from: a
    /// running detector parks at the stream's end or later, and goes on
    /// from there or restarts at or after it.
    pub(super) fn needed(&self) -> usize {
        let Some(sieve) = &self.sieve else {
            return self.pos;
        };
        // A few-lines window flagged later starts at or after this.
        let lines = sieve.lines_restart().min(sieve.lines_low);
        if self.running {
            return self.sieved.min(self.parked).min(lines);
        }
        let at = sieve.restart().0;
        let need = match &self.near {
            Some(_) if at < self.parked => self.parked,
            _ => at,
        };
        need.min(self.sieved).min(lines)
    }

    /// Drops the stream no restart can need.
    pub(super) fn trim(&mut self) {
        let sieved = self.sieved;
        let Some(sieve) = self.sieve.as_mut() else {
            return;
        };
        sieve.lines.advance(self.hist.as_bytes(), self.base, sieved);
        let need = self.needed();
        let k = need - self.base;
        if k > 4096 && k > self.hist.len() / 2 {
            self.hist.drain(..k);
            self.base = need;
        }
    }

    /// Reads the rest of the stream exactly: an exact detector caught up
    /// to the stream's end (nothing fires while it catches up: the sieve
    /// did not flag, and the unread tail cannot complete a token).
    pub(super) fn read_exactly(&mut self) {
        if !self.running {
            self.start(self.pos);
        }
        // No window is flagged from now on: the detector starts where the
        // earliest one that may still fire does, if that is earlier.
        if let Some(sieve) = self.sieve.as_mut() {
            sieve.lines_low = sieve.lines_low.min(sieve.lines_restart());
        }
        self.catch_up(self.pos, self.pos);
        self.sieve = None;
        self.running = true;
        self.hist = String::new();
    }

    /// Feeds one character of `len` bytes at `pos` (the replacement of an
    /// invalid sequence): the exact detector reads the rest.
    pub(crate) fn push(&mut self, c: char, pos: usize, len: usize) {
        self.pos = pos;
        if self.sieve.is_some() {
            self.read_exactly();
        }
        if let Some(n) = &mut self.near {
            n.push(c, pos, len);
        }
        self.pos = pos + len;
    }

    /// A byte offset no cut found from now on can fall before: the
    /// running detector's bound (it parks at the stream's end or later,
    /// and a later region goes on with it or starts after that); else
    /// the restart point of the next region, or the parked detector's
    /// bound if it may go on, and the lines of the code-block rule it
    /// carries.
    pub(crate) fn settled(&self, pos: usize) -> usize {
        let near = self.near.as_ref();
        let Some(sieve) = &self.sieve else {
            return near.map_or(pos, |n| n.settled(pos));
        };
        // A few-lines loop found later starts at or after this (a
        // detector that started later reads again from there).
        let lines = sieve.lines_restart().min(sieve.lines_low);
        if self.running {
            return near
                .map_or(pos, |n| n.settled(self.parked))
                .min(pos)
                .min(lines);
        }
        let at = sieve.restart().0;
        let bound = match near {
            None => usize::MAX,
            Some(n) if at < self.parked => n.settled(self.parked),
            Some(n) => n.code_bound(),
        };
        at.min(bound).min(pos).min(lines)
    }
}

/// Where the sieve's next look for a quiet point ends: just after an
/// ASCII white-space byte about 64 KiB past `i`, or the end of the text.
pub(super) fn window_end(text: &str, i: usize) -> usize {
    const WINDOW: usize = 64 * 1024;
    let b = text.as_bytes();
    let from = i.saturating_add(WINDOW);
    if from >= b.len() {
        return b.len();
    }
    span_end(b, from).saturating_add(1).min(b.len())
}
