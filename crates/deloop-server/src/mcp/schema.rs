//! MCP tool input schemas derived from the argument types, the way the
//! OpenAPI document is: one `utoipa::ToSchema` derive per type, so a field
//! added to a request shows in `/openapi.json` and in `tools/list` at once.
//!
//! An MCP input schema is one self-contained JSON Schema object, so the
//! `$ref`s into the OpenAPI components are inlined.

use std::collections::HashMap;

use rmcp::model::JsonObject;
use serde_json::Value;
use utoipa::ToSchema;

/// The deepest nesting of references inlined; the argument types are
/// shallow (a few levels), so hitting it means a recursive type.
const MAX_DEPTH: usize = 16;

const REF_PREFIX: &str = "#/components/schemas/";

/// The input schema of a tool whose arguments are `T`: an object schema
/// with every reference inlined and unknown arguments refused.
///
/// # Panics
/// When `T` is not an object, or its schema refers to a missing or
/// recursive component: a programming error in this crate's types, caught
/// by the unit tests that list every tool.
pub fn input_schema<T: ToSchema>() -> JsonObject {
    let mut named = Vec::new();
    T::schemas(&mut named);
    let components: HashMap<String, Value> = named
        .into_iter()
        .map(|(name, schema)| (name, to_json(&schema)))
        .collect();
    let mut root = to_json(&T::schema());
    inline(&mut root, &components, 0);
    tidy(&mut root, 0);
    let Value::Object(mut object) = root else {
        panic!("the arguments of a tool are an object: {}", T::name());
    };
    assert_eq!(
        object.get("type"),
        Some(&Value::from("object")),
        "the arguments of a tool are an object: {}",
        T::name()
    );
    // The tool's description says what the arguments are for.
    object.remove("description");
    // Every argument type denies unknown fields (serde), which utoipa does
    // not state; tools must say it so that models do not invent arguments.
    object.insert("additionalProperties".into(), Value::Bool(false));
    object
}

fn to_json(schema: &impl serde::Serialize) -> Value {
    serde_json::to_value(schema).expect("a utoipa schema serialises to JSON")
}

fn inline(v: &mut Value, components: &HashMap<String, Value>, depth: usize) {
    assert!(
        depth <= MAX_DEPTH,
        "schema references nest too deep (recursive type?)"
    );
    match v {
        Value::Object(o) => {
            let target = o
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(REF_PREFIX))
                .map(str::to_string);
            if let Some(name) = target {
                let mut resolved = components
                    .get(&name)
                    .unwrap_or_else(|| panic!("schema component {name} is not collected"))
                    .clone();
                inline(&mut resolved, components, depth + 1);
                // A `$ref` beside a description keeps the description.
                o.remove("$ref");
                if let Value::Object(r) = resolved {
                    for (k, val) in r {
                        o.entry(k).or_insert(val);
                    }
                }
            } else {
                for val in o.values_mut() {
                    inline(val, components, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            for val in items {
                inline(val, components, depth + 1);
            }
        }
        _ => {}
    }
}

/// Makes the schema read well for a model: an optional argument is just
/// optional (utoipa writes `Option<T>` as `oneOf: [null, T]`; absent is what
/// the tools take), and doc-comment line breaks inside a paragraph become
/// spaces.
fn tidy(v: &mut Value, depth: usize) {
    if depth > 4 * MAX_DEPTH {
        return;
    }
    match v {
        Value::Object(o) => {
            if let Some(Value::Array(branches)) = o.get("oneOf") {
                let null = |b: &Value| b.get("type") == Some(&Value::from("null"));
                if branches.len() == 2 && branches.iter().any(null) {
                    let other = branches.iter().find(|b| !null(b)).cloned();
                    o.remove("oneOf");
                    if let Some(Value::Object(b)) = other {
                        for (k, val) in b {
                            o.entry(k).or_insert(val);
                        }
                    }
                }
            }
            if let Some(Value::Array(types)) = o.get("type") {
                let kept: Vec<Value> = types
                    .iter()
                    .filter(|t| *t != &Value::from("null"))
                    .cloned()
                    .collect();
                if kept.len() == 1 {
                    o.insert("type".into(), kept[0].clone());
                }
            }
            if let Some(Value::String(d)) = o.get_mut("description") {
                *d = unwrap_lines(d);
            }
            for val in o.values_mut() {
                tidy(val, depth + 1);
            }
        }
        Value::Array(items) => {
            for val in items {
                tidy(val, depth + 1);
            }
        }
        _ => {}
    }
}

/// Joins the lines of each paragraph (blank lines stay).
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|p| p.split('\n').map(str::trim).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, utoipa::ToSchema)]
    #[allow(dead_code)]
    struct Inner {
        /// A word.
        word: String,
    }

    #[derive(serde::Deserialize, utoipa::ToSchema)]
    #[allow(dead_code)]
    struct Outer {
        /// Wrapped over
        /// two lines.
        flag: Option<bool>,
        /// The inner one.
        inner: Inner,
        /// Several.
        many: Vec<Inner>,
        maybe: Option<Inner>,
    }

    #[test]
    fn references_are_inlined_and_unknown_arguments_refused() {
        let s = Value::Object(input_schema::<Outer>());
        let text = s.to_string();
        assert!(!text.contains("$ref"), "{text}");
        assert_eq!(s["additionalProperties"], false);
        assert_eq!(
            s["properties"]["inner"]["properties"]["word"]["type"],
            "string"
        );
        assert_eq!(s["properties"]["inner"]["description"], "The inner one.");
        // An optional argument is just optional, not nullable.
        assert_eq!(s["properties"]["maybe"]["type"], "object");
        assert!(s["properties"]["maybe"].get("oneOf").is_none());
        assert_eq!(
            s["properties"]["many"]["items"]["properties"]["word"]["description"],
            "A word."
        );
        assert_eq!(s["properties"]["flag"]["type"], "boolean");
        assert_eq!(
            s["properties"]["flag"]["description"],
            "Wrapped over two lines."
        );
        let required: Vec<&str> = s["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(required, ["inner", "many"]);
    }
}
