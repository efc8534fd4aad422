//! Guarding an OpenAI-compatible stream (`/v1/chat/completions` and
//! `/v1/completions` with `"stream": true`), event by event.
//!
//! Each choice is watched on its own: its `content` (or `text`) deltas, and
//! its `reasoning_content` / `reasoning` deltas. An event the guard does not
//! change is forwarded byte for byte. When a choice loops, its delta is
//! truncated at the cut and the marker appended (for a JSON reply, the
//! text that closes the document instead); then a chunk with the stream's
//! `id`, `model` and `created`, the choice's `finish_reason` (configured)
//! and a top-level `deloop` object (`{detector, start, saved_chars,
//! channel}`) ends the choice. Once every choice has ended or been cut the
//! stream ends: the usage chunk when the request asked for it (the
//! upstream's last counts, or `null`; counts are never invented), then
//! `data: [DONE]`, and the caller drops the upstream.
//!
//! Pure: events in, bytes out. The relay ([`crate::relay`]) does the I/O.
//!
//! ```
//! use deloop_proxy::guard::StreamSettings;
//! use deloop_proxy::openai_stream::{Kind, OpenAiStream};
//! use deloop_proxy::sse::SseReader;
//! use deloop_proxy::Flow;
//!
//! let mut stream = OpenAiStream::new(Kind::Chat, StreamSettings::new("stop"), 1, false);
//! let mut reader = SseReader::new(1 << 20);
//! let mut out = Vec::new();
//! let mut events = Vec::new();
//! let chunk = |t: &str| format!(
//!     "data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\
//!      \"choices\":[{{\"index\":0,\"delta\":{{\"content\":{}}},\"finish_reason\":null}}]}}\n\n",
//!     serde_json::to_string(t).unwrap());
//! let mut flow = Flow::Continue;
//! reader.push(chunk("Intro. ").as_bytes(), &mut events).unwrap();
//! for _ in 0..60 {
//!     reader.push(chunk("over and over again we go ").as_bytes(), &mut events).unwrap();
//! }
//! for ev in events.drain(..) {
//!     flow = stream.on_event(&ev, &mut out);
//!     if flow == Flow::Stop { break; }
//! }
//! assert_eq!(flow, Flow::Stop);
//! let text = String::from_utf8(out.concat()).unwrap();
//! assert!(text.contains(r#""finish_reason":"stop""#));
//! assert!(text.contains(r#""deloop":{"#));
//! assert!(text.ends_with("data: [DONE]\n\n"));
//! ```

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::api::Api;
use crate::guard::{Channel, CutRecord, Fed, JsonTrack, StreamSettings, Watched};
use crate::sse::{event_bytes, SseEvent};
use crate::Flow;

/// Choices watched at most (OpenAI's own limit on `n`); entries with a
/// higher index are forwarded unwatched.
pub const MAX_CHOICES: usize = 128;

/// Which OpenAI endpoint the stream comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `/v1/chat/completions`: `choices[].delta.content`.
    Chat,
    /// `/v1/completions`: `choices[].text`.
    Completion,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    Finished,
    Cut,
}

#[derive(Debug)]
struct Choice {
    content: Watched,
    reasoning: Option<Watched>,
    /// The field the upstream sends reasoning in.
    reasoning_field: &'static str,
    json: Option<JsonTrack>,
    state: State,
}

/// The guard of one OpenAI stream.
#[derive(Debug)]
pub struct OpenAiStream {
    kind: Kind,
    settings: StreamSettings,
    n: usize,
    include_usage: bool,
    choices: Vec<Choice>,
    /// `id`, `object`, `created`, `model`, `system_fingerprint` of the
    /// first chunk, repeated in the chunks the proxy writes.
    meta: Map<String, Value>,
    usage: Option<Value>,
    cuts: Vec<CutRecord>,
    ended: bool,
    /// The upstream sent an error object in the stream.
    upstream_error: bool,
}

/// What one choice entry turned into.
struct EntryOut {
    /// The entry changed (rewrite the chunk).
    changed: bool,
    /// Keep it in the chunk.
    keep: bool,
    /// A `deloop` object for the entry's chunk (a JSON report).
    deloop: Option<Value>,
    /// A cut: the finish chunk to write after this chunk.
    cut: Option<(usize, CutRecord, Option<Value>)>,
}

impl OpenAiStream {
    /// A guard for a stream of `n` choices; `include_usage` as the request's
    /// `stream_options.include_usage`.
    pub fn new(kind: Kind, settings: StreamSettings, n: usize, include_usage: bool) -> Self {
        OpenAiStream {
            kind,
            settings,
            n: n.max(1),
            include_usage,
            choices: Vec::new(),
            meta: Map::new(),
            usage: None,
            cuts: Vec::new(),
            ended: false,
            upstream_error: false,
        }
    }

