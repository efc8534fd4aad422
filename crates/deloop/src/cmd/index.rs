//! `deloop index`: build or update the index (an SQLite file or a PostgreSQL
//! database) from markdown/text files or a BEIR `corpus.jsonl`. See
//! docs/retrieval.md and docs/deployment.md.

use std::path::{Path, PathBuf};
use std::time::Duration;

use deloop_index::{Embedder, Index, IndexOptions, SharedEmbedder, Stemmer};
use deloop_oracle::embedders;

use crate::exit::{BadInput, Exit};
use crate::render::search::{index_stats, IndexProgress};

/// Flags of `deloop index`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files or directories to index (`.md`, `.markdown`, `.txt` when
    /// walking directories; hidden entries, `target` and `node_modules` are
    /// skipped). With `--format beir`: one `corpus.jsonl` file.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// The index: a file, created with its parent directory when missing,
    /// or a PostgreSQL database with pgvector, `postgres://USER@HOST:PORT/DB`
    /// (password in the URL or DELOOP_DB_PASSWORD; deloop creates its
    /// tables). Default: `DELOOP_DB`, the config file's `[index] db`, else
    /// `.deloop/index.db`.
    #[arg(long, value_name = "PATH|URL", env = "DELOOP_DB")]
    pub db: Option<PathBuf>,
    /// Input format: `files` (markdown/text) or `beir` (a BEIR corpus.jsonl
    /// with `_id`, `title`, `text`).
    #[arg(long, default_value = "files", value_parser = ["files", "beir"])]
    pub format: String,
    /// Embedder for the vectors: `auto` (the index's own; for a new index
    /// `minilm-onnx` when it can be had, else `minilm`, else none),
    /// `minilm` (candle, f32), `minilm-onnx` (ONNX Runtime), `gemini` or
    /// `openai` (the remote embeddings of the configured LLM provider,
    /// docs/llm.md: `embedding_model`, `GEMINI_API_KEY`, `OPENAI_BASE_URL`,
    /// `OPENAI_API_KEY`) or `none` (lexical only). Missing model files are
    /// fetched into the cache.
    #[arg(long, default_value = "auto", env = "DELOOP_EMBEDDER",
          value_parser = ["auto", "minilm", "minilm-onnx", "gemini", "openai", "none"])]
    pub embedder: String,
    /// Directory with the MiniLM files (model.safetensors, config.json,
    /// tokenizer.json); default: deloop's cache, ~/.cache/deloop/models,
    /// fetched there on first use.
    #[arg(long, value_name = "DIR", env = "DELOOP_MINILM_DIR")]
    pub minilm_dir: Option<PathBuf>,
    /// Directory with libonnxruntime.so and all-MiniLM-L6-v2-int8.onnx for
    /// `--embedder minilm-onnx`; default: ~/.cache/deloop/onnx when
    /// scripts/setup-onnx.sh made it, else the fetched files in the cache.
    #[arg(long, value_name = "DIR", env = "DELOOP_ONNX_DIR")]
    pub onnx_dir: Option<PathBuf>,
    /// Delete the index (the file, or deloop's tables in PostgreSQL) and
    /// build it anew (needed to switch embedder or stemmer; also drops the
    /// HyDE cache).
    #[arg(long)]
    pub reindex: bool,
    /// Lexical tokenizer when the index is created: `porter` (English
    /// stemming, accent-insensitive) or `none` (accent-insensitive only).
    #[arg(long, default_value = "porter", value_parser = ["porter", "none"])]
    pub stemmer: String,
    /// Seconds between progress lines when stderr is not a terminal (a pipe
    /// or a log file); `0` logs every item. Default: the config file's
    /// `[index] progress_interval`, else 10.
    #[arg(long, value_name = "SECONDS", env = "DELOOP_PROGRESS_INTERVAL")]
    pub progress_interval: Option<f64>,
    /// No progress bar, no progress lines and no warnings on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Print the statistics as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// The index path: the flag (or `DELOOP_DB`), else the config file's
