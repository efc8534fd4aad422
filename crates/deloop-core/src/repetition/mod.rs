//! Text repetition guards (work in progress: see issue 2).
