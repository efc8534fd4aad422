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
use deloop_core::loops::{LoopConfig, Profile};

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
    /// The histories of LiteLLM guardrail requests, for their responses.
    pub recent: Arc<crate::litellm::RecentHistories>,
}

impl ProxyState {
    /// The state of a proxy with these settings (`settings.upstream` must
    /// be set), the loop guard's config (`[guards.clamp]`), the upstream
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
        let loops = ToolLoopAction::parse(&settings.tool_loops)
            .map(|a| (a, LoopJudge::new(Profile::Default, LoopConfig::default())));
        Ok(ProxyState(Arc::new(Inner {
            settings,
            clamp,
            upstream,
            keys,
            metrics,
            permits,
            loops,
            recent: Arc::default(),
        })))
    }

    /// Uses this profile and OpenClaw config for the tool-loop check
    /// (`server.sessions.profile` and `server.sessions.loop_config`; the
    /// default profile and config otherwise). No effect when the check is
    /// off.
    pub fn with_loop_guard(mut self, profile: Profile, config: LoopConfig) -> Self {
        let inner = Arc::make_mut(&mut self.0);
        if let Some((_, judge)) = &mut inner.loops {
            *judge = LoopJudge::new(profile, config);
        }
        self
    }

    /// The tool-loop action and judge, when the check is on.
    pub fn tool_loops(&self) -> Option<(ToolLoopAction, &LoopJudge)> {
        self.0.loops.as_ref().map(|(a, j)| (*a, j))
    }

    /// The settings.
    pub fn settings(&self) -> &ProxySettings {
        &self.0.settings
    }

    /// The metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.0.metrics
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
