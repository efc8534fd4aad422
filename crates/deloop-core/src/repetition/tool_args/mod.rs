//! The loop guard on a tool call's arguments as they stream
//! (`delta.tool_calls[].function.arguments`, Anthropic
//! `input_json_delta`): a model that degenerates while it writes a call
//! streams kilobytes of one fragment, and the call never ends before the
//! token limit.
//!
//! [`ToolArgsWatcher`] runs the text guards of [`StreamWatcher`] (periodic
//! walls, substring floods, near-duplicates; the same configuration as the
//! content) on two texts of the same arguments:
//! * the **arguments** as written, JSON syntax included, which shows loops
//!   of structure (`[1, 2, 1, 2, …`, `{"a": {"a": {"a": …`, a record
//!   repeated);
//! * the **values**: every string value decoded (escapes read, object keys
//!   skipped), one per line, which shows loops inside a value written with
//!   escapes (a file's lines joined by `\n`, near-duplicate sentences) and
//!   repeated values (`["ok", "ok", "ok", …]`).
//!
//! The first guard to fire cuts the call: [`ArgsCut::keep`] is where the
//! arguments must stop (a byte offset in the argument text, on a character
//! boundary, never inside an escape), and [`ToolArgsWatcher::closing`] is
//! the text that, appended to the kept prefix, makes it valid JSON again:
//! the guard's marker inside the string the cut falls in, then whatever
//! closes the open strings, arrays and objects ([`JsonCloser`]).
//!
//! Pure and bounded: O(1) amortised per byte, memory bounded by the
//! configuration and [`MAX_WATCHED_ARGS_BYTES`] (the argument text is kept
//! to place the cut; past the cap the call is no longer watched).
//!
//! ```
//! use deloop_core::repetition::{ClampConfig, ToolArgsWatcher};
//!
//! let mut w = ToolArgsWatcher::new(ClampConfig::default());
//! let mut sent = String::from(r##"{"path": "notes.md", "content": "# Notes\n"##);
//! w.push(&sent);
//! for _ in 0..200 {
//!     let piece = "la la la la ";
//!     sent.push_str(piece);
//!     if w.push(piece).is_some() {
//!         break;
//!     }
//! }
//! let cut = w.cut().expect("the wall is seen");
//! assert!(cut.keep < sent.len());
//! let closed = format!("{}{}", w.kept(), w.closing().unwrap());
//! let v: serde_json::Value = serde_json::from_str(&closed).unwrap();
//! assert!(v["content"].as_str().unwrap().ends_with("[…]"));
//! ```

mod decode;

use serde::Serialize;

use crate::repetition::{ClampConfig, ClampReport, Detector, StreamCut, StreamWatcher};
use crate::rescue::JsonCloser;
use decode::ValueDecoder;

/// Bytes of one call's arguments watched at most: past them the call is
/// no longer watched (a loop is seen within a few thousand bytes; a
/// healthy call this long is written by a tool, not improvised).
pub const MAX_WATCHED_ARGS_BYTES: usize = 4 << 20;

/// Which text of the arguments the guard fired on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArgsChannel {
    /// The argument text as written (JSON syntax included).
    Arguments,
    /// The decoded string values, one per line.
    Values,
}

/// Where and why a call's arguments were cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgsCut {
    /// The detector that fired.
    pub detector: Detector,
    /// The text it fired on.
    pub channel: ArgsChannel,
    /// Byte offset in the argument text where the loop starts.
    pub start: usize,
    /// Byte offset in the argument text where the arguments must stop (a
    /// character boundary, never inside an escape).
    pub keep: usize,
    /// Bytes of argument text received when the loop was recognised.
    pub detected_at: usize,
    /// The guard's report (offsets in the channel's own text).
    pub report: ClampReport,
    /// The guard's marker (`[guards.clamp] marker`).
    pub marker: String,
}

impl ArgsCut {
    /// Bytes received after the kept prefix (taken out of the call).
    pub fn removed_bytes(&self) -> usize {
        self.detected_at.saturating_sub(self.keep)
    }
}

/// The loop guard of one tool call's arguments (see the module docs).
#[derive(Debug, Clone)]
pub struct ToolArgsWatcher {
    text_guard: StreamWatcher,
    values_guard: StreamWatcher,
    decoder: ValueDecoder,
    scratch: Vec<u8>,
    text: String,
    cut: Option<ArgsCut>,
    done: bool,
}

impl ToolArgsWatcher {
    /// A watcher with the text guards' configuration.
    pub fn new(config: ClampConfig) -> Self {
        ToolArgsWatcher {
            text_guard: StreamWatcher::new(config.clone()),
            values_guard: StreamWatcher::new(config),
            decoder: ValueDecoder::default(),
            scratch: Vec::new(),
            text: String::new(),
            cut: None,
            done: false,
        }
    }

