//! Live: the timeline of every guard decision in this process. The page
//! lists the ring's events (filters work without JavaScript); `live.js`
//! then appends each new event from `/ui/live/feed` (server-sent events
//! whose data is the fragment the server rendered, so there is one
//! renderer).

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::Form;
use deloop_events::{EventKind, GuardEvent, Totals};
use futures_util::{Stream, StreamExt};
use maud::{html, Markup};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;

use crate::auth::ConsoleUser;
use crate::page::{self, highlight, Notice};
use crate::Console;

/// Live feeds open at once; past it a new one is refused (503) rather than
/// holding another buffer.
pub const MAX_FEEDS: usize = 64;

/// The page's filters (empty: all).
#[derive(Debug, Default, Deserialize)]
pub struct LiveFilter {
    /// `text_cut`, `json_rescue`, `tool_loop`, `session_call`, `session_result`.
    #[serde(default)]
    pub kind: String,
    /// The proxied request's model.
    #[serde(default)]
    pub model: String,
    /// The session of the session API.
    #[serde(default)]
    pub session: String,
    /// A message to show (after a report).
    #[serde(default)]
    pub notice: String,
}

impl LiveFilter {
    fn admits(&self, e: &GuardEvent) -> bool {
        (self.kind.is_empty() || e.kind.as_str() == self.kind)
            && (self.model.is_empty() || e.model.as_deref() == Some(self.model.as_str()))
            && (self.session.is_empty() || e.session.as_deref() == Some(self.session.as_str()))
    }
}

/// `HH:MM:SS.mmm` (UTC) of a time in milliseconds since the epoch.
pub fn clock(at_ms: u64) -> String {
    let ms = at_ms % 1000;
    let s = (at_ms / 1000) % 86_400;
    format!("{:02}:{:02}:{:02}.{ms:03}", s / 3600, (s / 60) % 60, s % 60)
}

fn kind_label(k: EventKind) -> &'static str {
    match k {
        EventKind::TextCut => "text cut",
        EventKind::JsonRescue => "JSON rescue",
        EventKind::ToolLoop => "tool loop",
        EventKind::SessionCall => "session call",
        EventKind::SessionResult => "session result",
    }
}

/// One event as a timeline item.
pub fn event_item(e: &GuardEvent, csrf: &str) -> Markup {
    let level = e.level.as_deref().unwrap_or("");
    html! {
        li.event data-kind=(e.kind.as_str()) data-model=(e.model.as_deref().unwrap_or(""))
            data-session=(e.session.as_deref().unwrap_or("")) data-level=(level) data-id=(e.id) {
            div.event-head {
                time { (clock(e.at_ms)) }
                span.badge.{(e.kind.as_str())} { (kind_label(e.kind)) }
                @if !level.is_empty() { span.badge.level.{(level)} { (level) } }
                span.source { (e.source) }
                @if let Some(m) = &e.model { span.model { "model " b { (m) } } }
                @if let Some(s) = &e.session { span.session { "session " b { (s) } } }
            }
            @if let (Some(c), Some(u)) = (&e.context, &e.unit) {
                p.context { (highlight(c, u)) }
            }
            dl.facts {
                @if let Some(d) = &e.detector { dt { "detector" } dd { (d) } }
                @if let Some(p) = e.period { dt { "period" } dd { (p) } }
                @if let Some(u) = &e.unit { dt { "unit" } dd { mark { (u) } } }
                @if let Some(b) = e.saved_bytes { dt { "saved" } dd { (b) " bytes, ≈" (e.saved_tokens.unwrap_or(0)) " tokens" } }
                @if let Some(t) = &e.tool { dt { "tool" } dd { code { (t) } } }
                @if let Some(a) = &e.args { dt { "args" } dd { code { (a) } } }
                @if let Some(i) = e.index { dt { "call" } dd { "#" (i) } }
                @if let Some(s) = &e.status { dt { "status" } dd { (s) } }
                @if let Some(a) = &e.action { dt { "action" } dd { (a) } }
                @if let Some(m) = &e.message { dt { "note" } dd { (m) } }
            }
            @if e.is_loop() {
                form.report method="post" action="/ui/live/report" {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="id" value=(e.id);
                    button type="submit" { "Not a loop" }
                }
            }
        }
    }
}

