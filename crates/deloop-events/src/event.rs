//! One guard decision, as the live feed shows it.

use serde::{Deserialize, Serialize};

/// Bytes kept of the text around a cut; longer context is cut at its start
/// (the end, next to the loop, is what matters).
pub const MAX_CONTEXT_BYTES: usize = 1200;
/// Bytes kept of the repeated unit, of a tool's arguments or of a message.
pub const MAX_FIELD_BYTES: usize = 400;

/// What kind of decision an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A repetition loop cut out of a text (a proxied stream or reply, an
    /// answer of the oracle, a clamp request).
    TextCut,
    /// A JSON reply closed or repaired into a valid document.
    JsonRescue,
    /// A tool-call loop found in a proxied history or reply.
    ToolLoop,
    /// A call judged by the session API (any level, so a session's
    /// timeline is complete).
    SessionCall,
    /// A tool result recorded by the session API.
    SessionResult,
}

impl EventKind {
    /// The name used in JSON, URLs and the console's filters.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::TextCut => "text_cut",
            EventKind::JsonRescue => "json_rescue",
            EventKind::ToolLoop => "tool_loop",
            EventKind::SessionCall => "session_call",
            EventKind::SessionResult => "session_result",
        }
    }

    /// Every kind, in the console's order.
    pub const ALL: [EventKind; 5] = [
        EventKind::TextCut,
        EventKind::JsonRescue,
        EventKind::ToolLoop,
        EventKind::SessionCall,
        EventKind::SessionResult,
    ];

    /// The kind of a name ([`EventKind::as_str`]).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One guard decision. Fields that do not apply to a kind are `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardEvent {
    /// Assigned by the bus: increasing, unique in this process.
    pub id: u64,
    /// Assigned by the bus: milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// What was decided.
    pub kind: EventKind,
    /// Who decided: `proxy`, `oracle`, `clamp`, `sessions`, `api`.
    pub source: String,
    /// The model of the proxied request, when it named one.
    pub model: Option<String>,
    /// The session of the session API.
    pub session: Option<String>,
    /// The detector that fired.
    pub detector: Option<String>,
    /// A tool-loop verdict's level (`ok`, `warning`, `critical`).
    pub level: Option<String>,
    /// The loop's period (tokens for word detectors, characters for
    /// substring).
    pub period: Option<usize>,
    /// One copy of the repeated unit.
    pub unit: Option<String>,
    /// The text just before the cut, as it was forwarded.
    pub context: Option<String>,
    /// Bytes (characters for streams) cut and not forwarded.
    pub saved_bytes: Option<u64>,
    /// Tokens saved, estimated as four bytes a token.
    pub saved_tokens: Option<u64>,
    /// The tool of a tool-loop verdict or a session call.
    pub tool: Option<String>,
    /// The tool's arguments, as compact JSON.
    pub args: Option<String>,
    /// A session result's status (`ok` or `error`).
    pub status: Option<String>,
    /// What the proxy did (`observed`, `warned`, `blocked`).
    pub action: Option<String>,
    /// The verdict's message, or what was repaired.
    pub message: Option<String>,
    /// The call's index in its session.
    pub index: Option<usize>,
    /// The call id of a session call or result.
    pub call_id: Option<String>,
}

impl GuardEvent {
    /// An event of `kind` from `source`, every other field empty.
    pub fn new(kind: EventKind, source: &str) -> Self {
        GuardEvent {
            id: 0,
            at_ms: 0,
            kind,
            source: source.to_string(),
            model: None,
            session: None,
            detector: None,
            level: None,
            period: None,
            unit: None,
            context: None,
            saved_bytes: None,
            saved_tokens: None,
            tool: None,
            args: None,
            status: None,
            action: None,
            message: None,
            index: None,
            call_id: None,
        }
    }

    /// Sets `saved_bytes` and the token estimate from it.
    pub fn with_saved(mut self, bytes: u64) -> Self {
        self.saved_bytes = Some(bytes);
        self.saved_tokens = Some(bytes.div_ceil(4));
        self
    }

