//! Streaming under the loop guard: accumulates streamed answer text, runs
//! deloop-core's `StreamWatcher` over it and cuts where the guard says.

use deloop_core::repetition::{ClampConfig, ClampReport, StreamCut, StreamWatcher};

/// Accumulated answer text of one streamed call.
pub(crate) struct GuardedText {
    text: String,
    watcher: Option<StreamWatcher>,
    cut: Option<(ClampReport, usize)>,
}

impl GuardedText {
    pub fn new(config: Option<ClampConfig>) -> Self {
        GuardedText {
            text: String::new(),
            watcher: config.map(StreamWatcher::new),
            cut: None,
        }
    }

    /// Appends a delta and forwards to `on_delta` the part of it that lies
    /// before any cut. Returns true when the guard fired: stop reading.
    pub fn push(&mut self, delta: &str, on_delta: &mut impl FnMut(&str)) -> bool {
        if self.cut.is_some() || delta.is_empty() {
            return self.cut.is_some();
        }
        let start = self.text.len();
        self.text.push_str(delta);
        let fired = self.watcher.as_mut().and_then(|w| w.feed(delta.as_bytes()));
        match fired {
            None => {
                on_delta(delta);
                false
            }
            Some(cut) => {
                let keep = self.apply(cut);
                if keep > start {
                    on_delta(&self.text[start..keep]);
                }
                true
            }
        }
    }

    /// Ends the stream. The watcher may still fire on its flushed tail; the
    /// deltas were already forwarded then, and the final (cut) text is the
    /// authoritative one.
    pub fn finish(&mut self) {
        if self.cut.is_some() {
            return;
        }
        if let Some(cut) = self.watcher.as_mut().and_then(|w| w.finish()) {
            self.apply(cut);
        }
    }

    /// Cuts the text at the guard's `keep_bytes`; returns the kept length.
    fn apply(&mut self, cut: StreamCut) -> usize {
        let mut keep = cut.keep_bytes.min(self.text.len());
        while !self.text.is_char_boundary(keep) {
            keep -= 1;
        }
        let discarded = self.text[keep..].chars().count();
        self.cut = Some((cut.report, discarded));
        self.text.truncate(keep);
        self.text.push_str(&cut.replacement_tail);
        keep
    }

    /// The answer text, the guard's report and the discarded character count.
    pub fn into_parts(self) -> (String, Option<ClampReport>, usize) {
        match self.cut {
            Some((report, saved)) => (self.text, Some(report), saved),
            None => (self.text, None, 0),
        }
    }

    /// Bytes of answer text accumulated so far.
    pub fn len(&self) -> usize {
        self.text.len()
    }

    /// True once the guard has fired.
    pub fn is_cut(&self) -> bool {
        self.cut.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_guard_everything_passes() {
        let mut g = GuardedText::new(None);
        let mut seen = String::new();
        assert!(!g.push("hello ", &mut |d: &str| seen.push_str(d)));
        assert!(!g.push("world", &mut |d: &str| seen.push_str(d)));
        g.finish();
        assert_eq!(g.into_parts(), ("hello world".to_string(), None, 0));
        assert_eq!(seen, "hello world");
    }

    #[test]
    fn looping_deltas_are_cut_and_discarded_chars_counted() {
        let text = format!(
            "La auditoría suprema es la revisión final. {}",
            "y la revisión vuelve a empezar otra vez ".repeat(40)
        );
        let chars: Vec<char> = text.chars().collect();
        let mut g = GuardedText::new(Some(ClampConfig::default()));
        let mut forwarded = String::new();
        let mut received = String::new();
        let mut stopped = false;
        // Three characters per delta: deltas split words and accents' bytes
        // never reach the watcher half-done.
        for piece in chars.chunks(3) {
            let delta: String = piece.iter().collect();
            received.push_str(&delta);
            if g.push(&delta, &mut |d: &str| forwarded.push_str(d)) {
                stopped = true;
                break;
            }
        }
        assert!(stopped, "the guard never fired");
        assert!(
            received.len() < text.len(),
            "the guard fired before the end"
        );
        g.finish();
        let (answer, report, saved) = g.into_parts();
        let report = report.unwrap();
        let kept = &received[..report.keep_bytes];
        assert!(answer.starts_with(kept));
        assert_eq!(saved, received[report.keep_bytes..].chars().count());
        assert!(saved > 0);
        assert!(forwarded.starts_with(kept) || kept.starts_with(&forwarded));
        // Nothing is forwarded after the guard fired.
        assert!(!g_push_after_cut_forwards());
    }

    fn g_push_after_cut_forwards() -> bool {
        let mut g = GuardedText::new(Some(ClampConfig::default()));
        let looping = "ab".repeat(2000);
        let mut fired = false;
        for c in looping.as_bytes().chunks(7) {
            if g.push(std::str::from_utf8(c).unwrap(), &mut |_: &str| {}) {
                fired = true;
                break;
            }
        }
        assert!(fired);
        let mut called = false;
        assert!(g.push("more", &mut |_: &str| called = true));
        called
    }
}
