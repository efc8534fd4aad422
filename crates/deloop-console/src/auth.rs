//! Login with an API key into a session cookie, and CSRF tokens.
//!
//! The console is behind the same keys as the API. A key typed into the
//! login form is checked like a bearer token; on success the browser gets
//! a random session token in a cookie that scripts cannot read
//! (`HttpOnly`) and that other sites' requests do not carry
//! (`SameSite=Strict`). Each session has its own CSRF token, put in every
//! form and sent as the `x-deloop-csrf` header by the modules; a state
//! changing request without it is refused, and so is one whose `Origin`
//! or `Sec-Fetch-Site` says it came from another site.
//!
//! Without keys the console is open, as the API is; forms then carry one
//! token of the process.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{FromRef, FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::Form;
use deloop_http::auth::Access;
use serde::Deserialize;
use subtle::ConstantTimeEq;

use crate::page;
use crate::Console;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "deloop_console";
/// The form field that carries the CSRF token.
pub const CSRF_FIELD: &str = "csrf";
/// The header that carries the CSRF token on the modules' requests.
pub const CSRF_HEADER: &str = "x-deloop-csrf";
/// How long a login lasts.
pub const LOGIN_TTL: Duration = Duration::from_secs(12 * 3600);
/// Logged-in sessions kept at once; past it the one closest to expiry goes.
pub const MAX_LOGINS: usize = 1024;

fn random_token() -> String {
    let mut bytes = [0u8; 32];
    // The OS generator failing is not recoverable; no token is better
    // than a guessable one.
    getrandom::fill(&mut bytes).expect("the operating system's random generator failed");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

struct Login {
    csrf: String,
    expires: Instant,
}

/// The logged-in sessions of this process, bounded ([`MAX_LOGINS`]) and
/// expiring ([`LOGIN_TTL`]).
pub struct Logins {
    map: Mutex<HashMap<String, Login>>,
    /// The CSRF token of forms when no key is needed.
    open_csrf: String,
}

impl Default for Logins {
    fn default() -> Self {
        Logins {
            map: Mutex::new(HashMap::new()),
            open_csrf: random_token(),
        }
    }
}

impl std::fmt::Debug for Logins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print tokens.
        write!(f, "Logins({})", self.len())
    }
}

impl Logins {
    /// Logged-in sessions now.
    pub fn len(&self) -> usize {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// True when nobody is logged in.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A new session: its cookie token and its CSRF token.
    pub fn start(&self) -> (String, String) {
        let token = random_token();
        let csrf = random_token();
        let now = Instant::now();
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, l| l.expires > now);
        if map.len() >= MAX_LOGINS {
            let oldest = map
                .iter()
                .min_by_key(|(_, l)| l.expires)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                map.remove(&k);
            }
        }
        map.insert(
            token.clone(),
            Login {
                csrf: csrf.clone(),
                expires: now + LOGIN_TTL,
            },
        );
        (token, csrf)
    }

    /// The CSRF token of a live session.
    pub fn csrf_of(&self, token: &str) -> Option<String> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        match map.get(token) {
            Some(l) if l.expires > Instant::now() => Some(l.csrf.clone()),
            Some(_) => {
                map.remove(token);
                None
            }
            None => None,
        }
    }

    /// Ends a session.
    pub fn end(&self, token: &str) {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(token);
    }
}

/// The session token in a request's cookies.
pub fn session_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.trim())
        .filter(|v| !v.is_empty())
}

