//! # deloop-oracle
//!
//! The library oracle: documentation Q&A over a deloop index, with optional
//! HyDE retrieval and guarded answer synthesis (seeds `synthesizeAnswer` and
//! `generateHyDE`).
//!
//! * [`language`] — Spanish/English detection of the question;
//! * [`prompts`] — prompt builders per mode × language, with JSON schemas;
//! * [`synthesis`] — the reply pipeline: JSON rescue → word guard →
//!   substring guard → degraded fallback, refusals, citations;
//! * [`citations`] — citations checked against the retrieved passages;
//! * [`extractive`] — the answer without any LLM: the best passages;
//! * [`messages`] — every fixed message, per mode and language;
//! * [`hyde`] — hypothetical passages, query vectors, the passage cache;
//! * [`retrieve`] — retrieval over a deloop index, HyDE included;
//! * [`embedded`] — deloop's own docs, the corpus of the default index;
//! * [`remote_embedder`] — remote embeddings behind the index's sync trait.
#![deny(missing_docs)]

pub mod citations;
pub mod embedded;
pub mod extractive;
pub mod hyde;
pub mod language;
pub mod messages;
pub mod prompts;
pub mod remote_embedder;
pub mod retrieve;
pub mod synthesis;
mod types;

pub use language::{detect_language, Language};
pub use types::{Citation, Mode, Passage};
