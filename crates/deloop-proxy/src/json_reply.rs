//! Replies to requests that ask for JSON (`response_format` `json_object`
//! or `json_schema`): the content is rescued and repaired into one valid
//! JSON document (`deloop_core::rescue`), and with `json_schema` checked
//! against the request's schema. A failure is reported in the reply's
//! `deloop` object, never hidden.

use std::sync::Arc;

use deloop_core::rescue::{repair_json, Repair};
use serde::Serialize;
use serde_json::Value;

use crate::request::JsonFormat;

/// Schemas nested deeper than this are not compiled (the validator
/// compiles recursively); the report says so.
pub const MAX_SCHEMA_DEPTH: usize = 64;
/// Schema errors listed at most in a report.
pub const MAX_SCHEMA_ERRORS: usize = 8;

/// What a request asked for, ready to check replies against.
#[derive(Clone)]
pub struct JsonSpec {
    schema: Option<Result<Arc<jsonschema::Validator>, String>>,
}

impl std::fmt::Debug for JsonSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonSpec")
            .field("schema", &self.schema.as_ref().map(|s| s.is_ok()))
            .finish()
    }
}

/// What the proxy did to, and found in, one JSON reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JsonReport {
    /// The content is one valid JSON document (after repair).
    pub valid: bool,
    /// The proxy changed the content to make it valid.
    pub repaired: bool,
    /// The repairs applied.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repairs: Vec<Repair>,
    /// Why the content is not valid JSON, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The result of the schema check: `true`, `false`, or absent when
    /// there is no schema or it could not be used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_valid: Option<bool>,
    /// Where the content breaks the schema (`/path: message`), at most
    /// [`MAX_SCHEMA_ERRORS`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub schema_errors: Vec<String>,
    /// Why the schema could not be used (invalid, too deep, remote refs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_error: Option<String>,
}

impl JsonReport {
    /// The `x-deloop-json` header value: `valid`, `repaired` or `invalid`.
    pub fn header(&self) -> &'static str {
        match (self.valid, self.repaired) {
            (false, _) => "invalid",
            (true, true) => "repaired",
            (true, false) => "valid",
        }
    }

    /// The `x-deloop-json-schema` header value, when there is a schema:
    /// `valid`, `invalid` or `unchecked`.
    pub fn schema_header(&self) -> Option<&'static str> {
        match (self.schema_valid, &self.schema_error) {
            (Some(true), _) => Some("valid"),
            (Some(false), _) => Some("invalid"),
            (None, Some(_)) => Some("unchecked"),
            (None, None) => None,
        }
    }
}

fn depth(v: &Value) -> usize {
    // Iterative: a schema from a request is input and must not recurse.
    let mut max = 0;
    let mut stack = vec![(v, 1usize)];
    while let Some((v, d)) = stack.pop() {
        max = max.max(d);
        if d > MAX_SCHEMA_DEPTH {
            break;
        }
        match v {
            Value::Array(a) => stack.extend(a.iter().map(|x| (x, d + 1))),
            Value::Object(o) => stack.extend(o.values().map(|x| (x, d + 1))),
            _ => {}
        }
    }
    max
}

impl JsonSpec {
    /// The spec of a `response_format`; compiles the schema once.
    pub fn new(format: &JsonFormat) -> JsonSpec {
        let schema = match format {
            JsonFormat::Object | JsonFormat::Schema(None) => None,
            JsonFormat::Schema(Some(schema)) => Some(compile(schema)),
        };
        JsonSpec { schema }
    }

    /// Checks text the client already has (a streamed reply): it is not
    /// changed, only judged.
    pub fn check(&self, text: &str) -> JsonReport {
        match serde_json::from_str::<Value>(text) {
            Ok(v) => self.judge(&v, false, Vec::new()),
            Err(e) => JsonReport {
                valid: false,
                repaired: false,
                repairs: Vec::new(),
                error: Some(format!("the content is not valid JSON: {e}")),
                schema_valid: None,
                schema_errors: Vec::new(),
                schema_error: None,
            },
        }
    }

    /// Repairs a whole reply's content: the new content when it changed,
    /// and the report.
    pub fn repair(&self, text: &str) -> (Option<String>, JsonReport) {
        if let Ok(v) = serde_json::from_str::<Value>(text) {
            return (None, self.judge(&v, false, Vec::new()));
        }
        match repair_json(text) {
            Ok(r) => match serde_json::from_str::<Value>(&r.json) {
                Ok(v) => {
                    let report = self.judge(&v, true, r.repairs);
                    (Some(r.json), report)
                }
                Err(e) => (
                    None,
                    invalid(format!("the repaired content is not JSON: {e}")),
                ),
            },
            Err(e) => (
                None,
                invalid(format!("the content could not be repaired into JSON: {e}")),
            ),
        }
    }

