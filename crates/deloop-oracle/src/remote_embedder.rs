//! Adapts deloop-llm's async [`EmbeddingClient`] (Gemini `embedContent`,
//! OpenAI-compatible `/v1/embeddings`) to deloop-index's synchronous
//! [`Embedder`] trait.
//!
//! The adapter owns a small current-thread tokio runtime. Called from plain
//! synchronous code it blocks on that runtime; called from inside an async
//! context (where blocking on a runtime would panic or stall the executor)
//! it runs the call on a short-lived scoped OS thread instead, so it is safe
//! everywhere.

use deloop_index::{EmbedError, Embedder};
use deloop_llm::EmbeddingClient;

/// A remote embedder usable wherever deloop-index wants an [`Embedder`].
#[derive(Debug)]
pub struct RemoteEmbedder {
    client: EmbeddingClient,
    /// Always `Some` until dropped (see the `Drop` impl).
    runtime: Option<tokio::runtime::Runtime>,
    id: String,
    dim: usize,
}

impl RemoteEmbedder {
    /// Wraps `client`, learning the vector length from one probe call
    /// (`dim: None`) or trusting `dim` when the caller knows it (e.g. from
    /// the index's recorded embedder).
    pub fn new(client: EmbeddingClient, dim: Option<usize>) -> Result<Self, EmbedError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| EmbedError::Unavailable(format!("cannot start a runtime: {e}")))?;
        let id = client.id();
        let mut this = RemoteEmbedder {
            client,
            runtime: Some(runtime),
            id,
            dim: dim.unwrap_or(0),
        };
        if dim.is_none() {
            let probe = this.run(&["dimension probe"])?;
            this.dim = probe.first().map(Vec::len).unwrap_or(0);
            if this.dim == 0 {
                return Err(EmbedError::Unavailable(format!(
                    "{} returned an empty vector",
                    this.id
                )));
            }
        }
        Ok(this)
    }

    fn run(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let owned: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
        let Some(runtime) = &self.runtime else {
            return Err(EmbedError::Unavailable("the embedder was shut down".into()));
        };
        let call = || runtime.block_on(self.client.embed(&owned));
        let result = if tokio::runtime::Handle::try_current().is_ok() {
            std::thread::scope(|s| s.spawn(call).join())
                .map_err(|_| EmbedError::Failed("the embedding thread panicked".into()))?
        } else {
            call()
        };
        result.map_err(|e| EmbedError::Failed(e.to_string()))
    }
}

impl Embedder for RemoteEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let vectors = self.run(texts)?;
        if vectors.len() != texts.len() {
            return Err(EmbedError::Failed(format!(
                "{} returned {} vectors for {} texts",
                self.id,
                vectors.len(),
                texts.len()
            )));
        }
        if let Some(v) = vectors.iter().find(|v| v.len() != self.dim) {
            return Err(EmbedError::Failed(format!(
                "{} returned a vector of {} dimensions, expected {}",
                self.id,
                v.len(),
                self.dim
            )));
        }
        Ok(vectors)
    }
}

impl Drop for RemoteEmbedder {
    /// Shuts the runtime down without blocking: a plain drop of a runtime
    /// panics inside an async context, where a server may well drop the
    /// oracle that owns this embedder.
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
