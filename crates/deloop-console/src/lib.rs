//! The web console's shell, shared by `deloop serve` and `deloop proxy`.
//!
//! * [`auth`]: login with an API key (the same keys as the API) into a
//!   session cookie (`HttpOnly`, `SameSite=Strict`), and a CSRF token per
//!   session that every form and every cookie-authenticated API call
//!   carries;
//! * [`page`]: the layout every page shares, with the navigation bar;
//! * [`live`]: the Live timeline of guard decisions, read from the
//!   [`deloop_events::EventBus`] (its ring, then its broadcast as
//!   server-sent events), with the "not a loop" reports;
//! * [`assets`]: the stylesheet and the plain ES modules, embedded in the
//!   binary.
//!
//! Pages are rendered on the server with `maud` (every value escaped); the
//! modules only stream, filter and swap fragments the server rendered.
//! `deloop serve` adds its pages (Ask, Sessions, Check, Clamp) to
//! [`router`]; `deloop proxy` serves [`router`] alone.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod assets;
pub mod auth;
pub mod live;
pub mod page;

use std::sync::Arc;

use axum::extract::FromRef;
use axum::response::Redirect;
use axum::routing::{get, post};
use axum::Router;
use deloop_events::EventBus;
use deloop_http::auth::ApiKeys;

pub use auth::{ConsoleUser, Logins, CSRF_FIELD, CSRF_HEADER, SESSION_COOKIE};
pub use page::{NavItem, Notice};

/// The console of one process: its event bus, the keys that log in, the
/// logged-in sessions and the pages its navigation bar lists. Cheap to
/// clone.
#[derive(Clone, Debug)]
pub struct Console {
    pub(crate) bus: Arc<EventBus>,
    pub(crate) keys: ApiKeys,
    pub(crate) logins: Arc<Logins>,
    pub(crate) nav: &'static [NavItem],
    pub(crate) landing: &'static str,
    pub(crate) feeds: Arc<std::sync::atomic::AtomicUsize>,
}

impl Console {
    /// A console over `bus`, logged into with `keys` (none: open, as the
    /// API is), whose navigation bar lists `nav` and whose `/ui/` opens
    /// `landing`.
    pub fn new(
        bus: Arc<EventBus>,
        keys: ApiKeys,
        nav: &'static [NavItem],
        landing: &'static str,
    ) -> Self {
        Console {
            bus,
            keys,
            logins: Arc::new(Logins::default()),
            nav,
            landing,
            feeds: Arc::default(),
        }
    }

    /// The console of `deloop proxy` alone: Live only.
    pub fn live_only(bus: Arc<EventBus>, keys: ApiKeys) -> Self {
        Console::new(bus, keys, page::LIVE_ONLY, "/ui/live")
    }

    /// The event bus.
    pub fn bus(&self) -> &Arc<EventBus> {
        &self.bus
    }

    /// The logged-in sessions.
    pub fn logins(&self) -> &Arc<Logins> {
        &self.logins
    }

    /// Whether logging in is needed (the process has API keys).
    pub fn needs_login(&self) -> bool {
        !self.keys.is_empty()
    }
}

/// The console's own routes: `/ui/` (to the landing page), login and
/// logout, the assets, and Live. The caller adds its pages to the same
/// router (with a state `S` the [`Console`] is taken from).
pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Console: FromRef<S>,
{
    Router::new()
        .route("/ui", get(landing::<S>))
        .route("/ui/", get(landing::<S>))
        .route("/ui/login", get(auth::login_page).post(auth::login))
        .route("/ui/logout", post(auth::logout))
        .route("/ui/assets/{name}", get(assets::serve))
        .route("/ui/live", get(live::page))
        .route("/ui/live/feed", get(live::feed))
        .route("/ui/live/report", post(live::report))
}

async fn landing<S>(axum::extract::State(state): axum::extract::State<S>) -> Redirect
where
    Console: FromRef<S>,
{
    Redirect::to(Console::from_ref(&state).landing)
}

/// Whether `path` is one of the console's (its routes do their own auth).
pub fn is_console_path(path: &str) -> bool {
    path == "/ui" || path.starts_with("/ui/")
}
