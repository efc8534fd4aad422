use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::litellm::{guardrail, guardrail_recalling, Recall, RecentHistories};

/// The proxy's answer to a response check of `id` with `texts`.
fn ask(
    streams: &ResponseStreams,
    id: &str,
    texts: &[&str],
    config: &ClampConfig,
) -> (Value, usize) {
    let req = json!({"texts": texts, "input_type": "response", "litellm_call_id": id,
        "request_data": {}});
    let histories = RecentHistories::new(1024, 64 << 20);
    let recall = Recall {
        histories: &histories,
        cost: 0,
        streams: Some(streams),
    };
    let a = guardrail_recalling(&req, config, None, &recall).unwrap();
    let full = guardrail(&req, config, None).unwrap();
    assert_eq!(
        a.value, full,
        "incremental and full answers differ on {texts:?}"
    );
    (a.value, a.judged_bytes)
}

fn healthy(words: usize) -> String {
    (0..words).map(|i| format!("word{i} ")).collect()
}

#[test]
fn a_healthy_stream_is_judged_once() {
    let config = ClampConfig::default();
    let streams = ResponseStreams::default();
    let text = healthy(3000);
    let mut judged = 0;
    for end in (0..=text.len()).step_by(40) {
        let (v, j) = ask(&streams, "s", &[&text[..end]], &config);
        assert_eq!(v, json!({"action": "NONE"}));
        judged += j;
    }
    assert_eq!(judged, text.len() - text.len() % 40);
    assert_eq!(streams.len(), 1);
}

#[test]
fn a_looping_stream_is_cut_as_the_full_path_cuts_it() {
    let config = ClampConfig::default();
    let streams = ResponseStreams::default();
    let text = format!(
        "{}{}",
        healthy(200),
        "over and over again we go ".repeat(60)
    );
    let mut cuts = 0;
    for end in (0..=text.len()).step_by(25) {
        let (v, _) = ask(&streams, "loop", &[&text[..end]], &config);
        cuts += usize::from(v["action"] == "GUARDRAIL_INTERVENED");
    }
    assert!(cuts > 0, "the loop is cut");
}

#[test]
fn texts_that_do_not_extend_are_judged_from_the_start() {
    let config = ClampConfig::default();
    let streams = ResponseStreams::default();
    let a = healthy(400);
    let b = format!("other {}", healthy(300));
    let (_, j) = ask(&streams, "s", &[&a[..1000]], &config);
    assert_eq!(j, 1000);
    let (_, j) = ask(&streams, "s", &[&a[..1500]], &config);
    assert_eq!(j, 500);
    // A rewrite, a second choice, and another id.
    let (_, j) = ask(&streams, "s", &[&b[..1000], &a[..100]], &config);
    assert_eq!(j, 1100);
    let (_, j) = ask(&streams, "s", &[&b[..1200], &a[..150]], &config);
    assert_eq!(j, 250);
    let (_, j) = ask(&streams, "t", &[&b[..1200]], &config);
    assert_eq!(j, 1200);
    // One text fewer: the rest still extends.
    let (_, j) = ask(&streams, "s", &[&b[..1300]], &config);
    assert_eq!(j, 100);
}

#[test]
fn streams_stay_within_their_bounds() {
    let config = ClampConfig::default();
    let streams = ResponseStreams::new(3, 4 * WATCHER_BYTES, Duration::from_secs(300));
    for i in 0..50 {
        ask(&streams, &format!("id{i}"), &["some text"], &config);
        let s = streams.lock();
        assert!(s.map.len() <= 3 && s.bytes <= 4 * WATCHER_BYTES);
        assert_eq!(s.map.len(), s.order.len());
        assert_eq!(s.bytes, s.map.values().map(|e| e.cost).sum::<usize>());
    }
    // The newest stay: id49 extends, id0 starts over.
    assert_eq!(ask(&streams, "id49", &["some text more"], &config).1, 5);
    assert_eq!(ask(&streams, "id0", &["some text more"], &config).1, 14);
    // Over the byte budget (two texts: two watchers each): the oldest go.
    ask(&streams, "two", &["a", "b"], &config);
    assert_eq!(streams.len(), 2);
    // A stream over the whole budget is not kept.
    ask(&streams, "big", &["a", "b", "c", "d"], &config);
    assert!(!streams.lock().map.contains_key("big"));
    // Nothing kept at all.
    let none = ResponseStreams::new(0, 1 << 20, Duration::from_secs(300));
    ask(&none, "x", &["text"], &config);
    assert!(none.is_empty());
}

#[test]
fn idle_streams_are_forgotten() {
    let config = ClampConfig::default();
    let streams = ResponseStreams::new(10, 1 << 30, Duration::ZERO);
    ask(&streams, "a", &["some text"], &config);
    std::thread::sleep(Duration::from_millis(5));
    // Expired before it is looked up: judged from the start.
    assert_eq!(ask(&streams, "a", &["some text more"], &config).1, 14);
    ask(&streams, "b", &["x"], &config);
    std::thread::sleep(Duration::from_millis(5));
    ask(&streams, "c", &["x"], &config);
    assert_eq!(streams.len(), 1, "a and b expired");
}

/// Texts with loops in them: healthy words, runs of a repeated unit, and
/// non-ASCII characters.
fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        3 => (0..400usize, 1..80usize).prop_map(|(start, n)| {
            (start..start + n).map(|i| format!("w{i} ")).collect::<String>()
        }),
        2 => (
            prop::sample::select(vec![
                "over and over again we go ",
                "la même chose ",
                "ab",
                "x",
                "The committee reviewed the proposal and decided to wait. ",
                "1. Anise\n",
            ]),
            1..60usize,
        )
            .prop_map(|(u, k)| u.repeat(k)),
        1 => "[a-zé ]{0,40}",
    ];
    prop::collection::vec(piece, 0..8).prop_map(|v| v.concat())
}

/// Increasing cut points in `text`, on character boundaries.
fn prefixes(text: &str, steps: &[usize]) -> Vec<usize> {
    let mut at = 0;
    let mut out = Vec::new();
    for s in steps {
        at = (at + s).min(text.len());
        while !text.is_char_boundary(at) {
            at += 1;
        }
        out.push(at);
    }
    out.push(text.len());
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(64)
    ))]

    /// Growing texts (one or two choices), restarts and evictions
    /// included: the incremental answer is the full path's (checked in
    /// `ask`), and a stream that only grows is judged about once.
    #[test]
    fn incremental_answers_equal_the_full_path(
        a in text(),
        b in text(),
        steps in prop::collection::vec(0..400usize, 1..30),
        restart in prop::option::of(0..30usize),
        small in any::<bool>(),
    ) {
        let config = ClampConfig::default();
        let streams = if small {
            ResponseStreams::new(1, 1 << 30, Duration::from_secs(300))
        } else {
            ResponseStreams::default()
        };
        let cuts_a = prefixes(&a, &steps);
        let cuts_b = prefixes(&b, &steps);
        let mut judged = 0;
        let mut looped = false;
        for (i, (&ea, &eb)) in cuts_a.iter().zip(&cuts_b).enumerate() {
            if restart == Some(i) {
                // Another stream's check in between (evicts with `small`),
                // then the stream again from a rewritten start.
                ask(&streams, "other", &[&b[..eb]], &config);
                ask(&streams, "s", &["rewritten"], &config);
            }
            let (v, j) = ask(&streams, "s", &[&a[..ea], &b[..eb]], &config);
            looped |= v["action"] != "NONE";
            judged += j;
        }
        if restart.is_none() && !small && !looped {
            prop_assert_eq!(judged, a.len() + b.len());
        }
    }
}
