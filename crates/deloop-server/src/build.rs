//! Building a server's state from its settings: the session store (in
//! memory with its sweeper, or Valkey/Redis), the API keys, the tool-loop
//! guard.

use std::sync::Arc;
use std::time::Duration;

use deloop_config::LoopGuardSettings;
use deloop_core::repetition::ClampConfig;

use crate::auth::ApiKeys;
use crate::metrics::Metrics;
use crate::sessions::{GuardSettings, MemoryStore, MetricsEvents};
use crate::settings::{ServerSettings, SettingsError};
use crate::state::AppState;

/// The tool-loop guard of the settings: the profile and the OpenClaw
/// config file, read and checked.
pub fn guard_settings(settings: &ServerSettings) -> Result<GuardSettings, SettingsError> {
    let s = &settings.sessions;
    let loops = LoopGuardSettings::load(
        ("server.sessions.profile", s.profile.as_deref()),
        ("server.sessions.loop_config", s.loop_config.as_deref()),
    )?;
    for a in &loops.adjustments {
        tracing::warn!("loop config {a}");
    }
    Ok(GuardSettings {
        profile: loops.profile,
        config: loops.config,
        max_open_calls: s.max_open_calls,
    })
}

/// The API keys: `DELOOP_API_KEYS` (comma separated, given as `list`) and
/// the key file of the settings.
pub fn api_keys(settings: &ServerSettings, list: Option<&str>) -> Result<ApiKeys, SettingsError> {
    ApiKeys::load(
        list,
        settings.api_keys_file.as_deref(),
        "server.api_keys_file",
    )
}

/// A state whose sessions live in this process, and the store (for its
/// sweeper, [`spawn_sweeper`]).
pub fn memory_state(
    settings: ServerSettings,
    clamp: ClampConfig,
    guard: GuardSettings,
    keys: ApiKeys,
) -> (AppState, Arc<MemoryStore>) {
    let metrics = Arc::new(Metrics::new());
    let store = Arc::new(
        MemoryStore::new(
            guard.clone(),
            settings.sessions.max_sessions,
            Duration::from_secs(settings.sessions.idle_ttl_secs),
            Arc::new(MetricsEvents(metrics.clone())),
        )
        .with_max_bytes(usize::try_from(settings.sessions.max_bytes).unwrap_or(usize::MAX)),
    );
    let state = AppState::new(settings, clamp, guard, store.clone(), metrics, keys);
    (state, store)
}

/// A state whose sessions live where `server.sessions.store` says: in this
/// process (the store is returned for its sweeper) or in Valkey/Redis,
/// with the password from `redis_password` when the URL has none.
pub fn state(
    settings: ServerSettings,
    clamp: ClampConfig,
    guard: GuardSettings,
    keys: ApiKeys,
    redis_password: Option<String>,
) -> Result<(AppState, Option<Arc<MemoryStore>>), SettingsError> {
    if !settings.sessions.shared_store() {
        let (state, store) = memory_state(settings, clamp, guard, keys);
        return Ok((state, Some(store)));
    }
    shared_state(settings, clamp, guard, keys, redis_password)
}

/// The state of sessions shared through Valkey/Redis.
#[cfg(feature = "redis")]
fn shared_state(
    settings: ServerSettings,
    clamp: ClampConfig,
    guard: GuardSettings,
    keys: ApiKeys,
    redis_password: Option<String>,
) -> Result<(AppState, Option<Arc<MemoryStore>>), SettingsError> {
    use deloop_sessions::{RedisSettings, RedisStore, SessionStore};
    let metrics = Arc::new(Metrics::new());
    let s = &settings.sessions;
    let redis = RedisSettings {
        url: s.store.clone(),
        password: redis_password,
        timeout: Duration::from_millis(s.store_timeout_ms),
        idle_ttl: Duration::from_secs(s.idle_ttl_secs),
        key_prefix: s.key_prefix.clone(),
        snapshot_every: s.snapshot_every,
        snapshot_bytes: (256 << 10).min(s.max_log_bytes / 4),
        max_log_events: s.max_log_events,
        max_log_bytes: s.max_log_bytes,
        cached_sessions: s.cached_sessions,
        max_cached_bytes: usize::try_from(s.max_bytes).unwrap_or(usize::MAX),
    };
    let store = RedisStore::new(
        redis,
        guard.clone(),
        Arc::new(MetricsEvents(metrics.clone())),
    )
    .map_err(|e| SettingsError {
        key: "server.sessions.store",
        message: e.to_string(),
    })?;
    tracing::info!(store = %store.describe(), "sessions are shared through the store");
    let state = AppState::new(settings, clamp, guard, Arc::new(store), metrics, keys);
    Ok((state, None))
}

/// A build without the `redis` feature cannot share sessions: the store
/// setting is refused, naming the feature.
#[cfg(not(feature = "redis"))]
fn shared_state(
    _settings: ServerSettings,
    _clamp: ClampConfig,
    _guard: GuardSettings,
    _keys: ApiKeys,
    _redis_password: Option<String>,
) -> Result<(AppState, Option<Arc<MemoryStore>>), SettingsError> {
    Err(SettingsError {
        key: "server.sessions.store",
        message: "this deloop was built without the Valkey/Redis session store (the cargo \
                  feature `redis`, on by default): rebuild it with default features, or use \
                  store = \"memory\""
            .into(),
    })
}

/// Forgets idle sessions in the background, every `every` (the store also
/// expires sessions of a shard whenever that shard is used).
pub fn spawn_sweeper(store: Arc<MemoryStore>, every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let n = store.sweep();
            if n > 0 {
                tracing::debug!(expired = n, "idle sessions forgotten");
            }
        }
    })
}
