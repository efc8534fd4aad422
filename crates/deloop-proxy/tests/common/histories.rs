//! Chat histories shared by the tool-loop suites.

use serde_json::{json, Value};

/// An OpenAI history: the user's question, then `n` rounds of the same
/// call (`read_file` on `/etc/app.toml`) with the same result.
pub fn repeated_history(n: usize) -> Vec<Value> {
    let mut m = vec![json!({"role": "user", "content": "Find the config file."})];
    for i in 0..n {
        m.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{i}"), "type": "function",
             "function": {"name": "read_file", "arguments": "{\"path\":\"/etc/app.toml\"}"}}]}));
        m.push(json!({"role": "tool", "tool_call_id": format!("call_{i}"),
            "content": "error: no such file"}));
    }
    m
}
