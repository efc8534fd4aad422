//! What the model is told: the note appended to a request whose latest
//! round repeats, the message that replaces a blocked call, and the
//! verdict object of a changed reply.

use deloop_core::loops::Verdict;
use serde_json::{json, Value};

use super::judge::RoundVerdict;
use crate::api::Api;

/// Longest excerpt of a call's arguments quoted in a note.
const ARGS_EXCERPT: usize = 200;

/// A call's arguments as compact JSON, cut at [`ARGS_EXCERPT`] characters.
pub fn excerpt_args(args: &Value) -> String {
    let s = args.to_string();
    if s.chars().count() <= ARGS_EXCERPT {
        return s;
    }
    let mut out: String = s.chars().take(ARGS_EXCERPT).collect();
    out.push('…');
    out
}

/// The note appended to a request whose latest round of calls repeats:
/// which call, what the guard saw, and what to do instead.
pub fn warning_note(round: &RoundVerdict) -> String {
    let v = &round.verdict;
    let what = match v.detector {
        Some(d) => d.as_str(),
        None => "loop",
    };
    let severity = if v.is_critical() {
        "is looping"
    } else {
        "is starting to loop"
    };
    format!(
        "[deloop loop guard] Your tool use {severity} ({what}). The repeating call is `{tool}` \
         with arguments {args}. {message} Do not make this call again with the same \
         arguments: use the results you already have, change the arguments or the approach, \
         or, if you are stuck, stop and tell the user what is blocking you.",
        tool = round.tool,
        args = round.args,
        message = v.message,
    )
}

/// The assistant text that replaces a blocked reply's tool calls.
pub fn block_message(tool: &str, args: &Value, v: &Verdict) -> String {
    format!(
        "[deloop loop guard] I did not run the tool call `{tool}` with arguments {args}: it \
         repeats a loop ({what}) and running it again would not make progress. {message} \
         The turn ends here; tell me how to continue, or change the task.",
        args = excerpt_args(args),
        what = v.detector.map_or("loop", |d| d.as_str()),
        message = v.message,
    )
}

/// The verdict as the `deloop.tool_loop` object of a changed reply.
pub fn verdict_json(tool: &str, v: &Verdict, action: &str) -> Value {
    json!({
        "tool": tool,
        "level": v.level.as_str(),
        "detector": v.detector.map(|d| d.as_str()),
        "count": v.count,
        "fingerprint": v.fingerprint,
        "action": action,
    })
}

/// The note as a message of the API: an OpenAI `user` message, or an
/// Anthropic `user` message with one text block (consecutive user turns
/// are merged by the Messages API).
pub fn note_message(api: Api, note: &str) -> Value {
    match api {
        Api::OpenAi => json!({"role": "user", "content": note}),
        Api::Anthropic => json!({"role": "user", "content": [{"type": "text", "text": note}]}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool_loops::fixtures::repeated;
    use crate::tool_loops::{History, LoopJudge};
    use deloop_core::loops::{LoopConfig, Profile};

    #[test]
    fn notes_name_the_call_and_the_way_out() {
        let h = History::read(Api::OpenAi, &repeated(12));
        let judge = LoopJudge::new(Profile::Default, LoopConfig::default());
        let round = judge.history(&h).unwrap();
        let note = warning_note(&round);
        assert!(note.contains("`read`"), "{note}");
        assert!(note.contains(r#"{"path":"/a"}"#), "{note}");
        assert!(note.contains("generic_repeat"), "{note}");
        assert!(note.contains("tell the user"), "{note}");
        let long = json!({"text": "x".repeat(10_000)});
        let msg = block_message("write", &long, &round.verdict);
        assert!(msg.len() < 2000 && msg.contains('…'));
    }
}
