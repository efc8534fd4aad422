//! Prometheus metrics: requests and latency per route, loops cut and
//! characters saved, tool-call verdicts by level and detector, the proxy's
//! tool-call loops, sessions, load shed. One registry serves `deloop serve`
//! and the proxy mounted inside it.

use std::sync::atomic::AtomicI64;
use std::time::Instant;

use axum::extract::Request;
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Labels of the request metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    /// The route pattern (`/v1/sessions/{session}/calls`), never the raw path.
    pub route: String,
    /// The HTTP method, from a fixed set ([`method_label`]).
    pub method: String,
    /// The status code.
    pub status: u16,
}

/// Labels of the loop-cut metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CutLabels {
    /// Where the cut happened: `clamp`, `ask`, `proxy`.
    pub source: String,
    /// The detector that fired.
    pub detector: String,
}

/// Labels of the tool-call verdict metric.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerdictLabels {
    /// `ok`, `warning`, `critical`.
    pub level: String,
    /// The detector, or `none`.
    pub detector: String,
}

/// Labels of the proxy's tool-loop metric.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolLoopLabels {
    /// `history` (the round the agent just ran) or `reply` (the calls the
    /// model asks for).
    pub source: String,
    /// `warning` or `critical`.
    pub level: String,
    /// The detector.
    pub detector: String,
    /// What the proxy did: `observed`, `warned` or `blocked`.
    pub action: String,
}

/// Labels of the guardrail's text-bytes metric.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TextBytesLabels {
    /// `received` (the texts of response checks) or `judged` (what the loop
    /// guard read of them).
    pub kind: String,
}

