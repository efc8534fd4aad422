//! Fixtures for the document tests: a library, a server with the oracle, and
//! readers and validators over the OpenAPI document.

use crate::common;
use crate::common::{client, start, state_with, Library, TestServer};
use deloop_config::Config;
use deloop_core::loops::Profile;
use deloop_oracle::Oracle;
use deloop_server::auth::ApiKeys;
use deloop_server::ServerSettings;
use serde_json::Value;
use std::collections::BTreeSet;

pub(crate) const DOCS_MD: &str =
    "# Loops\n\nWhen a stream loops, the watcher cuts it and the request is \
cancelled.\n\n## Rescue\n\nThe JSON rescue recovers the answer from broken model output.\n";

pub(crate) fn library() -> Library {
    common::library(&[("loops.md", DOCS_MD)])
}

/// A server with the oracle (extractive: no LLM configured).
pub(crate) async fn serve_with_oracle(
    lib: &Library,
    settings: ServerSettings,
    keys: ApiKeys,
) -> TestServer {
    let state = state_with(settings, Profile::Default, keys).serving_oracle();
    let oracle = Oracle::open(&Config::default(), Some(&lib.db)).unwrap();
    assert!(state.set_oracle(oracle));
    start(state).await
}

pub(crate) async fn fetch_doc(url: &str, key: Option<&str>) -> Value {
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
pub(crate) fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

pub(crate) const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// `(METHOD, path)` of every operation.
pub(crate) fn operations(doc: &Value) -> BTreeSet<(String, String)> {
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

pub(crate) fn operation<'a>(doc: &'a Value, method: &str, path: &str) -> &'a Value {
    let op = &doc["paths"][path][method.to_lowercase()];
    assert!(op.is_object(), "{method} {path} is not documented");
    op
}

/// A validator for the schema at `pointer` in `doc`; the document's
/// `components` go beside it, so `#/components/schemas/...` resolves.
pub(crate) fn validator(doc: &Value, pointer: &str) -> jsonschema::Validator {
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
pub(crate) fn response_validator(
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

pub(crate) fn request_validator(doc: &Value, method: &str, path: &str) -> jsonschema::Validator {
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

pub(crate) fn assert_valid(v: &jsonschema::Validator, instance: &Value, what: &str) {
    let errors: Vec<String> = v.iter_errors(instance).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "{what}: {instance} does not validate: {errors:?}"
    );
}

/// Every `$ref` in the document, with where it is.
pub(crate) fn refs(v: &Value, at: &str, out: &mut Vec<(String, String)>) {
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
