//! The layout every console page shares: the head with the embedded
//! stylesheet and modules, the navigation bar, and the page's own content.

use maud::{html, Markup, PreEscaped, DOCTYPE};

use crate::assets;
use crate::auth::ConsoleUser;

/// One link of the navigation bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NavItem {
    /// The link's text (`Ask`, `Live`, …).
    pub label: &'static str,
    /// Where it goes.
    pub href: &'static str,
}

/// The navigation bar of `deloop proxy` alone.
pub const LIVE_ONLY: &[NavItem] = &[NavItem {
    label: "Live",
    href: "/ui/live",
}];

/// A message shown above a page's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// Something went wrong; the text says what and what to do.
    Error(String),
    /// Something worth knowing.
    Info(String),
}

impl maud::Render for Notice {
    fn render(&self) -> Markup {
        match self {
            Notice::Error(m) => html! { p.notice.error role="alert" { (m) } },
            Notice::Info(m) => html! { p.notice.info role="status" { (m) } },
        }
    }
}

fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) " · deloop" }
            // No favicon request (it would need the API's key).
            link rel="icon" href="data:,";
            link rel="stylesheet" href=(assets::url("console.css"));
        }
    }
}

/// A whole page: `title`, the navigation bar with `active` marked, the
/// user's CSRF token (for the modules), `modules` to load, and `body`.
pub fn layout(
    nav: &[NavItem],
    title: &str,
    active: &str,
    user: &ConsoleUser,
    modules: &[&str],
    body: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body data-csrf=(user.csrf) {
                a.skip href="#main" { "Skip to content" }
                header {
                    nav aria-label="Console" {
                        span.brand { "deloop" }
                        ul {
                            @for item in nav {
                                li {
                                    @if item.label == active {
                                        a href=(item.href) aria-current="page" { (item.label) }
                                    } @else {
                                        a href=(item.href) { (item.label) }
                                    }
                                }
                            }
                        }
                        @if !user.open {
                            form.logout method="post" action="/ui/logout" {
                                input type="hidden" name="csrf" value=(user.csrf);
                                button type="submit" { "Log out" }
                            }
                        }
                    }
                }
                main id="main" {
                    h1 { (title) }
                    (body)
                }
                @for m in modules {
                    script type="module" src=(assets::url(m)) {}
                }
            }
        }
    }
}

/// The login page: one key, nothing else shown.
pub fn login(next: &str, error: Option<&str>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head("Log in"))
            body {
                main id="main" {
                    h1 { "Log in to deloop" }
                    @if let Some(e) = error {
                        p.notice.error role="alert" { (e) }
                    }
                    form.login method="post" action="/ui/login" {
                        input type="hidden" name="next" value=(next);
                        label for="key" { "API key" }
                        input id="key" name="key" type="password" autocomplete="current-password" required autofocus;
                        button type="submit" { "Log in" }
                    }
                    p.hint { "The same key the API takes as " code { "Authorization: Bearer" } "." }
                }
            }
        }
    }
}

/// A page with a title and one sentence (errors before login).
pub fn bare(title: &str, text: &str) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title))
            body { main id="main" { h1 { (title) } p { (text) } } }
        }
    }
}

/// `text` with every copy of `unit` marked (`<mark>`), escaped.
pub fn highlight(text: &str, unit: &str) -> Markup {
    let unit = unit.trim();
    if unit.is_empty() {
        return html! { (text) };
    }
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(unit) {
        out.push_str(&maud::html! { (rest[..i]) }.into_string());
        out.push_str(&maud::html! { mark { (unit) } }.into_string());
        rest = &rest[i + unit.len()..];
    }
    out.push_str(&maud::html! { (rest) }.into_string());
    PreEscaped(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn highlight_marks_each_copy_and_escapes() {
        let m = highlight("a <b> a <b> c", "<b>").into_string();
        assert_eq!(m, "a <mark>&lt;b&gt;</mark> a <mark>&lt;b&gt;</mark> c");
        assert_eq!(highlight("x<y", "").into_string(), "x&lt;y");
    }
}
