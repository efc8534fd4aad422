//! The document's names and ranges are the code's: the loop guard's enums and
//! the oracle's `k`.

use crate::common::{start, state_with};
use crate::document::*;
use deloop_core::loops::Profile;
use deloop_server::auth::ApiKeys;
use deloop_server::ServerSettings;

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
