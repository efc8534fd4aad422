//! A real Valkey (or Redis ≥ 7) server for tests: started on a free
//! loopback port in a folder of its own, stopped when dropped.
//!
//! The binary is `$DELOOP_VALKEY_SERVER`, else the path that
//! `scripts/setup-valkey.sh` wrote to `<cache>/valkey.env`. Without it a
//! suite skips with one line, or fails under `CI=true` /
//! `DELOOP_REQUIRE_REAL=1` ([`crate::real_component`]).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server binary, when installed.
pub fn server_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("DELOOP_VALKEY_SERVER").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let text = std::fs::read_to_string(crate::cache_dir().join("valkey.env")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("DELOOP_VALKEY_SERVER="))
        .map(|p| PathBuf::from(p.trim()))
        .filter(|p| p.is_file())
}

/// The binary, or `None` after the skip line (panics when required).
pub fn available(suite: &str) -> Option<PathBuf> {
    let bin = server_binary();
    crate::real_component(bin.is_some(), suite, "run scripts/setup-valkey.sh").then_some(bin?)
}

/// A free loopback port (free when asked; the server binds it right after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// One running server.
pub struct Valkey {
    child: Option<Child>,
    bin: PathBuf,
    port: u16,
    dir: PathBuf,
    extra: Vec<String>,
}

impl Valkey {
    /// Starts `bin` on a free port with `extra` arguments (for example
    /// `["--cluster-enabled", "yes"]`), and waits until it answers PING.
    pub fn start(bin: &Path, extra: &[&str]) -> Valkey {
        Self::start_on(bin, free_port(), extra)
    }

    /// [`Valkey::start`] on a given port.
    pub fn start_on(bin: &Path, port: u16, extra: &[&str]) -> Valkey {
        let dir = std::env::temp_dir().join(format!("deloop-valkey-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a folder for the server");
        let mut v = Valkey {
            child: None,
            bin: bin.to_path_buf(),
            port,
            dir,
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        v.spawn();
        v
    }

    fn spawn(&mut self) {
        let log = std::fs::File::create(self.dir.join("server.log")).expect("a log file");
        let child = Command::new(&self.bin)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra)
            .stdout(Stdio::from(log.try_clone().expect("log handle")))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.bin.display()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(reply) = self.try_command(&["PING"]) {
                if reply.as_deref() == Ok("PONG") {
                    return;
                }
            }
            if Instant::now() > deadline {
                panic!(
                    "valkey-server on port {} did not answer PING within 20 s: {}",
                    self.port,
                    std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Kills the server (SIGKILL: a crash, not a shutdown).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the server again on the same port (after [`Valkey::kill`]).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Runs one command; answers the reply as text (an error reply is
    /// `Err` with its text).
    pub fn command(&self, args: &[&str]) -> Result<String, String> {
        self.try_command(args).map_err(|e| e.to_string())?
    }

    fn try_command(&self, args: &[&str]) -> std::io::Result<Result<String, String>> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut req = format!("*{}\r\n", args.len());
        for a in args {
            req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        s.write_all(req.as_bytes())?;
        let mut r = BufReader::new(s);
        read_reply(&mut r)
    }
}

/// Reads one RESP reply as text (arrays joined by newlines).
fn read_reply(r: &mut impl BufRead) -> std::io::Result<Result<String, String>> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    let line = line.trim_end_matches("\r\n");
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "bad reply");
    let (kind, rest) = line.split_at_checked(1).ok_or_else(bad)?;
    Ok(match kind {
        "+" | ":" => Ok(rest.to_string()),
        "-" => Err(rest.to_string()),
        "$" | "=" => {
            let n: i64 = rest.parse().map_err(|_| bad())?;
            if n < 0 {
                return Ok(Ok(String::new()));
            }
            let mut buf = vec![0; n as usize + 2];
            r.read_exact(&mut buf)?;
            buf.truncate(n as usize);
            Ok(String::from_utf8_lossy(&buf).into_owned())
        }
        "*" => {
            let n: i64 = rest.parse().map_err(|_| bad())?;
            let mut parts = Vec::new();
            for _ in 0..n.max(0) {
                parts.push(read_reply(r)?.unwrap_or_else(|e| e));
            }
            Ok(parts.join("\n"))
        }
        _ => return Err(bad()),
    })
}

impl Drop for Valkey {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A 3-primary cluster of [`Valkey`] nodes, slots assigned with
/// `CLUSTER ADDSLOTSRANGE` and nodes joined with `CLUSTER MEET`.
pub struct Cluster {
    /// The nodes; the first is the one clients are pointed at.
    pub nodes: Vec<Valkey>,
}

impl Cluster {
    /// Starts three cluster-mode nodes and waits until the cluster is ok.
    pub fn start(bin: &Path) -> Cluster {
        let nodes: Vec<Valkey> = (0..3)
            .map(|_| {
                Valkey::start(
                    bin,
                    &["--cluster-enabled", "yes", "--cluster-node-timeout", "5000"],
                )
            })
            .collect();
        let ranges = [(0, 5460), (5461, 10922), (10923, 16383)];
        for (n, (a, b)) in nodes.iter().zip(ranges) {
            n.command(&["CLUSTER", "ADDSLOTSRANGE", &a.to_string(), &b.to_string()])
                .expect("CLUSTER ADDSLOTSRANGE");
        }
        for n in &nodes[1..] {
            nodes[0]
                .command(&["CLUSTER", "MEET", "127.0.0.1", &n.port().to_string()])
                .expect("CLUSTER MEET");
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while !nodes.iter().all(|n| {
            n.command(&["CLUSTER", "INFO"]).is_ok_and(|i| {
                i.contains("cluster_state:ok") && i.contains("cluster_known_nodes:3")
            })
        }) {
            assert!(
                Instant::now() < deadline,
                "the cluster did not become ok within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Cluster { nodes }
    }

    /// The first node's URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.nodes[0].port())
    }
}