    /// The cuts made so far, taken (for metrics).
    pub fn take_cuts(&mut self) -> Vec<CutRecord> {
        std::mem::take(&mut self.cuts)
    }

    /// True once the stream was ended by the guard (or `[DONE]` was seen).
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// Reads one upstream event; appends what to forward to `out`.
    pub fn on_event(&mut self, ev: &SseEvent, out: &mut Vec<Bytes>) -> Flow {
        if self.ended {
            return Flow::Stop;
        }
        let Some(data) = ev.data.as_deref() else {
            // A comment (keep-alive): forward it as it came.
            out.push(ev.raw.clone());
            return Flow::Continue;
        };
        if data.trim() == "[DONE]" {
            self.flush_open(out);
            out.push(ev.raw.clone());
            self.ended = true;
            return Flow::Stop;
        }
        let mut v: Value = match serde_json::from_str(data) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                self.fail(
                    out,
                    "upstream_malformed_stream",
                    &format!(
                        "the upstream sent a stream event whose data is not a JSON object: {}",
                        excerpt(data)
                    ),
                );
                return Flow::Stop;
            }
        };
        if self.meta.is_empty() {
            for key in ["id", "object", "created", "model", "system_fingerprint"] {
                if let Some(x) = v.get(key) {
                    self.meta.insert(key.into(), x.clone());
                }
            }
        }
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            self.usage = Some(u.clone());
        }
        let Some(entries) = v.get_mut("choices").and_then(Value::as_array_mut) else {
            // No choices: a usage chunk, an error object, something else.
            self.upstream_error |= v.get("error").is_some_and(|e| !e.is_null());
            out.push(ev.raw.clone());
            return Flow::Continue;
        };
        let had = entries.len();
        let mut changed = false;
        let mut kept = Vec::with_capacity(entries.len());
        let mut finish_chunks = Vec::new();
        for (pos, mut entry) in std::mem::take(entries).into_iter().enumerate() {
            let r = self.on_entry(pos, &mut entry);
            changed |= r.changed || !r.keep;
            if r.keep {
                kept.push((entry, r.deloop));
            }
            if let Some(c) = r.cut {
                finish_chunks.push(c);
            }
        }
        if !changed {
            out.push(ev.raw.clone());
        } else {
            self.write_rewritten(v, kept, had, out);
        }
        for (index, cut, json_report) in finish_chunks {
            let mut deloop = serde_json::to_value(&cut).unwrap_or(Value::Null);
            if let Some(r) = json_report {
                deloop["json"] = r;
            }
            self.cuts.push(cut);
            out.push(self.finish_chunk(index, deloop));
        }
        if self.all_ended() && self.choices.iter().any(|c| c.state == State::Cut) {
            self.end(out);
            return Flow::Stop;
        }
        Flow::Continue
    }

    /// The upstream ended (`error`: how it failed; `None`: it closed the
    /// stream). Appends the ending the client still needs.
    pub fn on_end(&mut self, error: Option<&str>, out: &mut Vec<Bytes>) {
        if self.ended {
            return;
        }
        let open = self.choices.iter().any(|c| c.state == State::Open) || self.choices.is_empty();
        match error {
            // The upstream reported its own error in the stream and closed
            // it: the client has the upstream's ending.
            None if self.upstream_error => self.ended = true,
            Some(e) => {
                self.flush_open(out);
                self.fail(out, "upstream_stream_error", e);
            }
            None if open => {
                self.flush_open(out);
                self.fail(
                    out,
                    "upstream_stream_truncated",
                    "the upstream closed the stream before every choice finished",
                );
            }
            None => {
                // Every choice finished; the upstream omitted `[DONE]`.
                // Forward nothing the upstream did not send.
                self.ended = true;
            }
        }
    }

    fn fail(&mut self, out: &mut Vec<Bytes>, code: &str, message: &str) {
        out.push(Api::OpenAi.error_event(code, message));
        self.ended = true;
    }

    fn all_ended(&self) -> bool {
        let n = self.n.min(MAX_CHOICES);
        self.choices.len() >= n && self.choices[..n].iter().all(|c| c.state != State::Open)
    }

    /// Ends a cut stream: the usage chunk when asked for, then `[DONE]`.
    fn end(&mut self, out: &mut Vec<Bytes>) {
        if self.include_usage {
            let mut chunk = self.meta.clone();
            chunk.insert("choices".into(), json!([]));
            chunk.insert("usage".into(), self.usage.clone().unwrap_or(Value::Null));
            out.push(event_bytes(None, &Value::Object(chunk).to_string()));
        }
        out.push(Bytes::from_static(b"data: [DONE]\n\n"));
        self.ended = true;
    }

    fn finish_chunk(&self, index: usize, deloop: Value) -> Bytes {
        let mut chunk = self.meta.clone();
        let entry = match self.kind {
            Kind::Chat => json!({
                "index": index,
                "delta": {},
                "logprobs": null,
                "finish_reason": self.settings.end_reason,
            }),
            Kind::Completion => json!({
                "index": index,
                "text": "",
                "logprobs": null,
                "finish_reason": self.settings.end_reason,
            }),
        };
        chunk.insert("choices".into(), Value::Array(vec![entry]));
        if self.include_usage {
            chunk.insert("usage".into(), Value::Null);
        }
        chunk.insert("deloop".into(), deloop);
        event_bytes(None, &Value::Object(chunk).to_string())
    }

    /// Writes a chunk whose entries changed: one chunk per entry when
    /// entries carry their own `deloop` object, none when no entry is left
    /// and the chunk carries nothing else.
    fn write_rewritten(
        &self,
        mut v: Value,
        kept: Vec<(Value, Option<Value>)>,
        had: usize,
        out: &mut Vec<Bytes>,
    ) {
        let has_usage = v.get("usage").is_some_and(|u| !u.is_null());
        if kept.is_empty() {
            if had > 0 && !has_usage {
                return;
            }
            v["choices"] = json!([]);
            out.push(event_bytes(None, &v.to_string()));
            return;
        }
        let split = kept.len() > 1 && kept.iter().any(|(_, d)| d.is_some());
        if !split {
            let deloop = kept.iter().find_map(|(_, d)| d.clone());
            v["choices"] = Value::Array(kept.into_iter().map(|(e, _)| e).collect());
            if let Some(d) = deloop {
                v["deloop"] = d;
            }
            out.push(event_bytes(None, &v.to_string()));
            return;
        }
        let last = kept.len() - 1;
        let usage = v.as_object_mut().and_then(|o| o.remove("usage"));
        for (i, (entry, deloop)) in kept.into_iter().enumerate() {
            let mut c = v.clone();
            c["choices"] = Value::Array(vec![entry]);
            if let Some(d) = deloop {
                c["deloop"] = d;
            }
            if let Some(u) = &usage {
                c["usage"] = if i == last { u.clone() } else { Value::Null };
            }
            out.push(event_bytes(None, &c.to_string()));
        }
    }

    /// The fields of an entry that carry text, by channel.
    fn reasoning_fields(&self) -> &'static [&'static str] {
        match self.kind {
            Kind::Chat if self.settings.guard_reasoning => &["reasoning_content", "reasoning"],
            _ => &[],
        }
    }

    fn on_entry(&mut self, pos: usize, entry: &mut Value) -> EntryOut {
        let mut r = EntryOut {
            changed: false,
            keep: true,
            deloop: None,
            cut: None,
        };
        let index = entry
            .get("index")
            .and_then(Value::as_u64)
            .map_or(pos, |i| i.min(usize::MAX as u64) as usize);
        if index >= MAX_CHOICES {
            return r;
        }
        let kind = self.kind;
        let reasoning_fields = self.reasoning_fields();
        let OpenAiStream {
            settings, choices, ..
        } = self;
        let choice = choice_at(choices, settings, index);
        match choice.state {
            State::Open => {}
            // A finished choice: whatever else the upstream sends for it
            // passes through.
            State::Finished => return r,
            // A cut choice: nothing more of it is forwarded.
            State::Cut => {
                r.keep = false;
                return r;
            }
        }
        let finishing = entry.get("finish_reason").is_some_and(|f| !f.is_null());
        let mut cut: Option<CutRecord> = None;

        // Reasoning first, then content, as models produce them.
        let container = match kind {
            Kind::Chat => entry.get_mut("delta"),
            Kind::Completion => Some(&mut *entry),
        };
        if let Some(container) = container.and_then(Value::as_object_mut) {
            // Reasoning: the first field present is watched; a server that
            // sends the same text under both names gets both rewritten.
            let present = reasoning_fields
                .iter()
                .find(|f| container.get(**f).is_some_and(Value::is_string));
            if let Some(field) = present {
                choice.reasoning_field = *field;
                let text = container[*field].as_str().unwrap_or_default().to_owned();
                let w = choice
                    .reasoning
                    .get_or_insert_with(|| Watched::new(settings, Channel::Reasoning));
                let fed = w.feed(&text, None);
                if fed.text != text {
                    for f in reasoning_fields {
                        if container.get(*f).is_some_and(|v| v.as_str() == Some(&text)) {
                            container.insert((*f).into(), Value::String(fed.text.clone()));
                        }
                    }
                    r.changed = true;
                }
                if fed.cut.is_some() {
                    cut = fed.cut;
                    // The choice ends inside its reasoning.
                    container.retain(|k, _| reasoning_fields.contains(&k.as_str()) || k == "role");
                }
            }
            let content_field = match kind {
                Kind::Chat => "content",
                Kind::Completion => "text",
            };
            if cut.is_none() {
                if let Some(text) = container.get(content_field).and_then(Value::as_str) {
                    let text = text.to_owned();
                    let fed = choice.content.feed(&text, choice.json.as_mut());
                    if fed.text != text {
                        container.insert(content_field.into(), Value::String(fed.text));
                        r.changed = true;
                    }
                    if fed.cut.is_some() {
                        cut = fed.cut;
                        container.remove("tool_calls");
                        container.remove("function_call");
                    }
                }
            }
            if finishing && cut.is_none() {
                // Flush what exact mode held back; the guard's last word.
                let mut extra = |field: &str, fed: Fed, r: &mut EntryOut| -> Option<CutRecord> {
                    if !fed.text.is_empty() {
                        let mut s = container
                            .get(field)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned();
                        s.push_str(&fed.text);
                        container.insert(field.into(), Value::String(s));
                        r.changed = true;
                    }
                    fed.cut
                };
                if let Some(w) = choice.reasoning.as_mut() {
                    let fed = w.finish(None);
                    cut = extra(choice.reasoning_field, fed, &mut r);
                }
                if cut.is_none() {
                    let fed = choice.content.finish(choice.json.as_mut());
                    cut = extra(content_field, fed, &mut r);
                }
            }
        }
        if let Some(c) = cut {
            choice.state = State::Cut;
            if finishing {
                entry["finish_reason"] = Value::Null;
            }
            r.changed = true;
            let report = match (&settings.json, &choice.json) {
                (Some(spec), Some(track)) if c.channel == Channel::Content => {
                    serde_json::to_value(track.report(spec)).ok()
                }
                _ => None,
            };
            r.cut = Some((index, c, report));
        } else if finishing {
            choice.state = State::Finished;
            if let (Some(spec), Some(track)) = (&settings.json, &choice.json) {
                r.deloop = Some(json!({ "json": track.report(spec) }));
                r.changed = true;
            }
        }
        r
    }

    /// Ends the open choices at `[DONE]` or a failure: what exact mode held
    /// back is forwarded (or cut, if the guard's last verdict says so).
    fn flush_open(&mut self, out: &mut Vec<Bytes>) {
        let n = self.choices.len();
        for index in 0..n {
            if self.choices[index].state != State::Open {
                continue;
            }
            let field = match self.kind {
                Kind::Chat => "content",
                Kind::Completion => "text",
            };
            let choice = &mut self.choices[index];
            let mut pieces: Vec<(&str, String)> = Vec::new();
            let mut cut = None;
            if let Some(w) = choice.reasoning.as_mut() {
                let fed = w.finish(None);
                if !fed.text.is_empty() {
                    pieces.push((choice.reasoning_field, fed.text));
                }
                cut = fed.cut;
            }
            if cut.is_none() {
                let fed = choice.content.finish(choice.json.as_mut());
                if !fed.text.is_empty() {
                    pieces.push((field, fed.text));
                }
                cut = fed.cut;
            }
            choice.state = if cut.is_some() {
                State::Cut
            } else {
                State::Finished
            };
            if !pieces.is_empty() {
                let mut entry = Map::new();
                entry.insert("index".into(), json!(index));
                match self.kind {
                    Kind::Chat => {
                        let delta: Map<String, Value> = pieces
                            .into_iter()
                            .map(|(k, v)| (k.to_string(), Value::String(v)))
                            .collect();
                        entry.insert("delta".into(), Value::Object(delta));
                    }
                    Kind::Completion => {
                        for (k, v) in pieces {
                            entry.insert(k.into(), Value::String(v));
                        }
                    }
                }
                entry.insert("finish_reason".into(), Value::Null);
                let mut chunk = self.meta.clone();
                chunk.insert("choices".into(), Value::Array(vec![Value::Object(entry)]));
                out.push(event_bytes(None, &Value::Object(chunk).to_string()));
            }
            if let Some(c) = cut {
                let deloop = serde_json::to_value(&c).unwrap_or(Value::Null);
                self.cuts.push(c);
                out.push(self.finish_chunk(index, deloop));
            }
        }
    }
}

