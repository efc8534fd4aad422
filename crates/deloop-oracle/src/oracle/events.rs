//! The ask's event sink: deltas batched and forwarded to the caller's
//! channel, if any.

use super::OracleError;
use crate::ask::{AskEvent, DeltaEvent, ErrorEvent};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::mpsc::Sender;

/// Forwards events to the caller's channel, if any. A closed receiver
/// (the client went away) silently stops the forwarding, never the ask.
pub(super) struct Events {
    pub(super) tx: Option<Sender<AskEvent>>,
    /// Delta text not yet accepted by a full channel.
    pending: String,
    pub(super) deltas: usize,
}

impl Events {
    pub(super) fn new(tx: Option<Sender<AskEvent>>) -> Self {
        Events {
            tx,
            pending: String::new(),
            deltas: 0,
        }
    }

    pub(super) async fn send(&mut self, event: AskEvent) {
        self.flush().await;
        if let Some(tx) = &self.tx {
            if tx.send(event).await.is_err() {
                self.tx = None;
            }
        }
    }

    /// Queues answer text without waiting (called from inside the LLM
    /// stream); text a full channel refuses is sent with the next delta.
    pub(super) fn delta(&mut self, text: &str) {
        let Some(tx) = &self.tx else { return };
        self.deltas += 1;
        self.pending.push_str(text);
        let event = AskEvent::Delta(DeltaEvent {
            text: std::mem::take(&mut self.pending),
        });
        match tx.try_send(event) {
            Ok(()) => {}
            Err(TrySendError::Full(AskEvent::Delta(d))) => self.pending = d.text,
            Err(TrySendError::Full(_)) => {}
            Err(TrySendError::Closed(_)) => self.tx = None,
        }
    }

    pub(super) async fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let text = std::mem::take(&mut self.pending);
        if let Some(tx) = &self.tx {
            if tx.send(AskEvent::Delta(DeltaEvent { text })).await.is_err() {
                self.tx = None;
            }
        }
    }
}

pub(super) fn error_event(e: &OracleError) -> AskEvent {
    AskEvent::Error(ErrorEvent {
        kind: e.kind().into(),
        message: e.to_string(),
    })
}