    /// Checks whole arguments (a reply that is not streamed): the verdict a
    /// stream of the same text gets at its end.
    pub fn check(text: &str, config: &ClampConfig) -> Self {
        let mut w = ToolArgsWatcher::new(config.clone());
        if w.push(text).is_none() {
            w.finish();
        }
        w
    }

    /// The argument text received (up to the cut's detection, and at most
    /// [`MAX_WATCHED_ARGS_BYTES`]).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The cut, once the guard fired.
    pub fn cut(&self) -> Option<&ArgsCut> {
        self.cut.as_ref()
    }

    /// The arguments to keep: all of them, or the prefix before the cut.
    pub fn kept(&self) -> &str {
        match &self.cut {
            Some(c) => &self.text[..c.keep],
            None => &self.text,
        }
    }

    /// After a cut: the text that, appended to [`ToolArgsWatcher::kept`],
    /// makes the arguments one valid JSON document (the marker inside the
    /// string value the cut falls in, then the closing). `None` without a
    /// cut, or when the kept text is not a JSON prefix (then nothing can
    /// close it: drop the call).
    pub fn closing(&self) -> Option<String> {
        let cut = self.cut.as_ref()?;
        let kept = self.kept();
        let mut closer = JsonCloser::new();
        closer.push(kept);
        if kept.trim().is_empty() {
            return Some("{}".into());
        }
        let mut out = String::new();
        if closer.in_value_string() {
            let marker = if kept.ends_with(char::is_whitespace) {
                cut.marker.trim_start()
            } else {
                cut.marker.as_str()
            };
            let quoted = serde_json::to_string(marker).unwrap_or_default();
            let inner = &quoted[1..quoted.len() - 1];
            out.push_str(inner);
            closer.push(inner);
        }
        out.push_str(&closer.closing()?);
        Some(out)
    }

    /// Feeds a piece of argument text. Returns the cut the first time a
    /// guard fires; later pieces are ignored.
    pub fn push(&mut self, piece: &str) -> Option<&ArgsCut> {
        if self.done || piece.is_empty() {
            return None;
        }
        if self.text.len() + piece.len() > MAX_WATCHED_ARGS_BYTES {
            self.done = true;
            return None;
        }
        self.text.push_str(piece);
        self.scratch.clear();
        self.decoder.push(piece, &mut self.scratch, |_, _| {});
        let a = self.text_guard.feed(piece.as_bytes());
        let b = if self.scratch.is_empty() {
            None
        } else {
            self.values_guard.feed(&self.scratch)
        };
        self.settle(a, b)
    }

    /// Ends the call: the guards' last verdict (the long-tail rule may cut
    /// a loop the call stopped in the middle of).
    pub fn finish(&mut self) -> Option<&ArgsCut> {
        if self.done {
            return None;
        }
        let a = self.text_guard.finish();
        let b = self.values_guard.finish();
        self.settle(a, b)
    }

    fn settle(&mut self, a: Option<StreamCut>, b: Option<StreamCut>) -> Option<&ArgsCut> {
        if a.is_none() && b.is_none() {
            return None;
        }
        self.done = true;
        let detected_at = self.text.len();
        let from_text = a.map(|c| {
            (
                ArgsChannel::Arguments,
                c.report.start.min(detected_at),
                c.keep_bytes.min(detected_at),
                c,
            )
        });
        let from_values = b.map(|c| {
            let (start, keep) = self.raw_offsets(c.report.start, c.keep_bytes);
            (ArgsChannel::Values, start, keep, c)
        });
        let (channel, start, keep, c) = match (from_text, from_values) {
            (Some(x), Some(y)) => {
                if y.2 < x.2 {
                    y
                } else {
                    x
                }
            }
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => return None,
        };
        let keep = self.safe_keep(keep);
        self.cut = Some(ArgsCut {
            detector: c.report.detector,
            channel,
            start: start.min(keep),
            keep,
            detected_at,
            report: c.report,
            marker: c.replacement_tail,
        });
        self.cut.as_ref()
    }

    /// Raw offsets of two decoded offsets of the values text.
    fn raw_offsets(&self, start: usize, keep: usize) -> (usize, usize) {
        let end = self.text.len();
        let (mut s, mut k) = (None, None);
        let mut d = ValueDecoder::default();
        d.push(&self.text, &mut Vec::new(), |dec, raw| {
            if s.is_none() && dec >= start {
                s = Some(raw);
            }
            if k.is_none() && dec >= keep {
                k = Some(raw);
            }
        });
        (s.unwrap_or(end), k.unwrap_or(end))
    }

    /// `keep` moved back to a character boundary outside any escape.
    fn safe_keep(&self, keep: usize) -> usize {
        let mut keep = keep.min(self.text.len());
        while !self.text.is_char_boundary(keep) {
            keep -= 1;
        }
        let mut d = ValueDecoder::default();
        d.push(&self.text[..keep], &mut Vec::new(), |_, _| {});
        match d.open_escape() {
            Some(at) => at.min(keep),
            None => keep,
        }
    }
}

#[cfg(test)]
mod tests;
