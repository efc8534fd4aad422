//! One guarded text stream: what may be forwarded of a stream while the
//! loop guard watches it, and the cut when it fires. Shared by
//! `deloop clamp --stream`, the LLM clients, the server and the proxy.

use std::borrow::Cow;

use crate::repetition::{ClampConfig, ClampReport, Detector, StreamCut, StreamWatcher};

/// A stream under the loop guard ([`StreamWatcher`]), with the bookkeeping
/// every caller needs: which bytes may be forwarded now, the cut, and how
/// much the cut saved.
///
/// Feed it text deltas ([`GuardedStream::push`]) or raw bytes
/// ([`GuardedStream::push_bytes`]; chunks may split UTF-8 sequences), then
/// [`GuardedStream::finish`]. Each call returns a [`Forward`]: the bytes to
/// pass on now, in order, and the [`GuardedCut`] the first time the guard
/// fires (then the caller writes the cut's marker and stops; later input is
/// ignored).
///
/// Two modes:
/// * default: every byte is forwarded as soon as it arrives; when the
///   guard fires, bytes of the loop forwarded in earlier chunks cannot be
///   taken back ([`GuardedCut::late_bytes`]), and [`GuardedCut::apply_to`]
///   turns the forwarded text into the guarded text;
/// * [`GuardedStream::exact`]: bytes a later cut could still remove are
///   held back (everything after [`StreamWatcher::settled`]), so the
///   forwarded bytes plus the marker are exactly the batch guard's output
///   on the prefix where it fired (mid-stream: as an unfinished text, see
///   [`StreamWatcher`]; at [`GuardedStream::finish`]: on the whole text,
///   where the long-tail rule may cut a loop stopped mid-copy). Output then
///   trails input by the guards' look-back (a few hundred words, or an
///   exempt repetition still going on).
///
/// Invalid UTF-8 ([`GuardedStream::push_bytes`]): refused with the offset
/// of the first invalid byte ([`InvalidUtf8`]), unless the stream is
/// [`GuardedStream::lossy`], where invalid bytes are forwarded unchanged
/// and count as U+FFFD for detection.
///
/// Memory: the bytes after the settled prefix (what exact mode holds back
/// anyway), kept to count the characters a cut saves.
///
/// ```
/// use deloop_core::repetition::{clamp, ClampConfig, GuardedStream};
///
/// let text = format!("Intro. {}", "over and over again we go ".repeat(30));
/// let mut stream = GuardedStream::new(ClampConfig::default()).exact(true);
/// let mut out = String::new();
/// let mut cut = None;
/// for piece in text.as_bytes().chunks(5) {
///     let step = stream.push_bytes(piece).unwrap();
///     out.push_str(&step.text());
///     if let Some(c) = step.cut {
///         cut = Some(c.clone());
///         break;
///     }
/// }
/// let cut = cut.expect("the loop is seen");
/// out.push_str(&cut.cut.replacement_tail);
/// // Exact mode: the batch guard's output on the prefix where it fired.
/// assert_eq!(out, clamp(&text[..cut.cut.detected_at], &ClampConfig::default()).text);
/// assert!(cut.saved_chars > 0);
/// ```
#[derive(Debug, Clone)]
pub struct GuardedStream {
    watcher: Option<StreamWatcher>,
    exact: bool,
    lossy: bool,
    /// Only [`GuardedStream::push`] was used: the stream is valid UTF-8 and
    /// forwarded pieces end on character boundaries.
    text_only: bool,
    utf8: Utf8Check,
    /// The stream from byte offset `base` to `received`.
    buf: Vec<u8>,
    base: usize,
    received: usize,
    forwarded: usize,
    cut: Option<GuardedCut>,
    finished: bool,
}

/// What may be passed on after one step of a [`GuardedStream`].
#[derive(Debug, Clone, Copy)]
pub struct Forward<'a> {
    /// The next bytes of the stream to forward (possibly none).
    pub bytes: &'a [u8],
    /// The cut, the one time the guard fires: forward `bytes`, then
    /// `cut.cut.replacement_tail` (the marker), and stop.
    pub cut: Option<&'a GuardedCut>,
}

impl<'a> Forward<'a> {
    /// [`Forward::bytes`] as text (borrowed when valid UTF-8, always the
    /// case for a stream fed by [`GuardedStream::push`]; invalid bytes of a
    /// lossy byte stream become U+FFFD).
    pub fn text(&self) -> Cow<'a, str> {
        String::from_utf8_lossy(self.bytes)
    }
}

