//! Ask: the documentation oracle in the browser.

use axum::extract::State;
use axum::response::Html;
use axum::Form;
use deloop_console::page::layout;
use deloop_console::{ConsoleUser, Notice};
use deloop_oracle::{AskReport, Mode as AskMode};
use maud::{html, Markup};
use serde::Deserialize;

use crate::oracle::{api_error, oracle_of, record_cut, AskArgs, AskLang};
use crate::state::AppState;

/// The ask form.
#[derive(Debug, Default, Deserialize)]
pub struct AskForm {
    csrf: String,
    question: String,
    mode: Option<AskMode>,
    lang: Option<AskLang>,
}

fn form(f: &AskForm, user: &ConsoleUser) -> Markup {
    let mode = f.mode.unwrap_or(AskMode::Oracle);
    let lang = f.lang.unwrap_or(AskLang::Auto);
    html! {
        form id="ask" method="post" action="/ui/ask" {
            input type="hidden" name="csrf" value=(user.csrf);
            label for="question" { "Question" }
            input id="question" name="question" type="text" required value=(f.question)
                placeholder="How do I cut a looping stream?" autocomplete="off";
            div.row {
                div { label for="mode" { "Mode" }
                    select id="mode" name="mode" {
                        option value="oracle" selected[mode == AskMode::Oracle] { "oracle" }
                        option value="help" selected[mode == AskMode::Help] { "help" }
                        option value="tutor" selected[mode == AskMode::Tutor] { "tutor" }
                    }
                }
                div { label for="lang" { "Language" }
                    select id="lang" name="lang" {
                        option value="auto" selected[lang == AskLang::Auto] { "auto" }
                        option value="en" selected[lang == AskLang::En] { "English" }
                        option value="es" selected[lang == AskLang::Es] { "Español" }
                    }
                }
                div { button type="submit" { "Ask" } }
            }
        }
    }
}

fn answer_view(report: Option<&AskReport>) -> Markup {
    html! {
        p id="ask-status" role="status" aria-live="polite" {
            @if let Some(r) = report { "Answered by " (r.provider) " (" (r.model) ")." }
        }
        div id="notes" {
            @if let Some(r) = report {
                @if r.loop_cut {
                    p.notice.guard { "A loop in the answer was cut ("
                        (r.loop_detector.as_deref().unwrap_or("unknown")) "); "
                        (r.saved_chars) " characters were not generated." }
                } @else if r.clamped { p.notice.guard { "A loop guard clamped the answer." } }
                @if r.degraded {
                    p.notice.guard { "The answer is a fallback ("
                        (r.degraded_reason.as_deref().unwrap_or("degraded")) ")"
                        @if let Some(e) = &r.llm_error { ": " (e) } "." }
                }
            }
        }
        h2 { "Answer" }
        div.answer id="answer" aria-live="polite" { @if let Some(r) = report { (r.answer) } }
        h2 { "Sources" }
        ol.sources id="sources" {
            @if let Some(r) = report {
                @for (i, p) in r.passages.iter().enumerate() {
                    li id=(format!("passage-{}", i + 1)) {
                        strong { "[" (i + 1) "] " (p.source) ":" (p.start_line) "-" (p.end_line) }
                    }
                }
            }
        }
    }
}

fn render(
    user: &ConsoleUser,
    f: &AskForm,
    report: Option<&AskReport>,
    notice: Option<Notice>,
) -> Html<String> {
    let body = html! {
        @if let Some(n) = notice { (n) }
        (form(f, user))
        (answer_view(report))
    };
    Html(
        layout(
            super::NAV,
            "Ask",
            "Ask",
            user,
            &["console.js", "ask.js"],
            body,
        )
        .into_string(),
    )
}

/// `GET /ui/ask`.
pub async fn page(user: ConsoleUser) -> Html<String> {
    render(&user, &AskForm::default(), None, None)
}

/// `POST /ui/ask`: the form without JavaScript, answered whole by the
/// same ask as `/api/{mode}`.
pub async fn answer(
    State(state): State<AppState>,
    user: ConsoleUser,
    Form(f): Form<AskForm>,
) -> Result<Html<String>, axum::response::Response> {
    user.verify(&f.csrf)?;
    let oracle = match oracle_of(&state) {
        Ok(o) => o,
        Err(e) => return Ok(render(&user, &f, None, Some(Notice::Error(e.detail)))),
    };
    let req = AskArgs {
        question: f.question.clone(),
        mode: f.mode,
        lang: f.lang,
        k: None,
        hyde: None,
        retrieval: None,
        history: Vec::new(),
    }
    .into_request();
    match oracle.ask(req).await {
        Ok(out) => {
            record_cut(&state, &out.report);
            Ok(render(&user, &f, Some(&out.report), None))
        }
        Err(e) => Ok(render(
            &user,
            &f,
            None,
            Some(Notice::Error(api_error(&e).detail)),
        )),
    }
}
