//! The shared incremental engine: batch guards and the streaming watcher
//! feed it the same characters, so they reach the same verdict.

use super::healthy::Lines;
use super::substring::{Candidate, Substring};
use super::words::Words;
use super::ClampConfig;

/// Which detectors an engine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Words,
    Substring,
    Both,
}

/// One pass over a text (or stream), character by character.
#[derive(Debug, Clone)]
pub(crate) struct Engine {
    lines: Lines,
    words: Option<Words>,
    substring: Option<Substring>,
    words_min: usize,
    substring_min: usize,
    pub(crate) pos: usize,
    chars: usize,
}

impl Engine {
    pub(crate) fn new(config: &ClampConfig, mode: Mode) -> Self {
        let words = (mode != Mode::Substring && config.words.enabled).then(|| Words::new(config));
        let substring =
            (mode != Mode::Words && config.substring.enabled).then(|| Substring::new(config));
        Engine {
            lines: Lines::default(),
            words,
            substring,
            words_min: config.words.min_chars,
            substring_min: config.substring.min_chars,
            pos: 0,
            chars: 0,
        }
    }

    /// Feeds one character that occupies `len` bytes of the input.
    #[inline(always)]
    pub(crate) fn push(&mut self, c: char, len: usize) {
        let pos = self.pos;
        // A token ends before the whitespace that follows it, so the word
        // detector sees whitespace with the line state before it.
        if c.is_whitespace() {
            if let Some(w) = &mut self.words {
                w.push(c, pos, len, &self.lines);
            }
            self.lines.push(c, pos);
        } else {
            self.lines.push(c, pos);
            if let Some(w) = &mut self.words {
                w.push(c, pos, len, &self.lines);
            }
        }
        if let Some(s) = &mut self.substring {
            s.push(c, pos, len, &self.lines);
        }
        self.pos = pos + len;
        self.chars += 1;
    }

    /// Ends the input: the last token becomes final.
    pub(crate) fn finish(&mut self) {
        if let Some(w) = &mut self.words {
            w.finish(self.pos, &self.lines);
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
        let s = self.substring.as_ref()?;
        if self.chars < self.substring_min {
            return None;
        }
        s.best.as_ref()
    }

    /// True when some detector has a (finished-token) verdict.
    #[inline]
    fn found(&self) -> bool {
        self.words.as_ref().is_some_and(|w| w.best.is_some())
            || self.substring.as_ref().is_some_and(|s| s.best.is_some())
    }

    /// The verdict of word-then-substring on the input seen so far: the
    /// word guard wins (the substring guard then runs on its output, which
    /// ends before any substring loop completed at this point).
    pub(crate) fn verdict(&self, partial: bool) -> Option<&Candidate> {
        self.words_verdict(partial)
            .or_else(|| self.substring_verdict())
    }

    /// True when scanning further could still move the word verdict.
    fn words_open(&self) -> bool {
        match (&self.words, self.words_verdict(false)) {
            (Some(w), Some(c)) => w.could_improve(c.start),
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// True when scanning further could still move the substring verdict.
    fn substring_open(&self) -> bool {
        match (&self.substring, self.substring_verdict()) {
            (Some(s), Some(c)) => s.could_improve(c.start),
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
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

/// Runs the detectors of `mode` in one pass. The word verdict is exact;
/// the substring verdict is exact when the word verdict is `None` (when a
/// word loop is found the pass stops as soon as that verdict is settled,
/// because the substring guard then runs on the word guard's output).
pub(crate) fn scan_pair(
    text: &str,
    config: &ClampConfig,
    mode: Mode,
) -> (Option<Candidate>, Option<Candidate>) {
    let mut engine = Engine::new(config, mode);
    let mut complete = true;
    let has_words = engine.words.is_some();
    for c in text.chars() {
        engine.push(c, c.len_utf8());
        // Once a loop is found, scan on only while an earlier start is
        // still possible (bounded by the largest period and threshold).
        if engine.found() {
            let stop = if has_words {
                engine.words_verdict(false).is_some() && !engine.words_open()
            } else {
                !engine.substring_open()
            };
            if stop {
                complete = false;
                break;
            }
        }
    }
    if complete {
        engine.finish();
    }
    (
        engine.words_verdict(false).cloned(),
        engine.substring_verdict().cloned(),
    )
}
