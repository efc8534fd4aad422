//! LLM clients for deloop: Google AI Studio (Gemini/Gemma) and OpenAI-compatible chat completions, with retries and guarded streaming.
//!
//! Work in progress: see issue 5.
#![deny(missing_docs)]
