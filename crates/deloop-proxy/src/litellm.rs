//! LiteLLM's Generic Guardrail API (`POST /beta/litellm_basic_guardrail_api`):
//! deloop as a guardrail of a LiteLLM proxy, without switching proxies.
//! Pure: a request value in, a response value out.
//!
//! The wire format (LiteLLM's `GenericGuardrailAPIRequest` /
//! `GenericGuardrailAPIResponse`, checked against LiteLLM 1.106.12's proxy):
//! LiteLLM posts `{texts, images?, tools?, structured_messages?,
//! tool_calls?, request_data, request_headers?, input_type: "request" |
//! "response", litellm_call_id?, litellm_trace_id?, litellm_version?,
//! model?, additional_provider_specific_params}` and reads `{action: "NONE"
//! | "BLOCKED" | "GUARDRAIL_INTERVENED", blocked_reason?, texts?}`.
//!
//! * `input_type: "response"`: every text is clamped by the loop guard; a
//!   cut answers `GUARDRAIL_INTERVENED` with the clamped texts. The proxy
//!   judges the checks of a streamed reply incrementally, by
//!   `litellm_call_id`, with the same answers ([`streams`]). The
//!   response's `tool_calls` are judged against the history: the
//!   `structured_messages` when present, else (the proxy, through
//!   [`guardrail_recalling`]) the history of the request with the same
//!   `litellm_call_id`, since LiteLLM sends the history with a call's
//!   request check only. A critical call answers `BLOCKED` (with
//!   `proxy.tool_loops = "block"`).
//! * `input_type: "request"`: the tool calls of `structured_messages` are
//!   replayed as the proxy does with a chat history. The latest round at
//!   warning level or worse: with `warn`/`block`, the note is appended to
//!   the last text (`GUARDRAIL_INTERVENED`); critical with `block`:
//!   `BLOCKED`, the reason naming the call.
//!
//! ```
//! use deloop_core::loops::{LoopConfig, Profile};
//! use deloop_core::repetition::{ClampConfig, Detector};
//! use deloop_proxy::litellm::guardrail;
//! use deloop_proxy::tool_loops::{LoopJudge, ToolLoopAction};
//! use serde_json::json;
//!
//! let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
//! let looping = format!("Intro. {}", "over and over again we go ".repeat(40));
//! let out = guardrail(
//!     &json!({"texts": [looping], "input_type": "response", "request_data": {}}),
//!     &ClampConfig::default(),
//!     Some((ToolLoopAction::Block, &judge)),
//! )
//! .unwrap();
//! assert_eq!(out["action"], "GUARDRAIL_INTERVENED");
//! assert!(out["texts"][0].as_str().unwrap().len() < looping.len());
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use deloop_core::loops::Level;
use deloop_core::repetition::{ClampConfig, Detector};
use serde_json::{json, Value};

use crate::api::Api;
use crate::tool_loops::{
    block_message, first_critical, openai_message_calls, warning_note, History, LoopJudge,
    ReplyCall, ToolLoopAction,
};
pub use streams::{judge_texts, Judged, ResponseStreams};

pub mod streams;

/// The path LiteLLM posts to.
pub const PATH: &str = "/beta/litellm_basic_guardrail_api";

/// A request header: `1` judges every text of a response check in full,
/// as before streams were judged incrementally (for measuring the
/// difference; LiteLLM sends it when set in the guardrail's `headers`).
pub const FULL_CHECK_HEADER: &str = "x-deloop-full-check";

/// What the guardrail found, for metrics: (source, tool, verdict, action).
pub type Finding = (
    &'static str,
    String,
    deloop_core::loops::Verdict,
    &'static str,
);

/// Answers one guardrail request; `Err` names what is wrong with it.
pub fn guardrail(
    req: &Value,
    clamp_config: &ClampConfig,
    loops: Option<(ToolLoopAction, &LoopJudge)>,
) -> Result<Value, String> {
    guardrail_with_findings(req, clamp_config, loops).map(|(v, _)| v)
}

/// [`guardrail`], with the loops it found.
pub fn guardrail_with_findings(
    req: &Value,
    clamp_config: &ClampConfig,
    loops: Option<(ToolLoopAction, &LoopJudge)>,
) -> Result<(Value, Vec<Finding>), String> {
    answer(req, clamp_config, loops, None).map(|a| (a.value, a.findings))
}

