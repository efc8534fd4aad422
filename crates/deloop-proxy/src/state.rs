//! What every proxy handler shares.

use std::sync::Arc;

use deloop_config::proxy::ProxySettings;
use deloop_config::SettingsError;
use deloop_core::repetition::ClampConfig;
use deloop_http::auth::ApiKeys;
use deloop_http::metrics::Metrics;
use tokio::sync::Semaphore;

use crate::guard::StreamSettings;
use crate::json_reply::JsonSpec;
use crate::request::RequestInfo;
use crate::tool_loops::{LoopJudge, ToolLoopAction};
use crate::upstream::Upstream;

/// The proxy's shared state: settings, the loop guard's config, the
/// upstream clients, deloop's own keys, metrics. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ProxyState(pub(crate) Arc<Inner>);

#[derive(Debug, Clone)]
pub(crate) struct Inner {
    pub settings: ProxySettings,
    pub clamp: ClampConfig,
    pub upstream: Upstream,
    pub keys: ApiKeys,
    pub metrics: Arc<Metrics>,
    pub permits: Arc<Semaphore>,
    /// The tool-loop check (`None`: `proxy.tool_loops = "off"`).
    pub loops: Option<(ToolLoopAction, LoopJudge)>,
    /// Histories replayed at once (one per core): each may take many times
    /// its request's size while it is parsed.
    pub replays: Arc<Semaphore>,
    /// The histories of LiteLLM guardrail requests, for their responses.
    pub recent: Arc<crate::litellm::RecentHistories>,
    /// The texts of LiteLLM's streamed response checks, judged
    /// incrementally.
    pub streams: Arc<crate::litellm::ResponseStreams>,
    /// The console's bus of guard decisions, when one listens.
    pub events: Option<Arc<deloop_events::EventBus>>,
}

impl ProxyState {
    /// The state of a proxy with these settings (`settings.upstream` must
    /// be set; the tool-loop profile and config are read from
    /// `settings.loop_profile` and `settings.loop_config`), the loop
    /// guard's config (`[guards.clamp]`), the upstream
    /// key (`DELOOP_PROXY_UPSTREAM_KEY`), deloop's own API keys (checked
    /// against `x-deloop-key`; none = open) and the metrics to count in
    /// (shared with `deloop serve` when the proxy runs inside it).
    pub fn new(
        settings: ProxySettings,
        clamp: ClampConfig,
        upstream_key: Option<&str>,
        keys: ApiKeys,
        metrics: Arc<Metrics>,
    ) -> Result<Self, SettingsError> {
        settings.validate()?;
        let upstream = Upstream::new(&settings, upstream_key)?;
        let permits = Arc::new(Semaphore::new(settings.concurrency_limit));
        let loops = match ToolLoopAction::parse(&settings.tool_loops) {
            None => None,
            Some(action) => {
                let guard = settings.loop_guard()?;
                for a in &guard.adjustments {
                    tracing::warn!("proxy loop config {a}");
                }
                Some((action, LoopJudge::new(guard.profile, guard.config)))
            }
        };
        let streams = crate::litellm::ResponseStreams::from_settings(&settings);
        let recent = crate::litellm::RecentHistories::new(
            settings.litellm_histories,
            settings.litellm_history_bytes,
        );
        Ok(ProxyState(Arc::new(Inner {
            settings,
            clamp,
            upstream,
            keys,
            metrics,
            permits,
            loops,
            replays: Arc::new(Semaphore::new(
                std::thread::available_parallelism().map_or(2, |n| n.get()),
            )),
            recent: Arc::new(recent),
            streams: Arc::new(streams),
            events: None,
        })))
    }

    /// This proxy, publishing what it decides on `bus` (the console's
    /// Live page; `deloop serve` passes the server's bus).
    pub fn with_events(self, bus: Arc<deloop_events::EventBus>) -> Self {
        let mut inner = (*self.0).clone();
        inner.events = Some(bus);
        ProxyState(Arc::new(inner))
    }

