//! deloop's own documentation, embedded in the binary: the corpus of the
//! default index, so `deloop ask` answers on a fresh machine with no index,
//! no model files and no API key.

/// The embedded documents: `(source path, markdown text)`, in the order
/// they are indexed. The paths are relative to the repository root.
pub const EMBEDDED_DOCS: &[(&str, &str)] = &[
    ("README.md", include_str!("../../../README.md")),
    (
        "docs/repetition.md",
        include_str!("../../../docs/repetition.md"),
    ),
    ("docs/rescue.md", include_str!("../../../docs/rescue.md")),
    ("docs/loops.md", include_str!("../../../docs/loops.md")),
    ("docs/llm.md", include_str!("../../../docs/llm.md")),
    (
        "docs/retrieval.md",
        include_str!("../../../docs/retrieval.md"),
    ),
    ("docs/oracle.md", include_str!("../../../docs/oracle.md")),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_document_is_present_and_named_once() {
        let mut names = std::collections::HashSet::new();
        for (name, text) in EMBEDDED_DOCS {
            assert!(names.insert(*name));
            assert!(!text.trim().is_empty(), "{name} is empty");
        }
        assert!(EMBEDDED_DOCS[0].1.contains("deloop"));
    }
}