    fn judge(&self, v: &Value, repaired: bool, repairs: Vec<Repair>) -> JsonReport {
        let mut report = JsonReport {
            valid: true,
            repaired,
            repairs,
            error: None,
            schema_valid: None,
            schema_errors: Vec::new(),
            schema_error: None,
        };
        match &self.schema {
            None => {}
            Some(Err(why)) => report.schema_error = Some(why.clone()),
            Some(Ok(validator)) => {
                let errors: Vec<String> = validator
                    .iter_errors(v)
                    .take(MAX_SCHEMA_ERRORS)
                    .map(|e| format!("{}: {e}", e.instance_path()))
                    .collect();
                report.schema_valid = Some(errors.is_empty());
                report.schema_errors = errors;
            }
        }
        report
    }
}

fn invalid(error: String) -> JsonReport {
    JsonReport {
        valid: false,
        repaired: false,
        repairs: Vec::new(),
        error: Some(error),
        schema_valid: None,
        schema_errors: Vec::new(),
        schema_error: None,
    }
}

fn compile(schema: &Value) -> Result<Arc<jsonschema::Validator>, String> {
    if depth(schema) > MAX_SCHEMA_DEPTH {
        return Err(format!(
            "the schema is nested deeper than {MAX_SCHEMA_DEPTH} levels; it was not checked"
        ));
    }
    jsonschema::validator_for(schema)
        .map(Arc::new)
        .map_err(|e| format!("the request's schema cannot be used: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn valid_json_is_left_alone() {
        let spec = JsonSpec::new(&JsonFormat::Object);
        let (new, report) = spec.repair(r#"{"a": 1}"#);
        assert_eq!(new, None);
        assert!(report.valid && !report.repaired);
        assert_eq!(report.header(), "valid");
        assert_eq!(report.schema_header(), None);
    }

    #[test]
    fn broken_json_is_repaired_and_reported() {
        let spec = JsonSpec::new(&JsonFormat::Object);
        let (new, report) = spec.repair("```json\n{'a': 1, b: [1, 2,]}\n```");
        assert_eq!(new.as_deref(), Some(r#"{"a":1,"b":[1,2]}"#));
        assert!(report.valid && report.repaired);
        assert!(!report.repairs.is_empty());
        assert_eq!(report.header(), "repaired");
        let (new, report) = spec.repair("I cannot answer that.");
        assert_eq!(new, None);
        assert!(!report.valid);
        assert!(report.error.unwrap().contains("no JSON"));
    }

    #[test]
    fn schema_failures_are_reported() {
        let schema = json!({
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"]
        });
        let spec = JsonSpec::new(&JsonFormat::Schema(Some(schema)));
        let (_, ok) = spec.repair(r#"{"n": 3}"#);
        assert_eq!(ok.schema_valid, Some(true));
        let (_, bad) = spec.repair(r#"{"n": "three"}"#);
        assert_eq!(bad.schema_valid, Some(false));
        assert_eq!(bad.schema_header(), Some("invalid"));
        assert!(
            bad.schema_errors[0].starts_with("/n: "),
            "{:?}",
            bad.schema_errors
        );
        let report = spec.check(r#"{"n": 1"#);
        assert!(!report.valid);
    }

    #[test]
    fn unusable_schemas_say_so() {
        let spec = JsonSpec::new(&JsonFormat::Schema(Some(json!({"type": 12}))));
        let (_, r) = spec.repair("{}");
        assert!(r.valid);
        assert_eq!(r.schema_header(), Some("unchecked"));
        let mut deep = json!({"type": "object"});
        for _ in 0..100 {
            deep = json!({"type": "object", "properties": {"a": deep}});
        }
        let spec = JsonSpec::new(&JsonFormat::Schema(Some(deep)));
        let (_, r) = spec.repair("{}");
        assert!(r.schema_error.unwrap().contains("deeper"));
        // A remote reference is not fetched.
        let spec = JsonSpec::new(&JsonFormat::Schema(Some(
            json!({"$ref": "https://example.invalid/schema.json"}),
        )));
        let (_, r) = spec.repair("{}");
        assert_eq!(r.schema_header(), Some("unchecked"), "{r:?}");
    }
}
