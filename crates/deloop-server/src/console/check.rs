//! Check: a pasted or uploaded transcript, judged by `deloop check`'s own
//! replay, shown as a timeline with the loop spans, and as the JSON lines
//! `deloop check --json` prints.

use axum::extract::State;
use axum::response::{Html, Response};
use axum::Form;
use deloop_check::{CheckSink, Summary};
use deloop_console::page::layout;
use deloop_console::{ConsoleUser, Notice};
use deloop_core::loops::replay::CallVerdict;
use deloop_core::loops::Level;
use deloop_render::check::{write_json_call, write_json_summary};
use maud::{html, Markup};
use serde::Deserialize;

use crate::routes::guards::{check_options, CheckQuery};
use crate::state::AppState;

/// Output kept of one check (the verdict lines); past it the replay stops
/// with an error naming the limit.
const MAX_OUTPUT_BYTES: usize = 32 << 20;

/// The check form.
#[derive(Debug, Default, Deserialize)]
pub struct CheckForm {
    csrf: String,
    #[serde(default)]
    transcript: String,
    #[serde(default)]
    format: String,
    #[serde(default)]
    profile: String,
}

fn form(f: &CheckForm, user: &ConsoleUser) -> Markup {
    let format = if f.format.is_empty() {
        "auto"
    } else {
        f.format.as_str()
    };
    html! {
        form id="check" method="post" action="/ui/check" {
            input type="hidden" name="csrf" value=(user.csrf);
            label for="file" { "Upload a transcript" }
            input id="file" type="file" accept=".jsonl,.json,.ndjson,.txt,application/json";
            p.hint id="file-status" role="status" { "Or paste it below: deloop's events as JSON lines, or OpenAI or Anthropic messages." }
            label for="transcript" { "Transcript" }
            textarea id="transcript" name="transcript" required { (f.transcript) }
            div.row {
                div { label for="format" { "Format" }
                    select id="format" name="format" {
                        @for name in ["auto", "events", "openai", "anthropic"] {
                            option value=(name) selected[format == name] { (name) }
                        }
                    }
                }
                div { label for="profile" { "Profile" }
                    select id="profile" name="profile" {
                        option value="" selected[f.profile.is_empty()] { "server's" }
                        @for name in ["default", "openclaw", "strict"] {
                            option value=(name) selected[f.profile == name] { (name) }
                        }
                    }
                }
                div { button type="submit" { "Check" } }
            }
        }
    }
}

struct Limited(Vec<u8>);

impl std::io::Write for Limited {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.0.len() + data.len() > MAX_OUTPUT_BYTES {
            return Err(std::io::Error::other(format!(
                "the verdicts are longer than {} MiB; check this transcript with `deloop check`",
                MAX_OUTPUT_BYTES >> 20
            )));
        }
        self.0.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What the page shows of a check: the verdicts, kept typed for the
/// timeline, and the lines of `deloop check --json` (at most
/// [`MAX_OUTPUT_BYTES`]; past it the replay stops).
struct Shown {
    calls: Vec<CallVerdict>,
    lines: Limited,
}

impl CheckSink for Shown {
    fn call(&mut self, c: CallVerdict) -> std::io::Result<()> {
        write_json_call(&mut self.lines, &c)?;
        self.calls.push(c);
        Ok(())
    }

