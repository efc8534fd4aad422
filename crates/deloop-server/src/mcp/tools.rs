//! The tools the MCP server lists: names, titles, what the model reads
//! about each, annotations, and input schemas derived from the argument
//! types ([`super::schema`]).

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};

use super::args::{CallArgs, ForgetArgs, ResultArgs, TranscriptArgs};
use super::schema::input_schema;
use crate::oracle::{AskArgs, SearchArgs};
use crate::routes::guards::{ClampRequest, RepairRequest, RescueRequest};

fn tool(name: &'static str, title: &str, description: &'static str, input: JsonObject) -> Tool {
    Tool::new(
        Cow::Borrowed(name),
        Cow::Borrowed(description),
        Arc::new(input),
    )
    .with_title(title)
}

/// Pure functions of their input: no state, same answer every time.
fn pure() -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false)
}

/// Changes the session store, nothing outside deloop.
fn session_write(idempotent: bool, destructive: bool) -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(false)
        .destructive(destructive)
        .idempotent(idempotent)
        .open_world(false)
}

/// The guard tools: text guards, JSON rescue, live tool-call sessions and
/// transcript checks.
pub fn guard_tools() -> Vec<Tool> {
    vec![
        tool(
            "clamp_text",
            "Cut repetition loops out of text",
            "Cut a degenerate repetition loop out of model-generated text: the same words, \
sentence, paragraph or short character run repeated over and over (a model stuck in a loop). \
Call it on an LLM answer before you show, store or reuse it, whenever the answer may have looped. \
Healthy text (lists, tables, code, deliberate refrains) is left alone. \
Returns the same JSON as `deloop clamp --json` and POST /v1/clamp: {text (the text to use, cut \
after the first copy of the loop and ending with a marker such as \" […]\" when it was cut), \
clamped (true when something was cut), detector (word_period, long_period or substring; null when \
nothing was cut), period, unit, start, keep_bytes, removed_bytes (null when nothing was cut), \
reports (every guard that fired)}.",
            input_schema::<ClampRequest>(),
        )
        .with_annotations(pure()),
        tool(
            "rescue_json",
            "Rescue one field from broken JSON",
            "Extract the value of one key from a model's JSON output that does not parse: \
truncated, wrapped in prose or a markdown fence, with trailing commas, single quotes, comments or \
unescaped newlines. Call it when you asked a model for JSON, need one field (for example \
\"answer\") and json parsing failed. \
Returns the same JSON as `deloop rescue --json` and POST /v1/rescue: {ok (true when the key's \
value was found), value (the rescued value, any JSON; null when not found), repairs (the fixes \
applied, in snake case), error (only when ok is false: why nothing was rescued)}. Not finding the \
key is a normal result with ok false, not a tool error.",
            input_schema::<RescueRequest>(),
        )
        .with_annotations(pure()),
        tool(
            "repair_json",
            "Repair broken JSON",
            "Turn a model's broken JSON output into one valid JSON document: strips prose and \
markdown fences around it, closes truncated strings, arrays and objects, fixes quotes, commas, \
comments and escapes. Call it when you need the whole document and json parsing failed (use \
rescue_json when you need a single field). \
Returns the same JSON as `deloop repair --json` and POST /v1/repair: {value (the repaired JSON \
value), repairs (the fixes applied, in snake case, in order; empty when the input was already \
valid)}. A text with no JSON in it at all is a tool error.",
            input_schema::<RepairRequest>(),
        )
        .with_annotations(pure()),
        tool(
            "check_tool_call",
            "Check a tool call for a loop before running it",
            "Judge a tool call BEFORE it runs: is the agent stuck repeating the same call, polling \
without progress, or ping-ponging between calls? Call it once for every tool call of the agent, \
in order, with the same session_id for the whole conversation, then run the tool and report its \
outcome with record_tool_result (loops are recognised by calls AND their results). \
Returns the verdict (the same JSON as POST /v1/sessions/{session_id}/calls): {index (0-based \
position of the call in the session), id (the call id; deloop assigns \"deloop-N\" when you gave \
none), level (\"ok\", \"warning\" or \"critical\"), detector (which loop detector fired, or null), \
count (how many repetitions it counted, or null), message (what to tell the model or the \
operator; empty when ok), fingerprint (identifies the loop, or null), terminate_run (true: end \
the run now)}. On \"warning\", let the call run but tell the model it is repeating itself; on \
\"critical\", do NOT run the call and return the message to the model instead.",
            input_schema::<CallArgs>(),
        )
        .with_annotations(session_write(false, false)),
        tool(
            "record_tool_result",
            "Record a tool call's result",
            "Record the outcome of a tool call that check_tool_call judged, AFTER the tool ran. \
Identical calls that keep returning identical results are what the no-progress detectors look \
for, so report every outcome. Name the call by `id` (as given to or returned by \
check_tool_call), or, without an id, by `tool` and `args` (the oldest matching call still waiting \
is used). Send exactly one of `result` and `error`. \
Returns {index (the index of the call the result attached to; null when the call was already \
settled and the result was ignored), verdict (a replacement verdict for that call when the result \
changed it, for example the strict profile ending the run; otherwise null)}, the same JSON as \
POST /v1/sessions/{session_id}/results. An id that no call of the session waits on is a tool error.",
            input_schema::<ResultArgs>(),
        )
        .with_annotations(session_write(false, false)),
        tool(
            "forget_session",
            "Forget a session",
            "Forget everything deloop remembers about a session (its call history, all runs and \
agents). Call it when the agent conversation is over, or to start it afresh. Sessions are also \
forgotten on their own after an idle time. \
Returns {session_id, forgotten (true when the session existed)}; forgetting an unknown session is \
not an error.",
            input_schema::<ForgetArgs>(),
        )
        .with_annotations(session_write(true, true)),
        tool(
            "check_transcript",
            "Find tool-call loops in a transcript",
            "Replay a finished agent transcript and judge every tool call in it, exactly as \
`deloop check --json` and POST /v1/check do. Call it to audit a conversation after the fact \
(where did the agent start looping, how many calls were wasted). The transcript is one string: \
deloop's events as JSON lines ({\"type\": \"call\"|\"result\"|\"compaction\", ...}), or an OpenAI \
or Anthropic messages transcript (a JSON document or JSON lines); the format is detected unless \
given. \
Returns {verdicts: one object per call, in order, {index, tool, level (ok, warning or critical), \
detector, count, message, fingerprint}; summary: {profile, format, calls, warnings, criticals, \
first_critical, terminate_at, detectors (non-ok verdicts per detector)}}. A malformed transcript \
is a tool error naming the line.",
            input_schema::<TranscriptArgs>(),
        )
        .with_annotations(pure()),
    ]
}

