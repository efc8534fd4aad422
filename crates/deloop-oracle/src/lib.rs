//! The library oracle: HyDE, prompt builders per mode and language, and guarded answer synthesis.
//!
//! Work in progress: see issue 5.
#![deny(missing_docs)]
