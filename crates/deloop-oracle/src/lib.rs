//! # deloop-oracle
//!
//! The library oracle: documentation Q&A over a deloop index, with optional
//! HyDE retrieval and guarded answer synthesis (seeds `synthesizeAnswer` and
//! `generateHyDE`).
//!
//! [`Oracle`] is the whole flow as one value, shared by the CLI (`deloop
//! ask`), the server (`/api/oracle`, `/api/help`, `/api/tutor`) and MCP:
//! open it once, then [`Oracle::ask`] (or [`Oracle::ask_with_events`] for
//! a stream of [`AskEvent`]s) as many questions as you like, concurrently.
//! Its parts are public too:
//!
//! * [`ask`] — [`AskRequest`], [`AskEvent`], [`AskOutcome`];
//! * [`report`] — [`AskReport`], what an ask reports (`deloop ask --json`);
//! * [`language`] — Spanish/English detection of the question;
//! * [`prompts`] — prompt builders per mode × language, with JSON schemas;
//! * [`synthesis`] — the reply pipeline: JSON rescue → word guard →
//!   substring guard → degraded fallback, refusals, citations;
//! * [`citations`] — citations checked against the retrieved passages;
//! * [`extractive`] — the answer without any LLM: the best passages;
//! * [`messages`] — every fixed message, per mode and language;
//! * [`hyde`] — hypothetical passages, query vectors, the passage cache;
//! * [`retrieve`] — retrieval over a deloop index, HyDE included;
//! * [`glossary`] — Spanish questions rendered in English for retrieval;
//! * [`embedded`] — deloop's own docs, the corpus of the default index;
//! * [`embedders`] — which embedder fills an index and embeds its queries;
//! * [`remote_embedder`] — remote embeddings behind the index's sync trait.
#![deny(missing_docs)]

pub mod ask;
pub mod citations;
pub mod embedded;
pub mod embedders;
pub mod extractive;
pub mod glossary;
pub mod hyde;
mod index_pool;
pub mod index_search;
pub mod language;
pub mod messages;
mod oracle;
pub mod prompts;
pub mod remote_embedder;
pub mod report;
pub mod retrieve;
mod settings;
pub mod synthesis;
mod types;

pub use ask::{
    AskEvent, AskOutcome, AskRequest, AskStatus, CutEvent, DeltaEvent, ErrorEvent, MetaEvent,
    Retrieval, Role, SourcesEvent, Turn,
};
pub use language::{detect_language, Language};
pub use oracle::{OpenOptions, Oracle, OracleError, SearchHit, SearchReport};
pub use report::{AskReport, HydeInfo, PassageInfo, RetrievalInfo};
pub use settings::{check_k, MAX_K};
pub use types::{Citation, Mode, Passage};
