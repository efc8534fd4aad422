//! Unit tests of the MCP handler: tool list, argument errors, answers.

use super::*;
use crate::auth::ApiKeys;
use crate::metrics::Metrics;
use crate::sessions::{GuardSettings, MemoryStore};
use crate::settings::ServerSettings;
use deloop_core::loops::{LoopConfig, Profile};
use deloop_core::repetition::ClampConfig;
use std::time::Duration;

fn state() -> AppState {
    let metrics = Arc::new(Metrics::new());
    let guard = GuardSettings {
        profile: Profile::Default,
        config: LoopConfig::default(),
        max_open_calls: 64,
    };
    let store = MemoryStore::new(
        guard.clone(),
        100,
        Duration::from_secs(60),
        Arc::new(crate::sessions::MetricsEvents(metrics.clone())),
    );
    AppState::new(
        ServerSettings::default(),
        ClampConfig::default(),
        guard,
        Arc::new(store),
        metrics,
        ApiKeys::default(),
    )
}

fn args(v: Value) -> JsonObject {
    match v {
        Value::Object(o) => o,
        _ => panic!("arguments are an object"),
    }
}

/// Answers with the arguments it was given, to test the seam (not an
/// oracle).
struct Echo;

impl AskService for Echo {
    fn ask(&self, a: AskArgs) -> BoxFuture<'_, Result<Value, ToolError>> {
        Box::pin(async move {
            Ok(json!({
                "question": a.question,
                "mode": a.mode.map(deloop_oracle::Mode::as_str),
                "lang": a.lang.map(crate::oracle::AskLang::as_str),
                "retrieval": a.retrieval.map(deloop_oracle::Retrieval::name),
                "k": a.k,
                "turns": a.history.len(),
            }))
        })
    }
    fn search(&self, a: SearchArgs) -> BoxFuture<'_, Result<Value, ToolError>> {
        Box::pin(async move { Err(ToolError::new(format!("no index for {:?}", a.query))) })
    }
}

fn names(s: &McpServer) -> Vec<&str> {
    s.tools().iter().map(|t| t.name.as_ref()).collect()
}

#[test]
fn every_tool_has_an_object_schema_that_lists_its_required_arguments() {
    let s = McpServer::new(state()).with_ask(Arc::new(Echo));
    for t in s.tools() {
        let schema = &t.input_schema;
        assert_eq!(schema["type"], "object", "{}", t.name);
        assert_eq!(schema["additionalProperties"], false, "{}", t.name);
        let props = schema["properties"].as_object().unwrap();
        for r in schema["required"].as_array().unwrap() {
            assert!(props.contains_key(r.as_str().unwrap()), "{}: {r}", t.name);
        }
        for (name, p) in props {
            assert!(
                p.get("description").is_some(),
                "{}.{name} undocumented",
                t.name
            );
        }
        assert!(t.description.as_ref().unwrap().len() > 150, "{}", t.name);
    }
}

#[tokio::test]
async fn ask_and_search_are_listed_and_served_only_with_an_oracle() {
    let plain = McpServer::new(state());
    assert!(!names(&plain).contains(&"ask"));
    assert!(plain
        .call("ask", args(json!({"question": "q"})))
        .await
        .is_none());
    let s = plain.with_ask(Arc::new(Echo));
    assert_eq!(&names(&s)[names(&s).len() - 2..], ["ask", "search"]);
    let v = s
        .call(
            "ask",
            args(
                json!({"question": "¿Qué es deloop?", "mode": "tutor", "lang": "es",
                "k": 3, "retrieval": "lexical",
                "history": [{"role": "user", "content": "hola"}]}),
            ),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        v,
        json!({"question": "¿Qué es deloop?", "mode": "tutor", "lang": "es",
            "retrieval": "lexical", "k": 3, "turns": 1})
    );
    let e = s
        .call("search", args(json!({"query": "loops"})))
        .await
        .unwrap();
    assert_eq!(e.unwrap_err().0, "no index for \"loops\"");
}

#[tokio::test]
async fn bad_ask_arguments_are_tool_errors_naming_the_argument() {
    let s = McpServer::new(state()).with_ask(Arc::new(Echo));
    for (a, named) in [
        (json!({}), "`question`"),
        (json!({"question": "  "}), "`question`"),
        (json!({"question": "q", "mode": "poet"}), "`mode`"),
        (json!({"question": "q", "k": 0}), "`k`"),
        (json!({"question": "q", "k": -1}), "`k`"),
        (
            json!({"question": "q", "history": [{"role": "system", "content": "x"}]}),
            "`history[0].role`",
        ),
        (json!({"question": "q", "stream": true}), "`stream`"),
    ] {
        let e = s.call("ask", args(a.clone())).await.unwrap().unwrap_err();
        assert!(e.0.contains(named), "{a}: {e}");
    }
    let e = s
        .call("search", args(json!({"query": ""})))
        .await
        .unwrap()
        .unwrap_err();
    assert!(e.0.contains("`query`"), "{e}");
}

#[tokio::test]
async fn guard_tools_answer_like_the_http_api_and_name_bad_arguments() {
    let s = McpServer::new(state());
    let v = s
        .call("repair_json", args(json!({"text": "[1, 2"})))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(v["value"], json!([1, 2]));
    for (tool, a, named) in [
        (
            "clamp_text",
            json!({"text": "x", "config": {"words": {"nope": 1}}}),
            "config",
        ),
        (
            "clamp_text",
            json!({"text": "x", "config": {"words": {"max_period": 40}}}),
            "words.max_period = 40 is out of range: expected 1 to 16",
        ),
        ("rescue_json", json!({"text": "{}"}), "`key`"),
        (
            "check_tool_call",
            json!({"session_id": "s", "tool": " ", "args": {}}),
            "`tool`",
        ),
        (
            "check_tool_call",
            json!({"session_id": "s", "tool": "t"}),
            "`args`",
        ),
        (
            "check_tool_call",
            json!({"session_id": "s".repeat(300), "tool": "t", "args": {}}),
            "`session_id`",
        ),
        (
            "check_tool_call",
            json!({"session_id": 7, "tool": "t", "args": {}}),
            "`session_id`",
        ),
        (
            "record_tool_result",
            json!({"session_id": "s", "id": "a"}),
            "`result`",
        ),
        (
            "record_tool_result",
            json!({"session_id": "s", "id": "a", "result": 1, "error": "e"}),
            "`error`",
        ),
        (
            "record_tool_result",
            json!({"session_id": "s", "result": 1}),
            "`id`",
        ),
        (
            "check_transcript",
            json!({"transcript": [1]}),
            "`transcript`",
        ),
        (
            "check_transcript",
            json!({"transcript": "", "format": "xml"}),
            "`format`",
        ),
    ] {
        let e = s.call(tool, args(a.clone())).await.unwrap().unwrap_err();
        assert!(e.0.contains(named), "{tool} {a}: {e}");
    }
    // `result: null` is a result.
    s.call(
        "check_tool_call",
        args(json!({"session_id": "s", "tool": "t", "args": {}, "id": "a"})),
    )
    .await
    .unwrap()
    .unwrap();
    let r = s
        .call(
            "record_tool_result",
            args(json!({"session_id": "s", "id": "a", "result": null})),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r["index"], 0);
}

#[tokio::test]
async fn an_empty_transcript_has_no_verdicts() {
    let s = McpServer::new(state());
    let v = s
        .call("check_transcript", args(json!({"transcript": ""})))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(v["verdicts"], json!([]));
    assert_eq!(v["summary"]["calls"], 0);
}
