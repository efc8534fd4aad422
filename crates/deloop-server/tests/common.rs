//! Starts a real server on 127.0.0.1 for the end-to-end tests.
#![allow(dead_code)]

use deloop_core::loops::{LoopConfig, Profile};
use deloop_core::repetition::ClampConfig;
use deloop_server::auth::ApiKeys;
use deloop_server::sessions::GuardSettings;
use deloop_server::{AppState, ServerSettings};

/// A running server: its base URL and a handle that stops it when dropped.
pub struct TestServer {
    pub url: String,
    pub state: AppState,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl TestServer {
    pub fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop();
    }
}

pub fn state_with(settings: ServerSettings, profile: Profile, keys: ApiKeys) -> AppState {
    let guard = GuardSettings {
        profile,
        config: LoopConfig::default(),
        max_open_calls: settings.sessions.max_open_calls,
    };
    let (state, _store) =
        deloop_server::build::memory_state(settings, ClampConfig::default(), guard, keys);
    state.set_ready();
    state
}

pub async fn start(state: AppState) -> TestServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(deloop_server::serve(listener, state.clone(), async move {
        let _ = rx.await;
    }));
    TestServer {
        url,
        state,
        stop: Some(tx),
        task,
    }
}

pub async fn start_default() -> TestServer {
    start(state_with(
        ServerSettings::default(),
        Profile::Default,
        ApiKeys::default(),
    ))
    .await
}

pub fn client() -> reqwest::Client {
    // reqwest is unified with deloop-llm's `rustls-no-provider` feature:
    // install rustls' ring provider as deloop-llm does (Err: already set).
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().build().unwrap()
}

/// The server's `GET /metrics` text, sent with the API key `key` if any.
pub async fn metrics_text(url: &str, key: Option<&str>) -> String {
    let mut req = client().get(format!("{url}/metrics"));
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    req.send().await.unwrap().text().await.unwrap()
}

/// A temporary index over a few small markdown documents, for the oracle.
pub struct Library {
    _dir: tempfile::TempDir,
    pub db: std::path::PathBuf,
}

/// Indexes `docs` (file name, text) into a fresh temporary database,
/// lexically (no embedder).
pub fn library(docs: &[(&str, &str)]) -> Library {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("docs");
    std::fs::create_dir_all(&folder).unwrap();
    for (name, text) in docs {
        std::fs::write(folder.join(name), text).unwrap();
    }
    let db = dir.path().join("index.db");
    let mut index = deloop_index::Index::open(&db).unwrap();
    index.index_paths(&[folder], None, &mut |_| {}).unwrap();
    Library { _dir: dir, db }
}
