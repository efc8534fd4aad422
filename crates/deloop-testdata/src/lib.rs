//! Test-only helpers that find deloop's test data. One place decides where
//! data lives and what a missing folder means, for every test suite.
//!
//! - **Vendored corpora** (`testdata/corpora/` in the repository: the
//!   jsonrepair, json-repair-py and OpenClaw loop suites, each with its
//!   licence) are always present: [`corpus`].
//! - **Real data** too large or not licensed for vendoring (SciFact, real
//!   model answers, agent trajectories) lives in a `shared/` folder beside
//!   the checkout, or at `$DELOOP_SHARED_DIR`: [`shared_data`]. When it is
//!   absent, a suite prints one line saying what it skipped and how to get
//!   the data, and passes; with `CI=true` or `DELOOP_REQUIRE_DATA=1` a
//!   missing folder fails the suite instead.
//! - **Slow components** (llama-server, LiteLLM, the npm `openclaw`
//!   package) follow the same rule with `CI=true` or `DELOOP_REQUIRE_REAL=1`:
//!   [`real_component`]. [`llama`] starts a real llama-server under that
//!   rule.
//!
//! ```
//! // A vendored corpus is always there.
//! assert!(deloop_testdata::corpus("jsonrepair").join("cases.jsonl").is_file());
//! ```
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

pub mod llama;
pub mod postgres;
pub mod valkey;

/// The folder where the setup scripts cache what they install outside the
/// checkout: `$DELOOP_CACHE`, else `$XDG_CACHE_HOME/deloop`, else
/// `~/.cache/deloop` (the same rule as `scripts/setup-*.sh`).
pub fn cache_dir() -> PathBuf {
    match (
        std::env::var_os("DELOOP_CACHE"),
        std::env::var_os("XDG_CACHE_HOME"),
    ) {
        (Some(d), _) if !d.is_empty() => PathBuf::from(d),
        (_, Some(x)) if !x.is_empty() => PathBuf::from(x).join("deloop"),
        _ => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/deloop"),
    }
}

/// The repository's root folder.
///
/// Found at run time from `CARGO_MANIFEST_DIR`, which `cargo test` sets to
/// the tested crate's folder in the checkout being tested: the nearest
/// ancestor whose `Cargo.toml` declares `[workspace]`. Only without it (a
/// test binary run by hand) does the folder this crate was compiled in
/// decide; that one can be stale when several checkouts share a target
/// folder, since Cargo does not rebuild a crate whose checkout moved.
pub fn workspace_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
        if let Some(root) = Path::new(&dir).ancestors().find(|d| is_workspace_root(d)) {
            return root.to_path_buf();
        }
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|_| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")))
}

fn is_workspace_root(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("Cargo.toml"))
        .is_ok_and(|toml| toml.lines().any(|l| l.trim() == "[workspace]"))
}

/// A vendored conformance corpus: `testdata/corpora/<name>`. Panics when it
/// is missing, since it ships with the repository.
pub fn corpus(name: &str) -> PathBuf {
    let dir = workspace_root().join("testdata/corpora").join(name);
    assert!(
        dir.is_dir(),
        "vendored corpus {} is missing from the checkout",
        dir.display()
    );
    dir
}

/// The real-data folder: `$DELOOP_SHARED_DIR`, else `shared/` beside the
/// checkout. It may not exist.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("DELOOP_SHARED_DIR") {
        Some(d) => PathBuf::from(d),
        None => workspace_root().join("../shared"),
    }
}

fn flag(name: &str) -> bool {
    std::env::var(name)
        .map(|v| {
            let v = v.trim().to_ascii_lowercase();
            !v.is_empty() && v != "0" && v != "false"
        })
        .unwrap_or(false)
}

/// True when missing real data must fail the tests (`CI=true` or
/// `DELOOP_REQUIRE_DATA=1`).
pub fn data_required() -> bool {
    flag("CI") || flag("DELOOP_REQUIRE_DATA")
}

/// True when missing slow components must fail the tests (`CI=true` or
/// `DELOOP_REQUIRE_REAL=1`).
pub fn real_required() -> bool {
    flag("CI") || flag("DELOOP_REQUIRE_REAL")
}

/// One line on the real stderr: the test harness captures `eprintln!`
/// output of passing tests, and a skip must be seen.
fn say(msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{msg}");
}

/// The real-data file or folder `rel` (for example
/// `data/scifact/corpus.jsonl`) under [`shared_dir`], or `None` after one
/// line on stderr naming what `suite` skipped, when it is absent and not
/// required. Panics when it is absent and required.
pub fn shared_data(rel: &str, suite: &str) -> Option<PathBuf> {
    let path = shared_dir().join(rel);
    if path.exists() {
        return Some(path);
    }
    let msg = format!(
        "{suite}: skipped, real data {} not found (put deloop's shared data folder beside the \
         checkout or set DELOOP_SHARED_DIR)",
        path.display()
    );
    if data_required() {
        panic!("{msg}; CI=true or DELOOP_REQUIRE_DATA=1 makes missing data a failure");
    }
    say(&msg);
    None
}

/// Whether a slow-to-build component is `present`. When it is absent and not
/// required, prints one line naming what `suite` skipped and `how` to get
/// the component, and returns false; when it is absent and required, panics.
pub fn real_component(present: bool, suite: &str, how: &str) -> bool {
    if present {
        return true;
    }
    let msg = format!("{suite}: skipped, its component is not installed ({how})");
    if real_required() {
        panic!("{msg}; CI=true or DELOOP_REQUIRE_REAL=1 makes a missing component a failure");
    }
    say(&msg);
    false
}
