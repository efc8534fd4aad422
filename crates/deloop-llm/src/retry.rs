//! The HTTP layer shared by every client: deadline, cancellation, error-body
//! parsing and retries with backoff.

use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::RetryPolicy;
use crate::error::{transport, LlmError};
use crate::types::GenerateRequest;

/// Largest error body kept for the message (bytes).
const ERROR_EXCERPT: usize = 400;

/// Connection-establishment limit of every client.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Builds the reqwest client: rustls with the `ring` provider, no proxy for
/// loopback base URLs (local servers and the test fakes).
pub(crate) fn http_client(base_url: &str) -> Result<reqwest::Client, LlmError> {
    // reqwest is built with `rustls-no-provider`: install ring once per
    // process (an Err means some provider is already installed, which is fine).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let url = reqwest::Url::parse(base_url)
        .map_err(|e| LlmError::Config(format!("base URL {base_url:?} is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(LlmError::Config(format!(
            "base URL {base_url:?} must start with http:// or https://"
        )));
    }
    let mut builder = reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT);
    let host = url.host_str().unwrap_or("").trim_matches(['[', ']']);
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if loopback {
        builder = builder.no_proxy();
    }
    builder
        .build()
        .map_err(|e| LlmError::Config(format!("cannot build the HTTP client: {e}")))
}

/// Adds Google's `x-goog-api-key` header, marked sensitive so that no
/// debug output of the request shows it (reqwest marks `bearer_auth` the
/// same way). A key that is not a valid header value is passed on as is,
/// and the request fails to build without echoing it.
pub(crate) fn google_key(rb: reqwest::RequestBuilder, key: &str) -> reqwest::RequestBuilder {
    match reqwest::header::HeaderValue::from_str(key) {
        Ok(mut value) => {
            value.set_sensitive(true);
            rb.header("x-goog-api-key", value)
        }
        Err(_) => rb.header("x-goog-api-key", key),
    }
}

/// Joins an API root and a path with exactly one slash.
pub(crate) fn join(base: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

/// One call's deadline, cancellation token and API key (to keep it out of
/// errors and logs).
pub(crate) struct CallCtx<'a> {
    pub deadline: Instant,
    pub timeout: Duration,
    pub cancel: &'a CancellationToken,
    key: Option<&'a str>,
}

impl<'a> CallCtx<'a> {
    pub fn new(timeout: Duration, cancel: &'a CancellationToken, key: Option<&'a str>) -> Self {
        CallCtx {
            deadline: Instant::now() + timeout,
            timeout,
            cancel,
            key,
        }
    }

    /// Replaces the call's key by `<redacted>` in `err`, should a server
    /// have echoed it.
    pub fn redact(&self, err: LlmError) -> LlmError {
        match self.key {
            Some(key) => crate::error::redact(err, key),
            None => err,
        }
    }

    /// Runs `fut` unless the call is cancelled or its deadline passes first.
    pub async fn guard<T>(&self, fut: impl Future<Output = T>) -> Result<T, LlmError> {
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Err(LlmError::Cancelled),
            _ = tokio::time::sleep_until(self.deadline) => Err(LlmError::Timeout(self.timeout)),
            v = fut => Ok(v),
        }
    }
}

/// A failed attempt: the error and the server's requested wait, if any.
#[derive(Debug)]
pub(crate) struct Failure {
    pub error: LlmError,
    pub retry_after: Option<Duration>,
}

impl From<LlmError> for Failure {
    fn from(error: LlmError) -> Self {
        Failure {
            error,
            retry_after: None,
        }
    }
}

/// The backoff before retry number `retry` (1-based), jitter included.
pub(crate) fn backoff(policy: &RetryPolicy, retry: u32, server_hint: Option<Duration>) -> Duration {
    if let Some(hint) = server_hint {
        return hint.min(policy.max_server_delay());
    }
    let exp = retry.saturating_sub(1).min(30);
    let full = policy
        .base_delay_ms
        .saturating_mul(1u64 << exp)
        .min(policy.max_delay_ms);
    // Equal jitter: between half and all of the exponential delay.
    let half = full / 2;
    let jitter = if full > half {
        random_u64() % (full - half + 1)
    } else {
        0
    };
    Duration::from_millis(half + jitter)
}

/// A random number from the std hasher's per-process random keys (enough for
/// jitter; no cryptographic use).
fn random_u64() -> u64 {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.finish()
}

