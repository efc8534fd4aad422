//! What the stream guards of both APIs share: their settings, the record
//! of a cut, one watched text channel, and the JSON tracking of a reply
//! that must stay a JSON document.

use deloop_core::repetition::{ClampConfig, Detector, GuardedStream};
use serde::Serialize;

use crate::json_reply::{JsonReport, JsonSpec};
use deloop_core::rescue::JsonCloser;

/// Bytes of one text channel a guard watches before it is restarted. A
/// guard's state grows with the text it has read (about 14% of it), so a
/// never-ending stream without a loop would grow the proxy's memory
/// without bound; restarting bounds it. A loop is seen within a few
/// thousand bytes (the longest unit the guards look back for, times its
/// repeats), so a loop straddling a restart is cut shortly after it.
pub const WATCH_WINDOW_BYTES: usize = 4 << 20;

/// How one stream is guarded.
#[derive(Debug, Clone)]
pub struct StreamSettings {
    /// The loop guard.
    pub clamp: ClampConfig,
    /// Forward only the settled prefix (no loop byte reaches the client).
    pub exact: bool,
    /// Watch reasoning text too.
    pub guard_reasoning: bool,
    /// The `finish_reason` (OpenAI) or `stop_reason` (Anthropic) of a cut.
    pub end_reason: String,
    /// The request asked for JSON: the content is tracked, closed at a cut
    /// and judged at the end.
    pub json: Option<JsonSpec>,
    /// Content kept per choice to judge a JSON reply at its end; a longer
    /// reply is reported as not checked.
    pub max_json_bytes: usize,
}

impl StreamSettings {
    /// Settings with the default guard, no exact mode, reasoning watched,
    /// and this end reason.
    pub fn new(end_reason: &str) -> Self {
        StreamSettings {
            clamp: ClampConfig::default(),
            exact: false,
            guard_reasoning: true,
            end_reason: end_reason.to_string(),
            json: None,
            max_json_bytes: 32 << 20,
        }
    }
}

/// Which text of a choice a watcher reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    /// The answer (`content`, `text`, Anthropic `text` blocks).
    Content,
    /// Reasoning (`reasoning_content`, `reasoning`, Anthropic `thinking`).
    Reasoning,
}

/// A loop the proxy cut: the fields of `deloop serve`'s `cut` event, and
/// the channel it was found in. Serialized as the `deloop` object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CutRecord {
    /// The detector that fired.
    pub detector: Detector,
    /// Byte offset in the channel's text where the loop starts.
    pub start: usize,
    /// Characters received after the kept prefix and not forwarded, plus
    /// those forwarded before the loop was recognised.
    pub saved_chars: usize,
    /// Where the loop was.
    pub channel: Channel,
    /// The loop's period, for the console (not sent to the client).
    #[serde(skip)]
    pub period: usize,
    /// One copy of the repeated unit, for the console.
    #[serde(skip)]
    pub unit: String,
    /// The text forwarded just before the cut, for the console.
    #[serde(skip)]
    pub context: String,
}

/// What to forward of one delta.
#[derive(Debug, Default)]
pub(crate) struct Fed {
    /// The text to forward (the kept part, and at a cut the marker or the
    /// JSON closing).
    pub text: String,
    /// The cut, the one time the guard fires.
    pub cut: Option<CutRecord>,
}

/// One watched text channel.
#[derive(Debug)]
pub(crate) struct Watched {
    pub guard: GuardedStream,
    pub channel: Channel,
    /// What a restarted guard is built with.
    clamp: ClampConfig,
    exact: bool,
    /// Bytes of the channel read by the guards before this one.
    offset: usize,
    /// The text forwarded so far ends in white space.
    ends_in_space: bool,
    /// The last [`CONTEXT_BYTES`] forwarded, the context of a cut.
    tail: String,
}

/// Bytes of forwarded text a cut record carries as its context.
const CONTEXT_BYTES: usize = 600;