/// [`guardrail_with_findings`], remembering what LiteLLM does not resend
/// ([`Recall`]).
pub fn guardrail_recalling(
    req: &Value,
    clamp_config: &ClampConfig,
    loops: Option<(ToolLoopAction, &LoopJudge)>,
    recall: &Recall<'_>,
) -> Result<Answer, String> {
    answer(req, clamp_config, loops, Some(recall))
}

/// What the proxy remembers between guardrail requests.
#[derive(Debug, Clone, Copy)]
pub struct Recall<'a> {
    /// The history of a request by its `litellm_call_id`, so that the
    /// response of the same call, which LiteLLM sends without the history,
    /// has its tool calls judged against it.
    pub histories: &'a RecentHistories,
    /// The request's size in bytes (its cost in `histories`).
    pub cost: usize,
    /// The texts of a streamed response by `litellm_call_id`, judged
    /// incrementally ([`streams`]); `None`: each text in full.
    pub streams: Option<&'a ResponseStreams>,
}

/// A guardrail request's answer, with what was found and judged.
#[derive(Debug)]
pub struct Answer {
    /// The body to send LiteLLM.
    pub value: Value,
    /// The tool-call loops found.
    pub findings: Vec<Finding>,
    /// Bytes of response `texts` received.
    pub text_bytes: usize,
    /// Bytes of them given to the loop guard ([`Judged::judged_bytes`]).
    pub judged_bytes: usize,
    /// The response texts cut: the first detector that fired, and the
    /// characters of the text after the kept prefix.
    pub cuts: Vec<(Detector, usize)>,
}