fn totals_view(t: &Totals) -> Markup {
    html! {
        dl.totals aria-live="polite" {
            div { dt { "Loops cut" } dd data-total="loops_cut" { (t.loops_cut) } }
            div { dt { "Tool loops" } dd data-total="tool_loops" { (t.tool_loops) } }
            div { dt { "JSON rescues" } dd data-total="json_rescues" { (t.json_rescues) } }
            div { dt { "Tokens saved (≈)" } dd data-total="tokens_saved" { (t.tokens_saved) } }
            div { dt { "Bytes saved" } dd data-total="bytes_saved" { (t.bytes_saved) } }
            div { dt { "Not-a-loop reports" } dd data-total="reports" { (t.reports) } }
        }
    }
}

/// Items the page renders at most (the newest the filters admit), as
/// `live.js` keeps at most as many: a full ring would be megabytes of HTML.
pub const MAX_SHOWN: usize = 500;
/// Models and sessions each filter offers at most (the most recent).
pub const MAX_FILTER_OPTIONS: usize = 100;

/// The distinct values of `field` among `recent`, newest first, at most
/// [`MAX_FILTER_OPTIONS`], then sorted.
fn options<'a>(
    recent: &'a [std::sync::Arc<GuardEvent>],
    field: impl Fn(&'a GuardEvent) -> Option<&'a str>,
) -> std::collections::BTreeSet<&'a str> {
    let mut out = std::collections::BTreeSet::new();
    for e in recent.iter().rev() {
        if out.len() >= MAX_FILTER_OPTIONS {
            break;
        }
        if let Some(v) = field(e) {
            out.insert(v);
        }
    }
    out
}

/// `GET /ui/live`.
pub async fn page(
    State(c): State<Console>,
    user: ConsoleUser,
    Query(f): Query<LiveFilter>,
) -> Html<String> {
    let recent = c.bus.recent();
    let models = options(&recent, |e| e.model.as_deref());
    let sessions = options(&recent, |e| e.session.as_deref());
    let shown: Vec<_> = recent
        .iter()
        .rev()
        .filter(|e| f.admits(e))
        .take(MAX_SHOWN)
        .collect();
    let reports = c.bus.reports();
    let body = html! {
        @if !f.notice.is_empty() { (Notice::Info(f.notice.clone())) }
        (totals_view(&c.bus.totals()))
        form.filters method="get" action="/ui/live" {
            label { "Kind "
                select name="kind" {
                    option value="" { "all" }
                    @for k in EventKind::ALL {
                        option value=(k.as_str()) selected[f.kind == k.as_str()] { (kind_label(k)) }
                    }
                }
            }
            label { "Model "
                select name="model" {
                    option value="" { "all" }
                    @for m in &models { option value=(m) selected[f.model == *m] { (m) } }
                }
            }
            label { "Session "
                select name="session" {
                    option value="" { "all" }
                    @for s in &sessions { option value=(s) selected[f.session == *s] { (s) } }
                }
            }
            button type="submit" { "Filter" }
        }
        p.hint { "Newest first, at most " (MAX_SHOWN) " shown. The ring keeps the last "
            (c.bus.max_bytes() / 1024) " KiB of events; "
            span id="feed-state" { "live updates need JavaScript" } "." }
        ol.timeline id="timeline" {
            @for e in &shown { (event_item(e, &user.csrf)) }
        }
        @if shown.is_empty() { p.empty id="empty" { "No guard decision yet." } }
        @if !reports.is_empty() {
            h2 { "Reported as not a loop" }
            ul.reports {
                @for r in reports.iter().rev() {
                    li { (clock(r.at_ms)) " — event " (r.event.id) " (" (kind_label(r.event.kind)) ", "
                        (r.event.detector.as_deref().unwrap_or("no detector")) ")"
                        @if !r.note.is_empty() { ": " (r.note) } }
                }
            }
        }
    };
    Html(
        page::layout(
            c.nav,
            "Live",
            "Live",
            &user,
            &["console.js", "live.js"],
            body,
        )
        .into_string(),
    )
}

/// The data of one feed message.
#[derive(Serialize)]
struct FeedItem<'a> {
    id: u64,
    kind: &'static str,
    model: Option<&'a str>,
    session: Option<&'a str>,
    html: String,
    totals: Totals,
}

struct FeedSlot(Arc<AtomicUsize>);

impl Drop for FeedSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// `GET /ui/live/feed`: new events as server-sent events (`guard`, and
/// `lagged` when this reader fell behind and missed some).
pub async fn feed(State(c): State<Console>, user: ConsoleUser) -> Response {
    let open = c.feeds.fetch_add(1, Ordering::AcqRel);
    let slot = FeedSlot(c.feeds.clone());
    if open >= MAX_FEEDS {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "too many live feeds are open; close a console tab",
        )
            .into_response();
    }
    feed_stream(c, user.csrf, slot).into_response()
}