/// Runs `attempt` until it succeeds, fails for good, runs out of attempts,
/// or the deadline/cancel fires. `attempts` counts the HTTP attempts made.
/// Errors are redacted ([`CallCtx::redact`]) before they are logged or
/// returned.
pub(crate) async fn with_retries<T, F, Fut>(
    policy: &RetryPolicy,
    ctx: &CallCtx<'_>,
    attempts: &mut u32,
    mut attempt: F,
) -> Result<T, LlmError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
{
    let max = policy.max_attempts.max(1);
    let mut retry = 0u32;
    loop {
        *attempts += 1;
        let failure = match ctx.guard(attempt()).await? {
            Ok(v) => return Ok(v),
            Err(f) => f,
        };
        let error = ctx.redact(failure.error);
        retry += 1;
        if !error.is_retryable() || retry >= max {
            return Err(error);
        }
        let wait = backoff(policy, retry, failure.retry_after);
        if Instant::now() + wait >= ctx.deadline {
            tracing::debug!(?wait, "retry wait would pass the deadline; giving up");
            return Err(error);
        }
        tracing::debug!(%error, ?wait, retry, "retrying model call");
        ctx.guard(tokio::time::sleep(wait)).await?;
    }
}

/// A generation client whose model may reject optional request features
/// (Gemini's `systemInstruction` or JSON mode, OpenAI's `response_format`).
/// [`send_with_fallback`] retries such a request with weaker features, and
/// the client remembers per model what its model accepts.
pub(crate) trait FeatureFallback {
    /// The optional features one request uses.
    type Features: Copy;

    /// The retry policy of transient failures.
    fn policy(&self) -> &RetryPolicy;

    /// The strongest features to try for `req`, given what the model is
    /// known to accept.
    fn features(&self, req: &GenerateRequest) -> Self::Features;

    /// After `err`, the weaker features to retry with (remembered for the
    /// model), or `None` when `err` is not a rejection of a feature `used`.
    fn fallback(
        &self,
        used: Self::Features,
        req: &GenerateRequest,
        err: &LlmError,
    ) -> Option<Self::Features>;

    /// The request body for `req` with `features` (`stream`: the streamed
    /// variant of the call).
    fn body(
        &self,
        req: &GenerateRequest,
        features: Self::Features,
        stream: bool,
    ) -> serde_json::Value;

    /// One HTTP request carrying `body` (`stream`: the streaming endpoint).
    fn post(&self, body: &serde_json::Value, stream: bool) -> reqwest::RequestBuilder;
}

/// Sends `req` through `client` with `send` ([`send`] or [`send_json`]):
/// transient failures are retried per the client's policy
/// ([`with_retries`]), and a rejected feature makes the call start again
/// with the weaker features [`FeatureFallback::fallback`] names, until the
/// call succeeds or fails for good. `attempts` counts every HTTP attempt,
/// fallbacks included. Errors are redacted by [`with_retries`].
pub(crate) async fn send_with_fallback<C, T, S, Fut>(
    client: &C,
    req: &GenerateRequest,
    ctx: &CallCtx<'_>,
    attempts: &mut u32,
    stream: bool,
    send: S,
) -> Result<T, LlmError>
where
    C: FeatureFallback,
    S: Fn(reqwest::RequestBuilder) -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
{
    let mut features = client.features(req);
    loop {
        let body = client.body(req, features, stream);
        let result = with_retries(client.policy(), ctx, attempts, || {
            send(client.post(&body, stream))
        })
        .await;
        match result {
            Ok(v) => return Ok(v),
            Err(e) => match client.fallback(features, req, &e) {
                Some(next) => features = next,
                None => return Err(e),
            },
        }
    }
}

/// Largest successful reply body read (64 MiB).
pub(crate) const MAX_BODY: usize = 64 << 20;
/// Largest error body read (64 KiB).
const MAX_ERROR_BODY: usize = 64 << 10;

