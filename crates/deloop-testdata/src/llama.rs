//! A real llama.cpp `llama-server` for tests: [`start`] finds the binary and
//! a model, runs the server on a free port of 127.0.0.1, waits until
//! `/health` answers 200 and returns a [`LlamaServer`] that kills it on drop.
//!
//! The binary comes from `scripts/setup-llama.sh` (a 20-minute build) and the
//! models from `scripts/setup-models.sh`. Each path is read from an
//! environment variable or, failing that, from the env file those scripts
//! write:
//!
//! | what | variable | |
//! |---|---|---|
//! | server | `DELOOP_LLAMA_SERVER` | |
//! | SmolLM2-135M-Instruct Q4_1 (chat) | `DELOOP_MODEL_SMOLLM2` | [`Model::SmolLm2`] |
//! | Gemma 3 270M Q4_K_M (base) | `DELOOP_MODEL_GEMMA3` | [`Model::Gemma3`] |
//!
//! The env file is `$DELOOP_CACHE/llama.env`, else
//! `$XDG_CACHE_HOME/deloop/llama.env`, else `~/.cache/deloop/llama.env`.
//!
//! When the server or the model is missing, [`start`] follows the crate's
//! rule for slow components ([`crate::real_component`]): one line on stderr
//! and `None`, or a panic under `CI=true` / `DELOOP_REQUIRE_REAL=1`. A server
//! that is present but does not come up is always a panic, with the end of
//! its log.
//!
//! ```no_run
//! use deloop_testdata::llama::{self, Model};
//!
//! let Some(server) = llama::start(Model::SmolLm2, "my_suite") else {
//!     return; // skipped: not installed
//! };
//! let (status, body) = server
//!     .post_json(
//!         "/v1/chat/completions",
//!         r#"{"messages":[{"role":"user","content":"Hi"}],"max_tokens":8}"#,
//!     )
//!     .unwrap();
//! assert_eq!(status, 200, "{body}");
//! println!("{}", server.base_url()); // http://127.0.0.1:<port>
//! ```

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How to get the server and the models, for skip messages.
pub const HOW: &str = "run `bash scripts/setup-llama.sh && bash scripts/setup-models.sh` (a build \
                       of 20 minutes or more the first time), or set DELOOP_LLAMA_SERVER and \
                       DELOOP_MODEL_SMOLLM2 / DELOOP_MODEL_GEMMA3";

/// How long a server may take to load its model and answer `/health`.
const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// The two small real models of `scripts/setup-models.sh`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Model {
    /// SmolLM2-135M-Instruct, GGUF Q4_1: a chat model (its template is in
    /// the GGUF; use `/v1/chat/completions`).
    SmolLm2,
    /// Gemma 3 270M, GGUF Q4_K_M: a base model (use `/v1/completions`).
    Gemma3,
}

impl Model {
    /// Both models.
    pub const ALL: [Model; 2] = [Model::SmolLm2, Model::Gemma3];

    /// The variable (and env-file key) that holds the model file's path.
    pub fn env_var(self) -> &'static str {
        match self {
            Model::SmolLm2 => "DELOOP_MODEL_SMOLLM2",
            Model::Gemma3 => "DELOOP_MODEL_GEMMA3",
        }
    }

    /// A short name: `smollm2` or `gemma3`.
    pub fn name(self) -> &'static str {
        match self {
            Model::SmolLm2 => "smollm2",
            Model::Gemma3 => "gemma3",
        }
    }
}

/// Settings of a started server. The defaults suit tests: a 4096-token
/// context shared by 4 slots (1024 tokens each), one thread, `/metrics` and
/// `/slots` on.
///
/// One thread, because test machines are shared: with both cores of this
/// 2-core machine busy with builds, llama-server with 2 threads (its default
/// here) generated 1 token/s, as its threads spin on ggml's barriers, and
/// 13 tokens/s with 1 thread (SmolLM2-135M). Several servers started at once
/// also share the cores better that way.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--ctx-size`: the context of all slots together.
    pub ctx_size: u32,
    /// `-np`: parallel slots (concurrent requests).
    pub slots: u32,
    /// `--threads`; `None` keeps llama-server's default (one per core).
    pub threads: Option<u32>,
    /// Further arguments, appended last.
    pub extra_args: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            ctx_size: 4096,
            slots: 4,
            threads: Some(1),
            extra_args: Vec::new(),
        }
    }
}

