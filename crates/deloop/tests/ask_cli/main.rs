//! End-to-end tests of `deloop ask` (and `deloop search --hyde`): the real
//! binary, a real SQLite index built by `deloop index` in a temp dir, and
//! fake Gemini / OpenAI-compatible servers on 127.0.0.1 that speak the real
//! wire formats (JSON bodies, SSE streams) from a script.

mod answers;
mod env;
mod fake_llm;
mod fallbacks;