/// Where and why a [`GuardedStream`] was cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardedCut {
    /// The detector that fired (`cut.report.detector`).
    pub detector: Detector,
    /// Byte offset in the stream where the loop starts (`cut.report.start`).
    pub start: usize,
    /// Characters received after the kept prefix, discarded by the cut
    /// (those already forwarded included).
    pub saved_chars: usize,
    /// Bytes forwarded before the step that found the cut.
    pub forwarded_before: usize,
    /// The watcher's cut: kept bytes, marker, detection offset, report.
    pub cut: StreamCut,
}

impl GuardedCut {
    /// The guard's report.
    pub fn report(&self) -> &ClampReport {
        &self.cut.report
    }

    /// Bytes after the cut that were already forwarded in earlier steps
    /// (always 0 in exact mode).
    pub fn late_bytes(&self) -> usize {
        self.forwarded_before.saturating_sub(self.cut.keep_bytes)
    }

    /// Turns the text forwarded so far (everything a caller passed on,
    /// from the start of the stream) into the guarded text: truncated at
    /// the cut (on a character boundary), the marker appended.
    pub fn apply_to(&self, text: &mut String) {
        let mut keep = self.cut.keep_bytes.min(text.len());
        while !text.is_char_boundary(keep) {
            keep -= 1;
        }
        text.truncate(keep);
        text.push_str(&self.cut.replacement_tail);
    }
}

/// A byte stream that is not valid UTF-8, refused by a strict
/// [`GuardedStream`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidUtf8 {
    /// Byte offset in the stream of the first invalid byte (for a stream
    /// that ends inside a sequence, where that sequence starts).
    pub offset: usize,
}

impl std::fmt::Display for InvalidUtf8 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "not valid UTF-8 (first invalid byte at offset {})",
            self.offset
        )
    }
}

impl std::error::Error for InvalidUtf8 {}

impl GuardedStream {
    /// A stream watched by the guard with this configuration.
    pub fn new(config: ClampConfig) -> Self {
        GuardedStream::with_watcher(Some(StreamWatcher::new(config)))
    }

    /// A stream with no guard: everything is forwarded, nothing is cut
    /// (the LLM clients' guard switched off).
    pub fn unguarded() -> Self {
        GuardedStream::with_watcher(None)
    }

    fn with_watcher(watcher: Option<StreamWatcher>) -> Self {
        GuardedStream {
            watcher,
            exact: false,
            lossy: false,
            text_only: true,
            utf8: Utf8Check::default(),
            buf: Vec::new(),
            base: 0,
            received: 0,
            forwarded: 0,
            cut: None,
            finished: false,
        }
    }

    /// Exact mode: hold back what a later cut could remove (see the type's
    /// docs).
    pub fn exact(mut self, exact: bool) -> Self {
        self.exact = exact;
        self
    }

    /// Lossy mode: invalid UTF-8 from [`GuardedStream::push_bytes`] passes
    /// through unchanged (U+FFFD for detection) instead of being refused.
    pub fn lossy(mut self, lossy: bool) -> Self {
        self.lossy = lossy;
        self
    }

    /// Bytes received so far (after a cut, up to the step that found it).
    pub fn received(&self) -> usize {
        self.received
    }

    /// Bytes forwarded so far (the marker not counted).
    pub fn forwarded(&self) -> usize {
        self.forwarded
    }

    /// The cut, once the guard has fired.
    pub fn cut(&self) -> Option<&GuardedCut> {
        self.cut.as_ref()
    }

    /// True once the guard has fired: further input is ignored.
    pub fn is_cut(&self) -> bool {
        self.cut.is_some()
    }