fn answer(
    req: &Value,
    clamp_config: &ClampConfig,
    loops: Option<(ToolLoopAction, &LoopJudge)>,
    recall: Option<&Recall<'_>>,
) -> Result<Answer, String> {
    let Some(obj) = req.as_object() else {
        return Err("the body must be a JSON object".into());
    };
    let texts: Vec<String> = match obj.get("texts") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|t| match t {
                Value::String(s) => Ok(s.clone()),
                _ => Err("\"texts\" must be an array of strings".to_string()),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("\"texts\" must be an array of strings".into()),
    };
    let input_type = match obj.get("input_type").and_then(Value::as_str) {
        Some(t @ ("request" | "response")) => t,
        Some(other) => {
            return Err(format!(
                "\"input_type\" must be \"request\" or \"response\", got {other:?}"
            ))
        }
        None => return Err("\"input_type\" is missing (\"request\" or \"response\")".into()),
    };
    let mut history = match obj.get("structured_messages") {
        Some(Value::Array(m)) => Some(History::read(api_of(m), m)),
        _ => None,
    };
    let call_id = obj
        .get("litellm_call_id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty() && id.len() <= MAX_CALL_ID);
    if let (Some(r), Some(id), Some(_)) = (recall, call_id, loops) {
        match (input_type, &history) {
            ("request", Some(h)) if has_calls(h) => r.histories.remember(id, h.clone(), r.cost),
            ("response", None) => history = r.histories.take(id),
            _ => {}
        }
    }
    let mut findings = Vec::new();
    let done = |value, findings, judged: Option<&Judged>| Answer {
        value,
        findings,
        text_bytes: judged.map_or(0, |_| texts.iter().map(String::len).sum()),
        judged_bytes: judged.map_or(0, |j| j.judged_bytes),
        cuts: judged.map_or_else(Vec::new, |j| cuts(&texts, j)),
    };
    if input_type == "response" {
        if let (Some((action, judge)), Some(h)) = (loops, &history) {
            let calls = response_calls(obj.get("tool_calls"));
            let verdicts = judge.judge_calls(h, &calls);
            let critical = first_critical(&calls, &verdicts);
            let block = action == ToolLoopAction::Block;
            if let Some((c, v)) = critical {
                let what = if block { "blocked" } else { "observed" };
                findings.push(("reply", c.name.clone(), v.clone(), what));
                if block {
                    let v = blocked(block_message(&c.name, &c.args, v));
                    return Ok(done(v, findings, None));
                }
            }
        }
        let judged = match (recall.and_then(|r| r.streams), call_id) {
            (Some(streams), Some(id)) => streams.judge(id, &texts, clamp_config),
            _ => judge_texts(&texts, clamp_config),
        };
        let changed = judged
            .clamped
            .iter()
            .any(|c| c.as_ref().is_some_and(|c| c.report().is_some()));
        let v = if changed {
            let out: Vec<&str> = texts
                .iter()
                .zip(&judged.clamped)
                .map(|(t, c)| c.as_ref().map_or(t.as_str(), |c| c.text.as_str()))
                .collect();
            json!({"action": "GUARDRAIL_INTERVENED", "texts": out})
        } else {
            json!({"action": "NONE"})
        };
        return Ok(done(v, findings, Some(&judged)));
    }
    let (Some((action, judge)), Some(h)) = (loops, &history) else {
        return Ok(done(json!({"action": "NONE"}), findings, None));
    };
    let Some(round) = judge.history(h) else {
        return Ok(done(json!({"action": "NONE"}), findings, None));
    };
    let note = warning_note(&round);
    let (v, what) = match action {
        ToolLoopAction::Block if round.verdict.level == Level::Critical => {
            (blocked(note), "blocked")
        }
        ToolLoopAction::Warn | ToolLoopAction::Block if !texts.is_empty() => {
            let mut out = texts.clone();
            if let Some(last) = out.last_mut() {
                last.push_str("\n\n");
                last.push_str(&note);
            }
            (
                json!({"action": "GUARDRAIL_INTERVENED", "texts": out}),
                "warned",
            )
        }
        _ => (json!({"action": "NONE"}), "observed"),
    };
    findings.push(("history", round.tool, round.verdict, what));
    Ok(done(v, findings, None))
}

/// The first report of each text that was cut, with the characters after
/// its kept prefix.
fn cuts(texts: &[String], judged: &Judged) -> Vec<(Detector, usize)> {
    texts
        .iter()
        .zip(&judged.clamped)
        .filter_map(|(t, c)| {
            let r = c.as_ref()?.report()?;
            let saved = t.get(r.keep_bytes..).map_or(0, |rest| rest.chars().count());
            Some((r.detector, saved))
        })
        .collect()
}

/// Whether the history holds a tool call (else there is nothing to judge a
/// reply's calls against, and nothing is remembered).
fn has_calls(h: &History) -> bool {
    h.events
        .iter()
        .any(|e| matches!(e, deloop_core::loops::replay::Event::Call { .. }))
}

/// Longest `litellm_call_id` remembered (LiteLLM's are UUIDs).
const MAX_CALL_ID: usize = 256;

/// The histories of recent guardrail requests by `litellm_call_id`: LiteLLM
/// sends `structured_messages` with a call's `pre_call` check but not with
/// its `post_call` check, where the reply's tool calls are. Bounded: at
/// most `max_entries` histories and `max_bytes` of requests (the oldest go
/// first); a response takes its history out.
#[derive(Debug)]
pub struct RecentHistories {
    max_entries: usize,
    max_bytes: usize,
    inner: Mutex<Recent>,
}

#[derive(Debug, Default)]
struct Recent {
    /// id -> (insertion number, cost, history).
    map: HashMap<String, (u64, usize, History)>,
    /// Insertion order; entries whose number no longer matches are stale.
    order: VecDeque<(String, u64)>,
    next: u64,
    bytes: usize,
}

impl RecentHistories {
    /// A store of at most `max_entries` histories and `max_bytes` of
    /// requests.
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        RecentHistories {
            max_entries,
            max_bytes,
            inner: Mutex::new(Recent::default()),
        }
    }

    /// Remembers `history` for `id` (a request of `cost` bytes); a request
    /// larger than the whole budget is not remembered.
    pub fn remember(&self, id: &str, history: History, cost: usize) {
        if self.max_entries == 0 || cost > self.max_bytes {
            return;
        }
        let mut r = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let n = r.next;
        r.next += 1;
        if let Some((_, old, _)) = r.map.insert(id.to_string(), (n, cost, history)) {
            r.bytes -= old;
        }
        r.bytes += cost;
        r.order.push_back((id.to_string(), n));
        while r.map.len() > self.max_entries || r.bytes > self.max_bytes {
            let Some((key, k)) = r.order.pop_front() else {
                break;
            };
            if r.map.get(&key).is_some_and(|(m, _, _)| *m == k) {
                if let Some((_, c, _)) = r.map.remove(&key) {
                    r.bytes -= c;
                }
            }
        }
        // Stale order entries (taken or replaced ids) are dropped once they
        // outnumber the live ones, so the queue stays within 2 x entries.
        if r.order.len() > 2 * r.map.len() + 16 {
            let Recent { map, order, .. } = &mut *r;
            order.retain(|(key, k)| map.get(key).is_some_and(|(m, _, _)| m == k));
        }
    }

    /// Takes out the history remembered for `id`.
    pub fn take(&self, id: &str) -> Option<History> {
        let mut r = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (_, cost, h) = r.map.remove(id)?;
        r.bytes -= cost;
        Some(h)
    }

    /// How many histories are remembered.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map
            .len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn blocked(reason: String) -> Value {
    json!({"action": "BLOCKED", "blocked_reason": reason})
}

/// Messages with `tool_use`/`tool_result` blocks read as Anthropic, others
/// as OpenAI.
fn api_of(messages: &[Value]) -> Api {
    let anthropic = messages.iter().any(|m| {
        m.get("content")
            .and_then(Value::as_array)
            .is_some_and(|blocks| {
                blocks.iter().any(|b| {
                    matches!(
                        b.get("type").and_then(Value::as_str),
                        Some("tool_use" | "tool_result")
                    )
                })
            })
    });
    if anthropic {
        Api::Anthropic
    } else {
        Api::OpenAi
    }
}

/// The response's `tool_calls` (OpenAI's shape).
fn response_calls(v: Option<&Value>) -> Vec<ReplyCall> {
    match v {
        Some(list @ Value::Array(_)) => openai_message_calls(&json!({"tool_calls": list})),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deloop_core::loops::{LoopConfig, Profile};

    fn history(n: usize) -> Vec<Value> {
        let mut m = vec![json!({"role": "user", "content": "go"})];
        for i in 0..n {
            m.push(json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": format!("c{i}"), "type": "function",
                 "function": {"name": "read", "arguments": "{\"path\":\"/a\"}"}}]}));
            m.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": "same"}));
        }
        m
    }

    fn judge() -> LoopJudge {
        LoopJudge::new(Profile::Default, LoopConfig::default())
    }

    #[test]
    fn requests_warn_and_block_from_structured_messages() {
        let j = judge();
        let c = ClampConfig::default();
        let req = |n| {
            json!({"texts": ["go", "same"], "input_type": "request",
                "structured_messages": history(n), "request_data": {}})
        };
        let v = guardrail(&req(6), &c, Some((ToolLoopAction::Block, &j))).unwrap();
        assert_eq!(v["action"], "GUARDRAIL_INTERVENED");
        assert_eq!(v["texts"][0], "go");
        assert!(v["texts"][1].as_str().unwrap().contains("`read`"));
        let v = guardrail(&req(25), &c, Some((ToolLoopAction::Block, &j))).unwrap();
        assert_eq!(v["action"], "BLOCKED");
        assert!(v["blocked_reason"].as_str().unwrap().contains("`read`"));
        let v = guardrail(&req(25), &c, Some((ToolLoopAction::Observe, &j))).unwrap();
        assert_eq!(v["action"], "NONE");
        let v = guardrail(&req(1), &c, Some((ToolLoopAction::Block, &j))).unwrap();
        assert_eq!(v["action"], "NONE");
        let v = guardrail(&req(25), &c, None).unwrap();
        assert_eq!(v["action"], "NONE");
    }

    #[test]
    fn responses_clamp_texts_and_block_calls() {
        let j = judge();
        let c = ClampConfig::default();
        let healthy = json!({"texts": ["A short healthy answer."], "input_type": "response"});
        assert_eq!(
            guardrail(&healthy, &c, Some((ToolLoopAction::Block, &j))).unwrap(),
            json!({"action": "NONE"})
        );
        let calls = json!([{"id": "x", "type": "function",
            "function": {"name": "read", "arguments": "{\"path\":\"/a\"}"}}]);
        let req = json!({"texts": [], "input_type": "response", "tool_calls": calls,
            "structured_messages": history(25)});
        let (v, found) =
            guardrail_with_findings(&req, &c, Some((ToolLoopAction::Block, &j))).unwrap();
        assert_eq!(v["action"], "BLOCKED");
        assert_eq!(found[0].3, "blocked");
        let v = guardrail(&req, &c, Some((ToolLoopAction::Warn, &j))).unwrap();
        assert_eq!(v["action"], "NONE");
    }

    #[test]
    fn a_response_is_judged_against_its_requests_history() {
        // LiteLLM's order: the request check with the history, then the
        // response check of the same call id without it.
        let j = judge();
        let c = ClampConfig::default();
        let recent = RecentHistories::new(1024, 64 << 20);
        let loops = Some((ToolLoopAction::Block, &j));
        let calls = json!([{"id": "x", "type": "function",
            "function": {"name": "read", "arguments": "{\"path\":\"/a\"}"}}]);
        let response = |id: &str| {
            json!({"texts": [], "input_type": "response", "tool_calls": calls,
                "litellm_call_id": id, "request_data": {}})
        };
        let req = json!({"texts": ["go"], "input_type": "request", "litellm_call_id": "a",
            "structured_messages": history(8), "request_data": {}});
        let recall = Recall {
            histories: &recent,
            cost: 100,
            streams: None,
        };
        let ask = |req: &Value| {
            let a = guardrail_recalling(req, &c, loops, &recall).unwrap();
            (a.value, a.findings)
        };
        let (v, _) = ask(&req);
        assert_eq!(v["action"], "GUARDRAIL_INTERVENED", "warned, not blocked");
        assert_eq!(recent.len(), 1);
        // Another call's response: nothing to judge against.
        let (v, _) = ask(&response("b"));
        assert_eq!(v["action"], "NONE");
        let (v, found) = ask(&response("a"));
        assert_eq!(v["action"], "BLOCKED");
        assert_eq!(found[0].3, "blocked");
        assert!(recent.is_empty(), "the response took the history out");
        // The pure function remembers nothing.
        let (v, _) = guardrail_with_findings(&response("a"), &c, loops).unwrap();
        assert_eq!(v["action"], "NONE");
        // A history without tool calls is not remembered.
        let plain = json!({"texts": ["hi"], "input_type": "request", "litellm_call_id": "p",
            "structured_messages": [{"role": "user", "content": "hi"}]});
        ask(&plain);
        assert!(recent.is_empty());
    }

    #[test]
    fn recent_histories_stay_within_their_bounds() {
        let h = History::read(Api::OpenAi, &history(2));
        let recent = RecentHistories::new(3, 1000);
        for i in 0..10_000 {
            recent.remember(&format!("id{i}"), h.clone(), 10);
            if i % 2 == 0 {
                assert!(recent.take(&format!("id{i}")).is_some());
            }
            let r = recent.inner.lock().unwrap();
            assert!(r.map.len() <= 3 && r.bytes <= 1000);
            assert!(r.order.len() <= 2 * r.map.len() + 17, "{}", r.order.len());
        }
        // The newest stay, the oldest went.
        assert!(recent.take("id9999").is_some());
        assert!(recent.take("id9997").is_some());
        assert!(recent.take("id1").is_none());
        // The byte budget: a big entry pushes the old ones out; one over
        // the whole budget is not kept.
        recent.remember("a", h.clone(), 400);
        recent.remember("b", h.clone(), 400);
        recent.remember("c", h.clone(), 400);
        assert!(recent.take("a").is_none());
        assert_eq!(recent.len(), 2);
        recent.remember("huge", h.clone(), 1001);
        assert!(recent.take("huge").is_none());
        // The same id again replaces its entry and its cost.
        recent.remember("b", h.clone(), 100);
        assert_eq!(recent.inner.lock().unwrap().bytes, 500);
        assert!(RecentHistories::new(0, 10).take("x").is_none());
    }

    #[test]
    fn bad_requests_name_the_problem() {
        let c = ClampConfig::default();
        for (req, what) in [
            (json!([1]), "JSON object"),
            (json!({"texts": "x", "input_type": "request"}), "texts"),
            (json!({"texts": [1], "input_type": "request"}), "texts"),
            (json!({"texts": []}), "input_type"),
            (json!({"texts": [], "input_type": "both"}), "input_type"),
        ] {
            let e = guardrail(&req, &c, None).unwrap_err();
            assert!(e.contains(what), "{e}");
        }
        // Hostile but well-typed: ignored parts.
        let req = json!({"texts": [], "input_type": "request",
            "structured_messages": [1, {"role": 3}, {"role": "tool"}], "tool_calls": "x"});
        assert_eq!(
            guardrail(&req, &c, Some((ToolLoopAction::Block, &judge()))).unwrap()["action"],
            "NONE"
        );
    }
}