    /// The feed of a request for `model`, when a bus listens.
    pub(crate) fn feed(&self, model: Option<&str>) -> Option<crate::feed::Feed> {
        self.0
            .events
            .as_ref()
            .map(|b| crate::feed::Feed::new(b.clone(), model.map(str::to_string)))
    }

    /// The tool-loop action and judge, when the check is on.
    pub fn tool_loops(&self) -> Option<(ToolLoopAction, &LoopJudge)> {
        self.0.loops.as_ref().map(|(a, j)| (*a, j))
    }

    /// What happens to a tool call whose arguments loop (`None`:
    /// `proxy.tool_args_loops = "off"`).
    pub fn tool_args(&self) -> Option<crate::tool_args::ArgsAction> {
        crate::tool_args::ArgsAction::parse(&self.0.settings.tool_args_loops)
    }

    /// The text guards' configuration (`[guards.clamp]`).
    pub fn clamp(&self) -> &deloop_core::repetition::ClampConfig {
        &self.0.clamp
    }

    /// The settings.
    pub fn settings(&self) -> &ProxySettings {
        &self.0.settings
    }

    /// The metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.0.metrics
    }

    /// Whether deloop's own keys are required (`x-deloop-key`).
    pub fn has_keys(&self) -> bool {
        !self.0.keys.is_empty()
    }

    /// The upstream root URL.
    pub fn upstream_url(&self) -> &str {
        self.0.upstream.base()
    }

    /// How a reply to this request is guarded.
    pub(crate) fn stream_settings(
        &self,
        info: &RequestInfo,
        exact: bool,
        end_reason: &str,
    ) -> StreamSettings {
        let s = &self.0.settings;
        StreamSettings {
            clamp: self.0.clamp.clone(),
            exact: exact || s.exact,
            guard_reasoning: s.guard_reasoning,
            end_reason: end_reason.to_string(),
            json: if s.repair_json {
                info.json.as_ref().map(JsonSpec::new)
            } else {
                None
            },
            max_json_bytes: s.max_reply_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use deloop_core::loops::Profile;

    use super::*;

    fn state(settings: ProxySettings) -> Result<ProxyState, SettingsError> {
        ProxyState::new(
            ProxySettings {
                upstream: "http://127.0.0.1:9".into(),
                ..settings
            },
            ClampConfig::default(),
            None,
            ApiKeys::default(),
            Arc::new(Metrics::new()),
        )
    }

    #[test]
    fn the_loop_guard_comes_from_the_proxy_section() {
        let s = state(ProxySettings::default()).unwrap();
        assert_eq!(s.tool_loops().unwrap().1.profile(), Profile::Default);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("loops.json5");
        std::fs::write(
            &file,
            "{ tools: { loopDetection: { profile: 'openclaw' } } }",
        )
        .unwrap();
        let from_file = ProxySettings {
            loop_config: Some(file.clone()),
            ..ProxySettings::default()
        };
        let s = state(from_file).unwrap();
        assert_eq!(s.tool_loops().unwrap().1.profile(), Profile::OpenClaw);
        let named = ProxySettings {
            loop_profile: Some("strict".into()),
            loop_config: Some(file),
            ..ProxySettings::default()
        };
        let s = state(named).unwrap();
        assert_eq!(s.tool_loops().unwrap().1.profile(), Profile::Strict);
    }

    #[test]
    fn loop_guard_errors_name_the_proxy_key() {
        let missing = ProxySettings {
            loop_config: Some("/nonexistent/loops.json5".into()),
            ..ProxySettings::default()
        };
        assert_eq!(state(missing).unwrap_err().key, "proxy.loop_config");
        let off = ProxySettings {
            tool_loops: "off".into(),
            loop_config: Some("/nonexistent/loops.json5".into()),
            ..ProxySettings::default()
        };
        assert!(
            state(off).unwrap().tool_loops().is_none(),
            "not read when off"
        );
    }
}