    /// Feeds a text delta.
    pub fn push(&mut self, delta: &str) -> Forward<'_> {
        // Text is valid UTF-8, and stays so across deltas: no check to fail.
        self.step(delta.as_bytes())
    }

    /// Feeds raw bytes as they arrive (chunks may split UTF-8 sequences).
    /// A strict stream refuses invalid UTF-8 before forwarding anything of
    /// the chunk; after the error the stream should be abandoned.
    pub fn push_bytes(&mut self, chunk: &[u8]) -> Result<Forward<'_>, InvalidUtf8> {
        if self.cut.is_some() || self.finished {
            return Ok(self.nothing());
        }
        self.text_only = false;
        if !self.lossy {
            self.utf8.feed(chunk)?;
        }
        Ok(self.step(chunk))
    }

    /// Ends the stream: the guard's last verdict (it may still fire on the
    /// final word, or by the long-tail rule on a loop stopped mid-copy:
    /// [`StreamWatcher::finish`]), and whatever was held back up to the
    /// cut. Fails only for a strict byte stream that ends inside a UTF-8
    /// sequence.
    pub fn finish(&mut self) -> Result<Forward<'_>, InvalidUtf8> {
        if self.cut.is_some() || self.finished {
            return Ok(self.nothing());
        }
        self.finished = true;
        if !self.lossy && !self.text_only {
            self.utf8.finish()?;
        }
        if let Some(cut) = self.watcher.as_mut().and_then(StreamWatcher::finish) {
            return Ok(self.apply(cut));
        }
        let from = self.forwarded;
        self.forwarded = self.received;
        Ok(Forward {
            bytes: &self.buf[from - self.base..],
            cut: None,
        })
    }

    fn nothing(&self) -> Forward<'_> {
        Forward {
            bytes: &[],
            cut: None,
        }
    }

    fn step(&mut self, chunk: &[u8]) -> Forward<'_> {
        if self.cut.is_some() || self.finished || chunk.is_empty() {
            return self.nothing();
        }
        self.buf.extend_from_slice(chunk);
        self.received += chunk.len();
        if let Some(cut) = self.watcher.as_mut().and_then(|w| w.feed(chunk)) {
            return self.apply(cut);
        }
        let settled = self
            .watcher
            .as_ref()
            .map_or(self.received, StreamWatcher::settled);
        let upto = if self.exact {
            self.floor(settled.max(self.forwarded)).max(self.forwarded)
        } else {
            self.received
        };
        let from = self.forwarded;
        self.forwarded = upto;
        self.forget(from.min(settled));
        Forward {
            bytes: &self.buf[from - self.base..upto - self.base],
            cut: None,
        }
    }

    /// The cut: forwards the kept bytes not yet forwarded.
    fn apply(&mut self, cut: StreamCut) -> Forward<'_> {
        let keep = self.floor(cut.keep_bytes.clamp(self.base, self.received));
        let saved_chars = String::from_utf8_lossy(&self.buf[keep - self.base..])
            .chars()
            .count();
        let from = self.forwarded;
        let upto = keep.max(from);
        self.forwarded = upto;
        self.cut = Some(GuardedCut {
            detector: cut.report.detector,
            start: cut.report.start,
            saved_chars,
            forwarded_before: from,
            cut,
        });
        Forward {
            bytes: &self.buf[from - self.base..upto - self.base],
            cut: self.cut.as_ref(),
        }
    }

    /// For a text stream, the largest character boundary at or before
    /// `at` (a byte stream is forwarded as the bytes come).
    fn floor(&self, at: usize) -> usize {
        let mut at = at.min(self.received);
        if self.text_only {
            while at > self.base && at < self.received && is_continuation(self.buf[at - self.base])
            {
                at -= 1;
            }
        }
        at
    }

    /// Drops the bytes before stream offset `to` once they are at least
    /// half the buffer (amortised O(1) per byte).
    fn forget(&mut self, to: usize) {
        let n = to.saturating_sub(self.base);
        if n > 0 && n * 2 >= self.buf.len() {
            self.buf.drain(..n);
            self.base += n;
        }
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// Checks UTF-8 across chunk boundaries.
#[derive(Debug, Clone, Default)]
struct Utf8Check {
    pending: Vec<u8>,
    offset: usize,
}

impl Utf8Check {
    /// The offset of the first invalid byte in the stream, if this chunk
    /// holds one.
    fn feed(&mut self, chunk: &[u8]) -> Result<(), InvalidUtf8> {
        let mut data = std::mem::take(&mut self.pending);
        let base = self.offset - data.len();
        data.extend_from_slice(chunk);
        self.offset += chunk.len();
        match std::str::from_utf8(&data) {
            Ok(_) => Ok(()),
            Err(e) if e.error_len().is_none() => {
                self.pending = data[e.valid_up_to()..].to_vec();
                Ok(())
            }
            Err(e) => Err(InvalidUtf8 {
                offset: base + e.valid_up_to(),
            }),
        }
    }

    fn finish(&self) -> Result<(), InvalidUtf8> {
        if self.pending.is_empty() {
            Ok(())
        } else {
            Err(InvalidUtf8 {
                offset: self.offset - self.pending.len(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn looping_text() -> String {
        format!(
            "La auditoría suprema es la revisión final. {}",
            "y la revisión vuelve a empezar otra vez ".repeat(40)
        )
    }

    #[test]
    fn utf8_check_across_chunks() {
        let mut c = Utf8Check::default();
        assert!(c.feed(b"ab\xe2").is_ok());
        assert!(c.feed(b"\x82").is_ok());
        assert!(c.feed(b"\xacz").is_ok());
        assert!(c.finish().is_ok());
        let mut c = Utf8Check::default();
        assert!(c.feed(b"abc").is_ok());
        assert_eq!(c.feed(b"d\xffe"), Err(InvalidUtf8 { offset: 4 }));
        let mut c = Utf8Check::default();
        assert!(c.feed(b"ab\xe2\x82").is_ok());
        assert_eq!(c.finish(), Err(InvalidUtf8 { offset: 2 }));
    }

    #[test]
    fn without_guard_everything_passes() {
        let mut g = GuardedStream::unguarded().exact(true);
        let mut seen = String::new();
        seen.push_str(&g.push("hello ").text());
        seen.push_str(&g.push("world").text());
        seen.push_str(&g.finish().unwrap().text());
        assert_eq!(seen, "hello world");
        assert!(!g.is_cut());
        assert_eq!(g.received(), 11);
        assert_eq!(g.forwarded(), 11);
    }

    #[test]
    fn looping_deltas_are_cut_and_discarded_chars_counted() {
        let text = looping_text();
        let chars: Vec<char> = text.chars().collect();
        let mut g = GuardedStream::new(ClampConfig::default());
        let mut forwarded = String::new();
        let mut received = String::new();
        let mut cut = None;
        // Three characters per delta: deltas split words.
        for piece in chars.chunks(3) {
            let delta: String = piece.iter().collect();
            received.push_str(&delta);
            let step = g.push(&delta);
            forwarded.push_str(&step.text());
            if let Some(c) = step.cut {
                cut = Some(c.clone());
                break;
            }
        }
        let cut = cut.expect("the guard fired");
        assert!(
            received.len() < text.len(),
            "the guard fired before the end"
        );
        let keep = cut.cut.keep_bytes;
        assert_eq!(cut.saved_chars, received[keep..].chars().count());
        assert!(cut.saved_chars > 0);
        assert_eq!(cut.detector, cut.report().detector);
        assert_eq!(cut.start, cut.report().start);
        // Default mode: everything up to the cut's step was forwarded.
        assert_eq!(forwarded, received[..keep.max(cut.forwarded_before)]);
        assert_eq!(cut.late_bytes(), cut.forwarded_before.saturating_sub(keep));
        let mut answer = forwarded.clone();
        cut.apply_to(&mut answer);
        assert_eq!(
            answer,
            format!("{}{}", &received[..keep], cut.cut.replacement_tail)
        );
        // Nothing is forwarded after the guard fired.
        let step = g.push("more");
        assert!(step.bytes.is_empty() && step.cut.is_none());
        assert!(g.is_cut());
        assert!(g.finish().unwrap().bytes.is_empty());
    }

    #[test]
    fn strict_bytes_refuse_invalid_utf8_and_lossy_passes_it() {
        let mut g = GuardedStream::new(ClampConfig::default());
        assert_eq!(g.push_bytes(b"abc ").unwrap().bytes, b"abc ");
        assert_eq!(
            g.push_bytes(b"d\xffe").unwrap_err(),
            InvalidUtf8 { offset: 5 }
        );
        let mut g = GuardedStream::new(ClampConfig::default());
        assert_eq!(g.push_bytes(b"ab\xe2\x82").unwrap().bytes, b"ab\xe2\x82");
        assert_eq!(g.finish().unwrap_err(), InvalidUtf8 { offset: 2 });
        let mut g = GuardedStream::new(ClampConfig::default()).lossy(true);
        let mut out = Vec::new();
        out.extend_from_slice(g.push_bytes(b"a\xff b").unwrap().bytes);
        out.extend_from_slice(g.finish().unwrap().bytes);
        assert_eq!(out, b"a\xff b");
    }

    /// A chunk split inside a UTF-8 sequence: exact mode forwards whole
    /// characters of a text stream only.
    #[test]
    fn exact_text_stream_forwards_whole_characters() {
        let text: String = (0..400).map(|i| format!("pálabra{i} ")).collect();
        let mut g = GuardedStream::new(ClampConfig::default()).exact(true);
        let mut out = String::new();
        for piece in text.split_inclusive('á') {
            let step = g.push(piece);
            assert!(std::str::from_utf8(step.bytes).is_ok());
            out.push_str(&step.text());
        }
        out.push_str(&g.finish().unwrap().text());
        assert_eq!(out, text);
    }
}
