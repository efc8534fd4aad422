//! The corpus pairs deloop deliberately answers differently (included by
//! `rescue_conformance.rs`).

/// One documented difference.
pub struct Difference {
    /// `jsonrepair` or `json-repair-py`.
    pub corpus: &'static str,
    /// Case id (`L<line>` for jsonrepair, the `id` field for json-repair).
    pub id: &'static str,
    /// What deloop returns instead (JSON text), or `None` for an error.
    pub ours: Option<&'static str>,
    /// Why.
    pub reason: &'static str,
}

/// Every deliberate difference.
pub fn table() -> Vec<Difference> {
    vec![]
}