/// False when the request says it came from another site (`Origin` not
/// this host, or `Sec-Fetch-Site: cross-site`).
pub fn same_site(headers: &HeaderMap) -> bool {
    let fetch_site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if fetch_site.eq_ignore_ascii_case("cross-site") {
        return false;
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let origin_host = origin
        .split_once("://")
        .map_or(origin, |(_, rest)| rest)
        .trim_end_matches('/');
    !host.is_empty() && origin_host.eq_ignore_ascii_case(host)
}

/// A person allowed to use the console, with the CSRF token their forms
/// carry.
#[derive(Debug, Clone)]
pub struct ConsoleUser {
    /// The CSRF token of this session.
    pub csrf: String,
    /// True when the console needs no login (no API keys).
    pub open: bool,
}

impl ConsoleUser {
    /// Checks a CSRF token from a form or header: a 403 page otherwise.
    pub fn verify(&self, presented: &str) -> Result<(), BadCsrf> {
        if same(presented, &self.csrf) {
            Ok(())
        } else {
            Err(BadCsrf)
        }
    }
}

/// A form whose CSRF token is not its session's: answered 403.
#[derive(Debug, Clone, Copy)]
pub struct BadCsrf;

impl IntoResponse for BadCsrf {
    fn into_response(self) -> Response {
        forbidden(
            "the form's CSRF token does not match this session; reload the page and try again",
        )
    }
}

impl From<BadCsrf> for Response {
    fn from(b: BadCsrf) -> Response {
        b.into_response()
    }
}

fn forbidden(why: &str) -> Response {
    (
        StatusCode::FORBIDDEN,
        Html(page::bare("Forbidden", why).into_string()),
    )
        .into_response()
}

impl Console {
    /// The user of a request: a live session cookie, or anyone when no key
    /// is needed.
    pub fn user(&self, headers: &HeaderMap) -> Option<ConsoleUser> {
        if !self.needs_login() {
            return Some(ConsoleUser {
                csrf: self.logins.open_csrf.clone(),
                open: true,
            });
        }
        let token = session_token(headers)?;
        let csrf = self.logins.csrf_of(token)?;
        Some(ConsoleUser { csrf, open: false })
    }

    /// Whether a request to the API may go on the console's session
    /// cookie instead of a bearer key: a live session, from this site, and
    /// for anything but `GET`/`HEAD` the session's CSRF token in
    /// `x-deloop-csrf`.
    pub fn admits_api(&self, method: &Method, headers: &HeaderMap) -> bool {
        if !self.needs_login() || !same_site(headers) {
            return false;
        }
        let Some(user) = self.user(headers) else {
            return false;
        };
        if matches!(*method, Method::GET | Method::HEAD) {
            return true;
        }
        headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| same(t, &user.csrf))
    }
}

/// What a request without a session gets: the login page (by redirect
/// for a page, a 401 for anything else).
#[derive(Debug)]
pub struct LoginRequired {
    next: Option<String>,
}

impl IntoResponse for LoginRequired {
    fn into_response(self) -> Response {
        match self.next {
            Some(next) => {
                let q = serde_urlencode_next(&next);
                Redirect::to(&format!("/ui/login?next={q}")).into_response()
            }
            None => (
                StatusCode::UNAUTHORIZED,
                Html(page::bare("Login required", "Log in at /ui/login first.").into_string()),
            )
                .into_response(),
        }
    }
}

fn serde_urlencode_next(next: &str) -> String {
    next.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl<S> FromRequestParts<S> for ConsoleUser
where
    S: Send + Sync,
    Console: FromRef<S>,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let console = Console::from_ref(state);
        let safe = matches!(parts.method, Method::GET | Method::HEAD);
        if !safe && !same_site(&parts.headers) {
            return Err(forbidden(
                "this request came from another site; use the console's own pages",
            ));
        }
        match console.user(&parts.headers) {
            Some(u) => Ok(u),
            None => Err(LoginRequired {
                next: safe.then(|| parts.uri.path().to_string()),
            }
            .into_response()),
        }
    }
}

/// Where to go after logging in: a console path, never another site.
fn safe_next(next: Option<&str>, landing: &str) -> String {
    match next {
        Some(n) if crate::is_console_path(n) && !n.starts_with("//") && !n.contains('\\') => {
            n.to_string()
        }
        _ => landing.to_string(),
    }
}

