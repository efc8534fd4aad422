//! [`Oracle`]: the whole ask flow as one value — the index opened once
//! (built from the embedded docs when missing), the query embedder loaded
//! once, the LLM client, and per question: HyDE, retrieval, synthesis,
//! guards and citations. The CLI, the server and MCP share it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use deloop_config::{Config, ConfigError};
use deloop_index::Retrieval;
use deloop_llm::LlmClient;
use tokio::sync::mpsc::Sender;

use crate::ask::{AskEvent, AskOutcome, AskRequest};
use crate::embedders::{query_embedder, QueryEmbedder};
use crate::hyde::PassageCache;
use crate::hyde::{hyde_passage, HydeOutcome};
use crate::index_pool::{open_index, IndexPool};
use crate::language::{detect_language, Language};
use crate::retrieve::IndexCache;
use crate::settings::{check_k, Settings};

mod answer;
mod events;
mod search;

use events::{error_event, Events};
pub use search::{SearchHit, SearchReport};

/// Why the oracle could not open or could not answer. LLM failures are not
/// errors: they end in an extractive answer (see [`AskStatus::LlmFailed`]).
#[derive(Debug, thiserror::Error)]
pub enum OracleError {
    /// The configuration is invalid (the message names the key).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An explicitly named index does not exist.
    #[error("no index at {path}: run `deloop index --db {path} PATH...` first to index your documents", path = .path.display())]
    NoIndex {
        /// The missing file.
        path: PathBuf,
    },
    /// The request is invalid: an empty question, `k` out of range.
    #[error("{0}")]
    BadRequest(String),
    /// The index failed (SQLite, a corrupt or foreign file).
    #[error(transparent)]
    Index(#[from] deloop_index::Error),
    /// The embedder chosen to build the default index failed to load.
    #[error("the embedder failed: {0}")]
    Embedder(String),
    /// A retrieval task panicked or was cancelled (a bug; reported, not
    /// propagated as a panic).
    #[error("internal error: {0}")]
    Internal(String),
}

impl OracleError {
    /// True when the caller must fix its input or configuration (CLI exit
    /// 2, HTTP 4xx); false for runtime failures (exit 1, HTTP 5xx).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            OracleError::Config(_) | OracleError::NoIndex { .. } | OracleError::BadRequest(_)
        )
    }

    /// True when the index's database cannot be reached now (PostgreSQL
    /// down, restarting or saturated): the request may succeed if retried
    /// (HTTP 503 with `Retry-After`).
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            OracleError::Index(deloop_index::Error::Unavailable(_))
        )
    }

    /// A short machine name: `config`, `no_index`, `bad_request`, `index`,
    /// `embedder` or `internal`.
    pub fn kind(&self) -> &'static str {
        match self {
            OracleError::Config(_) => "config",
            OracleError::NoIndex { .. } => "no_index",
            OracleError::BadRequest(_) => "bad_request",
            OracleError::Index(_) => "index",
            OracleError::Embedder(_) => "embedder",
            OracleError::Internal(_) => "internal",
        }
    }
}

/// Options of [`Oracle::open_with`].
#[derive(Default)]
pub struct OpenOptions<'a> {
    /// Build no LLM client, even when one is configured: every answer is
    /// extractive and the `[llm]` settings are not checked (`deloop ask
    /// --no-llm`). Remote query embedders still use `[llm]`.
    pub extractive_only: bool,
    /// Hears what opening does as it happens (building or refreshing the
    /// default index; the first build can take a while). Default: logged at
    /// `info`.
    pub on_note: Option<&'a dyn Fn(&str)>,
    /// Where the default index lives when none is named (no `--db`,
    /// `DELOOP_DB` or `[index] db`). Default: `.deloop/index.db` in the
    /// working directory. `deloop mcp` puts it in the user's cache: an MCP
    /// client starts it in any directory.
    pub default_db: Option<&'a Path>,
    /// Set from another thread to stop building the default index (the
    /// caller no longer needs it); the build then fails with
    /// [`OracleError::Embedder`] and leaves no index behind.
    pub cancel: Option<&'a std::sync::atomic::AtomicBool>,
}

