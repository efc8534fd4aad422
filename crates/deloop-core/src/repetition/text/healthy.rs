//! Structure tracking for the false-positive protections: fenced code
//! blocks, table rows, and the characters used for layout.

/// Characters written without spaces between words: Han ideographs, kana,
/// CJK punctuation and fullwidth forms. Each is a token of its own.
#[inline]
pub(crate) fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{3000}'..='\u{30FF}' | '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}'
        | '\u{F900}'..='\u{FAFF}' | '\u{FF00}'..='\u{FFEF}' | '\u{20000}'..='\u{2FA1F}')
}

/// Letters of a cyclic unit that carry content: alphabetic characters,
/// except those of LaTeX control words (`\quad`, `\cdot`).
pub(crate) fn content_letters(unit: &[char]) -> usize {
    let n = unit.len();
    let mut count = 0;
    for i in 0..n {
        if !unit[i].is_alphabetic() {
            continue;
        }
        // Walk back (cyclically) over letters; a backslash before them
        // makes them a control word.
        let mut k = 1;
        let mut control = false;
        while k < n {
            let c = unit[(i + n - k) % n];
            if c == '\\' {
                control = true;
                break;
            }
            if !c.is_ascii_alphabetic() {
                break;
            }
            k += 1;
        }
        if !control {
            count += 1;
        }
    }
    count
}

/// Characters that draw layout rather than say something: ASCII
/// punctuation, general punctuation (dashes, bullets), arrows, math
/// operators, box drawing, block elements, geometric shapes, CJK and
/// fullwidth punctuation, the katakana long vowel mark. Letters, digits,
/// emoji and pictographs are not layout.
#[inline]
pub(crate) fn is_layout(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(c,
            '\u{2010}'..='\u{205E}' | '\u{2190}'..='\u{25FF}' | '\u{2E00}'..='\u{2E7F}'
            | '\u{3000}'..='\u{303F}' | '\u{30FB}'..='\u{30FC}' | '\u{FF01}'..='\u{FF0F}'
            | '\u{FF1A}'..='\u{FF20}' | '\u{FF3B}'..='\u{FF40}' | '\u{FF5B}'..='\u{FF65}')
}

/// Sentence punctuation ignored at the end of a token when
/// `ignore_trailing_punctuation` is on.
#[inline]
pub(crate) fn is_trailing_punct(c: char) -> bool {
    matches!(
        c,
        '.' | ',' | ';' | ':' | '!' | '?' | '…' | '。' | '，' | '、' | '；' | '：' | '！' | '？'
    )
}

/// Line-level structure seen so far: fenced code and table rows.
///
/// It reads raw bytes, lazily: the detectors ask for the state at a byte
/// offset and [`Lines::advance`] catches up to it, jumping from line to line
/// (only the first bytes of a line can change the state). Every byte that is
/// not ASCII counts as an ordinary character, so a multi-byte character (or
/// an invalid sequence read as U+FFFD) gives the same state as one character.
#[derive(Debug, Clone)]
pub(crate) struct Lines {
    /// Bytes consumed.
    done: usize,
    /// Byte offset where the current line starts.
    line_start: usize,
    /// Still in the line's leading spaces.
    leading: bool,
    /// The fence character being counted at the start of this line.
    fence_char: Option<u8>,
    fence_count: u32,
    /// The current line starts with `|`.
    table_row: bool,
    /// Open fence: its character and the byte offset of its line.
    open_fence: Option<(u8, usize)>,
}

impl Default for Lines {
    fn default() -> Self {
        Lines {
            done: 0,
            line_start: 0,
            leading: true,
            fence_char: None,
            fence_count: 0,
            table_row: false,
            open_fence: None,
        }
    }
}

impl Lines {
    /// The state just after a newline at `pos - 1` (or at the text's
    /// start, `pos == 0`), with the fenced block `open_fence` open.
    pub(crate) fn at_line_start(pos: usize, open_fence: Option<(u8, usize)>) -> Self {
        Lines {
            done: pos,
            line_start: pos,
            open_fence,
            ..Lines::default()
        }
    }

    /// The open fenced block: its character and the offset of the line
    /// that opened it.
    #[inline]
    pub(crate) fn open_fence(&self) -> Option<(u8, usize)> {
        self.open_fence
    }

    /// Bytes consumed so far.
    #[inline]
    pub(crate) fn done(&self) -> usize {
        self.done
    }

    /// Consumes byte `b` (at offset `self.done`).
    #[inline]
    fn byte(&mut self, b: u8) {
        let pos = self.done;
        self.done = pos + 1;
        if b == b'\n' {
            self.line_start = pos + 1;
            self.leading = true;
            self.fence_char = None;
            self.fence_count = 0;
            self.table_row = false;
            return;
        }
        if self.leading {
            if b == b' ' || b == b'\t' {
                return;
            }
            self.leading = false;
            match b {
                b'|' => self.table_row = true,
                b'`' | b'~' => {
                    self.fence_char = Some(b);
                    self.fence_count = 1;
                }
                _ => {}
            }
            return;
        }
        if let Some(f) = self.fence_char {
            if b == f && self.fence_count < 3 {
                self.fence_count += 1;
                if self.fence_count == 3 {
                    match self.open_fence {
                        Some((open, _)) if open == f => self.open_fence = None,
                        Some(_) => {}
                        None => self.open_fence = Some((f, self.line_start)),
                    }
                    self.fence_char = None;
                }
            } else {
                self.fence_char = None;
            }
        }
    }

