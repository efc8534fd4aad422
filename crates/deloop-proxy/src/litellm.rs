//! LiteLLM's Generic Guardrail API (`POST /beta/litellm_basic_guardrail_api`):
//! deloop as a guardrail of a LiteLLM proxy, without switching proxies.
//! Pure: a request value in, a response value out.
//!
//! The wire format (LiteLLM's `GenericGuardrailAPIRequest` /
//! `GenericGuardrailAPIResponse`): LiteLLM posts `{texts, images?, tools?,
//! structured_messages?, tool_calls?, request_data, input_type: "request" |
//! "response", litellm_call_id?, litellm_trace_id?,
//! additional_provider_specific_params}` and reads `{action: "NONE" |
//! "BLOCKED" | "GUARDRAIL_INTERVENED", blocked_reason?, texts?}`.
//!
//! * `input_type: "response"`: every text is clamped by the loop guard; a
//!   cut answers `GUARDRAIL_INTERVENED` with the clamped texts. When the
//!   response's `tool_calls` come with `structured_messages` (the history),
//!   they are judged against it; a critical one answers `BLOCKED` (with
//!   `proxy.tool_loops = "block"`).
//! * `input_type: "request"`: the tool calls of `structured_messages` are
//!   replayed as the proxy does with a chat history. The latest round at
//!   warning level or worse: with `warn`/`block`, the note is appended to
//!   the last text (`GUARDRAIL_INTERVENED`); critical with `block`:
//!   `BLOCKED`, the reason naming the call.
//!
//! ```
//! use deloop_core::loops::{LoopConfig, Profile};
//! use deloop_core::repetition::ClampConfig;
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

use deloop_core::loops::Level;
use deloop_core::repetition::{clamp, ClampConfig};
use serde_json::{json, Value};

use crate::api::Api;
use crate::tool_loops::{
    block_message, first_critical, openai_message_calls, warning_note, History, LoopJudge,
    ReplyCall, ToolLoopAction,
};

/// The path LiteLLM posts to.
pub const PATH: &str = "/beta/litellm_basic_guardrail_api";

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
    let history = match obj.get("structured_messages") {
        Some(Value::Array(m)) => Some(History::read(api_of(m), m)),
        _ => None,
    };
    let mut findings = Vec::new();
    if input_type == "response" {
        if let (Some((action, judge)), Some(h)) = (loops, &history) {
            let calls = response_calls(obj.get("tool_calls"));
            let verdicts = judge.judge_calls(h, &calls);
            let critical = first_critical(&calls, &verdicts);
            let block = action == ToolLoopAction::Block;
            if let Some((c, v)) = critical {
                let done = if block { "blocked" } else { "observed" };
                findings.push(("reply", c.name.clone(), v.clone(), done));
                if block {
                    return Ok((blocked(block_message(&c.name, &c.args, v)), findings));
                }
            }
        }
        let mut changed = false;
        let out: Vec<String> = texts
            .iter()
            .map(|t| {
                let c = clamp(t, clamp_config);
                changed |= c.report().is_some();
                c.text
            })
            .collect();
        let v = if changed {
            json!({"action": "GUARDRAIL_INTERVENED", "texts": out})
        } else {
            json!({"action": "NONE"})
        };
        return Ok((v, findings));
    }
    let (Some((action, judge)), Some(h)) = (loops, &history) else {
        return Ok((json!({"action": "NONE"}), findings));
    };
    let Some(round) = judge.history(h) else {
        return Ok((json!({"action": "NONE"}), findings));
    };
    let note = warning_note(&round);
    let (v, done) = match action {
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
    findings.push(("history", round.tool, round.verdict, done));
    Ok((v, findings))
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