    /// Whether this event counts as a loop (a text cut, or a tool-loop
    /// verdict above `ok`).
    pub fn is_loop(&self) -> bool {
        match self.kind {
            EventKind::TextCut => true,
            EventKind::ToolLoop | EventKind::SessionCall => {
                self.level.as_deref().is_some_and(|l| l != "ok")
            }
            EventKind::JsonRescue | EventKind::SessionResult => false,
        }
    }

    /// Cuts every text field to its bound (on a character boundary).
    pub(crate) fn bound(&mut self) {
        if let Some(c) = &mut self.context {
            keep_tail(c, MAX_CONTEXT_BYTES);
        }
        for f in [
            &mut self.source,
            &mut self.model.get_or_insert_default(),
            &mut self.session.get_or_insert_default(),
        ] {
            keep_head(f, MAX_FIELD_BYTES);
        }
        for f in [
            &mut self.unit,
            &mut self.args,
            &mut self.message,
            &mut self.tool,
            &mut self.detector,
            &mut self.level,
            &mut self.status,
            &mut self.action,
            &mut self.call_id,
        ]
        .into_iter()
        .flatten()
        {
            keep_head(f, MAX_FIELD_BYTES);
        }
        // `get_or_insert_default` above made them `Some("")`.
        if self.model.as_deref() == Some("") {
            self.model = None;
        }
        if self.session.as_deref() == Some("") {
            self.session = None;
        }
    }

    /// The bytes this event holds, for the ring's budget.
    pub(crate) fn weight(&self) -> usize {
        let strings = [
            Some(&self.source),
            self.model.as_ref(),
            self.session.as_ref(),
            self.detector.as_ref(),
            self.level.as_ref(),
            self.unit.as_ref(),
            self.context.as_ref(),
            self.tool.as_ref(),
            self.args.as_ref(),
            self.status.as_ref(),
            self.action.as_ref(),
            self.message.as_ref(),
            self.call_id.as_ref(),
        ];
        std::mem::size_of::<Self>()
            + strings
                .into_iter()
                .flatten()
                .map(String::len)
                .sum::<usize>()
    }
}

fn keep_head(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
}

fn keep_tail(s: &mut String, max: usize) {
    if s.len() > max {
        let mut start = s.len() - max;
        while !s.is_char_boundary(start) {
            start += 1;
        }
        *s = format!("…{}", &s[start..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_their_names() {
        for k in EventKind::ALL {
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
        }
        assert_eq!(EventKind::parse("nope"), None);
    }

    #[test]
    fn fields_are_bounded_on_char_boundaries() {
        let mut ev = GuardEvent::new(EventKind::TextCut, "proxy");
        ev.context = Some("é".repeat(2000));
        ev.unit = Some("ü".repeat(1000));
        ev.bound();
        let c = ev.context.unwrap();
        assert!(c.len() <= MAX_CONTEXT_BYTES + 4, "{}", c.len());
        assert!(c.starts_with('…'));
        let u = ev.unit.unwrap();
        assert!(u.len() <= MAX_FIELD_BYTES + 4);
        assert!(u.ends_with('…'));
        assert_eq!(ev.model, None);
        assert_eq!(ev.session, None);
    }

    #[test]
    fn loops_are_cuts_and_verdicts_above_ok() {
        assert!(GuardEvent::new(EventKind::TextCut, "x").is_loop());
        let mut v = GuardEvent::new(EventKind::SessionCall, "sessions");
        v.level = Some("ok".into());
        assert!(!v.is_loop());
        v.level = Some("critical".into());
        assert!(v.is_loop());
        assert!(!GuardEvent::new(EventKind::JsonRescue, "x").is_loop());
    }

    #[test]
    fn saved_tokens_are_estimated_from_bytes() {
        let ev = GuardEvent::new(EventKind::TextCut, "x").with_saved(9);
        assert_eq!(ev.saved_tokens, Some(3));
    }
}