/// The state of choice `index`, created (with those before it) on first use.
fn choice_at<'a>(choices: &'a mut Vec<Choice>, s: &StreamSettings, index: usize) -> &'a mut Choice {
    while choices.len() <= index {
        choices.push(Choice {
            content: Watched::new(s, Channel::Content),
            reasoning: None,
            reasoning_field: "reasoning_content",
            json: s.json.as_ref().map(|_| JsonTrack::new(s.max_json_bytes)),
            state: State::Open,
        });
    }
    &mut choices[index]
}

/// The first 200 characters of `s`, for error messages.
pub(crate) fn excerpt(s: &str) -> String {
    let mut e: String = s.chars().take(200).collect();
    if e.len() < s.len() {
        e.push('…');
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::SseReader;

    fn ev(data: &str) -> SseEvent {
        let mut r = SseReader::new(1 << 20);
        let mut out = Vec::new();
        r.push(format!("data: {data}\n\n").as_bytes(), &mut out)
            .unwrap();
        out.pop().unwrap()
    }

    fn chunk(delta: Value, finish: Option<&str>) -> SseEvent {
        ev(
            &json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            .to_string(),
        )
    }

    fn run(stream: &mut OpenAiStream, events: &[SseEvent]) -> (String, Flow) {
        let mut out = Vec::new();
        let mut flow = Flow::Continue;
        for e in events {
            flow = stream.on_event(e, &mut out);
            if flow == Flow::Stop {
                break;
            }
        }
        (String::from_utf8(out.concat()).unwrap(), flow)
    }

    #[test]
    fn exact_mode_releases_held_reasoning_under_its_own_field() {
        let mut s = StreamSettings::new("stop");
        s.exact = true;
        let mut stream = OpenAiStream::new(Kind::Chat, s, 1, false);
        let text: String = (0..50).map(|i| format!("step{i} ")).collect();
        let mut events: Vec<SseEvent> = text
            .split_inclusive(' ')
            .map(|w| chunk(json!({"reasoning": w}), None))
            .collect();
        events.push(chunk(json!({}), Some("stop")));
        let (out, _) = run(&mut stream, &events);
        let mut reader = SseReader::new(1 << 20);
        let mut parsed = Vec::new();
        reader.push(out.as_bytes(), &mut parsed).unwrap();
        let got: String = parsed
            .iter()
            .filter_map(|e| e.data.as_deref())
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .filter_map(|v| {
                v["choices"][0]["delta"]["reasoning"]
                    .as_str()
                    .map(String::from)
            })
            .collect();
        assert_eq!(got, text);
        assert!(!out.contains("reasoning_content"), "{out}");
    }

    #[test]
    fn upstream_error_objects_pass_and_end_the_stream_as_the_upstream_did() {
        let mut stream = OpenAiStream::new(Kind::Chat, StreamSettings::new("stop"), 1, false);
        let err = ev(r#"{"error": {"message": "model crashed"}}"#);
        let (out, flow) = run(
            &mut stream,
            &[chunk(json!({"content": "Hi"}), None), err.clone()],
        );
        assert_eq!(flow, Flow::Continue);
        assert!(out.ends_with(std::str::from_utf8(&err.raw).unwrap()));
        let mut tail = Vec::new();
        stream.on_end(None, &mut tail);
        assert!(
            tail.is_empty(),
            "nothing added after the upstream's own error"
        );
    }

    #[test]
    fn not_json_ends_with_a_clear_error() {
        let mut stream = OpenAiStream::new(Kind::Chat, StreamSettings::new("stop"), 1, false);
        let (out, flow) = run(&mut stream, &[ev("<html>502 Bad Gateway</html>")]);
        assert_eq!(flow, Flow::Stop);
        assert!(
            out.contains("upstream_malformed_stream") && out.contains("<html>"),
            "{out}"
        );
        assert!(out.ends_with("data: [DONE]\n\n"));
    }

    #[test]
    fn chunks_of_finished_choices_still_pass() {
        // Some servers send a last chunk for a finished choice (timings, usage).
        let mut stream = OpenAiStream::new(Kind::Chat, StreamSettings::new("stop"), 1, false);
        let events = [
            chunk(json!({"content": "Hello"}), None),
            chunk(json!({}), Some("stop")),
            chunk(json!({}), None),
        ];
        let (out, _) = run(&mut stream, &events);
        let raw: Vec<u8> = events.iter().flat_map(|e| e.raw.to_vec()).collect();
        assert_eq!(out.as_bytes(), &raw[..]);
    }
}