    /// Consumes the bytes up to offset `upto`, reading them from `bytes`,
    /// whose first byte is at offset `base` (`base <= self.done()`).
    pub(crate) fn advance(&mut self, bytes: &[u8], base: usize, upto: usize) {
        let stop = upto.min(base + bytes.len());
        while self.done < stop {
            if !self.leading && self.fence_char.is_none() {
                // Nothing changes before the next newline.
                let from = self.done - base;
                match memchr::memchr(b'\n', &bytes[from..stop - base]) {
                    Some(i) => self.done += i,
                    None => {
                        self.done = stop;
                        return;
                    }
                }
            }
            let b = bytes[self.done - base];
            self.byte(b);
        }
    }

    /// True when a repetition that starts at byte `start` and reaches the
    /// current position is exempt as structure: inside a fenced code block
    /// opened before it, or within one table row.
    #[inline]
    pub(crate) fn exempt(&self, start: usize, fences: bool, tables: bool) -> bool {
        if fences {
            if let Some((_, open)) = self.open_fence {
                if open <= start {
                    return true;
                }
            }
        }
        tables && self.table_row && start >= self.line_start
    }

    /// Whether `start` lies inside a fenced code block opened before it,
    /// on the current line.
    #[inline]
    pub(crate) fn fenced_line(&self, start: usize) -> bool {
        self.open_fence.is_some_and(|(_, open)| open <= start) && start >= self.line_start
    }
}

/// The text a detector reads, for looking up [`Lines`] lazily: `bytes`
/// holds the stream from offset `base` on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Src<'a> {
    pub bytes: &'a [u8],
    pub base: usize,
}

impl Src<'_> {
    /// No bytes: [`Lines`] must already be up to date (per-character use).
    pub(crate) const EMPTY: Src<'static> = Src {
        bytes: &[],
        base: usize::MAX,
    };
}

/// [`Lines`] and the text to catch it up with.
#[derive(Debug)]
pub(crate) struct LineCtx<'a> {
    pub lines: &'a mut Lines,
    pub src: Src<'a>,
}

impl LineCtx<'_> {
    /// [`Lines`] caught up to `end`, then asked whether a repetition
    /// starting at `start` is exempt.
    #[inline]
    pub(crate) fn exempt_at(
        &mut self,
        end: usize,
        start: usize,
        fences: bool,
        tables: bool,
    ) -> bool {
        if self.lines.done < end && self.src.base <= self.lines.done {
            self.lines.advance(self.src.bytes, self.src.base, end);
        }
        self.lines.exempt(start, fences, tables)
    }

    /// After [`LineCtx::exempt_at`]: the repetition from `start` lies in a
    /// fence, on the line being read.
    #[inline]
    pub(crate) fn fenced_line(&self, start: usize) -> bool {
        self.lines.fenced_line(start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(s: &str) -> Lines {
        let mut l = Lines::default();
        l.advance(s.as_bytes(), 0, s.len());
        l
    }

    /// Byte by byte and line-jumping give the same state at every offset.
    #[test]
    fn advance_equals_byte_by_byte() {
        let texts = [
            "a\n  ```rust\nx ~~~ y\n```\n| a | b\n\t~~~\n  |x\n``x`\néé\n  `é``\nend",
            "````\n~~`~\n|||\n",
            "",
            "\n\n  \t",
        ];
        for t in texts {
            let b = t.as_bytes();
            let mut slow = Lines::default();
            for (i, &x) in b.iter().enumerate() {
                slow.byte(x);
                let mut fast = Lines::default();
                fast.advance(b, 0, i + 1);
                assert_eq!(format!("{fast:?}"), format!("{slow:?}"), "{t:?} at {i}");
            }
        }
    }

    #[test]
    fn fences_open_and_close() {
        let l = feed("text\n```rust\nlet x = [0, 0, 0];\n");
        assert!(l.exempt(20, true, true));
        assert!(!l.exempt(2, true, true));
        let l = feed("text\n```\ncode\n```\nmore");
        assert!(!l.exempt(20, true, true));
        let l = feed("  ~~~\nx");
        assert!(l.exempt(6, true, false));
        assert!(!l.exempt(6, false, false));
    }

    #[test]
    fn table_rows() {
        let l = feed("intro\n| a | a | a");
        assert!(l.exempt(7, true, true));
        assert!(!l.exempt(2, true, true));
        let l = feed("| a |\nplain");
        assert!(!l.exempt(7, true, true));
    }

    #[test]
    fn latex_control_words_are_not_content() {
        let u: Vec<char> = "\\quad".chars().collect();
        assert_eq!(content_letters(&u), 0);
        let u: Vec<char> = "uad\\q".chars().collect();
        assert_eq!(content_letters(&u), 0);
        let u: Vec<char> = "resak-".chars().collect();
        assert_eq!(content_letters(&u), 5);
        let u: Vec<char> = "2 x ".chars().collect();
        assert_eq!(content_letters(&u), 1);
    }
}
