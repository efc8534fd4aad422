//! Clamp: what the clamp keeps of a pasted text, the cut and the repeated
//! unit marked. The same flow and JSON as `POST /v1/clamp`.

use axum::extract::State;
use axum::response::{Html, Response};
use axum::Form;
use deloop_console::page::{highlight, layout};
use deloop_console::{ConsoleUser, Notice};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::Value;

use crate::routes::guards::{clamp_value, ClampRequest};
use crate::state::AppState;

/// Bytes of the cut part shown (the rest is counted, not drawn).
const MAX_CUT_SHOWN: usize = 8 << 10;

/// The clamp form.
#[derive(Debug, Default, Deserialize)]
pub struct ClampForm {
    csrf: String,
    #[serde(default)]
    text: String,
}

fn floor(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The input with the kept part, the cut part and the unit marked.
fn result(input: &str, v: &Value) -> Markup {
    let clamped = v.get("clamped").and_then(Value::as_bool).unwrap_or(false);
    if !clamped {
        return html! { p.notice.info id="clamp-result" role="status" { "No loop: the clamp keeps the whole text." } };
    }
    let unit = v.get("unit").and_then(Value::as_str).unwrap_or("");
    let keep = floor(
        input,
        v.get("keep_bytes").and_then(Value::as_u64).unwrap_or(0) as usize,
    );
    let start = floor(
        input,
        v.get("start").and_then(Value::as_u64).unwrap_or(0) as usize,
    )
    .min(keep);
    let (before, kept_loop, cut) = (&input[..start], &input[start..keep], &input[keep..]);
    let shown = floor(cut, MAX_CUT_SHOWN);
    html! {
        dl.facts id="clamp-result" {
            dt { "detector" } dd { (v.get("detector").and_then(Value::as_str).unwrap_or("")) }
            dt { "period" } dd { (v.get("period").and_then(Value::as_u64).unwrap_or(0)) }
            dt { "unit" } dd { mark { (unit) } }
            dt { "removed" } dd { (v.get("removed_bytes").and_then(Value::as_u64).unwrap_or(0)) " bytes" }
        }
        h2 { "The text, marked" }
        p.hint { "Kept text, then the loop's kept copies with the unit marked, then what the clamp cut (struck through)." }
        div.kept id="clamp-marked" {
            (before) (highlight(kept_loop, unit))
            del { mark.cut { (&cut[..shown]) } }
            @if shown < cut.len() { " … (" (cut.len() - shown) " more bytes cut)" }
        }
        h2 { "What the clamp keeps" }
        pre id="clamp-kept" { (v.get("text").and_then(Value::as_str).unwrap_or("")) }
    }
}

fn render(
    user: &ConsoleUser,
    f: &ClampForm,
    out: Option<Markup>,
    notice: Option<Notice>,
) -> Html<String> {
    let body = html! {
        @if let Some(n) = notice { (n) }
        form id="clamp" method="post" action="/ui/clamp" {
            input type="hidden" name="csrf" value=(user.csrf);
            label for="text" { "Text" }
            textarea id="text" name="text" required { (f.text) }
            button type="submit" { "Clamp" }
        }
        @if let Some(o) = out { (o) }
    };
    Html(layout(super::NAV, "Clamp", "Clamp", user, &["console.js"], body).into_string())
}

/// `GET /ui/clamp`.
pub async fn page(user: ConsoleUser) -> Html<String> {
    render(&user, &ClampForm::default(), None, None)
}

/// `POST /ui/clamp`.
pub async fn run(
    State(state): State<AppState>,
    user: ConsoleUser,
    Form(f): Form<ClampForm>,
) -> Result<Html<String>, Response> {
    user.verify(&f.csrf)?;
    let req = ClampRequest {
        text: f.text.clone(),
        config: None,
    };
    Ok(match clamp_value(&state, req).await {
        Ok(v) => render(&user, &f, Some(result(&f.text, &v)), None),
        Err(e) => render(&user, &f, None, Some(Notice::Error(e.detail))),
    })
}
