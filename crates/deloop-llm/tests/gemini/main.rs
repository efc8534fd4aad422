//! The Gemini/Gemma client against a fake AI Studio server on 127.0.0.1.

#[path = "../common/mod.rs"]
mod common;
mod errors;
mod fallbacks;
mod fixtures;
mod replies;
mod retries;
mod streams;
