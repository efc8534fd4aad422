//! Starts a real server on 127.0.0.1 for the end-to-end tests.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use deloop_core::loops::{LoopConfig, Profile};
use deloop_core::repetition::ClampConfig;
use deloop_server::auth::ApiKeys;
use deloop_server::metrics::Metrics;
use deloop_server::sessions::{GuardSettings, MemoryStore};
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
    let metrics = Arc::new(Metrics::new());
    let guard = GuardSettings {
        profile,
        config: LoopConfig::default(),
        max_open_calls: settings.sessions.max_open_calls,
    };
    let store = MemoryStore::new(
        guard.clone(),
        settings.sessions.max_sessions,
        Duration::from_secs(settings.sessions.idle_ttl_secs),
        metrics.clone(),
    );
    let state = AppState::new(
        settings,
        ClampConfig::default(),
        guard,
        Arc::new(store),
        metrics,
        keys,
    );
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
    reqwest::Client::builder().build().unwrap()
}