/// Every metric deloop's HTTP services export.
pub struct Metrics {
    registry: Registry,
    requests: Family<RouteLabels, Counter>,
    latency: Family<RouteLabels, Histogram>,
    loops_cut: Family<CutLabels, Counter>,
    chars_saved: Family<CutLabels, Counter>,
    verdicts: Family<VerdictLabels, Counter>,
    tool_loops: Family<ToolLoopLabels, Counter>,
    guardrail_text_bytes: Family<TextBytesLabels, Counter>,
    sessions_evicted: Counter,
    sessions_expired: Counter,
    sessions_live: Gauge<i64, AtomicI64>,
    shed: Counter,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

fn latency_histogram() -> Histogram {
    // 100 µs … ~52 s, doubling.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.0001, 2.0, 20,
    ))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric at zero.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("deloop");
        let requests = Family::<RouteLabels, Counter>::default();
        let latency =
            Family::<RouteLabels, Histogram>::new_with_constructor(latency_histogram as fn() -> _);
        let loops_cut = Family::<CutLabels, Counter>::default();
        let chars_saved = Family::<CutLabels, Counter>::default();
        let verdicts = Family::<VerdictLabels, Counter>::default();
        let tool_loops = Family::<ToolLoopLabels, Counter>::default();
        let guardrail_text_bytes = Family::<TextBytesLabels, Counter>::default();
        let sessions_evicted = Counter::default();
        let sessions_expired = Counter::default();
        let sessions_live = Gauge::<i64, AtomicI64>::default();
        let shed = Counter::default();
        registry.register(
            "http_requests",
            "HTTP requests by route, method and status",
            requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time to the response head, by route, method and status",
            latency.clone(),
        );
        registry.register("loops_cut", "Text loops cut by a guard", loops_cut.clone());
        registry.register(
            "chars_saved",
            "Characters removed or not generated because a loop was cut",
            chars_saved.clone(),
        );
        registry.register(
            "tool_call_verdicts",
            "Tool-call verdicts by level and detector",
            verdicts.clone(),
        );
        registry.register(
            "proxy_tool_loops",
            "Tool-call loops the proxy found in requests (history) and replies, by level, detector and action",
            tool_loops.clone(),
        );
        registry.register(
            "proxy_guardrail_text_bytes",
            "Bytes of texts in LiteLLM's response checks: received, and judged by the loop guard",
            guardrail_text_bytes.clone(),
        );
        registry.register(
            "sessions_evicted",
            "Sessions evicted at the cap (least recently used first)",
            sessions_evicted.clone(),
        );
        registry.register(
            "sessions_expired",
            "Sessions forgotten after their idle TTL",
            sessions_expired.clone(),
        );
        registry.register(
            "sessions",
            "Live-agent sessions held in memory",
            sessions_live.clone(),
        );
        registry.register(
            "requests_shed",
            "Requests answered 503 at the concurrency limit",
            shed.clone(),
        );
        Metrics {
            registry,
            requests,
            latency,
            loops_cut,
            chars_saved,
            verdicts,
            tool_loops,
            guardrail_text_bytes,
            sessions_evicted,
            sessions_expired,
            sessions_live,
            shed,
        }
    }

    /// Records one answered request.
    pub fn request(&self, route: &str, method: &str, status: u16, seconds: f64) {
        let labels = RouteLabels {
            route: route.to_string(),
            method: method.to_string(),
            status,
        };
        self.requests.get_or_create(&labels).inc();
        self.latency.get_or_create(&labels).observe(seconds);
    }

    /// Records a loop cut and the characters it saved.
    pub fn loop_cut(&self, source: &str, detector: &str, saved_chars: u64) {
        let labels = CutLabels {
            source: source.to_string(),
            detector: detector.to_string(),
        };
        self.loops_cut.get_or_create(&labels).inc();
        self.chars_saved.get_or_create(&labels).inc_by(saved_chars);
    }

    /// Records a tool-call verdict.
    pub fn verdict(&self, level: &str, detector: Option<&str>) {
        self.verdicts
            .get_or_create(&VerdictLabels {
                level: level.to_string(),
                detector: detector.unwrap_or("none").to_string(),
            })
            .inc();
    }

    /// Records a tool-call loop the proxy found (`source`: `history` or
    /// `reply`; `action`: `observed`, `warned`, `blocked`).
    pub fn tool_loop(&self, source: &str, level: &str, detector: &str, action: &str) {
        self.tool_loops
            .get_or_create(&ToolLoopLabels {
                source: source.to_string(),
                level: level.to_string(),
                detector: detector.to_string(),
                action: action.to_string(),
            })
            .inc();
    }

    /// Records the texts of one LiteLLM response check: bytes received and
    /// bytes the loop guard judged.
    pub fn guardrail_texts(&self, received: u64, judged: u64) {
        for (kind, n) in [("received", received), ("judged", judged)] {
            self.guardrail_text_bytes
                .get_or_create(&TextBytesLabels {
                    kind: kind.to_string(),
                })
                .inc_by(n);
        }
    }

    /// A session was evicted at the cap.
    pub fn session_evicted(&self) {
        self.sessions_evicted.inc();
    }

    /// Sessions expired after their idle TTL.
    pub fn sessions_expired(&self, n: u64) {
        self.sessions_expired.inc_by(n);
    }

    /// Sets the number of live sessions.
    pub fn set_sessions(&self, n: i64) {
        self.sessions_live.set(n);
    }

    /// A request was shed at the concurrency limit.
    pub fn shed(&self) {
        self.shed.inc();
    }

    /// Evictions so far (for tests and the soak benchmark).
    pub fn evictions(&self) -> u64 {
        self.sessions_evicted.get()
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// The metrics label of a method: the standard methods by name, any other
/// (HTTP lets a client send any token as its method) `other`, so that
/// made-up methods cannot grow the label set.
pub fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

/// Runs the request and records it in `metrics` under `route`: its
/// method ([`method_label`]), its status, and its latency to the response
/// head. `route` must come from a fixed set (a route pattern, never the raw
/// path), or the label set grows without bound.
pub async fn track(metrics: &Metrics, route: &str, req: Request, next: Next) -> Response {
    let start = Instant::now();
    let method = method_label(req.method());
    let res = next.run(req).await;
    metrics.request(
        route,
        method,
        res.status().as_u16(),
        start.elapsed().as_secs_f64(),
    );
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_renders_with_its_labels() {
        let m = Metrics::new();
        m.request("/v1/clamp", "POST", 200, 0.01);
        m.loop_cut("proxy", "words", 120);
        m.verdict("warning", Some("generic_repeat"));
        m.verdict("ok", None);
        m.tool_loop("reply", "critical", "generic_repeat", "blocked");
        m.session_evicted();
        m.sessions_expired(3);
        m.set_sessions(7);
        m.shed();
        let text = m.render();
        for line in [
            r#"deloop_http_requests_total{route="/v1/clamp",method="POST",status="200"} 1"#,
            r#"deloop_loops_cut_total{source="proxy",detector="words"} 1"#,
            r#"deloop_chars_saved_total{source="proxy",detector="words"} 120"#,
            r#"deloop_tool_call_verdicts_total{level="ok",detector="none"} 1"#,
            r#"deloop_proxy_tool_loops_total{source="reply",level="critical",detector="generic_repeat",action="blocked"} 1"#,
            "deloop_sessions_evicted_total 1",
            "deloop_sessions_expired_total 3",
            "deloop_sessions 7",
            "deloop_requests_shed_total 1",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
        assert_eq!(m.evictions(), 1);
    }

    #[test]
    fn made_up_methods_share_one_label() {
        for (raw, label) in [
            ("GET", "GET"),
            ("DELETE", "DELETE"),
            ("FOO", "other"),
            ("BREW", "other"),
            ("get", "other"),
        ] {
            let m = Method::from_bytes(raw.as_bytes()).unwrap();
            assert_eq!(method_label(&m), label, "{raw}");
        }
    }
}
