//! The latency the proxy adds per streamed chunk.
//!
//! * `guard/*`: the pure work per event (SSE reading, JSON, the loop
//!   watcher, the bytes to forward), in process;
//! * `e2e/*`: one chunk's trip over loopback TCP, from the moment the fake
//!   upstream is told to write it until the client has read it: `direct`
//!   (client → upstream) and `proxied` (client → deloop proxy → upstream).
//!
//! Criterion reports means; after it, the bench prints the p50/p90/p99 of
//! `e2e` over 5,000 chunks each, and their difference, the latency added.
//! Run: `cargo bench -p deloop-proxy --bench proxy_latency`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use axum::Router;
use bytes::Bytes;
use criterion::{criterion_group, Criterion};
use deloop_config::ProxySettings;
use deloop_proxy::guard::StreamSettings;
use deloop_proxy::openai_stream::{Kind, OpenAiStream};
use deloop_proxy::sse::SseReader;
use deloop_proxy::{Flow, ProxyState};
use futures_util::StreamExt;
use tokio::sync::mpsc;

const WORDS: &[&str] = &[
    "the",
    "model",
    "answers",
    "with",
    "a",
    "short",
    "sentence",
    "about",
    "rust",
    "ownership",
    "borrowing",
    "lifetimes",
    "traits",
    "generics",
    "cargo",
    "crates",
    "tests",
    "memory",
    "safety",
    "threads",
    "async",
    "tokio",
    "futures",
    "streams",
    "bytes",
    "json",
    "serde",
    "errors",
    "result",
    "option",
    "match",
    "enum",
    "struct",
    "impl",
    "closure",
    "iterator",
    "vector",
    "string",
    "slice",
    "pointer",
    "box",
    "arc",
    "mutex",
    "channel",
    "socket",
    "server",
    "client",
    "request",
    "reply",
    "header",
    "body",
    "proxy",
    "guard",
    "loop",
    "watcher",
    "token",
    "delta",
    "choice",
    "usage",
];

/// Varied text that never loops: words picked by a linear congruential
/// generator, four per chunk.
fn chunk_texts(n: usize) -> Vec<String> {
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    (0..n)
        .map(|_| {
            let mut s = String::new();
            for _ in 0..4 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                s.push_str(WORDS[(x >> 33) as usize % WORDS.len()]);
                s.push(' ');
            }
            s
        })
        .collect()
}

fn chunk_event(text: &str) -> String {
    let v = serde_json::json!({
        "id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1_700_000_000u64,
        "model": "bench-model", "system_fingerprint": "fp_bench",
        "choices": [{"index": 0, "delta": {"content": text}, "logprobs": null, "finish_reason": null}],
    });
    format!("data: {v}\n\n")
}

fn guard_benches(c: &mut Criterion) {
    let events: Vec<String> = chunk_texts(4000).iter().map(|t| chunk_event(t)).collect();
    let mut g = c.benchmark_group("guard");
    g.bench_function("sse_read_and_openai_event", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut done = 0u64;
            while done < iters {
                let mut stream =
                    OpenAiStream::new(Kind::Chat, StreamSettings::new("stop"), 1, false);
                let mut reader = SseReader::new(1 << 20);
                let mut parsed = Vec::with_capacity(1);
                let mut out = Vec::with_capacity(2);
                let n = (iters - done).min(events.len() as u64) as usize;
                let start = Instant::now();
                for ev in &events[..n] {
                    reader.push(ev.as_bytes(), &mut parsed).unwrap();
                    for e in parsed.drain(..) {
                        assert_eq!(stream.on_event(&e, &mut out), Flow::Continue);
                    }
                    out.clear();
                }
                total += start.elapsed();
                done += n as u64;
            }
            total
        })
    });
    g.finish();
}

/// A fake upstream whose one stream writes a chunk whenever the bench
/// sends one on the channel.
struct Upstream {
    url: String,
    feed: Arc<Mutex<Option<mpsc::UnboundedReceiver<Bytes>>>>,
}

async fn stream_handler(
    State(feed): State<Arc<Mutex<Option<mpsc::UnboundedReceiver<Bytes>>>>>,
) -> Response {
    let rx = feed.lock().unwrap().take().expect("one stream at a time");
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(body))
        .unwrap()
}

