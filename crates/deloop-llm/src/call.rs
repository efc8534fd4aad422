//! One generation call, written once for every provider: the request goes
//! out through the retry and capability-fallback loop
//! ([`send_with_fallback`]), the reply is read whole or as a stream under
//! the loop guard ([`read_guarded`]), and every error that comes back has
//! the key redacted.

use deloop_core::repetition::ClampConfig;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::guard::{read_guarded, StreamChunk, Streamed};
use crate::retry::{send, send_json, send_with_fallback, CallCtx, FeatureFallback};
use crate::types::{GenerateRequest, Generation};
use crate::{retry, LlmError};

/// What a generation client adds to [`FeatureFallback`]: its key, its model
/// and how to read its replies.
pub(crate) trait Provider: FeatureFallback {
    /// One parsed reply or stream event.
    type Chunk: StreamChunk;

    /// The API key, if any (kept out of errors and logs).
    fn key(&self) -> Option<&str>;

    /// The model id requests go to.
    fn model_id(&self) -> &str;

    /// Parses a whole (non-streamed) reply.
    fn parse_reply(&self, reply: &Value) -> Result<Self::Chunk, LlmError>;

    /// Parses one stream event's data; `None` for an end marker.
    fn parse_event(&self, data: &str) -> Result<Option<Self::Chunk>, LlmError>;

    /// The generation of a reply that ran to its own end (a refusal is an
    /// error).
    fn finish(&self, chunk: Self::Chunk, attempts: u32) -> Result<Generation, LlmError>;
}

/// One non-streamed generation through `provider`.
pub(crate) async fn generate<P: Provider>(
    provider: &P,
    req: &GenerateRequest,
    cancel: &CancellationToken,
) -> Result<Generation, LlmError> {
    let ctx = CallCtx::new(req.timeout, cancel, provider.key());
    let mut attempts = 0;
    let reply = send_with_fallback(provider, req, &ctx, &mut attempts, false, send_json).await?;
    provider
        .parse_reply(&reply)
        .and_then(|chunk| provider.finish(chunk, attempts))
        .map_err(|e| ctx.redact(e))
}

/// One streamed generation through `provider`, under the loop guard
/// (`guard: None` turns it off); see [`crate::GeminiClient::generate_stream`].
pub(crate) async fn generate_stream<P: Provider>(
    provider: &P,
    req: &GenerateRequest,
    cancel: &CancellationToken,
    guard: Option<ClampConfig>,
    on_delta: impl FnMut(&str),
) -> Result<Generation, LlmError> {
    let ctx = CallCtx::new(req.timeout, cancel, provider.key());
    let mut attempts = 0;
    let resp = send_with_fallback(provider, req, &ctx, &mut attempts, true, send).await?;
    let read = read_guarded(&ctx, resp, guard, on_delta, |data| {
        provider.parse_event(data)
    });
    match read.await.map_err(|e| ctx.redact(e))? {
        Streamed::Cut(cut) => Ok(cut.into_generation(provider.model_id().to_string(), attempts)),
        Streamed::Ended(last) => provider.finish(last, attempts).map_err(|e| ctx.redact(e)),
    }
}

/// The `error` object of a reply body (some servers answer an error with a
/// 200, or inside a stream) as an [`LlmError::Http`]; `None` when the body
/// has none. Its status is `error.code` when `is_status` accepts it, else 500.
pub(crate) fn reply_error(v: &Value, is_status: impl Fn(&u16) -> bool) -> Option<LlmError> {
    let err = v.get("error")?;
    let status = err
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(is_status)
        .unwrap_or(500);
    let (message, _) = retry::parse_error_body(v.to_string().as_bytes());
    Some(LlmError::Http { status, message })
}

/// A token count from a usage object: `obj[key]` when it fits a `u32`.
pub(crate) fn token_count(obj: &Value, key: &str) -> Option<u32> {
    obj.get(key)
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
}

/// The public `generate` and `generate_stream` methods of a client that
/// implements [`Provider`], each with its own doc comment.
macro_rules! generation_methods {
    (
        $(#[$generate_doc:meta])*
        generate;
        $(#[$stream_doc:meta])*
        generate_stream;
    ) => {
        $(#[$generate_doc])*
        pub async fn generate(
            &self,
            req: &GenerateRequest,
            cancel: &CancellationToken,
        ) -> Result<Generation, LlmError> {
            call::generate(self, req, cancel).await
        }

        $(#[$stream_doc])*
        pub async fn generate_stream(
            &self,
            req: &GenerateRequest,
            cancel: &CancellationToken,
            guard: Option<ClampConfig>,
            on_delta: impl FnMut(&str),
        ) -> Result<Generation, LlmError> {
            call::generate_stream(self, req, cancel, guard, on_delta).await
        }
    };
}
pub(crate) use generation_methods;
