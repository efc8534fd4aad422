//! What every detector reads the text with: case folding and token keys
//! ([`fold`]), byte-parallel predicates ([`swar`]), and the structure the
//! false-positive protections track (fences, table rows, layout
//! characters: [`healthy`]), and the list marker ([`list_marker`]).

pub(crate) mod fold;
pub(crate) mod healthy;
pub(crate) mod list_marker;
pub(crate) mod swar;
