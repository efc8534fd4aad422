//! The upstream server: its root URL, the HTTP clients that reach it, and
//! which headers cross the proxy in each direction.
//!
//! Headers pass through except the hop-by-hop ones (RFC 9110 §7.6.1:
//! `Connection` and the headers it names, `Keep-Alive`, `TE`, `Trailer`,
//! `Transfer-Encoding`, `Upgrade`, `Proxy-*`), `Host` (the upstream's own),
//! and deloop's own `x-deloop-*` headers, which never reach the upstream.
//! The client's `Authorization` and `x-api-key` belong to the upstream and
//! pass; a configured upstream key replaces the value of its header.
//!
//! Compression: on the guarded routes the proxy asks the upstream for
//! `Accept-Encoding: identity`, since it must read the text, and LLM
//! servers stream small events for which compression buys little. An
//! upstream that compresses anyway with gzip or deflate is decoded; any
//! other encoding is refused with a clear error rather than passed on
//! unguarded. Other paths pass `Accept-Encoding` and the compressed body
//! through untouched.

use std::time::Duration;

use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::Method;
use deloop_config::proxy::ProxySettings;
use deloop_config::SettingsError;

/// Pool idle connections to the upstream for this long.
const POOL_IDLE: Duration = Duration::from_secs(90);

/// The upstream and its clients.
#[derive(Clone)]
pub struct Upstream {
    base: String,
    /// Decodes gzip/deflate bodies (guarded routes).
    decoding: reqwest::Client,
    /// Leaves bodies as they come (pass-through).
    raw: reqwest::Client,
    key: Option<(HeaderName, HeaderValue)>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("Upstream")
            .field("base", &self.base)
            .field("key", &self.key.as_ref().map(|(h, _)| h))
            .finish_non_exhaustive()
    }
}

fn is_hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

/// Headers named by `Connection` (hop-by-hop too), lowercased.
fn connection_named(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect()
}

/// True for deloop's own request headers (`x-deloop-key`,
/// `x-deloop-exact`, …), which are stripped before forwarding.
pub fn is_deloop_header(name: &HeaderName) -> bool {
    name.as_str().starts_with("x-deloop-")
}

impl Upstream {
    /// Clients for the settings' upstream, with `key` (the value of
    /// `DELOOP_PROXY_UPSTREAM_KEY`) sent in `proxy.upstream_key_header`.
    pub fn new(settings: &ProxySettings, key: Option<&str>) -> Result<Upstream, SettingsError> {
        // reqwest is built with `rustls-no-provider` (as in deloop-llm):
        // install ring once per process; Err means one is installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let base = settings.upstream_url()?;
        let host = base
            .split("://")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .unwrap_or("");
        let host = match host.rsplit_once(':') {
            Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
            _ => host,
        };
        let host = host.trim_matches(['[', ']']);
        let loopback = host.eq_ignore_ascii_case("localhost")
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        let build = |decode: bool| {
            let mut b = reqwest::Client::builder()
                .connect_timeout(settings.connect_timeout())
                .pool_idle_timeout(POOL_IDLE)
                .tcp_nodelay(true)
                .redirect(reqwest::redirect::Policy::none())
                .gzip(decode)
                .deflate(decode);
            if loopback {
                b = b.no_proxy();
            }
            b.build().map_err(|e| SettingsError {
                key: "proxy.upstream",
                message: format!("cannot build the HTTP client: {e}"),
            })
        };
        let key = match key {
            None => None,
            Some(k) => {
                let name = HeaderName::from_bytes(
                    settings
                        .upstream_key_header
                        .trim()
                        .to_ascii_lowercase()
                        .as_bytes(),
                )
                .map_err(|_| SettingsError {
                    key: "proxy.upstream_key_header",
                    message: "is not a header name".into(),
                })?;
                let text = if name == header::AUTHORIZATION {
                    format!("Bearer {k}")
                } else {
                    k.to_string()
                };
                let mut value = HeaderValue::from_str(&text).map_err(|_| SettingsError {
                    key: "DELOOP_PROXY_UPSTREAM_KEY",
                    message: "is not a valid header value (control characters?)".into(),
                })?;
                value.set_sensitive(true);
                Some((name, value))
            }
        };
        Ok(Upstream {
            base,
            decoding: build(true)?,
            raw: build(false)?,
            key,
        })
    }