/// The library oracle, ready to answer many questions at once.
///
/// `Oracle` is `Send + Sync`; share it behind an [`Arc`] (it is also cheap
/// to clone). Each ask borrows an SQLite connection of its own for its
/// retrieval only, so concurrent asks never wait on each other's LLM calls.
/// There is no global state: two oracles over two indexes are independent.
///
/// ```no_run
/// use deloop_config::Config;
/// use deloop_oracle::{AskRequest, Mode, Oracle};
///
/// # async fn demo() -> Result<(), deloop_oracle::OracleError> {
/// let config = Config::load(None)?; // deloop.toml and the environment
/// // Opens .deloop/index.db, building it from deloop's own docs if missing.
/// let oracle = std::sync::Arc::new(Oracle::open(&config, None)?);
/// let mut req = AskRequest::new("How do I stop a looping stream?");
/// req.mode = Some(Mode::Help);
/// let outcome = oracle.ask(req).await?;
/// println!("{}", outcome.report.answer);
/// # Ok(()) }
/// ```
///
/// Offline, without an LLM, the oracle answers extractively:
///
/// ```
/// use deloop_config::Config;
/// use deloop_oracle::{AskRequest, AskStatus, Oracle};
///
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("loops.md"), "# Loops\n\nCancel the stream when the watcher fires.\n").unwrap();
/// let db = dir.path().join("index.db");
/// let mut index = deloop_index::Index::open(&db).unwrap();
/// index.index_paths(&[dir.path().to_path_buf()], None, &mut |_| {}).unwrap();
/// drop(index);
///
/// let oracle = Oracle::open(&Config::default(), Some(&db)).unwrap();
/// let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// let outcome = rt.block_on(oracle.ask(AskRequest::new("How do I cancel the stream?"))).unwrap();
/// assert_eq!(outcome.status, AskStatus::Answered);
/// assert_eq!(outcome.report.provider, "extractive");
/// assert!(outcome.report.answer.contains("watcher fires"));
/// ```
#[derive(Clone, Debug)]
pub struct Oracle {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    settings: Settings,
    /// The configuration, for loading the query embedder when first needed.
    config: Config,
    client: Option<LlmClient>,
    provider: &'static str,
    pool: IndexPool,
    /// Sources under this directory (the embedded docs) are shown relative
    /// to it.
    root: Option<PathBuf>,
    /// Loaded on the first ask that needs vectors, then shared.
    embedder: OnceLock<QueryEmbedder>,
    notes: Vec<String>,
}

/// The provider name for reports.
fn provider_name(config: &Config) -> &'static str {
    match config.llm.effective_provider() {
        Some(deloop_llm::Provider::Gemini) => "gemini",
        Some(deloop_llm::Provider::Openai) => "openai",
        None => "extractive",
    }
}

/// Everything an ask resolved from its request and the defaults.
struct Resolved {
    question: String,
    mode: crate::types::Mode,
    language: Language,
    retrieval: Retrieval,
    k: usize,
    hyde: bool,
    stream: bool,
    use_llm: bool,
    history: Vec<deloop_llm::Turn>,
}

impl Oracle {
    /// Opens the oracle: checks the configuration, builds the LLM client
    /// (none when no provider is configured: answers are then extractive)
    /// and opens the index at `db`, else the configured one (`$DELOOP_DB`,
    /// `[index] db`), else `.deloop/index.db`. The default path is built
    /// from deloop's embedded docs when missing; an explicit path that does
    /// not exist is [`OracleError::NoIndex`].
    ///
    /// Blocking (SQLite, and embedding the docs on the first build): in
    /// async code call it from `tokio::task::spawn_blocking`.
    pub fn open(config: &Config, db: Option<&Path>) -> Result<Oracle, OracleError> {
        Oracle::open_with(config, db, OpenOptions::default())
    }

    /// [`Oracle::open`] with options.
    pub fn open_with(
        config: &Config,
        db: Option<&Path>,
        options: OpenOptions<'_>,
    ) -> Result<Oracle, OracleError> {
        let settings = Settings::from_config(config)?;
        let client = if options.extractive_only {
            None
        } else {
            LlmClient::from_config(&config.llm).map_err(ConfigError::from)?
        };
        let log_note = |note: &str| tracing::info!(%note, "opening the oracle");
        let on_note = options.on_note.unwrap_or(&log_note);
        let opened = open_index(
            config,
            &settings,
            db,
            crate::index_pool::OpenIndexOptions {
                default_db: options.default_db,
                cancel: options.cancel,
                on_note,
            },
        )?;
        let embedder = OnceLock::new();
        if let Some(e) = opened.embedder {
            let _ = embedder.set(e);
        }
        Ok(Oracle {
            inner: Arc::new(Inner {
                provider: provider_name(config),
                settings,
                config: config.clone(),
                client,
                pool: IndexPool::new(opened.path, opened.index, opened.db_timeout),
                root: opened.root,
                embedder,
                notes: opened.notes,
            }),
        })
    }

    /// What opening did (built or refreshed the default index), for the
    /// caller to report; empty when the index was simply opened.
    pub fn notes(&self) -> &[String] {
        &self.inner.notes
    }

    /// Passages retrieved when a request does not say (`[oracle] k`).
    pub fn default_k(&self) -> usize {
        self.inner.settings.k
    }

    /// The LLM's provider (`gemini`, `openai`), or `extractive` without one.
    pub fn provider(&self) -> &str {
        if self.inner.client.is_some() {
            self.inner.provider
        } else {
            "extractive"
        }
    }

    /// The LLM's model, or `extractive` without one.
    pub fn model(&self) -> &str {
        self.inner
            .client
            .as_ref()
            .map_or("extractive", LlmClient::model)
    }