/// A running llama-server, killed (and reaped) on drop.
#[derive(Debug)]
pub struct LlamaServer {
    child: Child,
    port: u16,
    model: Model,
    model_path: PathBuf,
    log: PathBuf,
}

impl LlamaServer {
    /// The port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's root, `http://127.0.0.1:<port>` (no trailing slash, no
    /// `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Which model it serves.
    pub fn model(&self) -> Model {
        self.model
    }

    /// The GGUF file it serves.
    pub fn model_path(&self) -> &Path {
        &self.model_path
    }

    /// The server process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The file that receives the server's stdout and stderr.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The last `max_bytes` of the server's log, for failure messages.
    pub fn log_tail(&self, max_bytes: usize) -> String {
        tail(&self.log, max_bytes)
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// `GET path`: the status and the body (chunked bodies are decoded).
    /// A minimal HTTP/1.1 client, enough for `/health`, `/slots`,
    /// `/metrics` and `/v1/models`.
    pub fn get(&self, path: &str) -> std::io::Result<(u16, String)> {
        http(self.port, "GET", path, None)
    }

    /// `POST path` with a JSON body: the status and the whole response body
    /// (for a streamed request, the whole SSE text).
    pub fn post_json(&self, path: &str, body: &str) -> std::io::Result<(u16, String)> {
        http(self.port, "POST", path, Some(body))
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// The env file written by the setup scripts.
pub fn env_file() -> PathBuf {
    crate::cache_dir().join("llama.env")
}

/// `key` from the environment, else from [`env_file`]; `None` when unset
/// or when the file it names does not exist.
fn lookup(key: &str) -> Option<PathBuf> {
    let value = match std::env::var_os(key) {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => {
            let text = std::fs::read_to_string(env_file()).ok()?;
            let v = text.lines().find_map(|line| {
                let (k, v) = line.split_once('=')?;
                (k.trim() == key).then(|| v.trim().to_string())
            })?;
            PathBuf::from(v)
        }
    };
    value.is_file().then_some(value)
}

/// The llama-server binary, if installed.
pub fn server_binary() -> Option<PathBuf> {
    lookup("DELOOP_LLAMA_SERVER")
}

/// The model's GGUF file, if installed.
pub fn model_file(model: Model) -> Option<PathBuf> {
    lookup(model.env_var())
}

/// Whether the server and `model` are installed, under the crate's skip
/// rule: prints one line and returns false when they are absent (a panic
/// when `CI=true` or `DELOOP_REQUIRE_REAL=1`).
pub fn available(model: Model, suite: &str) -> bool {
    let what = match (server_binary(), model_file(model)) {
        (Some(_), Some(_)) => return true,
        (None, Some(_)) => "llama-server".to_string(),
        (Some(_), None) => format!("the {} model", model.name()),
        (None, None) => format!("llama-server and the {} model", model.name()),
    };
    crate::real_component(false, suite, &format!("{what}: {HOW}"))
}

/// Starts llama-server with `model` and the default [`Options`]; see
/// [`start_with`].
pub fn start(model: Model, suite: &str) -> Option<LlamaServer> {
    start_with(model, &Options::default(), suite)
}

/// Starts llama-server with `model` on a free port of 127.0.0.1 and waits
/// until `/health` answers 200. `None` (after one line on stderr) when the
/// server or the model is not installed and not required; panics when they
/// are required and missing, or when the server does not come up.
pub fn start_with(model: Model, options: &Options, suite: &str) -> Option<LlamaServer> {
    if !available(model, suite) {
        return None;
    }
    let binary = server_binary().expect("checked by available");
    let model_path = model_file(model).expect("checked by available");
    // The free port is found by binding port 0 and releasing it, so another
    // process can take it before llama-server does; a few tries cover that.
    let mut last_failure = String::new();
    for _ in 0..3 {
        match spawn(&binary, model, &model_path, options) {
            Ok(server) => return Some(server),
            Err(failure) => last_failure = failure,
        }
    }
    panic!("{suite}: llama-server did not start: {last_failure}");
}

fn spawn(
    binary: &Path,
    model: Model,
    model_path: &Path,
    options: &Options,
) -> Result<LlamaServer, String> {
    let port = free_port().map_err(|e| format!("no free port on 127.0.0.1: {e}"))?;
    let log = std::env::temp_dir().join(format!(
        "deloop-llama-{}-{}-{port}.log",
        model.name(),
        std::process::id()
    ));
    let log_file = std::fs::File::create(&log)
        .map_err(|e| format!("cannot create the log file {}: {e}", log.display()))?;
    let log_err = log_file
        .try_clone()
        .map_err(|e| format!("cannot share the log file: {e}"))?;
    let mut cmd = Command::new(binary);
    cmd.arg("--model")
        .arg(model_path)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--ctx-size", &options.ctx_size.to_string()])
        .args(["--parallel", &options.slots.to_string()])
        .args(["--metrics", "--slots"]);
    if let Some(t) = options.threads {
        cmd.args(["--threads", &t.to_string()]);
    }
    cmd.args(&options.extra_args)
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(log_err);
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
    let mut server = LlamaServer {
        child,
        port,
        model,
        model_path: model_path.to_path_buf(),
        log,
    };
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Ok(Some(status)) = server.child.try_wait() {
            return Err(format!(
                "it exited ({status}) before answering /health on port {port}; its log ends:\n{}",
                server.log_tail(3000)
            ));
        }
        if let Ok((200, _)) = server.get("/health") {
            return Ok(server);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "/health on port {port} did not answer 200 within {} s; its log ends:\n{}",
                READY_TIMEOUT.as_secs(),
                server.log_tail(3000)
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn free_port() -> std::io::Result<u16> {
    let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

fn tail(path: &Path, max_bytes: usize) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    let start = bytes.len().saturating_sub(max_bytes);
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

/// One HTTP/1.1 request with `Connection: close`; reads to the end.
fn http(port: u16, method: &str, path: &str, body: Option<&str>) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port))?;
    stream.set_read_timeout(Some(Duration::from_secs(600)))?;
    let body = body.unwrap_or("");
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Accept: */*\r\n"
    );
    if method == "POST" {
        request.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse_response(&raw)
}

fn bad(msg: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg.to_string())
}

fn parse_response(raw: &[u8]) -> std::io::Result<(u16, String)> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("HTTP response without a blank line after the headers"))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let body = &raw[split + 4..];
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| bad("HTTP response without a status line"))?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

fn dechunk(mut body: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| bad("chunked body cut inside a chunk size"))?;
        let size_text = String::from_utf8_lossy(&body[..line_end]);
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| bad("chunked body with an invalid chunk size"))?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if body.len() < size {
            return Err(bad("chunked body cut inside a chunk"));
        }
        out.extend_from_slice(&body[..size]);
        body = body.get(size + 2..).unwrap_or(&[]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_chunked_responses() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(parse_response(plain).unwrap(), (200, "ok".to_string()));
        let chunked = b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n\
                        5\r\nhello\r\n6;x=y\r\n world\r\n0\r\n\r\n";
        assert_eq!(
            parse_response(chunked).unwrap(),
            (503, "hello world".to_string())
        );
    }

    #[test]
    fn refuses_malformed_responses_without_panicking() {
        for raw in [
            &b""[..],
            b"HTTP/1.1 200 OK\r\n",
            b"garbage\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nff\r\nshort",
        ] {
            assert!(
                parse_response(raw).is_err(),
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
    }

    #[test]
    fn model_names_and_variables() {
        assert_eq!(Model::SmolLm2.env_var(), "DELOOP_MODEL_SMOLLM2");
        assert_eq!(Model::Gemma3.env_var(), "DELOOP_MODEL_GEMMA3");
        assert_eq!(Model::ALL.map(Model::name), ["smollm2", "gemma3"]);
    }
}
