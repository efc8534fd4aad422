//! Rendering of the oracle commands (`ask`, `search`, `index`). The other
//! commands' output formats live in the `deloop-render` crate, shared with
//! the server.

pub mod fetch;
pub mod oracle;
pub mod search;
