//! The one error type of every client call.

use std::time::Duration;

/// Why an LLM or embedding call failed. Messages never contain an API key:
/// keys travel only in request headers and are never formatted.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The server answered with a non-success HTTP status (after any
    /// retries). `message` is the server's own error message when its body
    /// could be parsed, else a short excerpt of the body.
    #[error("HTTP {status} from the model server: {message}")]
    Http {
        /// The HTTP status code.
        status: u16,
        /// The server's error message.
        message: String,
    },
    /// The call did not finish within its timeout (retries included).
    #[error("the model call timed out after {0:?}")]
    Timeout(Duration),
    /// The caller cancelled the call.
    #[error("the model call was cancelled")]
    Cancelled,
    /// The provider refused to answer (a safety, recitation or policy block).
    /// Refusals are final: they are never retried.
    #[error("the model refused to answer ({reason})")]
    Refused {
        /// The provider's reason code, e.g. `SAFETY`, `RECITATION`,
        /// `PROHIBITED_CONTENT`, `content_filter`.
        reason: String,
    },
    /// The connection failed (DNS, refused, reset, TLS) after any retries.
    #[error("could not reach the model server: {0}")]
    Transport(String),
    /// The server's reply could not be understood.
    #[error("could not decode the model server's reply: {0}")]
    Decode(String),
    /// The client is misconfigured (missing key, bad URL...).
    #[error("LLM configuration error: {0}")]
    Config(String),
}

impl LlmError {
    /// True for errors a retry may cure: 429, 500, 502, 503, 504 and
    /// connection failures. 400/401/403/404 and refusals are final.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Http { status, .. } => matches!(status, 429 | 500 | 502 | 503 | 504),
            LlmError::Transport(_) => true,
            _ => false,
        }
    }
}

/// Turns a reqwest error into an [`LlmError`] without its URL (the URL never
/// holds a key, but keeping errors URL-free keeps them short and safe).
pub(crate) fn transport(err: reqwest::Error) -> LlmError {
    let err = err.without_url();
    let mut msg = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    if err.is_decode() {
        LlmError::Decode(msg)
    } else {
        LlmError::Transport(msg)
    }
}

/// Replaces any occurrence of `key` in the error's text by `<redacted>`.
pub(crate) fn redact(err: LlmError, key: &str) -> LlmError {
    if key.len() < 4 {
        return err;
    }
    let clean = |s: String| s.replace(key, "<redacted>");
    match err {
        LlmError::Http { status, message } => LlmError::Http {
            status,
            message: clean(message),
        },
        LlmError::Transport(m) => LlmError::Transport(clean(m)),
        LlmError::Decode(m) => LlmError::Decode(clean(m)),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_statuses() {
        for s in [429, 500, 502, 503, 504] {
            assert!(LlmError::Http {
                status: s,
                message: String::new()
            }
            .is_retryable());
        }
        for s in [400, 401, 403, 404, 422] {
            assert!(!LlmError::Http {
                status: s,
                message: String::new()
            }
            .is_retryable());
        }
        assert!(LlmError::Transport("reset".into()).is_retryable());
        assert!(!LlmError::Refused {
            reason: "SAFETY".into()
        }
        .is_retryable());
        assert!(!LlmError::Timeout(Duration::from_secs(1)).is_retryable());
        assert!(!LlmError::Cancelled.is_retryable());
    }

    #[test]
    fn redact_removes_the_key() {
        let e = redact(
            LlmError::Http {
                status: 400,
                message: "bad key AIzaSECRET".into(),
            },
            "AIzaSECRET",
        );
        assert_eq!(
            e.to_string(),
            "HTTP 400 from the model server: bad key <redacted>"
        );
    }
}