fn feed_stream(
    c: Console,
    csrf: String,
    slot: FeedSlot,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let rx = c.bus.subscribe();
    let stream =
        futures_util::stream::unfold((rx, c, csrf, slot), |(mut rx, c, csrf, slot)| async move {
            let ev = match rx.recv().await {
                Ok(e) => {
                    let item = FeedItem {
                        id: e.id,
                        kind: e.kind.as_str(),
                        model: e.model.as_deref(),
                        session: e.session.as_deref(),
                        html: event_item(&e, &csrf).into_string(),
                        totals: c.bus.totals(),
                    };
                    Event::default()
                        .event("guard")
                        .data(serde_json::to_string(&item).unwrap_or_default())
                }
                Err(RecvError::Lagged(n)) => Event::default()
                    .event("lagged")
                    .data(format!("{{\"missed\":{n}}}")),
                Err(RecvError::Closed) => return None,
            };
            Some((Ok(ev), (rx, c, csrf, slot)))
        });
    Sse::new(stream.boxed()).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// The "not a loop" form.
#[derive(Debug, Deserialize)]
pub struct ReportForm {
    csrf: String,
    id: u64,
    #[serde(default)]
    note: String,
}

/// `POST /ui/live/report`: records an event as not a loop, for review.
/// Answers JSON to the module (`Accept: application/json`), else goes back
/// to Live with a notice.
pub async fn report(
    State(c): State<Console>,
    user: ConsoleUser,
    headers: axum::http::HeaderMap,
    Form(f): Form<ReportForm>,
) -> Response {
    if let Err(r) = user.verify(&f.csrf) {
        return r.into_response();
    }
    let wants_json = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"));
    let out = c.bus.report(f.id, &f.note);
    if wants_json {
        return match out {
            Ok(_) => axum::Json(serde_json::json!({"ok": true, "totals": c.bus.totals()}))
                .into_response(),
            Err(e) => (
                StatusCode::NOT_FOUND,
                axum::Json(serde_json::json!({"ok": false, "error": e.to_string()})),
            )
                .into_response(),
        };
    }
    let notice = match out {
        Ok(_) => format!("Event {} recorded as not a loop, for review.", f.id),
        Err(e) => e.to_string(),
    };
    let q: String = notice
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    Redirect::to(&format!("/ui/live?notice={q}")).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_reads_utc() {
        assert_eq!(clock(0), "00:00:00.000");
        assert_eq!(clock(86_400_000 + 3_723_045), "01:02:03.045");
    }

    #[test]
    fn a_cut_item_highlights_its_unit_and_offers_a_report() {
        let mut e = GuardEvent::new(EventKind::TextCut, "proxy").with_saved(40);
        e.unit = Some("again ".into());
        e.context = Some("once again again <x>".into());
        e.model = Some("m1".into());
        let h = event_item(&e, "tok").into_string();
        assert!(h.contains("<mark>again</mark>"), "{h}");
        assert!(h.contains("&lt;x&gt;"), "{h}");
        assert!(h.contains("data-model=\"m1\""), "{h}");
        assert!(h.contains("Not a loop"), "{h}");
        let ok = GuardEvent::new(EventKind::SessionResult, "sessions");
        assert!(!event_item(&ok, "tok").into_string().contains("Not a loop"));
    }

    #[test]
    fn filters_match_kind_model_and_session() {
        let mut e = GuardEvent::new(EventKind::ToolLoop, "proxy");
        e.model = Some("m".into());
        let f = LiveFilter {
            kind: "tool_loop".into(),
            model: "m".into(),
            ..Default::default()
        };
        assert!(f.admits(&e));
        let f = LiveFilter {
            session: "s".into(),
            ..Default::default()
        };
        assert!(!f.admits(&e));
    }

    #[test]
    fn filter_options_keep_the_most_recent_values() {
        let recent: Vec<Arc<GuardEvent>> = (0..3 * MAX_FILTER_OPTIONS)
            .map(|i| {
                let mut e = GuardEvent::new(EventKind::SessionCall, "sessions");
                e.session = Some(format!("s{i:04}"));
                Arc::new(e)
            })
            .collect();
        let got = options(&recent, |e| e.session.as_deref());
        assert_eq!(got.len(), MAX_FILTER_OPTIONS);
        assert_eq!(got.first().copied(), Some("s0200"), "the newest ones");
        assert!(options(&recent, |e| e.model.as_deref()).is_empty());
    }
}
