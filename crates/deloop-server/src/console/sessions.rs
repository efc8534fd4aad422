//! Sessions: the live-agent sessions and their calls, as the session API
//! published them on the event bus (the ring's recent events).

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::response::Html;
use deloop_console::live::clock;
use deloop_console::page::layout;
use deloop_console::ConsoleUser;
use deloop_events::{EventKind, GuardEvent};
use maud::html;

use crate::state::AppState;

struct Seen {
    calls: usize,
    loops: usize,
    last_ms: u64,
    last_level: String,
}

/// `GET /ui/sessions`.
pub async fn list(State(state): State<AppState>, user: ConsoleUser) -> Html<String> {
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    for e in state.events().recent() {
        if e.kind != EventKind::SessionCall {
            continue;
        }
        let Some(s) = &e.session else { continue };
        let entry = seen.entry(s.clone()).or_insert(Seen {
            calls: 0,
            loops: 0,
            last_ms: 0,
            last_level: String::new(),
        });
        entry.calls += 1;
        entry.loops += usize::from(e.is_loop());
        entry.last_ms = e.at_ms;
        entry.last_level = e.level.clone().unwrap_or_default();
    }
    let live = state.sessions().len();
    let body = html! {
        p.hint { (live) " sessions in the store ("
            (state.sessions().describe()) "). Listed: the sessions whose calls are among the recent events." }
        @if seen.is_empty() {
            p.empty { "No session call yet. Agents call " code { "POST /v1/sessions/{session}/calls" } "." }
        } @else {
            table id="sessions" {
                thead { tr { th scope="col" { "Session" } th scope="col" { "Calls" } th scope="col" { "Loop verdicts" } th scope="col" { "Last call" } th scope="col" { "Last level" } } }
                tbody {
                    @for (name, s) in &seen {
                        tr {
                            td { a href=(format!("/ui/sessions/{}", urlencode(name))) { (name) } }
                            td { (s.calls) } td { (s.loops) } td { (clock(s.last_ms)) } td { (s.last_level) }
                        }
                    }
                }
            }
        }
    };
    Html(
        layout(
            super::NAV,
            "Sessions",
            "Sessions",
            &user,
            &["console.js"],
            body,
        )
        .into_string(),
    )
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// `GET /ui/sessions/{session}`: the session's calls as a timeline.
pub async fn one(
    State(state): State<AppState>,
    user: ConsoleUser,
    Path(session): Path<String>,
) -> Html<String> {
    let events: Vec<std::sync::Arc<GuardEvent>> = state
        .events()
        .recent()
        .into_iter()
        .filter(|e| e.session.as_deref() == Some(session.as_str()))
        .collect();
    let status = |id: &Option<String>| {
        events
            .iter()
            .find(|r| r.kind == EventKind::SessionResult && r.call_id.is_some() && r.call_id == *id)
            .and_then(|r| r.status.clone())
            .unwrap_or_else(|| "waiting".into())
    };
    let calls: Vec<_> = events
        .iter()
        .filter(|e| e.kind == EventKind::SessionCall)
        .collect();
    let body = html! {
        p { a href="/ui/sessions" { "All sessions" } }
        @if calls.is_empty() {
            p.empty { "No call of this session among the recent events." }
        } @else {
            table id="session-calls" {
                caption { "Calls in order; a bar marks each call inside a loop." }
                thead { tr { th scope="col" { "#" } th scope="col" { "Loop" } th scope="col" { "Time" } th scope="col" { "Tool" } th scope="col" { "Arguments" } th scope="col" { "Result" } th scope="col" { "Level" } th scope="col" { "Detector" } } }
                tbody {
                    @for c in &calls {
                        @let lv = c.level.as_deref().unwrap_or("ok");
                        tr.(if lv == "critical" { "loop" } else if lv == "warning" { "warning" } else { "" }) data-level=(lv) {
                            td { (c.index.map(|i| i.to_string()).unwrap_or_default()) }
                            td { @if c.is_loop() { span.span-bar style="width:3rem" aria-label="in a loop" {} } }
                            td { (clock(c.at_ms)) }
                            td { code { (c.tool.as_deref().unwrap_or("")) } }
                            td { code { (c.args.as_deref().unwrap_or("")) } }
                            td { (status(&c.call_id)) }
                            td { (lv) }
                            td { (c.detector.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
        }
    };
    let title = format!("Session {session}");
    Html(layout(super::NAV, &title, "Sessions", &user, &["console.js"], body).into_string())
}
