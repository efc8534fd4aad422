//! Tool-call loop detection (work in progress: see issue 4).