    /// Answers one question. Upstream LLM faults (HTTP errors after the
    /// retries, 429s, timeouts, dropped connections) never fail the ask:
    /// they end in an extractive answer with `degraded: true` and
    /// `llm_error` set ([`AskStatus::LlmFailed`]). Errors are bad requests
    /// and index failures only.
    ///
    /// Dropping the future cancels the LLM request (its connection is
    /// closed, so the server stops generating).
    pub async fn ask(&self, req: AskRequest) -> Result<AskOutcome, OracleError> {
        self.run(req, Events::new(None)).await
    }

    /// [`Oracle::ask`], sending [`AskEvent`]s to `events` as the ask runs:
    /// `meta`, `sources`, `delta`*, `cut`?, `done` (or `error`). A closed
    /// receiver only stops the events; the ask still completes.
    pub async fn ask_with_events(
        &self,
        req: AskRequest,
        events: Sender<AskEvent>,
    ) -> Result<AskOutcome, OracleError> {
        let mut sink = Events::new(Some(events));
        match self.resolve(req) {
            Ok(resolved) => {
                let tx = sink.tx.clone();
                let result = self.answer(resolved, &mut sink).await;
                if let (Err(e), Some(tx)) = (&result, tx) {
                    let _ = tx.send(error_event(e)).await;
                }
                result
            }
            Err(e) => {
                sink.send(error_event(&e)).await;
                Err(e)
            }
        }
    }

    async fn run(&self, req: AskRequest, mut sink: Events) -> Result<AskOutcome, OracleError> {
        let resolved = self.resolve(req)?;
        self.answer(resolved, &mut sink).await
    }

    /// Checks a request as [`Oracle::ask`] would (an empty question, `k`
    /// out of range) without running it: a server answering with events
    /// calls it before its stream starts, so a bad request is a 400, not a
    /// 200 followed by an `error` event.
    pub fn check(&self, req: &AskRequest) -> Result<(), OracleError> {
        if req.question.trim().is_empty() {
            return Err(OracleError::BadRequest("the question is empty".into()));
        }
        check_k(req.k.unwrap_or(self.inner.settings.k)).map_err(OracleError::BadRequest)?;
        Ok(())
    }

    fn resolve(&self, req: AskRequest) -> Result<Resolved, OracleError> {
        self.check(&req)?;
        let s = &self.inner.settings;
        let question = req.question.trim().to_owned();
        let k = check_k(req.k.unwrap_or(s.k)).map_err(OracleError::BadRequest)?;
        let language = req
            .lang
            .or(s.language)
            .unwrap_or_else(|| detect_language(&question));
        Ok(Resolved {
            mode: req.mode.unwrap_or(s.mode),
            language,
            retrieval: req.retrieval.unwrap_or(s.retrieval),
            k,
            hyde: req.hyde.unwrap_or(s.hyde),
            stream: req.stream.unwrap_or(s.stream),
            use_llm: !req.no_llm && self.inner.client.is_some(),
            history: crate::prompts::history_turns(&req.history),
            question,
        })
    }

    /// Runs blocking index work (SQLite, query embedding) on a blocking
    /// thread with a pooled connection.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Inner, &deloop_index::Index) -> T + Send + 'static,
    ) -> Result<T, OracleError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || inner.pool.with(|index| f(&inner, index)))
            .await
            .map_err(|e| OracleError::Internal(format!("the index task failed: {e}")))?
            .map_err(OracleError::from)
    }

    /// HyDE with the cache in the index and the fallback to the question.
    async fn hyde(&self, client: &LlmClient, question: &str, lang: Language) -> HydeOutcome {
        let model = client.model().to_owned();
        let key = question.to_owned();
        let cached = {
            let (model, key) = (model.clone(), key.clone());
            self.blocking(move |_, index| IndexCache(index).get(&model, &key))
                .await
        };
        match cached {
            Ok(Some(passage)) => {
                tracing::debug!("HyDE passage from the cache");
                return HydeOutcome {
                    passage: Some(passage),
                    cached: true,
                    fallback_reason: None,
                };
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "cannot read the HyDE cache"),
        }
        let cancel = deloop_llm::CancellationToken::new();
        let params = &self.inner.settings.hyde_params;
        match hyde_passage(client, &key, lang, params, &cancel).await {
            Ok(passage) => {
                let stored = passage.clone();
                if let Err(e) = self
                    .blocking(move |_, index| IndexCache(index).put(&model, &key, &stored))
                    .await
                {
                    tracing::warn!(error = %e, "cannot write the HyDE cache");
                }
                HydeOutcome {
                    passage: Some(passage),
                    cached: false,
                    fallback_reason: None,
                }
            }
            Err(reason) => HydeOutcome::fallback(reason),
        }
    }
}

impl Inner {
    /// The query embedder, loaded on first use (blocking).
    fn query_embedder(&self, index: &deloop_index::Index) -> &QueryEmbedder {
        self.embedder
            .get_or_init(|| query_embedder(&self.config, index, None))
    }
}
