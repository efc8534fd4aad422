//! # deloop-core
//!
//! The pure guards of deloop: deterministic, allocation-conscious functions
//! that decide whether LLM output or agent behaviour is looping. This crate
//! does no I/O, spawns no tasks, touches no network and keeps no global
//! state: typed input goes in, a typed verdict comes out, and rendering is
//! left to the caller.
//!
//! * [`repetition`] — clamps periodic walls of text (word periods, short
//!   substrings, near-duplicates, long units, repeated code blocks), in
//!   batch and as a streaming watcher.
//! * [`rescue`] — a lenient, linear-time parser that rescues JSON values
//!   from broken model output.
//! * [`loops`] — tool-call loop detection for agents, OpenClaw-compatible,
//!   plus the strict anti-loop protocol with fingerprints.
//! * [`pipeline`] — the answer pipeline that chains the text guards and
//!   substitutes an honest fallback when a guard leaves too little.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod loops;
pub mod pipeline;
pub mod repetition;
pub mod rescue;
