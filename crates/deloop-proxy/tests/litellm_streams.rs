//! Streams through LiteLLM's own proxy (`litellm[proxy]`, pinned by
//! `scripts/setup-litellm.sh`) in the three ways deloop combines with it,
//! end to end on 127.0.0.1 with a scripted fake model server:
//!
//! * **deloop as LiteLLM's guardrail** (`generic_guardrail_api`,
//!   `post_call`): LiteLLM posts the whole text so far every 5th chunk;
//!   deloop judges only what each post adds (its
//!   `deloop_proxy_guardrail_text_bytes_total` counts bytes received and
//!   judged), and with `x-deloop-full-check: 1` every post in full, as
//!   before; with LiteLLM's `streaming_end_of_stream_only` it posts once.
//!   A looping stream is still judged looping (counted as a cut
//!   with `source="litellm"`); LiteLLM's default `block_only` streaming
//!   mode drops the rewritten text, so the client still gets the loop;
//! * **deloop proxy as LiteLLM's upstream** (the model's `api_base`): a
//!   looping stream is cut and its upstream request dropped, a healthy one
//!   passes whole;
//! * **deloop proxy in front of LiteLLM** (the client's base URL): the
//!   same.
//!
//! Nothing here measures time (see `scripts/bench-litellm.py`). Without
//! LiteLLM the suite prints one line and passes; with `CI=true` (or
//! `DELOOP_REQUIRE_REAL=1`) it fails instead.

mod common;

use std::time::Duration;

use common::litellm::{self, LiteLlm, MASTER_KEY};
use common::*;
use deloop_core::repetition::{clamp, ClampConfig};
use serde_json::{json, Value};

/// Chunks of the long healthy stream.
const CHUNKS: usize = 1000;

/// Healthy prose: a fixed walk over a vocabulary that never repeats a
/// word within three, split into `chunks` pieces.
fn prose(chunks: usize) -> Vec<String> {
    const VOCAB: &str = "river stone light bridge market winter garden letter \
        engine harbor window forest castle mirror silver thunder meadow canyon \
        lantern orchard velvet compass harvest island journey kingdom ladder \
        marble needle ocean pepper quarry ribbon saddle tunnel valley whistle \
        yellow anchor basket candle desert feather glacier hammer jungle kettle \
        lemon magnet nectar oyster pillow quartz rocket shadow timber umbrella \
        violet walnut barrel cobalt dragon ember falcon granite hollow ivory";
    let vocab: Vec<&str> = VOCAB.split_whitespace().collect();
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut last = [usize::MAX; 3];
    (0..chunks)
        .map(|i| {
            let pick = loop {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let w = (state >> 33) as usize % vocab.len();
                if !last.contains(&w) {
                    break w;
                }
            };
            last = [last[1], last[2], pick];
            let end = if i % 11 == 10 { ". " } else { " " };
            format!("{}{end}", vocab[pick])
        })
        .collect()
}

/// A streamed reply of these text pieces.
fn stream_of(pieces: &[String]) -> Reply {
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    Reply::Pieces {
        pieces: chat_stream(&refs)
            .into_iter()
            .map(String::into_bytes)
            .collect(),
        gap: Duration::ZERO,
        then: Then::End,
    }
}

/// A looping streamed reply: an intro, then [`LOOP_UNIT`] until the client
/// leaves (or `max` times), 1 ms apart.
fn looping_stream(max: usize) -> Reply {
    Reply::Loop {
        prefix: vec![chat_role(0), chat_text(0, "Intro sentence. ")],
        repeat: vec![chat_text(0, LOOP_UNIT)],
        max,
        suffix: vec![chat_finish(0, "stop"), DONE.to_string()],
        gap: Duration::from_millis(1),
    }
}

