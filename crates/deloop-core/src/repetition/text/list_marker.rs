//! The list marker (`51.`, `9)`): 1–4 ASCII digits then `.` or `)`. The
//! near-duplicate detector and its sieve both read it, from this one
//! definition: a line whose first token is a marker is a list item.

/// What a token read so far is, as a list marker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MarkerShape {
    /// 0: digits only (or nothing yet), 1: digits then `.` or `)`,
    /// 2: anything else (final).
    state: u8,
    digits: u32,
}

impl MarkerShape {
    /// A token that cannot be a list marker (whatever follows).
    pub(crate) const OTHER: MarkerShape = MarkerShape {
        state: 2,
        digits: 0,
    };

    /// The shape once the token's next character `c` is read.
    #[inline]
    pub(crate) fn push(&mut self, c: char) {
        self.state = match (self.state, c.is_ascii_digit(), c) {
            (0, true, _) => {
                self.digits += 1;
                if self.digits > 4 {
                    2
                } else {
                    0
                }
            }
            (0, false, '.' | ')') if self.digits > 0 => 1,
            _ => 2,
        };
    }

    /// The token read so far is a list marker.
    #[inline]
    pub(crate) fn is_marker(self) -> bool {
        self.state == 1
    }

    /// The token can no longer become a list marker.
    #[inline]
    pub(crate) fn is_other(self) -> bool {
        self.state == 2
    }
}

/// A whole ASCII token is a list marker: [`MarkerShape`] over its bytes.
#[inline]
pub(crate) fn is_marker(token: &[u8]) -> bool {
    let mut shape = MarkerShape::default();
    for &b in token {
        shape.push(char::from(b));
        if shape.is_other() {
            return false;
        }
    }
    shape.is_marker()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_one_to_four_digits_then_a_dot_or_a_parenthesis() {
        for t in ["1.", "9)", "51.", "2024)", "0000."] {
            assert!(is_marker(t.as_bytes()), "{t}");
        }
        for t in [
            "", ".", ")", "12345.", "1", "1.2", "1..", "a1.", "1a.", "1.)", "-1.",
        ] {
            assert!(!is_marker(t.as_bytes()), "{t}");
        }
    }

    #[test]
    fn the_shape_follows_the_token_character_by_character() {
        let mut s = MarkerShape::default();
        for c in "12".chars() {
            s.push(c);
            assert!(!s.is_marker() && !s.is_other());
        }
        s.push('.');
        assert!(s.is_marker());
        s.push('x');
        assert!(s.is_other());
        assert!(MarkerShape::OTHER.is_other());
    }
}
