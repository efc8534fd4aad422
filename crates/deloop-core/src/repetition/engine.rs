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
    #[inline]
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

    /// The verdict of word-then-substring on the input seen so far: the
    /// word guard wins (the substring guard then runs on its output, which
    /// ends before any substring loop completed at this point).
    pub(crate) fn verdict(&self, partial: bool) -> Option<&Candidate> {
        self.words_verdict(partial)
            .or_else(|| self.substring_verdict())
    }

    /// True when scanning further could still move the batch verdict.
    pub(crate) fn could_improve(&self) -> bool {
        let wv = self.words_verdict(false).map(|c| c.start);
        let sv = self.substring_verdict().map(|c| c.start);
        let w = match (&self.words, wv) {
            (Some(w), Some(start)) => w.could_improve(start),
            (Some(_), None) => true,
            (None, _) => false,
        };
        let s = match (&self.substring, sv) {
            (Some(s), Some(start)) => s.could_improve(start),
            (Some(_), None) => true,
            (None, _) => false,
        };
        w || s
    }
}

/// Runs a batch detector over `text`: the leftmost loop of the whole text.
pub(crate) fn scan(text: &str, config: &ClampConfig, mode: Mode) -> Option<Candidate> {
    let mut engine = Engine::new(config, mode);
    let mut found = false;
    let mut complete = true;
    for c in text.chars() {
        engine.push(c, c.len_utf8());
        if !found && engine.verdict(false).is_some() {
            found = true;
        }
        // Once a loop is found, scan on only while an earlier start is
        // still possible (bounded by the largest period and threshold).
        if found && !engine.could_improve() {
            complete = false;
            break;
        }
    }
    if complete {
        engine.finish();
    }
    match mode {
        Mode::Words => engine.words_verdict(false).cloned(),
        Mode::Substring => engine.substring_verdict().cloned(),
        Mode::Both => engine.verdict(false).cloned(),
    }
}
