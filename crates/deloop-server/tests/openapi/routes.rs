//! The document itself: OpenAPI 3.1 whose references resolve, listing exactly
//! the routes served, behind the key when auth is on.

use crate::common::{client, start, state_with, TestServer};
use crate::document::*;
use deloop_core::loops::Profile;
use deloop_server::auth::ApiKeys;
use deloop_server::ServerSettings;
use serde_json::{json, Value};
use std::collections::BTreeSet;

#[tokio::test]
async fn the_document_is_openapi_3_1_and_every_reference_resolves() {
    let lib = library();
    let server = serve_with_oracle(&lib, ServerSettings::default(), ApiKeys::default()).await;
    let doc = fetch_doc(&server.url, None).await;
    assert!(
        doc["openapi"].as_str().unwrap().starts_with("3.1"),
        "{}",
        doc["openapi"]
    );
    assert_eq!(doc["info"]["title"], "deloop");
    assert!(doc["info"]["version"].is_string());
    let mut all = Vec::new();
    refs(&doc, "", &mut all);
    assert!(all.len() > 50, "only {} references", all.len());
    for (at, r) in &all {
        let pointer = r
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("{at}: {r} is not local"));
        assert!(doc.pointer(pointer).is_some(), "{at}: {r} does not resolve");
    }
    // Every component schema is a valid JSON Schema (2020-12, OpenAPI
    // 3.1's dialect) and compiles.
    for (name, schema) in doc["components"]["schemas"].as_object().unwrap() {
        if let Err(e) = jsonschema::meta::validate(schema) {
            panic!("components/schemas/{name} is not a valid JSON Schema: {e}");
        }
        validator(&doc, &format!("/components/schemas/{name}"));
    }
    // Every operation answers something, has an id, and names its errors
    // as problem+json.
    for (method, path) in operations(&doc) {
        let op = operation(&doc, &method, &path);
        assert!(op["operationId"].is_string(), "{method} {path}");
        let responses = op["responses"].as_object().unwrap();
        assert!(
            responses.keys().any(|s| s.starts_with('2')),
            "{method} {path}"
        );
    }
    // The bearer scheme, optional (a requirement, or none).
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    assert_eq!(doc["security"], json!([{"bearer": []}, {}]));
}

/// The routes `deloop serve` serves: the document must list exactly these.
pub(crate) const GUARD_ROUTES: [(&str, &str); 14] = [
    ("POST", "/v1/clamp"),
    ("POST", "/v1/rescue"),
    ("POST", "/v1/repair"),
    ("POST", "/v1/check"),
    ("POST", "/v1/sessions/{session}/calls"),
    ("POST", "/v1/sessions/{session}/results"),
    ("POST", "/v1/sessions/{session}/compaction"),
    ("DELETE", "/v1/sessions/{session}"),
    ("GET", "/v1/sessions"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("POST", "/mcp"),
    ("GET", "/openapi.json"),
];
pub(crate) const ORACLE_ROUTES: [(&str, &str); 3] = [
    ("POST", "/api/oracle"),
    ("POST", "/api/help"),
    ("POST", "/api/tutor"),
];

pub(crate) fn route_set<'a>(
    routes: impl IntoIterator<Item = &'a (&'a str, &'a str)>,
) -> BTreeSet<(String, String)> {
    routes
        .into_iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect()
}

/// A request that the route serves (valid body, existing session).
pub(crate) fn probe(
    c: &reqwest::Client,
    url: &str,
    method: &str,
    path: &str,
) -> reqwest::RequestBuilder {
    let concrete = path.replace("{session}", "probe");
    let full = format!("{url}{concrete}");
    let body = match path {
        "/v1/clamp" | "/v1/repair" => json!({"text": "{\"a\": 1}"}),
        "/v1/rescue" => json!({"text": "{\"a\": 1}", "key": "a"}),
        "/v1/sessions/{session}/calls" => json!({"tool": "read", "args": {}, "id": "c1"}),
        "/v1/sessions/{session}/results" => json!({"id": "c1", "result": "ok"}),
        "/v1/sessions/{session}/compaction" => json!({}),
        "/mcp" => json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        p if p.starts_with("/api/") => json!({"question": "How is a loop cut?"}),
        _ => Value::Null,
    };
    let req = match method {
        "GET" => c.get(full),
        "POST" => c.post(full),
        "DELETE" => c.delete(full),
        other => panic!("probe has no {other}"),
    };
    match path {
        "/v1/check" => req.body("{\"type\":\"call\",\"tool\":\"read\",\"args\":{}}\n"),
        "/mcp" => req
            .header("accept", "application/json, text/event-stream")
            .json(&body),
        _ if body.is_null() => req,
        _ => req.json(&body),
    }
}

