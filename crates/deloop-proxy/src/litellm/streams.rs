//! The texts of LiteLLM's response checks, judged incrementally per
//! stream. On a streamed reply LiteLLM posts the whole text so far every
//! 5th chunk (`streaming_sampling_rate`), each time with the call's
//! `litellm_call_id` and `input_type: "response"`: judging each post in
//! full costs the square of the stream's length. [`ResponseStreams`] keeps,
//! per call id, each text seen so far with a [`StreamWatcher`] fed with it,
//! and feeds only what a new post adds.
//!
//! The answer is the full path's, exactly ([`judge_texts`] is that path):
//! * while the watcher has not cut, [`clamp`] of the text so far (as an
//!   unfinished text) does not fire on any prefix; a copy of the watcher
//!   is ended ([`StreamWatcher::finish`]) to ask whether [`clamp`] of the
//!   whole text cuts (the long-tail rule). The copy's size is bounded by
//!   the configuration, not by the text (its windows and tables), so a
//!   check costs the same at any length. When it does not cut, the text
//!   stands unchanged, as [`clamp`] leaves it;
//! * when either fires, the text is judged in full by [`clamp`], and so
//!   is every later post of that text (a looping stream, which LiteLLM
//!   ends or deloop's answer cuts);
//! * a text that does not extend the one seen (another id, a restart, a
//!   rewrite), an evicted stream and a new id are judged from the start.
//!   Whether a post extends the text seen is a byte comparison of the
//!   whole post: linear in the post, as its JSON parsing already is; no
//!   detector runs over the old part again.
//!
//! Bounded: at most `max_streams` streams and `max_bytes` of texts and
//! watchers (`proxy.litellm_streams`, `proxy.litellm_stream_bytes`,
//! `proxy.litellm_stream_idle_secs`; a watcher counts as 256 KiB), the least recently
//! used going first; a stream idle for `idle` is forgotten. A forgotten
//! stream is judged from the start again: correct, only slower. Ending a
//! copy of a watcher at each check costs 20 to 70 µs (release build).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use deloop_core::repetition::{clamp, ClampConfig, Clamped, StreamWatcher};

/// What one watcher costs in the byte budget, besides its text: the
/// engine's windows and tables, bounded by the configuration. Measured
/// with the default one as the growth of resident memory over 200 to
/// 1,000 watchers fed 2 to 20 KB of text each: 100 to 290 KiB a watcher.
/// With the default budget of 64 MiB, about 250 streams are followed at
/// once.
const WATCHER_BYTES: usize = 256 << 10;

/// The judgement of a guardrail request's texts.
#[derive(Debug, Default)]
pub struct Judged {
    /// Per text: its clamp when [`clamp`] was run on it, `None` when the
    /// text stands as it is (what [`clamp`] would have answered).
    pub clamped: Vec<Option<Clamped>>,
    /// Bytes given to a detector: new text fed to a watcher plus texts
    /// clamped in full.
    pub judged_bytes: usize,
}

/// The full path: every text clamped as a whole.
pub fn judge_texts(texts: &[String], config: &ClampConfig) -> Judged {
    Judged {
        clamped: texts.iter().map(|t| Some(clamp(t, config))).collect(),
        judged_bytes: texts.iter().map(String::len).sum(),
    }
}

/// One text of a stream: what was seen, and the watcher fed with it.
#[derive(Debug, Clone)]
struct Watched {
    seen: String,
    watcher: StreamWatcher,
    /// The watcher cut: every later post is clamped in full.
    looped: bool,
}

impl Watched {
    fn new(config: &ClampConfig) -> Self {
        Watched {
            seen: String::new(),
            watcher: StreamWatcher::new(config.clone()),
            looped: false,
        }
    }

    fn cost(&self) -> usize {
        self.seen.capacity() + WATCHER_BYTES
    }

    /// Judges `text`, the text so far: (its clamp if one was run, bytes
    /// judged). `self` must hold a prefix of `text` (else start afresh).
    fn judge(&mut self, text: &str, config: &ClampConfig) -> (Option<Clamped>, usize) {
        let new = &text[self.seen.len()..];
        let mut judged = new.len();
        if !self.looped && self.watcher.feed(new.as_bytes()).is_some() {
            self.looped = true;
        }
        self.seen.push_str(new);
        let full = self.looped || self.watcher.clone().finish().is_some();
        if !full {
            return (None, judged);
        }
        judged += text.len();
        (Some(clamp(text, config)), judged)
    }
}