/// Reads a body, failing with `Decode` beyond `limit` bytes so a hostile or
/// broken server cannot exhaust memory.
async fn read_limited(mut resp: reqwest::Response, limit: usize) -> Result<Vec<u8>, LlmError> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(transport)? {
        if body.len() + chunk.len() > limit {
            return Err(LlmError::Decode(format!(
                "reply body larger than {limit} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Sends a request; a non-2xx status becomes a [`Failure`] with the server's
/// message and retry hint.
pub(crate) async fn send(req: reqwest::RequestBuilder) -> Result<reqwest::Response, Failure> {
    let resp = req.send().await.map_err(|e| Failure::from(transport(e)))?;
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let header_hint = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, SystemTime::now()));
    let body = read_limited(resp, MAX_ERROR_BODY)
        .await
        .unwrap_or_else(|e| e.to_string().into_bytes());
    let (message, body_hint) = parse_error_body(&body);
    Err(Failure {
        error: LlmError::Http {
            status: status.as_u16(),
            message,
        },
        retry_after: body_hint.or(header_hint),
    })
}

/// Sends a request and reads the whole successful body as JSON.
pub(crate) async fn send_json(req: reqwest::RequestBuilder) -> Result<serde_json::Value, Failure> {
    let resp = send(req).await?;
    let body = read_limited(resp, MAX_BODY).await?;
    serde_json::from_slice(&body).map_err(|e| {
        Failure::from(LlmError::Decode(format!(
            "reply is not JSON ({e}): {}",
            excerpt(&body)
        )))
    })
}

/// Longest server-requested wait kept before the policy's own cap (a day).
const MAX_HINT: Duration = Duration::from_secs(86_400);

/// `Retry-After` (RFC 9110 §10.2.3) as a wait from `now`: delta-seconds
/// (an integer, or a decimal as some servers send), or an HTTP-date
/// (IMF-fixdate such as `Wed, 21 Oct 2015 07:28:00 GMT`, or the obsolete
/// RFC 850 and asctime forms recipients must accept), whose wait is the time
/// left until it (zero once it has passed). At most a day; [`backoff`]
/// caps it further at the policy's `max_server_delay_ms`. `None` for
/// anything else.
pub(crate) fn parse_retry_after(v: &str, now: SystemTime) -> Option<Duration> {
    let v = v.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0)
            .then(|| Duration::from_secs_f64(secs.min(MAX_HINT.as_secs_f64())));
    }
    let date = httpdate::parse_http_date(v).ok()?;
    Some(
        date.duration_since(now)
            .unwrap_or(Duration::ZERO)
            .min(MAX_HINT),
    )
}

/// A protobuf JSON duration such as `"1.5s"` or `"58s"`.
pub(crate) fn parse_proto_duration(v: &str) -> Option<Duration> {
    let secs: f64 = v.trim().strip_suffix('s')?.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
}

/// The message of an error body (Google `{"error":{"message",...}}`,
/// OpenAI `{"error":{"message"}}`, Ollama `{"error":"..."}`, FastAPI
/// `{"detail":...}`, or a JSON array of those), and Google's
/// `google.rpc.RetryInfo.retryDelay` if present. Falls back to a short
/// excerpt of the body.
pub(crate) fn parse_error_body(body: &[u8]) -> (String, Option<Duration>) {
    let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(body) else {
        return (excerpt(body), None);
    };
    if let serde_json::Value::Array(items) = &mut v {
        if items.is_empty() {
            return (excerpt(body), None);
        }
        v = items.swap_remove(0);
    }
    let err = v.get("error").unwrap_or(&v);
    let mut message = match err {
        serde_json::Value::String(s) => s.clone(),
        _ => err
            .get("message")
            .or_else(|| err.get("detail"))
            .map(|m| match m {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .unwrap_or_else(|| excerpt(body)),
    };
    if let Some(status) = err.get("status").and_then(|s| s.as_str()) {
        message = format!("{status}: {message}");
    }
    let hint = err
        .get("details")
        .and_then(|d| d.as_array())
        .and_then(|details| {
            details.iter().find_map(|d| {
                let is_retry = d
                    .get("@type")
                    .and_then(|t| t.as_str())
                    .is_some_and(|t| t.ends_with("google.rpc.RetryInfo"));
                if is_retry {
                    d.get("retryDelay")
                        .and_then(|r| r.as_str())
                        .and_then(parse_proto_duration)
                } else {
                    None
                }
            })
        });
    (message, hint)
}

/// At most [`ERROR_EXCERPT`] bytes of a body, as lossy text on one line.
pub(crate) fn excerpt(body: &[u8]) -> String {
    let cut = &body[..body.len().min(ERROR_EXCERPT)];
    let mut s = String::from_utf8_lossy(cut).replace(['\n', '\r'], " ");
    if body.len() > ERROR_EXCERPT {
        s.push('…');
    }
    if s.trim().is_empty() {
        s = "(empty body)".to_string();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proto_durations() {
        assert_eq!(
            parse_proto_duration("1.5s"),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(parse_proto_duration("58s"), Some(Duration::from_secs(58)));
        assert_eq!(
            parse_proto_duration("0.000001s"),
            Some(Duration::from_micros(1))
        );
        assert_eq!(parse_proto_duration("12"), None);
        assert_eq!(parse_proto_duration("-1s"), None);
        assert_eq!(parse_proto_duration("NaNs"), None);
        assert_eq!(parse_proto_duration("1e400s"), None);
    }

    #[test]
    fn retry_after_delta_seconds() {
        let now = SystemTime::now();
        assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(
            parse_retry_after(" 0.25 ", now),
            Some(Duration::from_millis(250))
        );
        assert_eq!(parse_retry_after("0", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("999999999", now), Some(MAX_HINT));
        for bad in ["-1", "NaN", "inf", "", "soon", "1e400", "3 s"] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
    }

    #[test]
    fn retry_after_http_dates() {
        // RFC 9110's example date, 1445412480 s after the epoch.
        let date = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        let before = date - Duration::from_millis(90_500);
        let v = "Wed, 21 Oct 2015 07:28:00 GMT";
        assert_eq!(
            parse_retry_after(v, before),
            Some(Duration::from_millis(90_500))
        );
        // The obsolete forms a recipient must accept (RFC 9110 §5.6.7).
        for old in [
            "Wednesday, 21-Oct-15 07:28:00 GMT",
            "Wed Oct 21 07:28:00 2015",
        ] {
            assert_eq!(
                parse_retry_after(old, before),
                Some(Duration::from_millis(90_500)),
                "{old}"
            );
        }
        // A date already past means no wait.
        assert_eq!(
            parse_retry_after(v, date + Duration::from_secs(5)),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after(v, date), Some(Duration::ZERO));
        // A date years ahead is held to a day here (and to the policy's cap
        // in `backoff`).
        let far = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480 - 10 * 365 * 86_400);
        assert_eq!(parse_retry_after(v, far), Some(MAX_HINT));
        // Strict: a wrong weekday, impossible fields, other zones, non-ASCII.
        for bad in [
            "Thu, 21 Oct 2015 07:28:00 GMT",
            "Wed, 32 Oct 2015 07:28:00 GMT",
            "Wed, 21 Oct 2015 24:28:00 GMT",
            "Wed, 21 Oct 2015 07:28:00 PST",
            "Wed, 21 Oct 2015 07:28 GMT",
            "Wed, 21 Okt 2015 07:28:00 GMT",
            "Wed, 21 Oct 2015 07:28:00 GMT trailing",
            "Mié, 21 Oct 2015 07:28:00 GMT",
        ] {
            assert_eq!(parse_retry_after(bad, before), None, "{bad:?}");
        }
    }

    #[test]
    fn http_date_hints_are_capped_by_the_policy() {
        let p = RetryPolicy {
            max_attempts: 3,
            base_delay_ms: 1,
            max_delay_ms: 5,
            max_server_delay_ms: 2000,
        };
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480 - 3600);
        let hint = parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now);
        assert_eq!(hint, Some(Duration::from_secs(3600)));
        assert_eq!(backoff(&p, 1, hint), Duration::from_secs(2));
    }

    #[test]
    fn google_error_body_with_retry_info() {
        let body =
            br#"{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED",
          "details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[]},
                     {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}]}}"#;
        let (msg, hint) = parse_error_body(body);
        assert_eq!(msg, "RESOURCE_EXHAUSTED: Quota exceeded");
        assert_eq!(hint, Some(Duration::from_millis(1500)));
    }

    #[test]
    fn other_error_bodies() {
        assert_eq!(
            parse_error_body(br#"{"error":"model 'x' not found"}"#).0,
            "model 'x' not found"
        );
        assert_eq!(
            parse_error_body(br#"{"error":{"message":"bad","type":"invalid_request_error"}}"#).0,
            "bad"
        );
        assert_eq!(parse_error_body(br#"{"detail":"nope"}"#).0, "nope");
        assert_eq!(
            parse_error_body(
                br#"[{"error":{"code":400,"message":"m","status":"INVALID_ARGUMENT"}}]"#
            )
            .0,
            "INVALID_ARGUMENT: m"
        );
        assert_eq!(
            parse_error_body(b"<html>oops</html>").0,
            "<html>oops</html>"
        );
        assert_eq!(parse_error_body(b"").0, "(empty body)");
        assert_eq!(parse_error_body(b"[]").0, "[]");
        let long = vec![b'x'; 5000];
        assert!(parse_error_body(&long).0.chars().count() <= ERROR_EXCERPT + 1);
        // Invalid UTF-8 never panics.
        assert!(!parse_error_body(&[0xff, 0xfe, b'a']).0.is_empty());
    }

    #[test]
    fn backoff_grows_caps_and_jitters_within_bounds() {
        let p = RetryPolicy {
            max_attempts: 10,
            base_delay_ms: 100,
            max_delay_ms: 1000,
            max_server_delay_ms: 2000,
        };
        for _ in 0..50 {
            let d1 = backoff(&p, 1, None).as_millis();
            assert!((50..=100).contains(&d1), "{d1}");
            let d3 = backoff(&p, 3, None).as_millis();
            assert!((200..=400).contains(&d3), "{d3}");
            let d9 = backoff(&p, 9, None).as_millis();
            assert!((500..=1000).contains(&d9), "{d9}");
        }
        assert_eq!(
            backoff(&p, 1, Some(Duration::from_millis(1500))),
            Duration::from_millis(1500)
        );
        assert_eq!(
            backoff(&p, 1, Some(Duration::from_secs(60))),
            Duration::from_secs(2)
        );
        // Huge retry numbers do not overflow.
        assert!(backoff(&p, u32::MAX, None) <= Duration::from_millis(1000));
    }
}
