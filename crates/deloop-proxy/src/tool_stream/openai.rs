//! The OpenAI side of [`ToolStream`]: `choices[].delta.tool_calls`.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::{add_deloop, event, prefix, ToolStream};
use crate::sse::SseEvent;
use crate::tool_args::CallCut;
use crate::tool_loops::{block_message, verdict_json, OpenAiCalls, ReplyCall};

impl ToolStream {
    pub(super) fn on_openai(&mut self, ev: SseEvent, out: &mut Vec<SseEvent>) {
        let Some(data) = ev.data.as_deref() else {
            out.push(ev);
            return;
        };
        if data.trim() == "[DONE]" {
            self.decide_openai(out);
            out.push(ev);
            return;
        }
        // The common case, a text delta before any call: no second parse.
        if self.n == 1
            && self.choices.is_empty()
            && self.held.is_empty()
            && memchr::memmem::find(data.as_bytes(), b"\"tool_calls\"").is_none()
        {
            out.push(ev);
            return;
        }
        let Ok(mut v) = serde_json::from_str::<Value>(data) else {
            // The text guard reports it; what is held goes first.
            self.decide_openai(out);
            out.push(ev);
            return;
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
        // Entries of a choice cut earlier are dropped (n > 1).
        let ev = self.without_cut_choices(ev, &mut v);
        let Some(ev) = ev else { return };
        let mut touches = false;
        let mut cut: Option<(u64, CallCut)> = None;
        if let Some(entries) = v.get("choices").and_then(Value::as_array) {
            for (pos, e) in entries.iter().enumerate() {
                let index = e.get("index").and_then(Value::as_u64).unwrap_or(pos as u64);
                let finishing = e.get("finish_reason").is_some_and(|f| !f.is_null());
                if finishing {
                    self.ended_choices.insert(index);
                }
                if let Some(tc) = e.pointer("/delta/tool_calls").filter(|t| t.is_array()) {
                    if self.choices.len() < crate::openai_stream::MAX_CHOICES
                        || self.choices.contains_key(&index)
                    {
                        let went = self
                            .choices
                            .entry(index)
                            .or_default()
                            .calls
                            .push_tracked(tc);
                        if cut.is_none() {
                            cut = self.watch_args(index, tc, &went);
                        }
                    }
                }
                if cut.is_none() && finishing && self.choices.contains_key(&index) {
                    cut = self.complete_open(index, None);
                }
                if let Some(c) = self.choices.get_mut(&index) {
                    if !c.decided {
                        touches = true;
                        if finishing {
                            c.finished = true;
                        }
                    }
                }
            }
        }
        if let Some((index, c)) = cut {
            self.held.push(ev);
            self.cut_openai(index, c, out);
            return;
        }
        if !self.hold {
            out.push(ev);
            let ready: Vec<u64> = self
                .choices
                .iter()
                .filter(|(_, c)| c.finished && !c.decided)
                .map(|(i, _)| *i)
                .collect();
            for i in ready {
                if let Some(c) = self.choices.get_mut(&i) {
                    c.decided = true;
                    let calls = c.calls.finish();
                    self.judge(&calls);
                }
            }
            return;
        }
        if touches || !self.held.is_empty() {
            self.held.push(ev);
        } else {
            out.push(ev);
        }
        let open = self.choices.values().any(|c| !c.decided && !c.finished);
        if !open {
            self.decide_openai(out);
        }
    }

    /// Drops the entries of choices cut earlier; `None` when nothing of
    /// the event is left.
    fn without_cut_choices(&self, ev: SseEvent, v: &mut Value) -> Option<SseEvent> {
        if !self.choices.values().any(|c| c.cut) {
            return Some(ev);
        }
        let entries = v.get_mut("choices").and_then(Value::as_array_mut)?;
        let before = entries.len();
        entries.retain(|e| {
            let index = e.get("index").and_then(Value::as_u64);
            !index.is_some_and(|i| self.choices.get(&i).is_some_and(|c| c.cut))
        });
        if entries.len() == before {
            return Some(ev);
        }
        if entries.is_empty() && v.get("usage").is_none_or(Value::is_null) {
            return None;
        }
        Some(event(None, v))
    }

    /// Feeds the argument pieces of one delta's `tool_calls` (`went`: where
    /// each element went) to the choice's argument guard.
    fn watch_args(
        &mut self,
        index: u64,
        tc: &Value,
        went: &[(usize, usize)],
    ) -> Option<(u64, CallCut)> {
        self.args.as_ref()?;
        for &(elem, call) in went {
            let call = call as u64;
            if let Some(c) = self.complete_open(index, Some(call)) {
                return Some(c);
            }
            let piece = tc[elem]
                .pointer("/function/arguments")
                .and_then(Value::as_str)
                .unwrap_or("");
            let name = self
                .choices
                .get(&index)
                .map(|c| c.calls.name(call as usize).to_string())
                .unwrap_or_default();
            // An empty piece opens the call too: calls without arguments
            // are counted when they complete.
            if let Some(c) = self
                .guard_for(index)
                .and_then(|g| g.piece(call, &name, piece))
            {
                return Some((index, c));
            }
        }
        None
    }

    /// Completes the open call of choice `index` unless it is `except`
    /// (a delta of that call is coming): its last verdict, and the count.
    fn complete_open(&mut self, index: u64, except: Option<u64>) -> Option<(u64, CallCut)> {
        let open = self.guards.get(&index)?.open_call()?;
        if Some(open) == except {
            return None;
        }
        let call = self.choices.get(&index)?.calls.call(open as usize)?;
        let g = self.guards.get_mut(&index)?;
        g.complete(open, &call.name, &call.args).map(|c| (index, c))
    }

    /// Ends choice `index` at a cut: its held call deltas from the cut
    /// call on are dropped (or the cut call's arguments closed), then a
    /// chunk with the end reason and `deloop.tool_call_cut`; once every
    /// choice ended, the calls are judged, the usage chunk and `[DONE]`.
    fn cut_openai(&mut self, index: u64, cut: CallCut, out: &mut Vec<SseEvent>) {
        let pos = cut.call as usize;
        let original = self
            .choices
            .get(&index)
            .map(|c| c.calls.args_text(pos).to_string())
            .unwrap_or_default();
        let keep = cut.closed.as_ref().map(|c| c.keep);
        let mut replay = OpenAiCalls::default();
        let mut offset = 0usize;
        let mut wire_index = Value::from(pos);
        for ev in std::mem::take(&mut self.held) {
            let Some(mut v) = ev
                .data
                .as_deref()
                .and_then(|d| serde_json::from_str::<Value>(d).ok())
            else {
                self.held.push(ev);
                continue;
            };
            let mut changed = false;
            if let Some(entries) = v.get_mut("choices").and_then(Value::as_array_mut) {
                for (p, e) in entries.iter_mut().enumerate() {
                    let i = e.get("index").and_then(Value::as_u64).unwrap_or(p as u64);
                    if i != index {
                        continue;
                    }
                    if e.get("finish_reason").is_some_and(|f| !f.is_null()) {
                        e["finish_reason"] = Value::Null;
                        changed = true;
                    }
                    let Some(list) = e
                        .pointer_mut("/delta/tool_calls")
                        .and_then(Value::as_array_mut)
                    else {
                        continue;
                    };
                    let went = replay.push_tracked(&Value::Array(list.clone()));
                    let mut kept = Vec::with_capacity(list.len());
                    for (elem, item) in std::mem::take(list).into_iter().enumerate() {
                        let call = went.iter().find(|(e2, _)| *e2 == elem).map(|(_, c)| *c);
                        let Some(call) = call.filter(|c| *c >= pos) else {
                            kept.push(item);
                            continue;
                        };
                        changed = true;
                        let (Some(keep), true) = (keep, call == pos) else {
                            continue;
                        };
                        let mut item = item;
                        if let Some(w) = item.get("index") {
                            wire_index = w.clone();
                        }
                        let piece = item
                            .pointer("/function/arguments")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string();
                        let room = keep.saturating_sub(offset);
                        offset += piece.len();
                        if piece.len() > room {
                            if let Some(f) = item.get_mut("function").filter(|f| f.is_object()) {
                                f["arguments"] = Value::String(prefix(&piece, room).into());
                            }
                            if room == 0 && item.get("id").is_none() {
                                continue;
                            }
                        }
                        kept.push(item);
                    }
                    *list = kept;
                    if list.is_empty() {
                        if let Some(d) = e.get_mut("delta").and_then(Value::as_object_mut) {
                            d.remove("tool_calls");
                        }
                    }
                }
                entries.retain(|e| {
                    e.get("finish_reason").is_some_and(|f| !f.is_null())
                        || e.get("delta")
                            .and_then(Value::as_object)
                            .is_some_and(|d| d.values().any(|x| !x.is_null()))
                });
                if changed && entries.is_empty() && v.get("usage").is_none_or(Value::is_null) {
                    continue;
                }
            }
            if changed {
                self.held.push(event(None, &v));
            } else {
                self.held.push(ev);
            }
        }
        let end_reason = self.end_reason();
        if let Some(c) = self.choices.get_mut(&index) {
            c.finished = true;
            c.cut = true;
            match &cut.closed {
                Some(closed) => {
                    c.calls.truncate(pos + 1);
                    c.calls.set_args(pos, closed.text(&original));
                }
                None => c.calls.truncate(pos),
            }
        }
        self.guards.remove(&index);
        self.ended_choices.insert(index);
        if let Some(closed) = &cut.closed {
            let mut chunk = self.meta.clone();
            chunk.insert(
                "choices".into(),
                json!([{"index": index, "delta": {"tool_calls": [
                    {"index": wire_index, "function": {"arguments": closed.closing}}]},
                    "logprobs": null, "finish_reason": null}]),
            );
            self.held.push(event(None, &Value::Object(chunk)));
        }
        let mut chunk = self.meta.clone();
        chunk.insert(
            "choices".into(),
            json!([{"index": index, "delta": {}, "logprobs": null, "finish_reason": end_reason}]),
        );
        let mut v = Value::Object(chunk);
        add_deloop(
            &mut v,
            "tool_call_cut",
            serde_json::to_value(&cut.record).unwrap_or(Value::Null),
        );
        self.held.push(event(None, &v));
        self.cuts.push(cut.record);
        let all = (0..self.n as u64).all(|i| self.ended_choices.contains(&i));
        if !all {
            return;
        }
        self.decide_openai(out);
        if self.include_usage {
            let mut chunk = self.meta.clone();
            chunk.insert("choices".into(), json!([]));
            chunk.insert("usage".into(), self.usage.clone().unwrap_or(Value::Null));
            out.push(event(None, &Value::Object(chunk)));
        }
        out.push(SseEvent {
            raw: bytes::Bytes::from_static(b"data: [DONE]\n\n"),
            event: None,
            data: Some("[DONE]".into()),
        });
        self.ended = true;
    }

    /// Judges every choice with calls not yet decided, and releases or
    /// rewrites what is held.
    pub(super) fn decide_openai(&mut self, out: &mut Vec<SseEvent>) {
        let mut blocked: BTreeMap<u64, (ReplyCall, deloop_core::loops::Verdict)> = BTreeMap::new();
        let pending: Vec<u64> = self
            .choices
            .iter()
            .filter(|(_, c)| !c.decided)
            .map(|(i, _)| *i)
            .collect();
        for i in pending {
            let calls = match self.choices.get_mut(&i) {
                Some(c) => {
                    c.decided = true;
                    c.calls.finish()
                }
                None => continue,
            };
            if let Some(b) = self.judge(&calls) {
                blocked.insert(i, b);
            }
        }
        if blocked.is_empty() {
            out.append(&mut self.held);
            return;
        }
        let mut ended: Vec<u64> = Vec::new();
        for ev in std::mem::take(&mut self.held) {
            let Some(mut v) = ev
                .data
                .as_deref()
                .and_then(|d| serde_json::from_str::<Value>(d).ok())
            else {
                out.push(ev);
                continue;
            };
            let Some(entries) = v.get_mut("choices").and_then(Value::as_array_mut) else {
                out.push(ev);
                continue;
            };
            let mut changed = false;
            let mut report = None;
            let mut kept = Vec::with_capacity(entries.len());
            for (pos, mut e) in std::mem::take(entries).into_iter().enumerate() {
                let index = e.get("index").and_then(Value::as_u64).unwrap_or(pos as u64);
                let Some((call, verdict)) = blocked.get(&index) else {
                    kept.push(e);
                    continue;
                };
                changed = true;
                if let Some(d) = e.get_mut("delta").and_then(Value::as_object_mut) {
                    d.remove("tool_calls");
                    d.remove("function_call");
                }
                if e.get("finish_reason").is_some_and(|f| !f.is_null()) {
                    e["finish_reason"] = json!("stop");
                    if let Some(d) = e.get_mut("delta").and_then(Value::as_object_mut) {
                        d.insert(
                            "content".into(),
                            Value::String(block_message(&call.name, &call.args, verdict)),
                        );
                    } else {
                        e["delta"] = json!({
                            "content": block_message(&call.name, &call.args, verdict)
                        });
                    }
                    report = Some(verdict_json(&call.name, verdict, "blocked"));
                    ended.push(index);
                    kept.push(e);
                } else {
                    let empty = e
                        .get("delta")
                        .and_then(Value::as_object)
                        .is_none_or(|d| d.values().all(Value::is_null));
                    if !empty {
                        kept.push(e);
                    }
                }
            }
            if !changed {
                *entries = kept;
                out.push(ev);
                continue;
            }
            let has_usage = v.get("usage").is_some_and(|u| !u.is_null());
            if kept.is_empty() && !has_usage {
                continue;
            }
            v["choices"] = Value::Array(kept);
            if let Some(r) = report {
                add_deloop(&mut v, "tool_loop", r);
            }
            out.push(event(None, &v));
        }
        // A blocked choice whose finish the upstream never sent.
        for (index, (call, verdict)) in &blocked {
            if ended.contains(index) {
                continue;
            }
            let mut chunk = self.meta.clone();
            chunk.insert(
                "choices".into(),
                json!([{"index": index, "delta": {
                    "content": block_message(&call.name, &call.args, verdict)},
                    "logprobs": null, "finish_reason": "stop"}]),
            );
            chunk.insert(
                "deloop".into(),
                json!({"tool_loop": verdict_json(&call.name, verdict, "blocked")}),
            );
            out.push(event(None, &Value::Object(chunk)));
        }
    }
}
