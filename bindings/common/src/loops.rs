//! The tool-call loop guard for the packages: a live session judged call
//! by call ([`LoopGuard`], the session API's state machine) and a whole
//! transcript replayed as `deloop check --json` replays it ([`check`]).

use deloop_check::{CheckError, CheckOptions, Collect};
use deloop_core::loops::replay::{CallVerdict, DEFAULT_MAX_OPEN};
use deloop_core::loops::transcript::TranscriptFormat;
use deloop_core::loops::{LoopConfig, Profile};
use deloop_sessions::limits::{check_call, check_scope};
use deloop_sessions::{
    CallInput, GuardSettings, ResultInput, ScopeInput, Session, SessionError, VerdictOut,
};
use serde_json::Value;

use crate::Error;

/// OpenClaw's `tools.loopDetection` settings (the full config or the bare
/// block, as `deloop check --config` reads them), with the notes on values
/// it adjusted (`key adjusted to value (reason)`).
pub fn loop_config(value: Option<&Value>) -> Result<(LoopConfig, Vec<String>), Error> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok((LoopConfig::default(), Vec::new()));
    };
    let (config, adjustments) =
        LoopConfig::from_value(value).map_err(|e| Error::input(format!("config: {e}")))?;
    let notes = adjustments
        .iter()
        .map(|a| {
            format!(
                "config {}: {} adjusted to {} ({})",
                a.key, a.from, a.to, a.reason
            )
        })
        .collect();
    Ok((config, notes))
}

fn profile(name: Option<&str>, config: &LoopConfig) -> Result<Profile, Error> {
    match name {
        Some(n) => n.parse().map_err(Error::input),
        None => Ok(config.base().profile.unwrap_or_default()),
    }
}

fn session_error(e: SessionError) -> Error {
    Error::input(e.to_string())
}

/// One agent's tool calls judged as they happen, as a session of the
/// session API judges them (`deloop_sessions::Session`, in this process).
#[derive(Debug)]
pub struct LoopGuard {
    session: Session,
}

impl LoopGuard {
    /// A guard with `profile` (its name; `None`: the config's `profile`,
    /// else `default`) and OpenClaw's `tools.loopDetection` `config`; also
    /// the notes on adjusted config values.
    pub fn new(
        profile_name: Option<&str>,
        config: Option<&Value>,
    ) -> Result<(Self, Vec<String>), Error> {
        let (config, notes) = loop_config(config)?;
        let profile = profile(profile_name, &config)?;
        let settings = GuardSettings {
            profile,
            config,
            max_open_calls: DEFAULT_MAX_OPEN,
        };
        Ok((
            LoopGuard {
                session: Session::new(&settings),
            },
            notes,
        ))
    }

    /// Judges a call before it runs, and records it.
    pub fn call(&mut self, call: CallInput) -> Result<VerdictOut, Error> {
        check_call(&call).map_err(session_error)?;
        Ok(self.session.call(&call))
    }

    /// Attaches a result (or error) to its call: the call's new verdict
    /// when the result changed it (the post-compaction guard, the strict
    /// protocol), else `None`.
    pub fn result(&mut self, result: ResultInput) -> Result<Option<VerdictOut>, Error> {
        self.session
            .result(&result)
            .map(|r| r.verdict)
            .map_err(session_error)
    }

    /// Records a compaction of the agent's context.
    pub fn compaction(&mut self, scope: ScopeInput) -> Result<(), Error> {
        check_scope(&scope).map_err(session_error)?;
        self.session.compaction(&scope);
        Ok(())
    }
}

/// What [`check`] replays, as `deloop check`'s flags say it.
#[derive(Debug, Clone, Default)]
pub struct CheckRequest<'a> {
    /// `auto`, `events`, `openai` or `anthropic` (`None`: auto).
    pub format: Option<&'a str>,
    /// The profile's name (`None`: the config's, else `default`).
    pub profile: Option<&'a str>,
    /// OpenClaw's `tools.loopDetection` settings.
    pub config: Option<&'a Value>,
    /// Replace invalid UTF-8 with U+FFFD instead of refusing it.
    pub lossy: bool,
}

/// Replays a transcript through `deloop check`'s flow (`deloop_check::run`)
/// and returns a verdict per call, in order.
pub fn check(transcript: &[u8], request: &CheckRequest<'_>) -> Result<Vec<CallVerdict>, Error> {
    let format = match request.format.unwrap_or("auto") {
        "auto" => TranscriptFormat::Auto,
        "events" => TranscriptFormat::Events,
        "openai" => TranscriptFormat::OpenAi,
        "anthropic" => TranscriptFormat::Anthropic,
        other => {
            return Err(Error::input(format!(
            "unknown transcript format {other:?}; expected one of auto, events, openai, anthropic"
        )))
        }
    };
    let (config, _notes) = loop_config(request.config)?;
    let options = CheckOptions {
        format,
        profile: profile(request.profile, &config)?,
        config: Some(config),
        lossy: request.lossy,
    };
    let mut verdicts = Collect::default();
    deloop_check::run(transcript, &options, &mut verdicts).map_err(|e| match e {
        CheckError::Input { .. } => Error::input(e.to_string()),
        CheckError::Io(e) => Error::input(format!("reading the transcript: {e}")),
    })?;
    Ok(verdicts.into_verdicts())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn check_gives_the_json_lines_and_the_guard_judges_live() {
        let mut text = String::new();
        for i in 0..25 {
            text +=
                &format!("{{\"type\":\"call\",\"id\":\"c{i}\",\"tool\":\"read\",\"args\":{{}}}}\n");
            text += &format!("{{\"type\":\"result\",\"id\":\"c{i}\",\"result\":\"same\"}}\n");
        }
        let lines = check(text.as_bytes(), &CheckRequest::default()).unwrap();
        assert_eq!(lines.len(), 25);
        assert!(lines
            .iter()
            .any(|l| l.verdict.level == deloop_core::loops::Level::Critical));

        let (mut guard, notes) = LoopGuard::new(Some("default"), None).unwrap();
        assert!(notes.is_empty());
        let mut levels = Vec::new();
        for i in 0..25 {
            let v = guard
                .call(CallInput {
                    tool: "read".into(),
                    args: json!({}),
                    id: Some(format!("c{i}")),
                    agent: None,
                    run: None,
                })
                .unwrap();
            levels.push(v.level.clone());
            guard
                .result(ResultInput {
                    id: Some(format!("c{i}")),
                    tool: None,
                    args: None,
                    agent: None,
                    run: None,
                    result: Some(json!("same")),
                    error: None,
                })
                .unwrap();
        }
        let batch: Vec<String> = lines
            .iter()
            .map(|l| l.verdict.level.as_str().to_owned())
            .collect();
        assert_eq!(levels, batch);

        assert!(LoopGuard::new(Some("nope"), None)
            .unwrap_err()
            .message
            .contains("unknown profile"));
        let e = check(
            b"{\"type\":\"result\",\"id\":\"x\",\"result\":1}\n",
            &CheckRequest::default(),
        )
        .unwrap_err();
        assert!(e.message.starts_with("line 1: "), "{e}");
    }
}
