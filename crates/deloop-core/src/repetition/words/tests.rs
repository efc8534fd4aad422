//! The fast token paths against the per-character path.

use super::*;

/// The ASCII fast path's predicates agree with the general path's on
/// every ASCII character (exhaustive).
#[test]
fn ascii_fast_path_matches_unicode_path() {
    for b in 0u8..128 {
        let c = char::from(b);
        assert_eq!(matches!(b, b'\t'..=b'\r' | b' '), c.is_whitespace(), "{b}");
        assert_eq!(b.is_ascii_alphabetic(), c.is_alphabetic(), "{b}");
        assert!(!is_cjk(c), "{b}");
        assert_eq!(
            matches!(b, b'.' | b',' | b';' | b':' | b'!' | b'?'),
            is_trailing_punct(c),
            "{b}"
        );
        let mut folded = Vec::new();
        fold_char(c, |l| folded.push(l));
        assert_eq!(folded, vec![char::from(b.to_ascii_lowercase())], "{b}");
        assert_eq!(c.len_utf8(), 1);
    }
}

/// Tokens read through the byte loop ([`Words::feed`]) get the same
/// keys and previews as through the general path, char by char.
#[test]
fn feed_and_general_paths_build_the_same_tokens() {
    use crate::repetition::text::healthy::{Lines, Src};
    let config = ClampConfig::default();
    for text in [
        "Hello, world!",
        "AbC?? x\x0by\x0cz",
        "naïve CAFÉ. ok;",
        "高い山 x",
        "Abcdefghijklmnop,,, QRSTUVWXYZabcd!? x.y.z..........q",
    ] {
        let mut fast = Words::new(&config, true);
        let mut slow = Words::new(&config, true);
        let mut l1 = Lines::default();
        let mut l2 = Lines::default();
        let src = Src {
            bytes: text.as_bytes(),
            base: 0,
        };
        let mut lx = LineCtx {
            lines: &mut l1,
            src,
        };
        fast.feed(text, 0, &mut lx, Stop::Never);
        fast.finish(text.len(), &mut lx);
        let mut lx = LineCtx {
            lines: &mut l2,
            src,
        };
        for (i, c) in text.char_indices() {
            slow.push_general(c, i, c.len_utf8(), &mut lx);
        }
        slow.finish(text.len(), &mut lx);
        assert_eq!(fast.j, slow.j, "{text}");
        for t in 0..fast.j {
            let (a, b) = (fast.tok(t), slow.tok(t));
            assert_eq!(
                (a.key, a.start, a.end, a.connector, a.plen, a.ptrunc),
                (b.key, b.start, b.end, b.connector, b.plen, b.ptrunc),
                "{text}"
            );
            assert_eq!(
                a.preview[..a.plen as usize],
                b.preview[..b.plen as usize],
                "{text}"
            );
        }
    }
}