/// One streamed chat request to `url` for `model`: (status, the content
/// the client got, the body).
async fn stream(url: &str, model: &str, guardrail: Option<&str>) -> (u16, String, String) {
    let mut body = json!({"model": model, "stream": true,
        "messages": [{"role": "user", "content": "Tell me a long story."}]});
    if let Some(g) = guardrail {
        body["guardrails"] = json!([g]);
    }
    let res = client()
        .post(format!("{url}/v1/chat/completions"))
        .bearer_auth(MASTER_KEY)
        .timeout(Duration::from_secs(300))
        .json(&body)
        .send()
        .await
        .expect("the stream starts");
    let status = res.status().as_u16();
    let text = res.text().await.unwrap_or_default();
    (status, chat_content(&text, 0, "content"), text)
}

/// `deloop_proxy_guardrail_text_bytes_total`: (received, judged).
fn text_bytes(deloop: &Proxy) -> (u64, u64) {
    let metrics = deloop.state.metrics().render();
    let read = |kind: &str| {
        metrics
            .lines()
            .find(|l| {
                l.starts_with("deloop_proxy_guardrail_text_bytes_total")
                    && l.contains(&format!("kind=\"{kind}\""))
            })
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (read("received"), read("judged"))
}

/// Response checks answered with a cut (`deloop_loops_cut_total`,
/// `source="litellm"`).
fn guardrail_cuts(deloop: &Proxy) -> u64 {
    deloop
        .state
        .metrics()
        .render()
        .lines()
        .filter(|l| l.starts_with("deloop_loops_cut_total") && l.contains(r#"source="litellm""#))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Asserts a looping stream was cut: short, starting with the intro,
/// ending with deloop's marker, its upstream request dropped.
async fn assert_cut(fake: &Fake, dropped_before: usize, content: &str, body: &str) {
    let marker = &ClampConfig::default().words.marker;
    assert!(
        content.starts_with("Intro sentence. ") && content.trim_end().ends_with(marker.trim()),
        "{content}\n{body}"
    );
    assert!(content.len() < 60 * LOOP_UNIT.len(), "{content}");
    let probe = fake.probe();
    assert!(
        eventually(|| probe
            .dropped_early
            .load(std::sync::atomic::Ordering::SeqCst)
            > dropped_before)
        .await,
        "the looping upstream stream was dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_through_litellm_with_deloop() {
    let Some(program) = litellm::find("litellm_streams") else {
        return;
    };
    let healthy = prose(CHUNKS);
    let whole: String = healthy.concat();
    assert!(
        clamp(&whole, &ClampConfig::default()).report().is_none(),
        "the healthy story is healthy"
    );
    let short = prose(200);
    // The fake answers in this order (the requests below are sequential).
    let fake = Fake::start_only(
        Some("/chat/completions"),
        vec![
            stream_of(&healthy),
            stream_of(&healthy),
            stream_of(&healthy),
            looping_stream(200),
            looping_stream(2000),
            stream_of(&healthy),
            looping_stream(2000),
            stream_of(&short),
        ],
    )
    .await;
    let deloop = start_proxy(&fake.url).await;
    let guardrail = |name: &str, extra: &[&str]| {
        litellm::guardrail_yaml(&deloop.url, "unused", name, "[post_call]", false, extra)
    };
    let guardrails = [
        guardrail("deloop", &[]),
        guardrail("deloop-full", &["headers: {x-deloop-full-check: '1'}"]),
        guardrail("deloop-end", &["streaming_end_of_stream_only: true"]),
    ]
    .concat();
    let models = format!(
        "{}{}",
        litellm::model_yaml("direct", &format!("{}/v1", fake.url)),
        litellm::model_yaml("behind-deloop", &format!("{}/v1", deloop.url)),
    );
    let mut lite = LiteLlm::start(&program, &models, &guardrails);
    lite.wait_ready().await;
    let front = start_proxy(&lite.url).await;

    // deloop as the guardrail, incremental: LiteLLM resent the text ~200
    // times, deloop judged it about once.
    let (received0, judged0) = text_bytes(&deloop);
    let (status, content, body) = stream(&lite.url, "direct", Some("deloop")).await;
    assert_eq!(status, 200, "{body}\n{}", lite.log_tail());
    assert_eq!(content, whole, "a healthy stream passes whole");
    let (received, judged) = text_bytes(&deloop);
    let (received, judged) = (received - received0, judged - judged0);
    let n = whole.len() as u64;
    assert!(
        received > 20 * n,
        "LiteLLM resends the text so far: {received} bytes for a {n}-byte stream"
    );
    assert!(
        judged <= 2 * n,
        "judged {judged} bytes of a {n}-byte stream ({received} received)"
    );

    // The same stream with the full check: every byte received is judged.
    let (status, content, body) = stream(&lite.url, "direct", Some("deloop-full")).await;
    assert_eq!(status, 200, "{body}\n{}", lite.log_tail());
    assert_eq!(content, whole);
    let (received2, judged2) = text_bytes(&deloop);
    let (received2, judged2) = (received2 - received0 - received, judged2 - judged0 - judged);
    assert!(
        received2 > 20 * n && judged2 == received2,
        "{received2} {judged2}"
    );
    eprintln!(
        "a {n}-byte stream of {CHUNKS} chunks: LiteLLM posted {received} bytes of texts; \
         deloop judged {judged} (incremental), {judged2} (full check)"
    );

    // With LiteLLM's streaming_end_of_stream_only, one check per stream.
    let (status, content, body) = stream(&lite.url, "direct", Some("deloop-end")).await;
    assert_eq!(status, 200, "{body}\n{}", lite.log_tail());
    assert_eq!(content, whole);
    let (received3, judged3) = text_bytes(&deloop);
    let (received3, judged3) = (
        received3 - received0 - received - received2,
        judged3 - judged0 - judged - judged2,
    );
    assert_eq!((received3, judged3), (n, n), "one check of the whole text");

    // A looping stream through the guardrail: deloop's answers cut it
    // (counted), LiteLLM's block_only mode drops the rewrite.
    let cuts = guardrail_cuts(&deloop);
    let (status, content, body) = stream(&lite.url, "direct", Some("deloop")).await;
    assert_eq!(status, 200, "{body}\n{}", lite.log_tail());
    assert!(content.starts_with("Intro sentence. "), "{content}");
    assert!(
        guardrail_cuts(&deloop) > cuts,
        "deloop cut the looping stream"
    );

    // deloop proxy as LiteLLM's upstream.
    let dropped = fake
        .probe()
        .dropped_early
        .load(std::sync::atomic::Ordering::SeqCst);
    let (status, content, body) = stream(&lite.url, "behind-deloop", None).await;
    assert_eq!(status, 200, "{body}\n{}", lite.log_tail());
    assert_cut(&fake, dropped, &content, &body).await;
    let (status, content, body) = stream(&lite.url, "behind-deloop", None).await;
    assert_eq!(status, 200, "{body}\n{}", lite.log_tail());
    assert_eq!(content, whole, "a healthy stream passes whole");

    // deloop proxy in front of LiteLLM (the master key is LiteLLM's, passed
    // upstream).
    let dropped = fake
        .probe()
        .dropped_early
        .load(std::sync::atomic::Ordering::SeqCst);
    let (status, content, body) = stream(&front.url, "direct", None).await;
    assert_eq!(status, 200, "{body}\n{}", lite.log_tail());
    assert_cut(&fake, dropped, &content, &body).await;
    let (status, content, body) = stream(&front.url, "direct", None).await;
    assert_eq!(status, 200, "{body}\n{}", lite.log_tail());
    assert_eq!(content, short.concat(), "a healthy stream passes whole");

    assert_eq!(fake.seen().len(), 8, "one upstream request per stream");
    let first: Value = fake.seen()[0].json();
    assert_eq!(first["stream"], true);
}