#[derive(Debug)]
struct Entry {
    /// Position in the use order.
    seq: u64,
    used: Instant,
    cost: usize,
    texts: Vec<Watched>,
}

#[derive(Debug, Default)]
struct Streams {
    map: HashMap<String, Entry>,
    /// seq -> id, least recently used first.
    order: BTreeMap<u64, String>,
    next: u64,
    bytes: usize,
}

impl Streams {
    fn remove(&mut self, id: &str) -> Option<Entry> {
        let e = self.map.remove(id)?;
        self.order.remove(&e.seq);
        self.bytes -= e.cost;
        Some(e)
    }

    /// Forgets the streams idle since before `now - idle`.
    fn expire(&mut self, now: Instant, idle: Duration) {
        while let Some((_, id)) = self.order.first_key_value() {
            let stale = self
                .map
                .get(id)
                .is_none_or(|e| now.duration_since(e.used) > idle);
            if !stale {
                break;
            }
            let id = id.clone();
            self.remove(&id);
        }
    }
}

/// The streams of recent response checks by `litellm_call_id` (see the
/// module's documentation).
#[derive(Debug)]
pub struct ResponseStreams {
    max_streams: usize,
    max_bytes: usize,
    idle: Duration,
    inner: Mutex<Streams>,
}

impl Default for ResponseStreams {
    /// With `[proxy]`'s default caps.
    fn default() -> Self {
        ResponseStreams::from_settings(&deloop_config::ProxySettings::default())
    }
}

impl ResponseStreams {
    /// With the caps of `[proxy]`: `litellm_streams`,
    /// `litellm_stream_bytes`, `litellm_stream_idle_secs`.
    pub fn from_settings(s: &deloop_config::ProxySettings) -> Self {
        ResponseStreams::new(
            s.litellm_streams,
            s.litellm_stream_bytes,
            Duration::from_secs(s.litellm_stream_idle_secs),
        )
    }

    /// At most `max_streams` streams and `max_bytes` of texts and
    /// watchers, each forgotten after `idle` without a post.
    pub fn new(max_streams: usize, max_bytes: usize, idle: Duration) -> Self {
        ResponseStreams {
            max_streams,
            max_bytes,
            idle,
            inner: Mutex::new(Streams::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Streams> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Judges the `texts` of a response check of call `id`: what
    /// [`judge_texts`] answers, feeding only what each text adds to the
    /// one seen last for this id.
    pub fn judge(&self, id: &str, texts: &[String], config: &ClampConfig) -> Judged {
        let now = Instant::now();
        // Taken out while judged: a concurrent post of the same id (LiteLLM
        // awaits each check, so only a replay) starts afresh.
        let mut old = {
            let mut s = self.lock();
            s.expire(now, self.idle);
            s.remove(id).map(|e| e.texts).unwrap_or_default()
        };
        old.truncate(texts.len());
        let mut kept = Vec::with_capacity(texts.len());
        let mut out = Judged::default();
        let mut old = old.into_iter();
        for text in texts {
            let mut w = match old.next() {
                Some(w) if text.starts_with(&w.seen) => w,
                _ => Watched::new(config),
            };
            let (c, judged) = w.judge(text, config);
            out.clamped.push(c);
            out.judged_bytes += judged;
            kept.push(w);
        }
        self.keep(id, kept, now);
        out
    }

    fn keep(&self, id: &str, texts: Vec<Watched>, now: Instant) {
        let cost: usize = texts.iter().map(Watched::cost).sum::<usize>() + id.len();
        if self.max_streams == 0 || cost > self.max_bytes || texts.is_empty() {
            return;
        }
        let mut s = self.lock();
        s.remove(id);
        let seq = s.next;
        s.next += 1;
        s.order.insert(seq, id.to_string());
        s.map.insert(
            id.to_string(),
            Entry {
                seq,
                used: now,
                cost,
                texts,
            },
        );
        s.bytes += cost;
        while s.map.len() > self.max_streams || s.bytes > self.max_bytes {
            let Some((_, oldest)) = s.order.pop_first() else {
                break;
            };
            if let Some(e) = s.map.remove(&oldest) {
                s.bytes -= e.cost;
            }
        }
    }

    /// How many streams are remembered.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests;
