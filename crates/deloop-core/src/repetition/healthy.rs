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
#[derive(Debug, Clone, Default)]
pub(crate) struct Lines {
    /// Byte offset where the current line starts.
    line_start: usize,
    /// Still in the line's leading spaces.
    leading: bool,
    /// The fence character being counted at the start of this line.
    fence_char: Option<char>,
    fence_count: u32,
    /// The current line starts with `|`.
    table_row: bool,
    /// Open fence: its character and the byte offset of its line.
    open_fence: Option<(char, usize)>,
    started: bool,
}

impl Lines {
    /// Updates the state with character `c` found at byte offset `pos`.
    #[inline(always)]
    pub(crate) fn push(&mut self, c: char, pos: usize) {
        if !self.started {
            self.started = true;
            self.leading = true;
        }
        if c == '\n' {
            self.line_start = pos + 1;
            self.leading = true;
            self.fence_char = None;
            self.fence_count = 0;
            self.table_row = false;
            return;
        }
        if self.leading {
            if c == ' ' || c == '\t' {
                return;
            }
            self.leading = false;
            match c {
                '|' => self.table_row = true,
                '`' | '~' => {
                    self.fence_char = Some(c);
                    self.fence_count = 1;
                }
                _ => {}
            }
            return;
        }
        if let Some(f) = self.fence_char {
            if c == f && self.fence_count < 3 {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(s: &str) -> Lines {
        let mut l = Lines::default();
        for (i, c) in s.char_indices() {
            l.push(c, i);
        }
        l
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
