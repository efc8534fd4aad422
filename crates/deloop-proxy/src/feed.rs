//! What the proxy decides, published on the console's event bus
//! ([`deloop_events::EventBus`]): loops cut, JSON replies closed, tool-call
//! loops found. The bus is optional; without one nothing is published.

use std::sync::Arc;

use deloop_core::loops::Verdict;
use deloop_events::{EventBus, EventKind, GuardEvent};

use crate::guard::CutRecord;

/// The bus and the model of one proxied request.
#[derive(Debug, Clone)]
pub struct Feed {
    bus: Arc<EventBus>,
    model: Option<String>,
}

impl Feed {
    /// Events of a request for `model` go to `bus`.
    pub fn new(bus: Arc<EventBus>, model: Option<String>) -> Self {
        Feed { bus, model }
    }

    /// A loop cut out of a stream or a whole reply.
    pub fn cut(&self, c: &CutRecord) {
        let mut ev = GuardEvent::new(EventKind::TextCut, "proxy").with_saved(c.saved_chars as u64);
        ev.model = self.model.clone();
        ev.detector = serde_json::to_value(c.detector)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string));
        ev.period = Some(c.period);
        ev.unit = Some(c.unit.clone()).filter(|u| !u.is_empty());
        ev.context = Some(c.context.clone()).filter(|t| !t.is_empty());
        if matches!(c.channel, crate::guard::Channel::Reasoning) {
            ev.message = Some("in the reasoning".into());
        }
        self.bus.publish(ev);
    }

    /// A tool-call loop found in a history or a reply (`source`), and what
    /// the proxy did about it.
    pub fn tool_loop(&self, source: &str, tool: &str, v: &Verdict, action: &str) {
        let mut ev = GuardEvent::new(EventKind::ToolLoop, "proxy");
        ev.model = self.model.clone();
        ev.tool = Some(tool.to_string());
        ev.level = Some(v.level.as_str().to_string());
        ev.detector = v.detector.map(|d| d.as_str().to_string());
        ev.action = Some(action.to_string());
        ev.message = Some(format!("{source}: {}", v.message));
        self.bus.publish(ev);
    }

    /// A JSON reply closed or repaired (`what` says how).
    pub fn json_rescue(&self, what: &str) {
        let mut ev = GuardEvent::new(EventKind::JsonRescue, "proxy");
        ev.model = self.model.clone();
        ev.message = Some(what.to_string());
        self.bus.publish(ev);
    }
}
