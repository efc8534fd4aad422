//! A request's messages, read as the replay events of a transcript.

use std::ops::Range;

use deloop_core::loops::replay::Event;
use deloop_core::loops::transcript::{message_events, TranscriptFormat};
use serde_json::Value;

use crate::api::Api;

/// The history of one request, as replay events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    /// The events, in message order.
    pub events: Vec<Event>,
    /// The call events (0-based among calls) of the latest assistant
    /// message, when it asked for tools.
    pub last_round: Range<usize>,
    /// Messages skipped because they could not be read (no role, a tool
    /// result without its call id, a call without a name, …).
    pub skipped: usize,
    /// The last message is the assistant's (a prefill): a note appended
    /// after it would change what the model continues, so none is.
    pub ends_with_assistant: bool,
}

impl History {
    /// Reads a request's `messages` (OpenAI chat or Anthropic Messages).
    /// Never fails: unreadable messages are skipped and counted.
    pub fn read(api: Api, messages: &[Value]) -> History {
        let format = match api {
            Api::OpenAi => TranscriptFormat::OpenAi,
            Api::Anthropic => TranscriptFormat::Anthropic,
        };
        let mut h = History::default();
        let mut calls = 0usize;
        for (i, m) in messages.iter().enumerate() {
            let is_assistant = m.get("role").and_then(Value::as_str) == Some("assistant");
            h.ends_with_assistant = is_assistant;
            match message_events(format, m, i + 1) {
                Ok(events) => {
                    let start = calls;
                    for e in events {
                        if matches!(e, Event::Call { .. }) {
                            calls += 1;
                        }
                        h.events.push(e);
                    }
                    if is_assistant {
                        h.last_round = start..calls;
                    }
                }
                Err(_) => {
                    h.skipped += 1;
                    if is_assistant {
                        h.last_round = calls..calls;
                    }
                }
            }
        }
        h
    }

    /// Reads the `messages` of a request body; an empty history when there
    /// are none.
    pub fn from_body(api: Api, body: &Value) -> History {
        match body.get("messages") {
            Some(Value::Array(m)) => History::read(api, m),
            _ => History::default(),
        }
    }

    /// Number of calls in the history.
    pub fn calls(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::Call { .. }))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool_loops::fixtures::repeated;
    use crate::tool_loops::{LoopJudge, ReplyCall};
    use deloop_core::loops::{Level, LoopConfig, Profile};
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn reads_openai_history_and_last_round() {
        let h = History::read(Api::OpenAi, &repeated(3));
        assert_eq!(h.calls(), 3);
        assert_eq!(h.last_round, 2..3);
        assert_eq!(h.skipped, 0);
        // A final assistant text message has no round.
        let mut m = repeated(3);
        m.push(json!({"role": "assistant", "content": "done"}));
        let h = History::read(Api::OpenAi, &m);
        assert!(h.last_round.is_empty());
        assert!(h.ends_with_assistant);
        assert!(!History::read(Api::OpenAi, &repeated(3)).ends_with_assistant);
    }

    #[test]
    fn reads_anthropic_history() {
        let mut m = vec![json!({"role": "user", "content": "go"})];
        for i in 0..3 {
            m.push(json!({"role": "assistant", "content": [
                {"type": "text", "text": "reading"},
                {"type": "tool_use", "id": format!("t{i}"), "name": "read", "input": {"p": 1}}]}));
            m.push(json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": format!("t{i}"), "content": "x"}]}));
        }
        let h = History::read(Api::Anthropic, &m);
        assert_eq!(h.calls(), 3);
        assert_eq!(h.last_round, 2..3);
    }

    #[test]
    fn hostile_messages_are_skipped_not_errors() {
        let m = vec![
            json!(3),
            json!({"content": "no role"}),
            json!({"role": "tool", "content": "no id"}),
            json!({"role": "assistant", "tool_calls": [{"id": "a"}]}),
            json!({"role": "assistant", "tool_calls": "nope"}),
            json!({"role": "assistant", "tool_calls": [
                {"function": {"name": "x", "arguments": {"not": "a string"}}},
                {"id": 7, "function": {"name": "y", "arguments": 12}}]}),
            json!({"role": "tool", "tool_call_id": "zzz", "content": {"deep": [[[1]]]}}),
        ];
        let h = History::read(Api::OpenAi, &m);
        assert_eq!(h.skipped, 5);
        assert_eq!(h.calls(), 2);
        let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
        assert_eq!(judge.history(&h), None);
        let v = judge.judge_calls(
            &h,
            &[ReplyCall {
                id: None,
                name: "x".into(),
                args: json!({"not": "a string"}),
            }],
        );
        assert_eq!(v[0].level, Level::Ok);
    }

    proptest! {
        /// Any JSON value as messages never panics, and the last round is
        /// within the calls read.
        #[test]
        fn any_messages_are_read(v in arb_json()) {
            let msgs = match v { Value::Array(a) => a, other => vec![other] };
            for api in [Api::OpenAi, Api::Anthropic] {
                let h = History::read(api, &msgs);
                prop_assert!(h.last_round.end <= h.calls());
                prop_assert!(h.skipped <= msgs.len());
                let judge = LoopJudge::new(Profile::Strict, LoopConfig::default());
                let _ = judge.history(&h);
            }
        }
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            prop_oneof![
                Just("assistant"),
                Just("tool"),
                Just("user"),
                Just("tool_calls"),
                Just("function"),
                Just("name"),
                Just("arguments"),
                Just("tool_use"),
                Just("tool_result"),
                Just("id"),
                Just("x")
            ]
            .prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 64, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map(
                    prop_oneof![
                        Just("role".to_string()),
                        Just("content".to_string()),
                        Just("tool_calls".to_string()),
                        Just("function".to_string()),
                        Just("name".to_string()),
                        Just("arguments".to_string()),
                        Just("id".to_string()),
                        Just("tool_call_id".to_string()),
                        Just("type".to_string()),
                        Just("input".to_string()),
                        Just("tool_use_id".to_string())
                    ],
                    inner,
                    0..5
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