pub(crate) async fn assert_lists_exactly_what_is_served(
    server: &TestServer,
    expected: BTreeSet<(String, String)>,
) {
    let doc = fetch_doc(&server.url, None).await;
    assert_eq!(operations(&doc), expected);
    let c = client();
    // In this order, so that the session exists when its routes are probed
    // (a DELETE of an unknown session is a 404 by design).
    let order = |(m, p): &(String, String)| {
        (
            p.contains("{session}"),
            p.ends_with("{session}"),
            m.clone(),
            p.clone(),
        )
    };
    let mut ops: Vec<_> = expected.iter().cloned().collect();
    ops.sort_by_key(order);
    for (method, path) in &ops {
        let res = probe(&c, &server.url, method, path).send().await.unwrap();
        let status = res.status().as_u16();
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {}",
            res.text().await.unwrap()
        );
    }
    // Only the documented methods are served on a documented path.
    let paths: BTreeSet<&String> = expected.iter().map(|(_, p)| p).collect();
    for path in paths {
        let concrete = path.replace("{session}", "probe");
        for method in ["GET", "POST", "PUT", "DELETE", "PATCH"] {
            if expected.contains(&(method.to_string(), path.clone())) {
                continue;
            }
            let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
            let res = c
                .request(m, format!("{}{concrete}", server.url))
                .header("accept", "application/json, text/event-stream")
                .send()
                .await
                .unwrap();
            assert_eq!(
                res.status().as_u16(),
                405,
                "{method} {path} is served but not documented"
            );
        }
    }
}

#[tokio::test]
async fn the_document_lists_exactly_the_routes_served() {
    let lib = library();
    let with_oracle = serve_with_oracle(&lib, ServerSettings::default(), ApiKeys::default()).await;
    assert_lists_exactly_what_is_served(
        &with_oracle,
        route_set(GUARD_ROUTES.iter().chain(ORACLE_ROUTES.iter())),
    )
    .await;
    // Without an oracle there is no /api route, and the document says so.
    let guards_only = start(state_with(
        ServerSettings::default(),
        Profile::Default,
        ApiKeys::default(),
    ))
    .await;
    assert_lists_exactly_what_is_served(&guards_only, route_set(GUARD_ROUTES.iter())).await;
    let res = client()
        .post(format!("{}/api/oracle", guards_only.url))
        .json(&json!({"question": "q"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
}

#[tokio::test]
async fn openapi_json_needs_the_key_when_auth_is_on_and_probes_stay_open() {
    let server = start(state_with(
        ServerSettings::default(),
        Profile::Default,
        ApiKeys::parse(Some("k1"), None),
    ))
    .await;
    let c = client();
    let url = format!("{}/openapi.json", server.url);
    assert_eq!(c.get(&url).send().await.unwrap().status(), 401);
    assert_eq!(
        c.get(&url)
            .bearer_auth("nope")
            .send()
            .await
            .unwrap()
            .status(),
        403
    );
    let doc = fetch_doc(&server.url, Some("k1")).await;
    // The document says which routes need no key, by the layers' rule.
    for (method, path) in operations(&doc) {
        let op = operation(&doc, &method, &path);
        let open = path == "/healthz" || path == "/readyz";
        assert_eq!(op["security"] == json!([{}]), open, "{method} {path}");
        let responses = op["responses"].as_object().unwrap();
        for status in ["401", "403", "408", "503"] {
            assert_eq!(
                responses.contains_key(status),
                !open || (path == "/readyz" && status == "503"),
                "{method} {path} {status}"
            );
        }
    }
}