/// `ask` and `search`, listed only when an oracle is attached.
pub fn oracle_tools() -> Vec<Tool> {
    let read_only = ToolAnnotations::new()
        .read_only(true)
        .destructive(false)
        .idempotent(false)
        .open_world(false);
    vec![
        tool(
            "ask",
            "Ask deloop's documentation oracle",
            "Answer a question from the documentation this deloop server has indexed (by default \
deloop's own documentation), citing the passages it used. It retrieves passages, writes an \
answer with the configured LLM (or, without one, quotes the best passages), and guards the \
answer against loops and broken citations. Call it for questions about the indexed \
documentation; use `search` when you only need the passages. \
Returns the same JSON as `deloop ask --json` and POST /api/oracle: {question, answer (markdown), \
mode, language, citations (the passages cited: source, lines, heading), degraded (true when a \
fallback replaced the model's answer) and degraded_reason, llm_error (when the LLM failed and \
the answer is extractive), clamped, loop_cut, provider, model, retrieval, ...}.",
            input_schema::<AskArgs>(),
        )
        .with_annotations(read_only.clone()),
        tool(
            "search",
            "Search deloop's documentation index",
            "Find the passages of the indexed documentation that best match a query, without \
writing an answer. Call it to read the sources yourself or to check what the index holds. \
Returns the same JSON as `deloop search --json`: {query, retrieval_requested, retrieval_used, \
fallback_reason (why retrieval fell back to lexical, or null), hits: [{id, chunk_id, doc_id, \
score, source (file), start_line, end_line, heading_trail, text}] best first}.",
            input_schema::<SearchArgs>(),
        )
        .with_annotations(read_only),
    ]
}
