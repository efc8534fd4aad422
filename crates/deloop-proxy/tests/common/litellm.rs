//! LiteLLM's own proxy (PyPI `litellm[proxy]`, pinned and installed by
//! `bash scripts/setup-litellm.sh`) as a child process of a test: found in
//! the setup script's cache or through `DELOOP_LITELLM` (the path of a
//! `litellm` program), started on a free port of 127.0.0.1 with a config
//! the test writes, waited for, and ended with its process group.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::client;

pub const LITELLM: &str = "1.106.12";
/// LiteLLM refuses to start without a master key (or with a weak one).
pub const MASTER_KEY: &str = "sk-deloop-test-7f3a9c2e41b84d0a9e6f5c1b2d3e4f50";
/// How long LiteLLM may take to start (it imports a large web stack; on a
/// loaded 2-core machine that took 50 s).
const STARTUP: Duration = Duration::from_secs(300);

pub fn program() -> PathBuf {
    if let Some(p) = std::env::var_os("DELOOP_LITELLM") {
        return PathBuf::from(p);
    }
    deloop_testdata::cache_dir().join(format!("litellm-{LITELLM}/bin/litellm"))
}

/// Present when the program is there with the pinned version's generic
/// guardrail beside it (a file check; importing LiteLLM takes long).
pub fn present(program: &Path) -> bool {
    let Some(bin) = program.parent() else {
        return false;
    };
    let python = bin.join("python");
    program.is_file()
        && Command::new(python)
            .args([
                "-c",
                "import sys; from importlib.metadata import distribution as d; \
                 m = d('litellm'); \
                 sys.exit(m.version != sys.argv[1] or not m.locate_file(\
                 'litellm/proxy/guardrails/guardrail_hooks/generic_guardrail_api/__init__.py'\
                 ).exists())",
                LITELLM,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// The program, when the suite `suite` should run (see
/// [`deloop_testdata::real_component`]: with `CI=true` a missing LiteLLM
/// fails).
pub fn find(suite: &str) -> Option<PathBuf> {
    let p = program();
    deloop_testdata::real_component(
        present(&p),
        &format!("{suite} (LiteLLM {LITELLM} proxy)"),
        "bash scripts/setup-litellm.sh",
    )
    .then_some(p)
}

/// One `model_list` entry: `name` served by an OpenAI-compatible server
/// at `api_base` (its `/v1`).
pub fn model_yaml(name: &str, api_base: &str) -> String {
    format!(
        "\x20 - model_name: {name}\n\
         \x20   litellm_params:\n\
         \x20     model: openai/{}\n\
         \x20     api_base: {api_base}\n\
         \x20     api_key: sk-upstream-unused\n",
        super::MODEL
    )
}

/// A `generic_guardrail_api` guardrail `name` at `deloop`'s URL, in
/// `mode`, sending `key` as `x-api-key`, on for every request or only
/// those naming it (`"guardrails": [name]`), with more `litellm_params`
/// (`key: value` YAML lines, or empty).
pub fn guardrail_yaml(
    deloop: &str,
    key: &str,
    name: &str,
    mode: &str,
    default_on: bool,
    extra: &[&str],
) -> String {
    let extra: String = extra.iter().map(|l| format!("      {l}\n")).collect();
    format!(
        "\x20 - guardrail_name: {name}\n\
         \x20   litellm_params:\n\
         \x20     guardrail: generic_guardrail_api\n\
         \x20     mode: {mode}\n\
         \x20     api_base: {deloop}\n\
         \x20     api_key: {key}\n\
         \x20     default_on: {default_on}\n\
         {extra}"
    )
}

/// The running `litellm` process (and anything it started, in its process
/// group), ended on drop; its working folder removed.
pub struct LiteLlm {
    pub url: String,
    child: Child,
    dir: PathBuf,
}

impl LiteLlm {
    /// Starts `program` with these `model_list` entries and `guardrails`
    /// (YAML list items, or empty), no telemetry, and [`MASTER_KEY`].
    pub fn start(program: &Path, models: &str, guardrails: &str) -> LiteLlm {
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("deloop-litellm-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let guardrails = if guardrails.is_empty() {
            String::new()
        } else {
            format!("guardrails:\n{guardrails}")
        };
        let config = format!(
            "model_list:\n{models}{guardrails}\
             litellm_settings:\n\
             \x20 telemetry: false\n\
             general_settings:\n\
             \x20 master_key: {MASTER_KEY}\n"
        );
        std::fs::write(dir.join("config.yaml"), config).unwrap();
        // A free port: taken from the OS, then released for LiteLLM.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::File::create(dir.join("litellm.log")).unwrap();
        let mut cmd = Command::new(program);
        cmd.current_dir(&dir)
            .args(["--config", "config.yaml", "--host", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            // No network: the bundled model cost map, no telemetry, and
            // nothing through a proxy.
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            .env("LITELLM_TELEMETRY", "False")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env("no_proxy", "127.0.0.1,localhost")
            .env_remove("HTTP_PROXY")
            .env_remove("HTTPS_PROXY")
            .env_remove("http_proxy")
            .env_remove("https_proxy")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        let child = cmd.spawn().expect("litellm starts");
        LiteLlm {
            url: format!("http://127.0.0.1:{port}"),
            child,
            dir,
        }
    }

    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("litellm.log")).unwrap_or_default();
        let start = log.len().saturating_sub(4000);
        let start = (start..log.len())
            .find(|&i| log.is_char_boundary(i))
            .unwrap_or(log.len());
        log[start..].to_string()
    }

    /// Polls `/health/liveliness` until LiteLLM answers, it exits, or
    /// [`STARTUP`] passes.
    pub async fn wait_ready(&mut self) {
        let c = client();
        let url = format!("{}/health/liveliness", self.url);
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "litellm exited ({status}) while starting:\n{}",
                    self.log_tail()
                );
            }
            let ok = c
                .get(&url)
                .timeout(Duration::from_secs(5))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ok {
                return;
            }
            if started.elapsed() > STARTUP {
                panic!(
                    "litellm did not answer {url} within {STARTUP:?}:\n{}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

impl Drop for LiteLlm {
    fn drop(&mut self) {
        // The process group this test started (LiteLLM may run workers).
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
