//! Output formats (human and JSON) for the `rescue` command family
//! (`deloop rescue`, `deloop repair`).

use deloop_core::rescue::Repair;
use serde::Serialize;
use serde_json::Value;

/// The `--json` report of `deloop rescue` (and the answer of
/// `POST /v1/rescue`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RescueJson<'a> {
    /// True when a value was rescued.
    pub ok: bool,
    /// The rescued value (any JSON), or null when nothing was rescued.
    #[cfg_attr(feature = "openapi", schema(required))]
    pub value: Option<&'a Value>,
    /// The repairs applied, in order.
    pub repairs: &'a [Repair],
    /// Why nothing was rescued; only present when `ok` is false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a str>,
}

/// The `--json` object of `deloop repair` (and the answer of
/// `POST /v1/repair`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RepairJson<'a> {
    /// The repaired JSON document (any JSON value).
    pub value: &'a Value,
    /// The repairs applied, in order (empty when the input was valid JSON).
    pub repairs: &'a [Repair],
}

/// The value as printed by `deloop rescue`: a string raw (with a final
/// newline), any other value as compact JSON.
pub fn value_plain(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s}\n"),
        other => format!("{other}\n"),
    }
}

/// The `--json` report of `deloop rescue` (and the answer of
/// `POST /v1/rescue`): `{"ok": bool, "value": <JSON or null>, "repairs":
/// [...]}`, plus `"error"` when nothing was rescued.
pub fn report_value(value: Option<&Value>, repairs: &[Repair], error: Option<&str>) -> Value {
    serde_json::to_value(RescueJson {
        ok: value.is_some(),
        value,
        repairs,
        error,
    })
    .unwrap_or(Value::Null)
}

/// [`report_value`] as `deloop rescue --json` prints it: compact, one line.
pub fn report_json(value: Option<&Value>, repairs: &[Repair], error: Option<&str>) -> String {
    format!("{}\n", report_value(value, repairs, error))
}

/// One compact, valid JSON document (`deloop repair`), from its text
/// (`RepairedJson::json`, which is the value's compact `Display`), with a
/// final newline.
pub fn document_text(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + 1);
    out.push_str(json);
    out.push('\n');
    out
}

/// The `--json` object of `deloop repair` (and the answer of
/// `POST /v1/repair`): `{"value": <the repaired JSON>, "repairs": [...]}`,
/// the repairs named in snake case in the order they were applied.
pub fn repair_value(value: &Value, repairs: &[Repair]) -> Value {
    serde_json::to_value(RepairJson { value, repairs }).unwrap_or(Value::Null)
}

/// [`repair_value`] as `deloop repair --json` prints it: compact, one line.
pub fn repair_json(value: &Value, repairs: &[Repair]) -> String {
    format!("{}\n", repair_value(value, repairs))
}

/// The repairs as one line for standard error (`deloop repair --explain`).
pub fn repairs_line(repairs: &[Repair]) -> String {
    let names: Vec<String> = repairs
        .iter()
        .map(|r| {
            serde_json::to_value(r).map_or_else(
                |_| format!("{r:?}"),
                |v| v.as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    if names.is_empty() {
        "repairs: none (the input was valid JSON)\n".to_owned()
    } else {
        format!("repairs: {}\n", names.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_prints_strings_raw_and_other_values_as_json() {
        assert_eq!(value_plain(&json!("a \"b\"\nc")), "a \"b\"\nc\n");
        assert_eq!(value_plain(&json!({"a": [1, null]})), "{\"a\":[1,null]}\n");
    }

    #[test]
    fn json_report_shape() {
        let r = report_json(Some(&json!("x")), &[Repair::ClosedTruncated], None);
        let v: Value = serde_json::from_str(&r).unwrap();
        assert_eq!(
            v,
            json!({"ok": true, "value": "x", "repairs": ["closed_truncated"]})
        );
        let r = report_json(None, &[], Some("no JSON"));
        let v: Value = serde_json::from_str(&r).unwrap();
        assert_eq!(
            v,
            json!({"ok": false, "value": null, "repairs": [], "error": "no JSON"})
        );
    }

    #[test]
    fn repair_value_shape() {
        let v = repair_value(&json!({"a": 1}), &[Repair::StrippedCodeFence]);
        assert_eq!(
            v,
            json!({"value": {"a": 1}, "repairs": ["stripped_code_fence"]})
        );
        assert_eq!(
            repair_json(&json!([]), &[]),
            "{\"value\":[],\"repairs\":[]}\n"
        );
    }

    #[test]
    fn repairs_line_names_snake_case() {
        assert_eq!(
            repairs_line(&[Repair::StrippedCodeFence, Repair::EscapedInnerQuote]),
            "repairs: stripped_code_fence, escaped_inner_quote\n"
        );
    }
}