impl Watched {
    pub fn new(settings: &StreamSettings, channel: Channel) -> Self {
        Watched {
            guard: GuardedStream::new(settings.clamp.clone()).exact(settings.exact),
            channel,
            clamp: settings.clamp.clone(),
            exact: settings.exact,
            offset: 0,
            ends_in_space: false,
            tail: String::new(),
        }
    }

    /// Feeds a delta.
    pub fn feed(&mut self, delta: &str, mut json: Option<&mut JsonTrack>) -> Fed {
        let channel = self.channel;
        let read = self.guard.received();
        if read > 0 && read + delta.len() > WATCH_WINDOW_BYTES && !self.guard.is_cut() {
            // Restart the watch: flush what exact mode holds back (or the
            // cut the old guard finds at its end), then a fresh guard.
            let flushed = self.finish(json.as_deref_mut());
            if flushed.cut.is_some() {
                return flushed;
            }
            self.offset += self.guard.received();
            self.guard = GuardedStream::new(self.clamp.clone()).exact(self.exact);
            let mut fed = self.feed(delta, json);
            fed.text.insert_str(0, &flushed.text);
            return fed;
        }
        let offset = self.offset;
        let step = self.guard.push(delta);
        let text = step.text().into_owned();
        let cut = step
            .cut
            .map(|c| (record(c, channel, offset), c.cut.replacement_tail.clone()));
        self.finish_step(text, cut, json)
    }

    /// Ends the channel: what exact mode held back, or the guard's last
    /// verdict.
    pub fn finish(&mut self, json: Option<&mut JsonTrack>) -> Fed {
        let channel = self.channel;
        let offset = self.offset;
        let Ok(step) = self.guard.finish() else {
            // Only byte streams can fail here; the proxy feeds text.
            return Fed::default();
        };
        let text = step.text().into_owned();
        let cut = step
            .cut
            .map(|c| (record(c, channel, offset), c.cut.replacement_tail.clone()));
        self.finish_step(text, cut, json)
    }

    fn finish_step(
        &mut self,
        mut text: String,
        cut: Option<(CutRecord, String)>,
        json: Option<&mut JsonTrack>,
    ) -> Fed {
        self.tail.push_str(&text);
        if self.tail.len() > 2 * CONTEXT_BYTES {
            let mut from = self.tail.len() - CONTEXT_BYTES;
            while !self.tail.is_char_boundary(from) {
                from += 1;
            }
            self.tail.drain(..from);
        }
        let cut = cut.map(|(mut r, tail)| {
            r.context = self.tail.clone();
            (r, tail)
        });
        let json = json.filter(|_| self.channel == Channel::Content);
        match json {
            Some(track) => {
                track.push(&text);
                if cut.is_some() {
                    // A marker would break the document: close it instead.
                    if let Some(closing) = track.close() {
                        text.push_str(&closing);
                    }
                }
            }
            None => {
                if let Some((_, tail)) = &cut {
                    // Forwarded text that already ends in a space takes the
                    // marker without its own leading one.
                    let space = match text.chars().last() {
                        Some(c) => c.is_whitespace(),
                        None => self.ends_in_space,
                    };
                    let tail = if space {
                        tail.strip_prefix(' ').unwrap_or(tail)
                    } else {
                        tail
                    };
                    text.push_str(tail);
                }
            }
        }
        if let Some(c) = text.chars().last() {
            self.ends_in_space = c.is_whitespace();
        }
        Fed {
            text,
            cut: cut.map(|(r, _)| r),
        }
    }
}

fn record(c: &deloop_core::repetition::GuardedCut, channel: Channel, offset: usize) -> CutRecord {
    CutRecord {
        detector: c.detector,
        start: offset + c.start,
        saved_chars: c.saved_chars,
        channel,
        period: c.report().period,
        unit: c.report().unit.clone(),
        context: String::new(),
    }
}

/// The content of a JSON reply as the client has it.
#[derive(Debug)]
pub(crate) struct JsonTrack {
    closer: JsonCloser,
    text: String,
    limit: usize,
    over: bool,
}

impl JsonTrack {
    pub fn new(limit: usize) -> Self {
        JsonTrack {
            closer: JsonCloser::new(),
            text: String::new(),
            limit,
            over: false,
        }
    }

