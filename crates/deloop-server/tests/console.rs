//! The web console at /ui/ over real TCP: login with an API key into a
//! session cookie, the cookie's flags, CSRF refusals, every page, the API
//! on the cookie, and the live feed delivering an event.

mod common;

use std::time::Duration;

use deloop_core::loops::Profile;
use deloop_server::auth::ApiKeys;
use deloop_server::ServerSettings;
use futures_util::StreamExt;
use serde_json::json;

const KEY: &str = "console-test-key";

async fn server() -> common::TestServer {
    common::start(common::state_with(
        ServerSettings::default(),
        Profile::Default,
        ApiKeys::parse(Some(KEY), None),
    ))
    .await
}

fn no_redirects() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Logs in; the session cookie (`name=value`).
async fn login(url: &str) -> String {
    let res = no_redirects()
        .post(format!("{url}/ui/login"))
        .form(&[("key", KEY), ("next", "/ui/live")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(res.headers()["location"], "/ui/live");
    let cookie = res.headers()["set-cookie"].to_str().unwrap().to_string();
    cookie.split(';').next().unwrap().to_string()
}

/// The page's CSRF token (`<body data-csrf=…>`).
async fn page(url: &str, path: &str, cookie: &str) -> (String, String) {
    let res = no_redirects()
        .get(format!("{url}{path}"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{path}");
    let html = res.text().await.unwrap();
    let csrf = html
        .split("data-csrf=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("csrf on the page")
        .to_string();
    (html, csrf)
}

#[tokio::test]
async fn without_a_key_nothing_is_shown() {
    let s = server().await;
    for path in [
        "/ui/ask",
        "/ui/live",
        "/ui/sessions",
        "/ui/check",
        "/ui/clamp",
    ] {
        let res = no_redirects()
            .get(format!("{}{path}", s.url))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 303, "{path}");
        let to = res.headers()["location"].to_str().unwrap();
        assert!(to.starts_with("/ui/login?next="), "{to}");
    }
    let res = no_redirects()
        .get(format!("{}/ui/live/feed", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    // A wrong key gets the login page again, no cookie.
    let res = no_redirects()
        .post(format!("{}/ui/login", s.url))
        .form(&[("key", "wrong")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert!(res.headers().get("set-cookie").is_none());
    // A forged cookie is no session.
    let res = no_redirects()
        .get(format!("{}/ui/live", s.url))
        .header("cookie", "deloop_console=00ff")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
}

#[tokio::test]
async fn the_session_cookie_is_httponly_and_strict() {
    let s = server().await;
    let res = no_redirects()
        .post(format!("{}/ui/login", s.url))
        .form(&[("key", KEY)])
        .send()
        .await
        .unwrap();
    let cookie = res.headers()["set-cookie"].to_str().unwrap();
    assert!(cookie.starts_with("deloop_console="), "{cookie}");
    assert!(cookie.contains("; HttpOnly"), "{cookie}");
    assert!(cookie.contains("; SameSite=Strict"), "{cookie}");
    assert!(cookie.contains("; Path=/"), "{cookie}");
    assert!(!cookie.contains(KEY), "the key never goes into the cookie");
}

#[tokio::test]
async fn every_page_renders_with_the_navigation_bar() {
    let s = server().await;
    let cookie = login(&s.url).await;
    for (path, title) in [
        ("/ui/ask", "Ask"),
        ("/ui/live", "Live"),
        ("/ui/sessions", "Sessions"),
        ("/ui/check", "Check"),
        ("/ui/clamp", "Clamp"),
    ] {
        let (html, _) = page(&s.url, path, &cookie).await;
        assert!(html.contains(&format!("<h1>{title}</h1>")), "{path}");
        for link in ["Ask", "Live", "Sessions", "Check", "Clamp"] {
            assert!(
                html.contains(&format!(">{link}</a>")),
                "{path} lacks {link}"
            );
        }
        assert!(html.contains("aria-current=\"page\""), "{path}");
    }
    let css = no_redirects()
        .get(format!("{}/ui/assets/console.css", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(css.status(), 200);
    assert!(css.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/css"));
}

#[tokio::test]
async fn forms_without_the_csrf_token_are_refused() {
    let s = server().await;
    let cookie = login(&s.url).await;
    let (_, csrf) = page(&s.url, "/ui/clamp", &cookie).await;
    let text = "the loop goes round and round ".repeat(40);
    let post = |token: &str, origin: Option<&str>| {
        let mut r = no_redirects()
            .post(format!("{}/ui/clamp", s.url))
            .header("cookie", &cookie)
            .form(&[("csrf", token), ("text", text.as_str())]);
        if let Some(o) = origin {
            r = r.header("origin", o);
        }
        r.send()
    };
    assert_eq!(post("wrong", None).await.unwrap().status(), 403);
    assert_eq!(post("", None).await.unwrap().status(), 403);
    let cross = post(&csrf, Some("http://evil.example")).await.unwrap();
    assert_eq!(cross.status(), 403, "another site's form");
    let ok = post(&csrf, None).await.unwrap();
    assert_eq!(ok.status(), 200);
    let html = ok.text().await.unwrap();
    assert!(html.contains("<mark>"), "the unit is marked");
    assert!(html.contains("id=\"clamp-kept\""));
    // The API on the cookie: reads pass, writes need the CSRF header.
    let api = |token: Option<&str>| {
        let mut r = no_redirects()
            .post(format!("{}/v1/clamp", s.url))
            .header("cookie", &cookie)
            .json(&json!({"text": "hello"}));
        if let Some(t) = token {
            r = r.header("x-deloop-csrf", t);
        }
        r.send()
    };
    assert_eq!(api(None).await.unwrap().status(), 401);
    assert_eq!(api(Some("wrong")).await.unwrap().status(), 401);
    assert_eq!(api(Some(&csrf)).await.unwrap().status(), 200);
}

#[tokio::test]
async fn check_shows_the_verdicts_of_deloop_check_json() {
    let s = server().await;
    let cookie = login(&s.url).await;
    let (_, csrf) = page(&s.url, "/ui/check", &cookie).await;
    let mut transcript = String::new();
    for i in 0..12 {
        transcript.push_str(&format!(
            "{{\"type\":\"call\",\"id\":\"c{i}\",\"tool\":\"read\",\"args\":{{\"path\":\"a.txt\"}}}}\n{{\"type\":\"result\",\"id\":\"c{i}\",\"result\":\"same\"}}\n"
        ));
    }
    let res = no_redirects()
        .post(format!("{}/ui/check", s.url))
        .header("cookie", &cookie)
        .form(&[("csrf", csrf.as_str()), ("transcript", transcript.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    let api = common::client()
        .post(format!("{}/v1/check", s.url))
        .bearer_auth(KEY)
        .body(transcript)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let shown = html
        .split("<pre id=\"check-json\">")
        .nth(1)
        .unwrap()
        .split("</pre>")
        .next()
        .unwrap();
    let shown = shown
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">");
    assert_eq!(shown, api, "the page shows /v1/check's lines");
    assert!(
        html.contains("data-level=\"critical\"") || html.contains("data-level=\"warning\""),
        "a loop verdict"
    );
    assert!(html.contains("span-bar"), "the loop span is drawn");
    // A malformed line: the same error as `deloop check`, with its line.
    let res = no_redirects()
        .post(format!("{}/ui/check", s.url))
        .header("cookie", &cookie)
        .form(&[
            ("csrf", csrf.as_str()),
            (
                "transcript",
                "{\"type\":\"call\",\"id\":\"a\",\"tool\":\"t\"}\n{not json\n",
            ),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "the page keeps working");
    let html = res.text().await.unwrap();
    assert!(html.contains("line 2"), "{html}");
}

#[tokio::test]
async fn the_live_feed_delivers_session_verdicts_and_reports_are_recorded() {
    let s = server().await;
    let cookie = login(&s.url).await;
    let feed = no_redirects()
        .get(format!("{}/ui/live/feed", s.url))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(feed.status(), 200);
    assert!(feed.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let mut body = feed.bytes_stream();
    // Repeat a call until the guard calls it a loop.
    for _ in 0..12 {
        common::client()
            .post(format!("{}/v1/sessions/s1/calls", s.url))
            .bearer_auth(KEY)
            .json(&json!({"tool": "read", "args": {"path": "a"}}))
            .send()
            .await
            .unwrap();
    }
    let mut got = String::new();
    while !got.contains("event: guard") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), body.next())
            .await
            .expect("an event within 10 s")
            .unwrap()
            .unwrap();
        got.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(got.contains("session_call"), "{got}");
    assert!(got.contains("s1"), "{got}");
    // The Live page and the Sessions pages list them.
    let (html, csrf) = page(&s.url, "/ui/live", &cookie).await;
    assert!(html.contains("data-session=\"s1\""));
    let (html, _) = page(&s.url, "/ui/sessions", &cookie).await;
    assert!(html.contains("/ui/sessions/s1"));
    let (html, _) = page(&s.url, "/ui/sessions/s1", &cookie).await;
    assert!(html.contains("<code>read</code>"));
    // Report a loop verdict as not a loop.
    let looped = s
        .state
        .events()
        .recent()
        .into_iter()
        .find(|e| e.is_loop())
        .expect("a loop verdict");
    let res = no_redirects()
        .post(format!("{}/ui/live/report", s.url))
        .header("cookie", &cookie)
        .header("accept", "application/json")
        .form(&[("csrf", csrf.as_str()), ("id", &looped.id.to_string())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(s.state.events().totals().reports, 1);
    assert_eq!(s.state.events().reports()[0].event.id, looped.id);
}

#[tokio::test]
async fn logout_ends_the_session() {
    let s = server().await;
    let cookie = login(&s.url).await;
    let (_, csrf) = page(&s.url, "/ui/live", &cookie).await;
    let res = no_redirects()
        .post(format!("{}/ui/logout", s.url))
        .header("cookie", &cookie)
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let res = no_redirects()
        .get(format!("{}/ui/live", s.url))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303, "the old cookie is no session");
}

/// The Sessions page lists the store's sessions (also those the event bus
/// never saw), page by page as `GET /v1/sessions` does, with a Next link
/// that works without JavaScript; a bad cursor is a notice, not a 500.
#[tokio::test]
async fn the_sessions_page_pages_through_the_store_like_the_api() {
    let s = server().await;
    let cookie = login(&s.url).await;
    for name in ["alpha", "beta", "gamma"] {
        // Straight into the store: no event on the bus.
        let call = deloop_server::sessions::CallInput {
            tool: "read".into(),
            args: json!({}),
            id: None,
            agent: None,
            run: None,
        };
        s.state.sessions().call(name, call).await.unwrap();
    }
    let api: serde_json::Value = common::client()
        .get(format!("{}/v1/sessions?limit=2", s.url))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = api["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["session"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alpha", "beta"]);
    assert_eq!(api["sessions"][0]["events"], 1);
    let next = api["next"].as_str().expect("a next page").to_string();
    let (html, _) = page(&s.url, "/ui/sessions?limit=2", &cookie).await;
    assert!(html.contains("/ui/sessions/alpha") && html.contains("/ui/sessions/beta"));
    assert!(!html.contains("/ui/sessions/gamma"));
    let link = format!("/ui/sessions?cursor={next}&amp;limit=2");
    assert!(html.contains(&link), "{html}");
    let (html, _) = page(&s.url, &link.replace("&amp;", "&"), &cookie).await;
    assert!(html.contains("/ui/sessions/gamma") && !html.contains("/ui/sessions/alpha"));
    assert!(!html.contains("rel=\"next\""), "the last page");
    let (html, _) = page(&s.url, "/ui/sessions?cursor=zz", &cookie).await;
    assert!(html.contains("not one this store made"), "{html}");
    let res = common::client()
        .get(format!("{}/v1/sessions?limit=0", s.url))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
}

/// A full ring is not a page of megabytes: Live renders the newest 500.
#[tokio::test]
async fn the_live_page_renders_a_bounded_number_of_items() {
    let s = server().await;
    let cookie = login(&s.url).await;
    for i in 0..700 {
        let mut ev =
            deloop_events::GuardEvent::new(deloop_events::EventKind::SessionCall, "sessions");
        ev.session = Some(format!("s{i}"));
        ev.level = Some("ok".into());
        s.state.events().publish(ev);
    }
    let (html, _) = page(&s.url, "/ui/live", &cookie).await;
    let items = html.matches("<li class=\"event\"").count();
    assert_eq!(items, deloop_console::live::MAX_SHOWN, "{items} items");
    assert!(
        html.contains("data-session=\"s699\""),
        "the newest is shown"
    );
    assert!(!html.contains("data-session=\"s0\""), "the oldest is not");
}
