//! `unknown_tool_repeat`: the latest outcomes of this tool were errors naming
//! the same unavailable tool, whatever the arguments.

use super::{Current, Finding, Record, State, View};
use crate::loops::config::Settings;
use crate::loops::{Detector, Level};

/// `sticky`: a veto of the same tool extends the streak (deloop); OpenClaw's
/// veto breaks it, so the call after a block is allowed again.
pub(crate) fn detect(
    history: View<'_>,
    cur: Current<'_>,
    s: &Settings,
    sticky: bool,
) -> Option<Finding> {
    let mut count = 0u32;
    let mut name: Option<&str> = None;
    let mut vetoes = 0u32;
    for r in history.iter().rev() {
        if &*r.tool != cur.tool {
            break;
        }
        let unknown = match &r.state {
            State::Veto if sticky => {
                vetoes += 1;
                continue;
            }
            State::Done(d) => d.unknown.as_deref(),
            _ => None,
        };
        let Some(u) = unknown else { break };
        match name {
            None => {
                name = Some(u);
                count = 1 + vetoes;
            }
            Some(n) if n == u => count += 1 + vetoes,
            Some(_) => break,
        }
        vetoes = 0;
    }
    let name = name?;
    if count < s.unknown_tool_threshold {
        return None;
    }
    Some(Finding {
        level: Level::Critical,
        detector: Detector::UnknownToolRepeat,
        count,
        key: format!("unknown-tool:{}:{}", cur.tool, name),
        message: format!(
            "CRITICAL: the unavailable tool `{name}` was attempted {count} times. Stop retrying it and continue without it."
        ),
        latest: history.back().and_then(Record::result),
    })
}