    /// The root URL (`http://host:port`, no trailing slash).
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The headers to send upstream for a client's request headers.
    /// `guarded`: the proxy reads the reply, so it asks for identity.
    pub fn request_headers(&self, client: &HeaderMap, guarded: bool) -> HeaderMap {
        let named = connection_named(client);
        let mut out = HeaderMap::with_capacity(client.len() + 2);
        for (name, value) in client {
            if is_hop_by_hop(name)
                || name == header::HOST
                || is_deloop_header(name)
                || named.iter().any(|n| n == name.as_str())
                || (guarded && (name == header::CONTENT_LENGTH || name == header::ACCEPT_ENCODING))
            {
                continue;
            }
            out.append(name.clone(), value.clone());
        }
        if guarded {
            out.insert(
                header::ACCEPT_ENCODING,
                HeaderValue::from_static("identity"),
            );
        }
        if let Some((name, value)) = &self.key {
            out.insert(name.clone(), value.clone());
        }
        out
    }

    /// A request to the upstream: `path_and_query` as received; `body`
    /// `None` for a request without one (no chunked empty body).
    pub fn request(
        &self,
        guarded: bool,
        method: Method,
        path_and_query: &str,
        client_headers: &HeaderMap,
        body: Option<reqwest::Body>,
    ) -> reqwest::RequestBuilder {
        let client = if guarded { &self.decoding } else { &self.raw };
        let rb = client
            .request(method, format!("{}{}", self.base, path_and_query))
            .headers(self.request_headers(client_headers, guarded));
        match body {
            Some(b) => rb.body(b),
            None => rb,
        }
    }
}

/// The headers to send the client for the upstream's response headers.
/// `rewritten`: the proxy changes (or decoded) the body, so its length and
/// encoding headers no longer hold.
pub fn response_headers(upstream: &HeaderMap, rewritten: bool) -> HeaderMap {
    let named = connection_named(upstream);
    let mut out = HeaderMap::with_capacity(upstream.len() + 2);
    for (name, value) in upstream {
        if is_hop_by_hop(name)
            || named.iter().any(|n| n == name.as_str())
            || (rewritten && (name == header::CONTENT_LENGTH || name == header::CONTENT_ENCODING))
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream(key: Option<&str>, header: &str) -> Upstream {
        let s = ProxySettings {
            upstream: "http://127.0.0.1:9/v1".into(),
            upstream_key_header: header.into(),
            ..ProxySettings::default()
        };
        Upstream::new(&s, key).unwrap()
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn request_headers_drop_hop_by_hop_and_deloop_ones() {
        let u = upstream(None, "authorization");
        assert_eq!(u.base(), "http://127.0.0.1:9");
        let h = headers(&[
            ("authorization", "Bearer client"),
            ("x-api-key", "k"),
            ("x-request-id", "r1"),
            ("x-deloop-key", "secret"),
            ("x-deloop-exact", "1"),
            ("connection", "keep-alive, x-hop"),
            ("x-hop", "1"),
            ("host", "proxy"),
            ("accept-encoding", "gzip"),
            ("content-length", "5"),
            ("x-custom", "a"),
            ("x-custom", "b"),
        ]);
        let out = u.request_headers(&h, false);
        assert_eq!(out["authorization"], "Bearer client");
        assert_eq!(out["x-api-key"], "k");
        assert_eq!(out["x-request-id"], "r1");
        assert_eq!(out["accept-encoding"], "gzip");
        assert_eq!(out["content-length"], "5");
        assert_eq!(out.get_all("x-custom").iter().count(), 2);
        for gone in [
            "x-deloop-key",
            "x-deloop-exact",
            "connection",
            "x-hop",
            "host",
        ] {
            assert!(!out.contains_key(gone), "{gone}");
        }
        let out = u.request_headers(&h, true);
        assert_eq!(out["accept-encoding"], "identity");
        assert!(!out.contains_key("content-length"));
    }

    #[test]
    fn configured_key_replaces_the_clients() {
        let u = upstream(Some("up-key"), "authorization");
        let out = u.request_headers(&headers(&[("authorization", "Bearer dummy")]), true);
        assert_eq!(out["authorization"], "Bearer up-key");
        assert!(out["authorization"].is_sensitive());
        assert!(!format!("{u:?}").contains("up-key"));
        let u = upstream(Some("up-key"), "x-api-key");
        let out = u.request_headers(&HeaderMap::new(), true);
        assert_eq!(out["x-api-key"], "up-key");
    }

    #[test]
    fn response_headers_keep_ids_and_retry_after() {
        let h = headers(&[
            ("x-request-id", "up-1"),
            ("retry-after", "7"),
            ("content-length", "10"),
            ("content-encoding", "gzip"),
            ("transfer-encoding", "chunked"),
        ]);
        let out = response_headers(&h, false);
        assert_eq!(out["x-request-id"], "up-1");
        assert_eq!(out["retry-after"], "7");
        assert_eq!(out["content-length"], "10");
        assert!(!out.contains_key("transfer-encoding"));
        let out = response_headers(&h, true);
        assert!(!out.contains_key("content-length"));
        assert!(!out.contains_key("content-encoding"));
    }
}