/// `[index] db`, else `.deloop/index.db`: the same resolution as `deloop ask`.
/// The index location (`flag`, `DELOOP_DB`, `[index] db`, the default)
/// and the PostgreSQL deadline (`[index] db_timeout_ms`).
pub(crate) fn db_location(flag: Option<&Path>) -> anyhow::Result<(PathBuf, Duration)> {
    let config = deloop_config::Config::load(None)?;
    Ok((config.db_path(flag).path, config.index.db_timeout()?))
}

/// The embedder `name` asks for a new index ([`embedders::for_new_index`]),
/// or none (lexical only) with a warning that says why and how to get the
/// model files.
fn new_index_embedder(
    config: &deloop_config::Config,
    name: &str,
    onnx_dir: Option<&Path>,
    quiet: bool,
) -> anyhow::Result<Option<SharedEmbedder>> {
    match embedders::for_new_index(config, name, None, onnx_dir)
        .map_err(crate::exit::oracle_error)?
    {
        Ok(m) => Ok(Some(m)),
        Err(why) => {
            if !quiet && name != "none" {
                eprintln!(
                    "deloop: warning: {why}\ndeloop: indexing without vectors \
                     (lexical search only)"
                );
            }
            Ok(None)
        }
    }
}

/// Runs `deloop index`.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let (db, db_timeout) = db_location(args.db.as_deref())?;
    let beir = args.format == "beir";
    if beir && args.paths.len() != 1 {
        return Err(BadInput("--format beir takes exactly one corpus.jsonl file".into()).into());
    }
    if args.reindex {
        Index::remove_within(&db, db_timeout).map_err(map_index_error)?;
    }
    let options = IndexOptions {
        stemmer: if args.stemmer == "none" {
            Stemmer::None
        } else {
            Stemmer::Porter
        },
        ..Default::default()
    };
    let mut index = Index::open_with_within(&db, options, db_timeout).map_err(map_index_error)?;

    let recorded = index
        .embedder_info()?
        .filter(|_| index.summary().is_ok_and(|s| s.chunks > 0));
    let mut config = deloop_config::Config::load(None)?;
    if let Some(dir) = &args.minilm_dir {
        config.index.minilm_dir = Some(dir.clone());
    }
    let onnx_dir = args.onnx_dir.as_deref();
    let embedder: Option<SharedEmbedder> = match (args.embedder.as_str(), recorded) {
        ("auto", Some(info)) if info.is_none() => None,
        // An index keeps the embedder it was built with.
        ("auto", Some(info)) => Some(
            embedders::for_recorded(&config, &info.id, info.dim, onnx_dir).map_err(|why| {
                BadInput(format!(
                    "{} was built with embedder `{}`: {why}; fix that, or rebuild the \
                     index with --reindex (and --embedder minilm-onnx, minilm, gemini, \
                     openai or none)",
                    index.location(),
                    info.id
                ))
            })?,
        ),
        (name, _) => new_index_embedder(&config, name, onnx_dir, args.quiet)?,
    };
    let embedder_ref = embedder.as_deref().map(|m| m as &dyn Embedder);

    let interval = match args.progress_interval {
        Some(secs) => deloop_config::progress_interval_from(secs).ok_or_else(|| {
            BadInput(format!(
                "--progress-interval {secs}: expected seconds from 0 to 86400"
            ))
        })?,
        None => deloop_config::Config::load(None)?
            .index
            .progress_interval()?,
    };
    let bar = IndexProgress::new(args.quiet, interval);
    let mut report = |p| bar.update(p);
    let stats = if beir {
        index.index_beir(&args.paths[0], embedder_ref, &mut report)
    } else {
        index.index_paths(&args.paths, embedder_ref, &mut report)
    };
    bar.finish();
    let stats = stats.map_err(map_index_error)?;
    println!("{}", index_stats(&stats, &index.location(), args.json));
    Ok(Exit::Ok)
}

/// Index errors the user must fix map to exit code 2.
pub(crate) fn map_index_error(e: deloop_index::Error) -> anyhow::Error {
    match e {
        deloop_index::Error::BadInput(_)
        | deloop_index::Error::NoIndex { .. }
        | deloop_index::Error::EmbedderMismatch { .. }
        | deloop_index::Error::Schema(_) => BadInput(e.to_string()).into(),
        other => other.into(),
    }
}
