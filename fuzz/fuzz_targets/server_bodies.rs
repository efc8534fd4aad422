//! The server's request bodies, through the real router (every layer,
//! extractor and validation; in process, no socket): `POST /v1/clamp`,
//! `/v1/rescue`, `/v1/repair`, `/v1/check` and the session routes, with
//! the fuzzer's bytes as the body. Invariants: never a panic and never a
//! 5xx (503 only from the session store's load shedding), and every
//! answer but the streamed check is JSON. Options (byte 0): bits 0-2 the
//! route, bits 3-4 the session, bit 5 the JSON content type left out.

use std::sync::OnceLock;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use deloop_core::loops::{LoopConfig, Profile};
use deloop_core::repetition::ClampConfig;
use deloop_fuzz::Input;
use deloop_server::auth::ApiKeys;
use deloop_server::sessions::GuardSettings;
use deloop_server::ServerSettings;
use http_body_util::BodyExt;
use tower::ServiceExt;

const ROUTES: [&str; 8] = [
    "/v1/clamp",
    "/v1/rescue",
    "/v1/repair",
    "/v1/check",
    "/v1/sessions/S/calls",
    "/v1/sessions/S/results",
    "/v1/sessions/S/compaction",
    "/v1/check?format=openai&profile=strict",
];

fn app() -> &'static (tokio::runtime::Runtime, Router) {
    static APP: OnceLock<(tokio::runtime::Runtime, Router)> = OnceLock::new();
    APP.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let settings = ServerSettings::default();
        let guard = GuardSettings {
            profile: Profile::Default,
            config: LoopConfig::default(),
            max_open_calls: settings.sessions.max_open_calls,
        };
        let (state, _store) = deloop_server::build::memory_state(
            settings,
            ClampConfig::default(),
            guard,
            ApiKeys::default(),
        );
        state.set_ready();
        let router = rt.block_on(async { deloop_server::router(state) });
        (rt, router)
    })
}

fn check(data: &[u8]) {
    let input = Input::read(data);
    let f = input.flags;
    let route = ROUTES[usize::from(f & 7)];
    let session = ["a", "b", "c", "d"][usize::from((f >> 3) & 3)];
    let uri = route.replace('S', session);
    let mut req = Request::post(&uri);
    if f & 32 == 0 {
        req = req.header(header::CONTENT_TYPE, "application/json");
    }
    let req = req
        .body(Body::from(input.payload.to_vec()))
        .expect("a request");
    let (rt, router) = app();
    let (status, content_type, body) = rt.block_on(async {
        let res = router.clone().oneshot(req).await.expect("infallible");
        let status = res.status();
        let ct = res
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = res.into_body().collect().await.expect("a body").to_bytes();
        (status, ct, body)
    });
    let shed = status == StatusCode::SERVICE_UNAVAILABLE && route.starts_with("/v1/sessions");
    assert!(
        !status.is_server_error() || shed,
        "{uri}: {status}: {}",
        String::from_utf8_lossy(&body)
    );
    if route.starts_with("/v1/check") && status.is_success() {
        for line in body.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            serde_json::from_slice::<serde_json::Value>(line).expect("every check line is JSON");
        }
    } else if !body.is_empty() {
        assert!(
            content_type.contains("json"),
            "{uri}: {status}: content type {content_type}"
        );
        serde_json::from_slice::<serde_json::Value>(&body).expect("a JSON answer");
    }
}

fn main() {
    afl::fuzz!(|data: &[u8]| check(data));
}
