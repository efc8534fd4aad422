//! The web console at `/ui/`: the shell (login, layout, Live) comes from
//! `deloop-console`; the pages here call the same flows as the API's
//! handlers (the oracle's ask, `deloop check`'s replay, the clamp).
//!
//! * Ask: `/api/{mode}`'s events, streamed into the page by `ask.js`; the
//!   form also posts to `/ui/ask` and is answered whole without JavaScript.
//! * Sessions: the session API's calls as the event bus saw them.
//! * Check: a transcript's verdicts, the lines of `deloop check --json`.
//! * Clamp: what the clamp keeps, the cut and the repeated unit marked.

pub mod ask;
pub mod check;
pub mod clamp;
pub mod sessions;

use std::sync::Arc;

use axum::routing::get;
use axum::Router;
use deloop_console::{Console, NavItem};
use deloop_events::EventBus;
use deloop_http::auth::ApiKeys;

use crate::state::AppState;

/// The navigation bar of `deloop serve`'s console.
pub const NAV: &[NavItem] = &[
    NavItem {
        label: "Ask",
        href: "/ui/ask",
    },
    NavItem {
        label: "Live",
        href: "/ui/live",
    },
    NavItem {
        label: "Sessions",
        href: "/ui/sessions",
    },
    NavItem {
        label: "Check",
        href: "/ui/check",
    },
    NavItem {
        label: "Clamp",
        href: "/ui/clamp",
    },
];

/// The console of a server with this bus and these keys.
pub fn console(bus: Arc<EventBus>, keys: ApiKeys) -> Console {
    Console::new(bus, keys, NAV, "/ui/ask")
}

/// Every console route: the shell's and the server's pages.
pub fn router() -> Router<AppState> {
    deloop_console::router::<AppState>()
        .route("/ui/ask", get(ask::page).post(ask::answer))
        .route("/ui/sessions", get(sessions::list))
        .route("/ui/sessions/{session}", get(sessions::one))
        .route("/ui/check", get(check::page).post(check::run))
        .route("/ui/clamp", get(clamp::page).post(clamp::run))
}
