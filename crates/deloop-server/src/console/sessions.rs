//! Sessions: the live sessions listed from the session store (the flow of
//! `GET /v1/sessions`, page by page), with what the event bus's recent
//! events saw of each; and one session's calls as a timeline.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::response::Html;
use deloop_console::live::clock;
use deloop_console::page::layout;
use deloop_console::{ConsoleUser, Notice};
use deloop_events::{EventKind, GuardEvent};
use maud::html;

use crate::routes::sessions::{list_sessions, ListQuery};
use crate::state::AppState;

/// What the recent events saw of one session.
#[derive(Default)]
struct Seen {
    calls: usize,
    loops: usize,
    last_ms: u64,
    last_level: String,
}

/// `0.0 s`, `12 s`, `3 min`, `2 h`: an idle time at a glance.
fn idle(ms: u64) -> String {
    match ms {
        0..=9_999 => format!("{:.1} s", ms as f64 / 1000.0),
        10_000..=119_999 => format!("{} s", ms / 1000),
        120_000..=7_199_999 => format!("{} min", ms / 60_000),
        _ => format!("{} h", ms / 3_600_000),
    }
}

/// `GET /ui/sessions`: one page of the store's sessions (`?cursor=`,
/// `?limit=` as `GET /v1/sessions` takes them).
pub async fn list(
    State(state): State<AppState>,
    user: ConsoleUser,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Html<String> {
    let (page, notice) = match query {
        Err(r) => (None, Some(Notice::Error(r.body_text()))),
        Ok(Query(q)) => match list_sessions(&state, &q).await {
            Ok(p) => (Some((p, q)), None),
            Err(e) => (None, Some(Notice::Error(e.detail))),
        },
    };
    // Only the sessions of this page are looked up in the ring.
    let mut seen: HashMap<&str, Seen> = page
        .iter()
        .flat_map(|(p, _)| p.sessions.iter())
        .map(|s| (s.session.as_str(), Seen::default()))
        .collect();
    let recent = state.events().recent();
    for e in &recent {
        if e.kind != EventKind::SessionCall {
            continue;
        }
        let Some(s) = e.session.as_deref().and_then(|s| seen.get_mut(s)) else {
            continue;
        };
        s.calls += 1;
        s.loops += usize::from(e.is_loop());
        s.last_ms = e.at_ms;
        s.last_level = e.level.clone().unwrap_or_default();
    }
    let body = html! {
        @if let Some(n) = &notice { (n) }
        p.hint { "From the session store (" (state.sessions().describe()) "), one page at a time. \
            Recent calls and loop verdicts: what the live feed's recent events hold of each session." }
        @if let Some((p, q)) = &page {
            @if p.sessions.is_empty() {
                p.empty { @if q.cursor.is_some() { "No session on this page." } @else {
                    "No live session. Agents call " code { "POST /v1/sessions/{session}/calls" } "." } }
            } @else {
                table id="sessions" {
                    caption { "Live sessions" }
                    thead { tr {
                        th scope="col" { "Session" } th scope="col" { "Events" } th scope="col" { "Idle" }
                        th scope="col" { "Recent calls" } th scope="col" { "Loop verdicts" }
                        th scope="col" { "Last call" } th scope="col" { "Last level" }
                    } }
                    tbody {
                        @for s in &p.sessions {
                            @let r = seen.get(s.session.as_str());
                            tr data-session=(s.session) {
                                td { a href=(format!("/ui/sessions/{}", urlencode(&s.session))) { (s.session) } }
                                td { (s.events) }
                                td { (idle(s.idle_ms)) }
                                td { (r.map_or(0, |r| r.calls)) }
                                td { (r.map_or(0, |r| r.loops)) }
                                td { @if let Some(r) = r.filter(|r| r.calls > 0) { (clock(r.last_ms)) } }
                                td { (r.map(|r| r.last_level.as_str()).unwrap_or("")) }
                            }
                        }
                    }
                }
            }
            nav.pager aria-label="Session pages" {
                @if q.cursor.is_some() { a href="/ui/sessions" { "First page" } " " }
                @if let Some(next) = &p.next {
                    a rel="next" href=(format!("/ui/sessions?cursor={}{}", urlencode(next),
                        q.limit.map(|l| format!("&limit={l}")).unwrap_or_default())) { "Next page" }
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

/// The runs of consecutive calls judged above `ok`, as index pairs into
/// `calls` (first, last): what the timeline draws as one bar.
fn loop_spans(calls: &[&std::sync::Arc<GuardEvent>]) -> Vec<(usize, usize)> {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for (i, c) in calls.iter().enumerate() {
        if !c.is_loop() {
            continue;
        }
        match spans.last_mut() {
            Some((_, end)) if *end + 1 == i => *end = i,
            _ => spans.push((i, i)),
        }
    }
    spans
}

fn span_label(calls: &[&std::sync::Arc<GuardEvent>], i: usize) -> String {
    calls[i]
        .index
        .map_or_else(|| format!("{}", i + 1), |n| format!("#{n}"))
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
    let spans = loop_spans(&calls);
    let body = html! {
        p { a href="/ui/sessions" { "All sessions" } }
        @if !spans.is_empty() {
            ul.spans aria-label="Loop spans" {
                @for (a, b) in &spans {
                    li { "Loop: calls " (span_label(&calls, *a)) "–" (span_label(&calls, *b))
                        " (" (b - a + 1) " calls, " (calls[*b].detector.as_deref().unwrap_or("")) ")" }
                }
            }
        }
        @if calls.is_empty() {
            p.empty { "No call of this session among the recent events." }
        } @else {
            table id="session-calls" {
                caption { "Calls in order; one bar spans each run of calls judged a loop." }
                thead { tr { th scope="col" { "#" } th scope="col" { "Loop" } th scope="col" { "Time" } th scope="col" { "Tool" } th scope="col" { "Arguments" } th scope="col" { "Result" } th scope="col" { "Level" } th scope="col" { "Detector" } } }
                tbody {
                    @for (i, c) in calls.iter().enumerate() {
                        @let lv = c.level.as_deref().unwrap_or("ok");
                        @let span = spans.iter().find(|(a, b)| (*a..=*b).contains(&i));
                        tr.(if lv == "critical" { "loop" } else if lv == "warning" { "warning" } else { "" }) data-level=(lv) {
                            td { (c.index.map(|i| i.to_string()).unwrap_or_default()) }
                            @match span {
                                Some((a, b)) => td.span.start[i == *a].end[i == *b] { span.visually-hidden { "in a loop" } },
                                None => td {},
                            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn call(level: &str) -> std::sync::Arc<GuardEvent> {
        let mut e = GuardEvent::new(EventKind::SessionCall, "sessions");
        e.level = Some(level.into());
        std::sync::Arc::new(e)
    }

    #[test]
    fn consecutive_loop_verdicts_are_one_span() {
        let calls: Vec<_> = ["ok", "warning", "critical", "ok", "critical", "ok"]
            .into_iter()
            .map(call)
            .collect();
        let refs: Vec<_> = calls.iter().collect();
        assert_eq!(loop_spans(&refs), [(1, 2), (4, 4)]);
        assert!(loop_spans(&refs[..1]).is_empty());
    }

    #[test]
    fn idle_times_read_at_a_glance() {
        assert_eq!(idle(1234), "1.2 s");
        assert_eq!(idle(45_000), "45 s");
        assert_eq!(idle(600_000), "10 min");
        assert_eq!(idle(7_200_000), "2 h");
    }
}
