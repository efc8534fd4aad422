//! `/api/oracle`, `/api/help` and `/api/tutor` end to end over real TCP: a
//! real SQLite index in a temp dir, the oracle behind the server, and the
//! fake OpenAI-compatible LLM of deloop-llm's tests (the real wire format
//! on 127.0.0.1), which can stream a loop and see the client go away.

mod asks;
#[path = "../common.rs"]
mod common;
mod fixtures;
mod limits;
#[path = "../../../deloop-llm/tests/common/mod.rs"]
mod llm;
mod serving;
