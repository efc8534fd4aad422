//! `GET /openapi.json` over real TCP: the document is OpenAPI 3.1 whose
//! references all resolve, it lists exactly the routes the server serves,
//! real answers (JSON, problem+json, JSON lines, SSE events) validate
//! against its schemas, and its request schemas accept what the server
//! accepts and refuse what it refuses with a 400.

mod common;

use std::collections::BTreeSet;

use common::{client, start, state_with, Library, TestServer};
use deloop_config::Config;
use deloop_core::loops::Profile;
use deloop_oracle::Oracle;
use deloop_server::auth::ApiKeys;
use deloop_server::ServerSettings;
use serde_json::{json, Value};

const DOCS_MD: &str = "# Loops\n\nWhen a stream loops, the watcher cuts it and the request is \
cancelled.\n\n## Rescue\n\nThe JSON rescue recovers the answer from broken model output.\n";

fn library() -> Library {
    common::library(&[("loops.md", DOCS_MD)])
}

/// A server with the oracle (extractive: no LLM configured).
async fn serve_with_oracle(lib: &Library, settings: ServerSettings, keys: ApiKeys) -> TestServer {
    let state = state_with(settings, Profile::Default, keys).serving_oracle();
    let oracle = Oracle::open(&Config::default(), Some(&lib.db)).unwrap();
    assert!(state.set_oracle(oracle));
    start(state).await
}

async fn fetch_doc(url: &str, key: Option<&str>) -> Value {
    let mut req = client().get(format!("{url}/openapi.json"));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let res = req.send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/json");
    res.json().await.unwrap()
}

/// `/` and `~` escaped for a JSON pointer.
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// `(METHOD, path)` of every operation.
fn operations(doc: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for m in METHODS {
            if item.get(m).is_some() {
                out.insert((m.to_uppercase(), path.clone()));
            }
        }
    }
    out
}

fn operation<'a>(doc: &'a Value, method: &str, path: &str) -> &'a Value {
    let op = &doc["paths"][path][method.to_lowercase()];
    assert!(op.is_object(), "{method} {path} is not documented");
    op
}

/// A validator for the schema at `pointer` in `doc`; the document's
/// `components` go beside it, so `#/components/schemas/...` resolves.
fn validator(doc: &Value, pointer: &str) -> jsonschema::Validator {
    let schema = doc
        .pointer(pointer)
        .unwrap_or_else(|| panic!("no schema at {pointer}"));
    let mut root = schema.clone();
    if let Value::Object(m) = &mut root {
        m.insert("components".into(), doc["components"].clone());
    }
    jsonschema::draft202012::new(&root)
        .unwrap_or_else(|e| panic!("the schema at {pointer} does not compile: {e}"))
}

/// The response schema of `method path` for `status` and `content_type`,
/// following a `$ref` to a shared response.
fn response_validator(
    doc: &Value,
    method: &str,
    path: &str,
    status: u16,
    content_type: &str,
) -> jsonschema::Validator {
    let op = operation(doc, method, path);
    let response = &op["responses"][status.to_string()];
    assert!(
        response.is_object(),
        "{method} {path} answered {status}, which the document does not list"
    );
    let base = match response.get("$ref").and_then(Value::as_str) {
        Some(r) => r.trim_start_matches('#').to_string(),
        None => format!(
            "/paths/{}/{}/responses/{status}",
            escape(path),
            method.to_lowercase()
        ),
    };
    validator(
        doc,
        &format!("{base}/content/{}/schema", escape(content_type)),
    )
}

fn request_validator(doc: &Value, method: &str, path: &str) -> jsonschema::Validator {
    operation(doc, method, path);
    validator(
        doc,
        &format!(
            "/paths/{}/{}/requestBody/content/application~1json/schema",
            escape(path),
            method.to_lowercase()
        ),
    )
}

fn assert_valid(v: &jsonschema::Validator, instance: &Value, what: &str) {
    let errors: Vec<String> = v.iter_errors(instance).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "{what}: {instance} does not validate: {errors:?}"
    );
}

