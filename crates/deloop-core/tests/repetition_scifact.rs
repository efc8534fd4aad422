//! deloop's default guard must leave the SciFact abstracts (titles and
//! texts joined) unchanged, byte for byte. The seed's rules cut 7.8 MB of
//! them down to 3.0 MB (dot leaders, alignment spaces, an OCR quote run).

use deloop_core::repetition::{clamp, ClampConfig};

/// Each document as `(id, title + "\n\n" + text)`, or `None` when the
/// real-data folder is absent (and not required).
fn documents(suite: &str) -> Option<Vec<(String, String)>> {
    let path = deloop_testdata::shared_data("data/scifact/corpus.jsonl", suite)?;
    let data = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let docs = data
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("valid JSON line");
            (
                v["_id"].as_str().expect("_id").to_string(),
                format!(
                    "{}\n\n{}",
                    v["title"].as_str().expect("title"),
                    v["text"].as_str().expect("text")
                ),
            )
        })
        .collect();
    Some(docs)
}

#[test]
fn default_guard_leaves_every_scifact_document_unchanged() {
    let Some(docs) = documents("repetition_scifact (every document)") else {
        return;
    };
    assert_eq!(docs.len(), 5183);
    let config = ClampConfig::default();
    let mut changed = Vec::new();
    for (id, doc) in &docs {
        let out = clamp(doc, &config);
        if out.text != *doc {
            changed.push((id.clone(), out.report().cloned()));
        }
    }
    assert!(changed.is_empty(), "changed documents: {changed:?}");
}

#[test]
fn default_guard_leaves_the_whole_corpus_unchanged_as_one_text() {
    let Some(docs) = documents("repetition_scifact (one text)") else {
        return;
    };
    let docs: Vec<String> = docs.into_iter().map(|(_, d)| d).collect();
    let joined = docs.join("\n\n");
    let out = clamp(&joined, &ClampConfig::default());
    assert!(out.reports.is_empty(), "{:?}", out.reports);
    assert_eq!(out.text.len(), joined.len());
}

#[test]
fn seed_rules_fire_on_the_documents_the_issue_names() {
    // The baseline: the seed's exact rules cut the dot leaders, alignment
    // spaces and the OCR quote run (the documents holding them, by id).
    let config = ClampConfig::seed_compat();
    let named = ["9650982", "12207167", "36271512", "86217760"];
    let Some(docs) = documents("repetition_scifact (seed rules)") else {
        return;
    };
    for id in named {
        let (_, doc) = docs
            .iter()
            .find(|(i, _)| i == id)
            .expect("document present");
        let out = clamp(doc, &config);
        assert!(out.text.len() < doc.len(), "seed rules did not cut {id}");
        assert_eq!(clamp(doc, &ClampConfig::default()).text, *doc);
    }
}