    fn summary(&mut self, summary: &Summary) -> std::io::Result<()> {
        write_json_summary(&mut self.lines, summary)
    }
}

/// The verdicts and summary of a check, drawn, with its JSON `lines`.
fn verdicts(calls: &[CallVerdict], summary: Option<&Summary>, lines: &str) -> Markup {
    let level = |c: &CallVerdict| c.verdict.level;
    // Loop spans: runs of consecutive calls above `ok`.
    let mut span_start = vec![None; calls.len()];
    let mut i = 0;
    while i < calls.len() {
        if level(&calls[i]) == Level::Ok {
            i += 1;
            continue;
        }
        let start = i;
        while i < calls.len() && level(&calls[i]) != Level::Ok {
            i += 1;
        }
        span_start[start] = Some(i - start);
    }
    html! {
        @if let Some(s) = summary {
            p.summary id="check-summary" {
                (s.calls) " calls, "
                (s.warnings) " warnings, "
                (s.criticals) " criticals"
                @if let Some(t) = s.terminate_at { "; the run should end at call #" (t) }
                "."
            }
        }
        table id="check-timeline" {
            caption { "Calls in transcript order; a bar marks each loop span." }
            thead { tr { th scope="col" { "#" } th scope="col" { "Loop" } th scope="col" { "Tool" } th scope="col" { "Level" } th scope="col" { "Detector" } th scope="col" { "Message" } } }
            tbody {
                @for (n, c) in calls.iter().enumerate() {
                    @let lv = level(c).as_str();
                    tr.(if lv == "critical" { "loop" } else if lv == "warning" { "warning" } else { "" }) data-level=(lv) {
                        td { (c.index) }
                        td {
                            @if let Some(len) = span_start[n] {
                                span.span-bar style=(format!("width:{}rem", (len as f64 * 0.6).min(20.0))) aria-hidden="true" {}
                                " " span.hint { "loop of " (len) }
                            }
                        }
                        td { code { (c.tool) } }
                        td { (lv) }
                        td { (c.verdict.detector.map(|d| d.as_str()).unwrap_or("")) }
                        td { (c.verdict.message) }
                    }
                }
            }
        }
        details {
            summary { "The lines of " code { "deloop check --json" } }
            pre id="check-json" { (lines) }
        }
    }
}

fn render(
    user: &ConsoleUser,
    f: &CheckForm,
    result: Option<Markup>,
    notice: Option<Notice>,
) -> Html<String> {
    let body = html! {
        @if let Some(n) = notice { (n) }
        (form(f, user))
        @if let Some(r) = result { h2 { "Verdicts" } (r) }
    };
    Html(
        layout(
            super::NAV,
            "Check",
            "Check",
            user,
            &["console.js", "check.js"],
            body,
        )
        .into_string(),
    )
}

/// `GET /ui/check`.
pub async fn page(user: ConsoleUser) -> Html<String> {
    render(&user, &CheckForm::default(), None, None)
}

/// `POST /ui/check`: replays the transcript with `deloop check`'s flow.
pub async fn run(
    State(state): State<AppState>,
    user: ConsoleUser,
    Form(f): Form<CheckForm>,
) -> Result<Html<String>, Response> {
    user.verify(&f.csrf)?;
    let q = CheckQuery {
        format: Some(f.format.clone()).filter(|s| !s.is_empty()),
        profile: Some(f.profile.clone()).filter(|s| !s.is_empty()),
    };
    let options = match check_options(&state, &q) {
        Ok(o) => o,
        Err(e) => {
            return Ok(render(
                &user,
                &f,
                None,
                Some(Notice::Error(format!("field {e}"))),
            ))
        }
    };
    let text = f.transcript.clone();
    let ran = tokio::task::spawn_blocking(move || {
        let mut shown = Shown {
            calls: Vec::new(),
            lines: Limited(Vec::new()),
        };
        let res = deloop_check::run(text.as_bytes(), &options, &mut shown);
        (shown, res)
    })
    .await;
    let (shown, res) = match ran {
        Ok(r) => r,
        Err(e) => {
            return Ok(render(
                &user,
                &f,
                None,
                Some(Notice::Error(format!("the check failed: {e}"))),
            ))
        }
    };
    let lines = String::from_utf8_lossy(&shown.lines.0);
    let (summary, notice) = match res {
        Ok(s) => (Some(s), None),
        Err(e) => (
            None,
            Some(Notice::Error(format!(
                "{e}; fix the transcript and check again"
            ))),
        ),
    };
    let drawn = verdicts(&shown.calls, summary.as_ref(), &lines);
    Ok(render(&user, &f, Some(drawn), notice))
}