/// Every `$ref` in the document, with where it is.
fn refs(v: &Value, at: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if k == "$ref" {
                    if let Some(r) = x.as_str() {
                        out.push((at.to_string(), r.to_string()));
                    }
                } else {
                    refs(x, &format!("{at}/{}", escape(k)), out);
                }
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                refs(x, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

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
const GUARD_ROUTES: [(&str, &str); 14] = [
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
const ORACLE_ROUTES: [(&str, &str); 3] = [
    ("POST", "/api/oracle"),
    ("POST", "/api/help"),
    ("POST", "/api/tutor"),
];

fn route_set<'a>(
    routes: impl IntoIterator<Item = &'a (&'a str, &'a str)>,
) -> BTreeSet<(String, String)> {
    routes
        .into_iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect()
}

/// A request that the route serves (valid body, existing session).
fn probe(c: &reqwest::Client, url: &str, method: &str, path: &str) -> reqwest::RequestBuilder {
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

async fn assert_lists_exactly_what_is_served(
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

/// Sends `body` to `method path` and validates the answer against the
/// document: its status must be listed, its body must match the schema of
/// its content type. Answers the status and body.
async fn exchange(
    doc: &Value,
    req: reqwest::RequestBuilder,
    method: &str,
    path: &str,
) -> (u16, Value) {
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let content_type = res
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let text = res.text().await.unwrap();
    let what = format!("{method} {path} -> {status}");
    if content_type.starts_with("application/x-ndjson") {
        let v = response_validator(doc, method, path, status, "application/x-ndjson");
        let mut lines = Vec::new();
        for line in text.lines() {
            let value: Value = serde_json::from_str(line).unwrap();
            assert_valid(&v, &value, &what);
            lines.push(value);
        }
        return (status, Value::Array(lines));
    }
    let media = content_type.split(';').next().unwrap().trim().to_string();
    if text.is_empty() {
        // 204: the document lists the status with no content.
        let op = operation(doc, method, path);
        assert!(op["responses"][status.to_string()].is_object(), "{what}");
        return (status, Value::Null);
    }
    let value: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{what}: {text}"));
    assert!(
        media == "application/json" || media == "application/problem+json",
        "{what}: {content_type}"
    );
    let v = response_validator(doc, method, path, status, &media);
    assert_valid(&v, &value, &what);
    (status, value)
}

#[tokio::test]
async fn real_answers_validate_against_the_documented_schemas() {
    let lib = library();
    let server = serve_with_oracle(&lib, ServerSettings::default(), ApiKeys::default()).await;
    let doc = fetch_doc(&server.url, None).await;
    let c = client();
    let url = server.url.as_str();
    let post = |path: &str, body: Value| c.post(format!("{url}{path}")).json(&body);

    // The oracle, in the three modes, JSON answers.
    for path in ["/api/oracle", "/api/help", "/api/tutor"] {
        let body = json!({"question": "How is a looping stream cut?", "k": 3, "lang": "en",
                          "history": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]});
        let (status, report) = exchange(&doc, post(path, body), "POST", path).await;
        assert_eq!(status, 200);
        assert_eq!(report["provider"], "extractive");
    }
    // The guards, on inputs that exercise their optional fields.
    let looping = format!(
        "Intro sentence here. {}",
        "the cat sat on the mat ".repeat(20)
    );
    let (_, v) = exchange(
        &doc,
        post("/v1/clamp", json!({"text": looping})),
        "POST",
        "/v1/clamp",
    )
    .await;
    assert_eq!(v["clamped"], true);
    let (_, v) = exchange(
        &doc,
        post("/v1/clamp", json!({"text": "calm"})),
        "POST",
        "/v1/clamp",
    )
    .await;
    assert_eq!(v["clamped"], false);
    let config = json!({"words": {"min_run": 3}, "near": {"enabled": false}});
    exchange(
        &doc,
        post("/v1/clamp", json!({"text": looping, "config": config})),
        "POST",
        "/v1/clamp",
    )
    .await;
    exchange(
        &doc,
        post(
            "/v1/clamp",
            json!({"text": looping, "config": {"seed_compat": true}}),
        ),
        "POST",
        "/v1/clamp",
    )
    .await;
    let broken = "Sure! ```json\n{\"answer\": \"yes\", \"n\": [1, 2,]\n```";
    let (_, v) = exchange(
        &doc,
        post("/v1/rescue", json!({"text": broken, "key": "answer"})),
        "POST",
        "/v1/rescue",
    )
    .await;
    assert_eq!(v["ok"], true);
    let (_, v) = exchange(
        &doc,
        post("/v1/rescue", json!({"text": "no json", "key": "answer"})),
        "POST",
        "/v1/rescue",
    )
    .await;
    assert_eq!(v["ok"], false);
    let (_, v) = exchange(
        &doc,
        post("/v1/repair", json!({"text": broken})),
        "POST",
        "/v1/repair",
    )
    .await;
    assert!(!v["repairs"].as_array().unwrap().is_empty());
    let (status, _) = exchange(
        &doc,
        post("/v1/repair", json!({"text": "no json here"})),
        "POST",
        "/v1/repair",
    )
    .await;
    assert_eq!(status, 422);

    // /v1/check: every JSON line validates (calls, then the summary); a
    // looping transcript has warnings and criticals, a broken one ends
    // with an error line.
    let call = "{\"type\":\"call\",\"tool\":\"read\",\"args\":{\"path\":\"a\"}}\n";
    let transcript: String = (0..25)
        .map(|i| {
            format!(
                "{{\"type\":\"call\",\"id\":\"c{i}\",\"tool\":\"read\",\"args\":{{\"path\":\"a\"}}}}\n\
                 {{\"type\":\"result\",\"id\":\"c{i}\",\"result\":\"same\"}}\n"
            )
        })
        .collect();
    let (_, lines) = exchange(
        &doc,
        c.post(format!("{url}/v1/check")).body(transcript.clone()),
        "POST",
        "/v1/check",
    )
    .await;
    let lines = lines.as_array().unwrap();
    assert_eq!(lines.len(), 26);
    assert!(lines.iter().any(|l| l["level"] == "critical"));
    assert!(lines[25]["summary"]["criticals"].as_u64().unwrap() > 0);
    let (_, lines) = exchange(
        &doc,
        c.post(format!("{url}/v1/check?format=events&profile=strict"))
            .body(format!("{call}{call}not json\n")),
        "POST",
        "/v1/check",
    )
    .await;
    assert!(
        lines.as_array().unwrap().last().unwrap()["error"]["line"].is_u64(),
        "{lines}"
    );

    // Sessions: verdicts from ok to critical, results with and without id,
    // a compaction with and without a body, and the forget.
    let calls = "/v1/sessions/{session}/calls";
    let results = "/v1/sessions/{session}/results";
    let mut levels = BTreeSet::new();
    for i in 0..22 {
        let (_, v) = exchange(
            &doc,
            post(
                "/v1/sessions/s1/calls",
                json!({"tool": "read", "args": {"path": "a"}, "id": format!("c{i}"), "run": "r1"}),
            ),
            "POST",
            calls,
        )
        .await;
        levels.insert(v["level"].as_str().unwrap().to_string());
        exchange(
            &doc,
            post(
                "/v1/sessions/s1/results",
                json!({"id": format!("c{i}"), "result": "same", "run": "r1"}),
            ),
            "POST",
            results,
        )
        .await;
    }
    assert_eq!(levels.len(), 3, "{levels:?}");
    exchange(
        &doc,
        post("/v1/sessions/s1/calls", json!({"tool": "ls", "args": {}})),
        "POST",
        calls,
    )
    .await;
    exchange(
        &doc,
        post(
            "/v1/sessions/s1/results",
            json!({"tool": "ls", "args": {}, "error": "denied"}),
        ),
        "POST",
        results,
    )
    .await;
    let compaction = "/v1/sessions/{session}/compaction";
    let (status, _) = exchange(
        &doc,
        post("/v1/sessions/s1/compaction", json!({"agent": "main"})),
        "POST",
        compaction,
    )
    .await;
    assert_eq!(status, 204);
    let (status, _) = exchange(
        &doc,
        c.post(format!("{url}/v1/sessions/s1/compaction")),
        "POST",
        compaction,
    )
    .await;
    assert_eq!(status, 204);
    // The listing, a page at a time, and a refused cursor.
    let (status, v) = exchange(
        &doc,
        c.get(format!("{url}/v1/sessions?limit=1")),
        "GET",
        "/v1/sessions",
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(v["sessions"][0]["session"], "s1");
    let (status, _) = exchange(
        &doc,
        c.get(format!("{url}/v1/sessions?cursor=not-hex")),
        "GET",
        "/v1/sessions",
    )
    .await;
    assert_eq!(status, 400);
    let forget = "/v1/sessions/{session}";
    let (status, _) = exchange(
        &doc,
        c.delete(format!("{url}/v1/sessions/s1")),
        "DELETE",
        forget,
    )
    .await;
    assert_eq!(status, 204);

    // Errors: each is problem+json, with a status the document lists.
    let (status, _) = exchange(
        &doc,
        c.delete(format!("{url}/v1/sessions/s1")),
        "DELETE",
        forget,
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = exchange(
        &doc,
        post(
            "/v1/sessions/s2/results",
            json!({"id": "nope", "result": 1}),
        ),
        "POST",
        results,
    )
    .await;
    assert_eq!(status, 409);
    let (status, _) = exchange(
        &doc,
        post("/v1/clamp", json!({"txt": "x"})),
        "POST",
        "/v1/clamp",
    )
    .await;
    assert_eq!(status, 400);
    let (status, _) = exchange(
        &doc,
        c.post(format!("{url}/v1/rescue")).body("{}"),
        "POST",
        "/v1/rescue",
    )
    .await;
    assert_eq!(status, 415);
    let (status, _) = exchange(
        &doc,
        c.post(format!("{url}/v1/check?format=xml")).body(""),
        "POST",
        "/v1/check",
    )
    .await;
    assert_eq!(status, 400);
    let (status, _) = exchange(
        &doc,
        post("/api/help", json!({"question": "q", "k": 0})),
        "POST",
        "/api/help",
    )
    .await;
    assert_eq!(status, 400);

    // Operations.
    let (status, _) = exchange(
        &doc,
        c.get(format!("{url}/openapi.json")),
        "GET",
        "/openapi.json",
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn sse_events_validate_against_their_documented_schemas() {
    let lib = library();
    let server = serve_with_oracle(&lib, ServerSettings::default(), ApiKeys::default()).await;
    let doc = fetch_doc(&server.url, None).await;
    let stream = doc
        .pointer("/paths/~1api~1oracle/post/responses/200/content/text~1event-stream/schema/$ref")
        .unwrap()
        .as_str()
        .unwrap()
        .trim_start_matches('#');
    let events = doc
        .pointer(&format!("{stream}/x-events"))
        .unwrap()
        .as_object()
        .unwrap()
        .clone();
    let names: BTreeSet<&str> = events.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        BTreeSet::from(["meta", "sources", "delta", "cut", "done", "error"])
    );
    let res = client()
        .post(format!("{}/api/oracle", server.url))
        .header("accept", "text/event-stream")
        .json(&json!({"question": "How is a looping stream cut?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let text = res.text().await.unwrap();
    let mut seen = Vec::new();
    for block in text.split("\n\n") {
        let mut event = String::new();
        let mut data = String::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                event = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
            }
        }
        if event.is_empty() {
            continue;
        }
        let schema = events
            .get(&event)
            .unwrap_or_else(|| panic!("event {event} is not documented"));
        let pointer = schema["$ref"].as_str().unwrap().trim_start_matches('#');
        let data: Value = serde_json::from_str(&data).unwrap();
        assert_valid(&validator(&doc, pointer), &data, &format!("event {event}"));
        seen.push(event);
    }
    assert_eq!(seen, ["meta", "sources", "delta", "done"]);
    // An extractive ask has no `cut` and no `error`: their payloads, as the
    // oracle's types serialise them, validate too.
    let others = [
        (
            "cut",
            serde_json::to_value(deloop_oracle::CutEvent {
                detector: "word_period".into(),
                start: 120,
                saved_chars: 4000,
            })
            .unwrap(),
        ),
        (
            "error",
            serde_json::to_value(deloop_oracle::ErrorEvent {
                kind: "timeout".into(),
                message: "no event for 30 s".into(),
            })
            .unwrap(),
        ),
    ];
    for (event, data) in others {
        let pointer = events[event]["$ref"]
            .as_str()
            .unwrap()
            .trim_start_matches('#');
        assert_valid(&validator(&doc, pointer), &data, &format!("event {event}"));
        let mut wrong = data.clone();
        wrong
            .as_object_mut()
            .unwrap()
            .remove(if event == "cut" { "start" } else { "kind" });
        assert!(
            !validator(&doc, pointer).is_valid(&wrong),
            "event {event} without a required field validates"
        );
    }
    // `done` is the JSON answer's schema.
    assert_eq!(
        events["done"],
        doc.pointer("/paths/~1api~1oracle/post/responses/200/content/application~1json/schema")
            .unwrap()
            .clone()
    );
}

#[tokio::test]
async fn request_schemas_accept_what_the_server_accepts_and_refuse_what_it_refuses() {
    let lib = library();
    let server = serve_with_oracle(&lib, ServerSettings::default(), ApiKeys::default()).await;
    let doc = fetch_doc(&server.url, None).await;
    let c = client();
    // (path, a valid body, bodies the server refuses with 400)
    let cases: Vec<(&str, &str, Value, Vec<Value>)> = vec![
        (
            "/api/oracle",
            "/api/oracle",
            json!({"question": "How?", "lang": "auto", "k": 2, "hyde": false, "retrieval": "lexical",
                   "history": [{"role": "user", "content": "a"}], "stream": false}),
            vec![
                json!({}),
                json!({"question": 3}),
                json!({"question": "How?", "lang": "fr"}),
                json!({"question": "How?", "colour": "red"}),
                json!({"question": "How?", "k": 0}),
                json!({"question": "How?", "history": [{"role": "system", "content": "a"}]}),
            ],
        ),
        (
            "/v1/clamp",
            "/v1/clamp",
            json!({"text": "x", "config": {"words": {"min_run": 4}, "healthy": {"enabled": true}}}),
            vec![
                json!({}),
                json!({"text": "x", "extra": 1}),
                json!({"text": "x", "config": {"wordz": {}}}),
                json!({"text": "x", "config": {"words": {"min_run": "many"}}}),
                json!({"text": 1}),
            ],
        ),
        (
            "/v1/rescue",
            "/v1/rescue",
            json!({"text": "{\"a\": 1}", "key": "a"}),
            vec![
                json!({"text": "x"}),
                json!({"key": "a"}),
                json!({"text": "x", "key": "a", "k": 1}),
            ],
        ),
        (
            "/v1/repair",
            "/v1/repair",
            json!({"text": "[1,"}),
            vec![
                json!({}),
                json!({"text": null}),
                json!({"text": "x", "key": "a"}),
            ],
        ),
        (
            "/v1/sessions/{session}/calls",
            "/v1/sessions/r/calls",
            json!({"tool": "read", "args": {"p": 1}, "id": "x1", "agent": "main", "run": "r"}),
            vec![
                json!({"args": {}}),
                json!({"tool": 1}),
                json!({"tool": "read", "colour": 1}),
            ],
        ),
        (
            "/v1/sessions/{session}/results",
            "/v1/sessions/r/results",
            json!({"id": "x1", "result": {"ok": true}, "agent": "main", "run": "r"}),
            vec![
                json!({"id": "x1", "result": 1, "colour": 1}),
                json!({"id": 5, "result": 1}),
            ],
        ),
        (
            "/v1/sessions/{session}/compaction",
            "/v1/sessions/r/compaction",
            json!({"agent": "main", "run": "r"}),
            vec![json!({"agent": 1}), json!({"colour": 1})],
        ),
    ];
    for (path, concrete, good, bads) in cases {
        let v = request_validator(&doc, "POST", path);
        assert_valid(&v, &good, &format!("{path} valid body"));
        let res = c
            .post(format!("{}{concrete}", server.url))
            .json(&good)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        assert!(
            (200..300).contains(&status),
            "{path}: {status} {}",
            res.text().await.unwrap()
        );
        for bad in bads {
            let res = c
                .post(format!("{}{concrete}", server.url))
                .json(&bad)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 400, "{path} {bad}");
            // What the server refuses the schema refuses too, except rules
            // no schema states (k within range is stated; it is checked).
            assert!(
                !v.is_valid(&bad),
                "{path}: the schema accepts {bad}, which the server refuses"
            );
        }
    }
}

#[tokio::test]
async fn error_answers_of_the_layers_are_documented_problems() {
    // Auth on, a small body limit, a concurrency limit of one, and an
    // oracle that has not opened yet.
    let settings = ServerSettings {
        max_body_bytes: 1024,
        ..ServerSettings::default()
    };
    let keys = ApiKeys::parse(Some("k1"), None);
    let state = state_with(settings, Profile::Default, keys).serving_oracle();
    let server = start(state).await;
    let doc = fetch_doc(&server.url, Some("k1")).await;
    let c = client();
    let url = server.url.as_str();
    let big = "x".repeat(4096);
    let cases = [
        (
            "POST",
            "/v1/clamp",
            c.post(format!("{url}/v1/clamp"))
                .json(&json!({"text": "x"})),
            401,
        ),
        (
            "POST",
            "/v1/clamp",
            c.post(format!("{url}/v1/clamp"))
                .bearer_auth("no")
                .json(&json!({"text": "x"})),
            403,
        ),
        (
            "GET",
            "/openapi.json",
            c.get(format!("{url}/openapi.json")),
            401,
        ),
        (
            "GET",
            "/metrics",
            c.get(format!("{url}/metrics")).bearer_auth("no"),
            403,
        ),
        (
            "POST",
            "/v1/clamp",
            c.post(format!("{url}/v1/clamp"))
                .bearer_auth("k1")
                .json(&json!({"text": big})),
            413,
        ),
        (
            "POST",
            "/v1/check",
            c.post(format!("{url}/v1/check"))
                .bearer_auth("k1")
                .body(big.clone()),
            413,
        ),
        // The optional compaction body has the same limit, as problem+json.
        (
            "POST",
            "/v1/sessions/{session}/compaction",
            c.post(format!("{url}/v1/sessions/s/compaction"))
                .bearer_auth("k1")
                .body(big.clone()),
            413,
        ),
        (
            "POST",
            "/v1/sessions/{session}/calls",
            c.post(format!("{url}/v1/sessions/s/calls"))
                .bearer_auth("k1")
                .body("{}"),
            415,
        ),
        (
            "POST",
            "/api/help",
            c.post(format!("{url}/api/help"))
                .bearer_auth("k1")
                .json(&json!({"question": "q"})),
            503,
        ),
        (
            "POST",
            "/mcp",
            c.post(format!("{url}/mcp"))
                .bearer_auth("k1")
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .body("not json-rpc"),
            400,
        ),
    ];
    for (method, path, req, want) in cases {
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        assert_eq!(status, want, "{method} {path}");
        assert_eq!(
            res.headers()["content-type"],
            "application/problem+json",
            "{method} {path}"
        );
        let body: Value = res.json().await.unwrap();
        let v = response_validator(&doc, method, path, status, "application/problem+json");
        assert_valid(&v, &body, &format!("{method} {path} -> {status}"));
        assert_eq!(body["status"], status);
    }
}

/// The enums of the loop guard's names, as the document states them, are
/// exactly the strings the code writes (`as_str`/`name` over `ALL`): the
/// core derives their schemas from the variant names, and this keeps the
/// two from drifting apart.
#[tokio::test]
async fn loop_names_in_the_document_are_the_names_on_the_wire() {
    use deloop_core::loops::transcript::TranscriptFormat;
    use deloop_core::loops::{Detector, Level};
    let server = start(state_with(
        ServerSettings::default(),
        Profile::Default,
        ApiKeys::default(),
    ))
    .await;
    let doc = fetch_doc(&server.url, None).await;
    let listed = |name: &str| -> Vec<String> {
        doc["components"]["schemas"][name]["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("components/schemas/{name} has no enum"))
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    let strings = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(listed("LoopLevel"), strings(&Level::ALL.map(Level::as_str)));
    assert_eq!(
        listed("LoopDetector"),
        strings(&Detector::ALL.map(Detector::as_str))
    );
    assert_eq!(
        listed("LoopProfile"),
        strings(&Profile::ALL.map(Profile::name))
    );
    assert_eq!(
        listed("TranscriptFormat"),
        strings(&TranscriptFormat::ALL.map(TranscriptFormat::as_str))
    );
    // Each one parses back.
    for f in listed("TranscriptFormat") {
        assert_eq!(f.parse::<TranscriptFormat>().unwrap().as_str(), f);
    }
    for p in listed("LoopProfile") {
        assert_eq!(p.parse::<Profile>().unwrap().name(), p);
    }
}

/// The range of `k` that the document states is the oracle's.
#[tokio::test]
async fn the_documented_range_of_k_is_the_oracles() {
    let lib = library();
    let server = serve_with_oracle(&lib, ServerSettings::default(), ApiKeys::default()).await;
    let doc = fetch_doc(&server.url, None).await;
    let k = &doc["components"]["schemas"]["AskBody"]["properties"]["k"];
    assert_eq!(k["minimum"], 1, "{k}");
    assert_eq!(k["maximum"], deloop_oracle::MAX_K, "{k}");
}
