//! The answer pipeline (work in progress: see issue 2, section 5).