/// The login page's query.
#[derive(Debug, Deserialize)]
pub struct NextQuery {
    next: Option<String>,
}

/// `GET /ui/login`.
pub async fn login_page(State(c): State<Console>, Query(q): Query<NextQuery>) -> Response {
    if !c.needs_login() {
        return Redirect::to(&safe_next(q.next.as_deref(), c.landing)).into_response();
    }
    let next = safe_next(q.next.as_deref(), c.landing);
    Html(page::login(&next, None).into_string()).into_response()
}

/// The login form.
#[derive(Debug, Deserialize)]
pub struct LoginForm {
    key: String,
    next: Option<String>,
}

/// `POST /ui/login`: a key that the API accepts starts a session.
pub async fn login(
    State(c): State<Console>,
    headers: HeaderMap,
    Form(f): Form<LoginForm>,
) -> Response {
    if !same_site(&headers) {
        return forbidden("this login came from another site; log in on the console's own page");
    }
    let next = safe_next(f.next.as_deref(), c.landing);
    match c.keys.check(Some(&f.key)) {
        Access::Granted if c.needs_login() => {
            let (token, _) = c.logins.start();
            let cookie = format!(
                "{SESSION_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}",
                LOGIN_TTL.as_secs()
            );
            let mut res = Redirect::to(&next).into_response();
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                res.headers_mut().insert(header::SET_COOKIE, v);
            }
            res
        }
        Access::Granted => Redirect::to(&next).into_response(),
        Access::Missing | Access::Denied => (
            StatusCode::FORBIDDEN,
            Html(page::login(&next, Some("That key is not accepted.")).into_string()),
        )
            .into_response(),
    }
}

/// The logout form.
#[derive(Debug, Deserialize)]
pub struct LogoutForm {
    csrf: String,
}

/// `POST /ui/logout`: ends the session and clears the cookie.
pub async fn logout(
    State(c): State<Console>,
    user: ConsoleUser,
    headers: HeaderMap,
    Form(f): Form<LogoutForm>,
) -> Response {
    if let Err(r) = user.verify(&f.csrf) {
        return r.into_response();
    }
    if let Some(t) = session_token(&headers) {
        c.logins.end(t);
    }
    let mut res = Redirect::to("/ui/login").into_response();
    res.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("deloop_console=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let h = headers(&[("cookie", "a=1; deloop_console=tok ; b=2")]);
        assert_eq!(session_token(&h), Some("tok"));
        assert_eq!(
            session_token(&headers(&[("cookie", "deloop_consoleX=1")])),
            None
        );
    }

    #[test]
    fn cross_site_requests_are_told_apart() {
        assert!(same_site(&headers(&[("host", "127.0.0.1:8080")])));
        assert!(same_site(&headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080")
        ])));
        assert!(!same_site(&headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://evil.example")
        ])));
        assert!(!same_site(&headers(&[("sec-fetch-site", "cross-site")])));
    }

    #[test]
    fn logins_expire_and_are_bounded() {
        let l = Logins::default();
        let (t, csrf) = l.start();
        assert_eq!(l.csrf_of(&t), Some(csrf));
        assert_eq!(l.csrf_of("nope"), None);
        l.end(&t);
        assert_eq!(l.csrf_of(&t), None);
        for _ in 0..MAX_LOGINS + 3 {
            l.start();
        }
        assert_eq!(l.len(), MAX_LOGINS);
    }

    #[test]
    fn next_stays_in_the_console() {
        assert_eq!(safe_next(Some("/ui/check"), "/ui/ask"), "/ui/check");
        assert_eq!(
            safe_next(Some("https://evil.example/"), "/ui/ask"),
            "/ui/ask"
        );
        assert_eq!(safe_next(Some("//evil.example/ui/"), "/ui/ask"), "/ui/ask");
        assert_eq!(safe_next(None, "/ui/ask"), "/ui/ask");
    }

    #[test]
    fn tokens_are_random_and_long() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
