//! The guard endpoints over real TCP. Each answers the value the library
//! flow behind the CLI's `--json` gives for the same input (the CLI tests
//! in crates/deloop/tests/serve_cli.rs compare with the binary itself).

mod common;

use deloop_core::repetition::{clamp, ClampConfig};
use serde_json::{json, Value};

fn looping_text() -> String {
    let mut s = String::from("Intro sentence before the loop starts here. ");
    for _ in 0..40 {
        s.push_str("la continuación de un proceso de automatización automático o la de ");
    }
    s
}

#[tokio::test]
async fn clamp_answers_the_cli_json_value() {
    let server = common::start_default().await;
    let text = looping_text();
    let got: Value = common::client()
        .post(format!("{}/v1/clamp", server.url))
        .json(&json!({"text": text}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let want = deloop_render::clamp::json_value(&clamp(&text, &ClampConfig::default()));
    assert_eq!(got, want);
    assert_eq!(got["clamped"], true);
    // seed_compat and a per-request table change the answer.
    let seed: Value = common::client()
        .post(format!("{}/v1/clamp", server.url))
        .json(&json!({"text": text, "config": {"seed_compat": true}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        seed,
        deloop_render::clamp::json_value(&clamp(&text, &ClampConfig::seed_compat()))
    );
    let off: Value = common::client()
        .post(format!("{}/v1/clamp", server.url))
        .json(&json!({"text": text, "config": {"words": {"enabled": false}, "substring": {"enabled": false}, "near": {"enabled": false}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(off["clamped"], false, "{off}");
    // Unknown config keys are a 400 naming them.
    let r = common::client()
        .post(format!("{}/v1/clamp", server.url))
        .json(&json!({"text": text, "config": {"wordz": {}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("wordz"));
}

#[tokio::test]
async fn clamp_rejects_out_of_range_settings_naming_key_and_bounds() {
    let server = common::start_default().await;
    for (config, key, range) in [
        (
            json!({"words": {"max_period": 40}}),
            "words.max_period",
            "1 to 16",
        ),
        (
            json!({"substring": {"min_copies": 1}}),
            "substring.min_copies",
            "2 to 1000",
        ),
        (
            json!({"near": {"line_window": 17}}),
            "near.line_window",
            "0 to 16",
        ),
    ] {
        let r = common::client()
            .post(format!("{}/v1/clamp", server.url))
            .json(&json!({"text": looping_text(), "config": config}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "{key}");
        let problem: Value = r.json().await.unwrap();
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains(key) && detail.contains(range), "{detail}");
    }
    // The edge of a range is accepted.
    let r = common::client()
        .post(format!("{}/v1/clamp", server.url))
        .json(&json!({"text": looping_text(), "config": {"words": {"max_period": 16}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn rescue_and_repair() {
    let server = common::start_default().await;
    let c = common::client();
    let reply = "Sure! {\"answer\": \"He said \"hi\" to me\"} trailing";
    let got: Value = c
        .post(format!("{}/v1/rescue", server.url))
        .json(&json!({"text": reply, "key": "answer"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got["ok"], true, "{got}");
    assert_eq!(got["value"], "He said \"hi\" to me");
    // Nothing found is a 200 with ok: false.
    let r = c
        .post(format!("{}/v1/rescue", server.url))
        .json(&json!({"text": "no json here", "key": "answer"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["ok"], false);
    let r: Value = c
        .post(format!("{}/v1/repair", server.url))
        .json(&json!({"text": "{\"a\": [1, 2,"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["value"], json!({"a": [1, 2]}));
    assert!(r["repairs"].as_array().is_some());
    let r = c
        .post(format!("{}/v1/repair", server.url))
        .json(&json!({"text": "no json at all"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
}

#[tokio::test]
async fn check_streams_ndjson_and_ends_with_the_error_line() {
    let server = common::start_default().await;
    let mut body = String::new();
    for i in 0..3 {
        body.push_str(&format!(
            "{{\"type\":\"call\",\"id\":\"c{i}\",\"tool\":\"read\",\"args\":{{\"p\":1}}}}\n"
        ));
        body.push_str(&format!(
            "{{\"type\":\"result\",\"id\":\"c{i}\",\"result\":\"x\"}}\n"
        ));
    }
    let r = common::client()
        .post(format!("{}/v1/check?profile=openclaw", server.url))
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "application/x-ndjson");
    let text = r.text().await.unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(lines[3].get("summary").is_some(), "{text}");
    // The same flow, run directly, writes the same bytes.
    let mut want = Vec::new();
    let opts = deloop_check::CheckOptions {
        format: deloop_core::loops::transcript::TranscriptFormat::Auto,
        profile: deloop_core::loops::Profile::OpenClaw,
        config: None,
        lossy: false,
    };
    let mut sink = deloop_render::check::JsonLines::new(&mut want);
    deloop_check::run(std::io::Cursor::new(body.clone()), &opts, &mut sink).unwrap();
    let want: Vec<Value> = String::from_utf8(want)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines, want);

    // A malformed line after streaming began ends with an error line.
    let mut bad = body;
    bad.push_str("{not json\n");
    let text = common::client()
        .post(format!("{}/v1/check", server.url))
        .body(bad)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["error"]["line"], 7, "{text}");
    // Bad query parameters are a 400.
    let r = common::client()
        .post(format!("{}/v1/check?profile=nope", server.url))
        .body("")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
}