    pub fn push(&mut self, s: &str) {
        self.closer.push(s);
        if self.over {
            return;
        }
        if self.text.len() + s.len() > self.limit {
            self.over = true;
            self.text = String::new();
        } else {
            self.text.push_str(s);
        }
    }

    /// The text that closes the document (also recorded as forwarded).
    pub fn close(&mut self) -> Option<String> {
        let closing = self.closer.closing()?;
        self.push(&closing);
        Some(closing)
    }

    /// The report on the content as forwarded.
    pub fn report(&self, spec: &JsonSpec) -> JsonReport {
        if self.over {
            return JsonReport {
                valid: self.closer.is_complete(),
                repaired: false,
                repairs: Vec::new(),
                error: Some(format!(
                    "the content is longer than {} bytes (proxy.max_reply_bytes); only its \
                     syntax was followed, the schema was not checked",
                    self.limit
                ))
                .filter(|_| !self.closer.is_complete()),
                schema_valid: None,
                schema_errors: Vec::new(),
                schema_error: Some("the content was too long to check".into()),
            };
        }
        spec.check(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_appends_the_marker_or_closes_json() {
        let s = StreamSettings::new("stop");
        let text = format!("Intro. {}", "over and over again we go ".repeat(40));
        let mut w = Watched::new(&s, Channel::Content);
        let mut out = String::new();
        let mut cut = None;
        for piece in text.as_bytes().chunks(9) {
            let fed = w.feed(std::str::from_utf8(piece).unwrap(), None);
            out.push_str(&fed.text);
            if fed.cut.is_some() {
                cut = fed.cut;
                break;
            }
        }
        let cut = cut.expect("cut");
        assert!(out.ends_with(" […]"), "{out:?}");
        assert!(cut.saved_chars > 0);

        let json = format!(r#"{{"items": [{}"#, r#""over and over", "#.repeat(40));
        let mut w = Watched::new(&s, Channel::Content);
        let mut track = JsonTrack::new(1 << 20);
        let mut out = String::new();
        for piece in json.as_bytes().chunks(7) {
            let fed = w.feed(std::str::from_utf8(piece).unwrap(), Some(&mut track));
            out.push_str(&fed.text);
            if fed.cut.is_some() {
                break;
            }
        }
        assert!(w.guard.is_cut(), "the JSON loop is cut");
        serde_json::from_str::<serde_json::Value>(&out).expect("closed into JSON");
    }

    /// A never-ending stream without a loop keeps a bounded watch: the
    /// guard is restarted every window, forwards every byte, and still
    /// cuts a loop that starts after many windows.
    #[test]
    fn the_watch_is_bounded_on_an_endless_healthy_stream() {
        for exact in [false, true] {
            let mut s = StreamSettings::new("stop");
            s.exact = exact;
            let mut w = Watched::new(&s, Channel::Content);
            let mut sent = 0usize;
            let mut out = 0usize;
            let mut i = 0u64;
            while sent < 3 * WATCH_WINDOW_BYTES {
                // Distinct words: no loop anywhere.
                let piece = format!("w{i:x} z{:x} ", i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                i += 1;
                sent += piece.len();
                let fed = w.feed(&piece, None);
                assert!(fed.cut.is_none(), "no loop in a healthy stream");
                out += fed.text.len();
                assert!(
                    w.guard.received() <= WATCH_WINDOW_BYTES,
                    "the guard holds {} bytes",
                    w.guard.received()
                );
            }
            let loop_text = "over and over again we go ".repeat(60);
            let mut cut = None;
            for piece in loop_text.as_bytes().chunks(13) {
                let fed = w.feed(std::str::from_utf8(piece).unwrap(), None);
                out += fed.text.len();
                if fed.cut.is_some() {
                    cut = fed.cut;
                    break;
                }
            }
            assert!(cut.is_some(), "a later loop is still cut (exact: {exact})");
            assert!(
                out >= sent,
                "every healthy byte was forwarded (exact: {exact})"
            );
        }
    }
}
