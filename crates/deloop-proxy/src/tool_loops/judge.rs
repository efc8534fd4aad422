//! Judging a history and the calls a reply asks for, by replaying the
//! history through a fresh guard per request.

use deloop_core::loops::replay::{CallVerdict, Event, Replay};
use deloop_core::loops::{Guard, Level, LoopConfig, Profile, ToolCall, Verdict};
use serde_json::Value;

use super::history::History;
use super::notes::excerpt_args;

/// A tool call the model asks for in its reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplyCall {
    /// The call id, when the server gave one.
    pub id: Option<String>,
    /// The tool's name.
    pub name: String,
    /// The arguments (a string that is not JSON is kept as a string).
    pub args: Value,
}

/// Replays histories through a fresh guard per request.
#[derive(Debug, Clone)]
pub struct LoopJudge {
    profile: Profile,
    config: LoopConfig,
}

/// The worst of the latest round's verdicts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundVerdict {
    /// The call's tool, as written.
    pub tool: String,
    /// Its arguments, compact JSON, cut to a short excerpt.
    pub args: String,
    /// The verdict.
    pub verdict: Verdict,
}

impl LoopJudge {
    /// A judge with this profile and config.
    pub fn new(profile: Profile, config: LoopConfig) -> Self {
        LoopJudge { profile, config }
    }

    /// The profile.
    pub fn profile(&self) -> Profile {
        self.profile
    }

    fn replay(&self, history: &History) -> Replay {
        let mut r = Replay::new(Guard::new(self.profile, self.config.clone()));
        for e in &history.events {
            // A result for a call the history does not hold (trimmed
            // history) is ignored, as a runtime would.
            let _ = r.push(e.clone());
        }
        r
    }

    /// The worst verdict among the latest assistant message's calls (the
    /// first one at that level), `None` when it asked for none or all are
    /// ok.
    pub fn history(&self, history: &History) -> Option<RoundVerdict> {
        if history.last_round.is_empty() {
            return None;
        }
        let r = self.replay(history);
        let worst: &CallVerdict = r
            .verdicts()
            .iter()
            .filter(|v| history.last_round.contains(&v.index))
            .filter(|v| v.verdict.level > Level::Ok)
            .fold(None::<&CallVerdict>, |best, v| match best {
                Some(b) if b.verdict.level >= v.verdict.level => Some(b),
                _ => Some(v),
            })?;
        let args = history
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Call { args, .. } => Some(args),
                _ => None,
            })
            .nth(worst.index)
            .map(excerpt_args)
            .unwrap_or_default();
        Some(RoundVerdict {
            tool: worst.tool.to_string(),
            args,
            verdict: worst.verdict.clone(),
        })
    }

    /// The verdicts of the reply's calls, judged in order after the
    /// history (as the agent would run them).
    pub fn judge_calls(&self, history: &History, calls: &[ReplyCall]) -> Vec<Verdict> {
        if calls.is_empty() {
            return Vec::new();
        }
        let mut r = self.replay(history);
        calls
            .iter()
            .map(|c| {
                let mut call = ToolCall::new(&c.name, &c.args);
                if let Some(id) = &c.id {
                    call = call.id(id);
                }
                let i = r.push_call(&call);
                r.verdict(i)
                    .map(|v| v.verdict.clone())
                    .unwrap_or_else(Verdict::ok)
            })
            .collect()
    }
}

/// The first critical verdict of a reply's calls, with its call.
pub fn first_critical<'a>(
    calls: &'a [ReplyCall],
    verdicts: &'a [Verdict],
) -> Option<(&'a ReplyCall, &'a Verdict)> {
    calls.iter().zip(verdicts).find(|(_, v)| v.is_critical())
}

/// The worst of a reply's verdicts (first at its level).
pub fn worst<'a>(
    calls: &'a [ReplyCall],
    verdicts: &'a [Verdict],
) -> Option<(&'a ReplyCall, &'a Verdict)> {
    calls
        .iter()
        .zip(verdicts)
        .filter(|(_, v)| v.level > Level::Ok)
        .fold(None, |best: Option<(&ReplyCall, &Verdict)>, x| match best {
            Some(b) if b.1.level >= x.1.level => Some(b),
            _ => Some(x),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Api;
    use crate::tool_loops::fixtures::{openai_round, repeated};
    use serde_json::json;

    #[test]
    fn huge_history_is_linear_and_blocks() {
        let h = History::read(Api::OpenAi, &repeated(5000));
        assert_eq!(h.calls(), 5000);
        let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
        let round = judge.history(&h).unwrap();
        assert_eq!(round.verdict.level, Level::Critical);
        assert_eq!(round.tool, "read");
        let call = ReplyCall {
            id: Some("next".into()),
            name: "read".into(),
            args: json!({"path": "/a"}),
        };
        assert!(judge.judge_calls(&h, &[call])[0].is_critical());
    }

    #[test]
    fn deeply_nested_args_do_not_recurse_without_bound() {
        // serde_json refuses nesting over 128 levels when reading text;
        // built values can be deeper, and the guard caps hashing depth.
        let mut args = json!(1);
        for _ in 0..1000 {
            args = json!([args]);
        }
        let calls = vec![ReplyCall {
            id: None,
            name: "x".into(),
            args,
        }];
        let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
        let v = judge.judge_calls(&History::default(), &calls);
        assert_eq!(v[0].level, Level::Ok);
    }

    #[test]
    fn ping_pong_history_warns_then_blocks() {
        let mut m = vec![json!({"role": "user", "content": "go"})];
        for i in 0..20 {
            let (tool, args) = if i % 2 == 0 {
                ("read", "{\"p\":1}")
            } else {
                ("list", "{\"d\":2}")
            };
            m.extend(openai_round(i, tool, args, "same"));
        }
        let h = History::read(Api::OpenAi, &m);
        let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
        let round = judge.history(&h).unwrap();
        assert!(round.verdict.level >= Level::Warning);
        let next = ReplyCall {
            id: None,
            name: "read".into(),
            args: json!({"p": 1}),
        };
        let v = &judge.judge_calls(&h, &[next])[0];
        assert!(v.is_critical(), "{v:?}");
    }
}
