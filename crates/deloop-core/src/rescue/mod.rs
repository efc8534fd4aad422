//! JSON rescue from broken model output (work in progress: see issue 3).
