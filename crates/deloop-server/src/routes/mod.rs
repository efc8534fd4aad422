//! Handlers, one module per family of routes. Each handler only extracts,
//! calls a library flow and answers; limits, auth and metrics are layers.

pub mod guards;
pub mod ops;
pub mod oracle;
pub mod sessions;