async fn start_upstream() -> Upstream {
    use axum::serve::ListenerExt;
    let feed = Arc::new(Mutex::new(None));
    let app = Router::new()
        .fallback(stream_handler)
        .with_state(feed.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let listener = listener.tap_io(|t| {
        let _ = t.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Upstream { url, feed }
}

async fn start_proxy(upstream: &str) -> String {
    let settings = ProxySettings {
        upstream: upstream.to_string(),
        ..ProxySettings::default()
    };
    let state = ProxyState::new(
        settings,
        Default::default(),
        None,
        Default::default(),
        Arc::new(deloop_http::metrics::Metrics::new()),
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(deloop_proxy::serve(
        listener,
        state,
        std::future::pending(),
        Duration::from_secs(1),
    ));
    url
}

/// One open stream: send a chunk upstream, time its arrival at the client.
struct Trip {
    tx: mpsc::UnboundedSender<Bytes>,
    body: futures_util::stream::BoxStream<'static, reqwest::Result<Bytes>>,
    texts: Vec<String>,
    next: usize,
}

impl Trip {
    async fn open(upstream: &Upstream, base: &str, client: &reqwest::Client) -> Trip {
        let (tx, rx) = mpsc::unbounded_channel();
        *upstream.feed.lock().unwrap() = Some(rx);
        let res = client
            .post(format!("{base}/v1/chat/completions"))
            .body(r#"{"model":"bench-model","messages":[],"stream":true}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        Trip {
            tx,
            body: res.bytes_stream().boxed(),
            texts: chunk_texts(20_000),
            next: 0,
        }
    }

    /// One chunk's trip.
    async fn once(&mut self) -> Duration {
        let text = &self.texts[self.next % self.texts.len()];
        self.next += 1;
        let event = Bytes::from(chunk_event(text));
        let want = event.len();
        let start = Instant::now();
        self.tx.send(event).unwrap();
        let mut got = 0;
        while got < want {
            got += self.body.next().await.unwrap().unwrap().len();
        }
        start.elapsed()
    }
}

fn percentiles(mut v: Vec<Duration>) -> [Duration; 4] {
    v.sort_unstable();
    let at = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
    [at(0.50), at(0.90), at(0.99), *v.last().unwrap()]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn e2e(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let (upstream, proxy) = rt.block_on(async {
        let upstream = start_upstream().await;
        let proxy = start_proxy(&upstream.url).await;
        (upstream, proxy)
    });
    let mut g = c.benchmark_group("e2e");
    for (name, base) in [("direct", upstream.url.clone()), ("proxied", proxy.clone())] {
        // A stream carries 20,000 distinct chunks; open a new one after.
        let mut trip = rt.block_on(Trip::open(&upstream, &base, &client));
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        if trip.next >= trip.texts.len() {
                            trip = Trip::open(&upstream, &base, &client).await;
                        }
                        total += trip.once().await;
                    }
                    total
                })
            })
        });
    }
    g.finish();

    // Percentiles over 5,000 chunks each, after a warm-up.
    let mut report = Vec::new();
    for (name, base) in [("direct", upstream.url.clone()), ("proxied", proxy.clone())] {
        let samples = rt.block_on(async {
            let mut trip = Trip::open(&upstream, &base, &client).await;
            for _ in 0..500 {
                trip.once().await;
            }
            let mut v = Vec::with_capacity(5000);
            for _ in 0..5000 {
                v.push(trip.once().await);
            }
            v
        });
        report.push((name, percentiles(samples)));
    }
    println!("\nper-chunk trip over loopback (µs)    p50      p90      p99      max");
    for (name, p) in &report {
        println!(
            "  {name:<34} {:>7.1}  {:>7.1}  {:>7.1}  {:>7.1}",
            us(p[0]),
            us(p[1]),
            us(p[2]),
            us(p[3])
        );
    }
    let (d, p) = (&report[0].1, &report[1].1);
    println!(
        "  {:<34} {:>7.1}  {:>7.1}  {:>7.1}",
        "added by the proxy",
        us(p[0]) - us(d[0]),
        us(p[1]) - us(d[1]),
        us(p[2]) - us(d[2])
    );
}

criterion_group!(benches, guard_benches, e2e);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
