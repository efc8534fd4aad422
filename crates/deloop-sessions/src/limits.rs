//! What a session event may hold: every string field has a length cap, so
//! a session's memory is bounded by its caps in bytes, not only by counts.
//! The HTTP API, the MCP tools and every store check events here (one
//! place, one message per bound).

use crate::{CallInput, ResultInput, ScopeInput, SessionError};

/// Longest session name, in bytes.
pub const MAX_SESSION_NAME: usize = 256;

/// Longest tool name, call id, agent and run, in bytes.
pub const MAX_FIELD: usize = 256;

fn field(name: &str, value: Option<&str>) -> Result<(), SessionError> {
    match value {
        Some(v) if v.len() > MAX_FIELD => Err(SessionError::Invalid(format!(
            "field `{name}` is {} bytes long; the longest accepted is {MAX_FIELD}",
            v.len()
        ))),
        _ => Ok(()),
    }
}

/// A session name: 1 to [`MAX_SESSION_NAME`] bytes.
pub fn check_session(name: &str) -> Result<(), SessionError> {
    if name.is_empty() || name.len() > MAX_SESSION_NAME {
        return Err(SessionError::Invalid(format!(
            "session names are 1 to {MAX_SESSION_NAME} bytes long (this one is {})",
            name.len()
        )));
    }
    Ok(())
}

/// A call: a tool name that is not blank, and every field within its cap.
pub fn check_call(c: &CallInput) -> Result<(), SessionError> {
    if c.tool.trim().is_empty() {
        return Err(SessionError::Invalid(
            "field `tool` is empty: name the tool".into(),
        ));
    }
    field("tool", Some(&c.tool))?;
    field("id", c.id.as_deref())?;
    field("agent", c.agent.as_deref())?;
    field("run", c.run.as_deref())
}

/// A result: exactly one of `result` and `error`, a way to find its call,
/// and every field within its cap.
pub fn check_result(r: &ResultInput) -> Result<(), SessionError> {
    match (&r.result, &r.error) {
        (Some(_), Some(_)) => {
            return Err(SessionError::Invalid(
                "send one of `result` and `error`, not both".into(),
            ))
        }
        (None, None) => {
            return Err(SessionError::Invalid(
                "missing field `result` (or `error`)".into(),
            ))
        }
        _ => {}
    }
    if r.id.is_none() && (r.tool.is_none() || r.args.is_none()) {
        return Err(SessionError::Invalid(
            "a result without `id` needs `tool` and `args` to find its call".into(),
        ));
    }
    field("id", r.id.as_deref())?;
    field("tool", r.tool.as_deref())?;
    field("agent", r.agent.as_deref())?;
    field("run", r.run.as_deref())
}

/// A compaction's scope: every field within its cap.
pub fn check_scope(s: &ScopeInput) -> Result<(), SessionError> {
    field("agent", s.agent.as_deref())?;
    field("run", s.run.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tool: &str) -> CallInput {
        CallInput {
            tool: tool.into(),
            args: serde_json::Value::Null,
            id: None,
            agent: None,
            run: None,
        }
    }

    #[test]
    fn every_string_field_has_a_cap_named_in_the_error() {
        let long = "x".repeat(MAX_FIELD + 1);
        assert!(check_call(&call(&"t".repeat(MAX_FIELD))).is_ok());
        let e = check_call(&call(&long)).unwrap_err().to_string();
        assert!(
            e.contains("`tool`") && e.contains("257") && e.contains("256"),
            "{e}"
        );
        for f in ["id", "agent", "run"] {
            let mut c = call("read");
            match f {
                "id" => c.id = Some(long.clone()),
                "agent" => c.agent = Some(long.clone()),
                _ => c.run = Some(long.clone()),
            }
            let e = check_call(&c).unwrap_err().to_string();
            assert!(e.contains(&format!("`{f}`")), "{e}");
        }
        let scope = ScopeInput {
            agent: None,
            run: Some(long.clone()),
        };
        assert!(check_scope(&scope).is_err());
        assert!(check_session(&long).is_err() && check_session("").is_err());
        assert!(check_session("s").is_ok());
        assert!(matches!(
            check_call(&call("  ")),
            Err(SessionError::Invalid(_))
        ));
    }
}
