//! `deloop search`: query the index (hybrid, lexical or vector), one query
//! or a batch of BEIR queries. See docs/retrieval.md.

use std::io::BufRead;
use std::path::PathBuf;
use std::time::Instant;

use deloop_index::{Index, Retrieval, SearchOutcome};
use deloop_llm::LlmClient;
use deloop_oracle::index_search::{query_embedder, BlockingHyde, IndexSearch};

use crate::cmd::index::{db_location, map_index_error};
use crate::exit::{BadInput, Exit};
use crate::render::search::{batch_human, batch_line, fallback_note, outcome_human, outcome_json};

/// Flags of `deloop search`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The query (`-` reads it from standard input). Free text: FTS syntax
    /// characters are treated as separators.
    #[arg(
        value_name = "QUERY",
        required_unless_present = "queries",
        conflicts_with = "queries"
    )]
    pub query: Option<String>,
    /// Batch mode: a JSONL file of `{"_id", "text"}` queries (BEIR
    /// queries.jsonl); prints one line per query.
    #[arg(long, value_name = "FILE")]
    pub queries: Option<PathBuf>,
    /// The index: a file, or a PostgreSQL database
    /// `postgres://USER@HOST:PORT/DB` (password in the URL or
    /// DELOOP_DB_PASSWORD). Default: `DELOOP_DB`, the config file's
    /// `[index] db`, else `.deloop/index.db`.
    #[arg(long, value_name = "PATH|URL", env = "DELOOP_DB")]
    pub db: Option<PathBuf>,
    /// Number of hits.
    #[arg(long, default_value_t = 10)]
    pub k: usize,
    /// `hybrid` (BM25 and vectors fused by reciprocal rank fusion),
    /// `lexical` (BM25) or `vector` (cosine). Without vectors, hybrid and
    /// vector fall back to lexical and say so.
    #[arg(long, default_value = "hybrid", value_parser = ["hybrid", "lexical", "vector"])]
    pub retrieval: String,
    /// The reciprocal-rank-fusion constant for hybrid search.
    #[arg(long, default_value_t = deloop_index::DEFAULT_RRF_K, value_name = "K")]
    pub rrf_k: f32,
    /// Add a HyDE passage from the LLM to the query (needs an LLM); how it
    /// joins retrieval is `[oracle] hyde_query_vector` (`fused` by default).
    #[arg(long)]
    pub hyde: bool,
    /// Directory with the MiniLM files (default: deloop's cache,
    /// ~/.cache/deloop/models, fetched there on first use).
    #[arg(long, value_name = "DIR", env = "DELOOP_MINILM_DIR")]
    pub minilm_dir: Option<PathBuf>,
    /// Directory with libonnxruntime.so and the int8 model, for an index
    /// built with `--embedder minilm-onnx` (default: ~/.cache/deloop/onnx
    /// when scripts/setup-onnx.sh made it, else the fetched files).
    #[arg(long, value_name = "DIR", env = "DELOOP_ONNX_DIR")]
    pub onnx_dir: Option<PathBuf>,
    /// Machine output: one JSON object (or one line per query in batch mode,
    /// `{"query_id", "hits": [{"id", "score"}], "took_ms"}`; `id` is the BEIR
    /// doc id, else the chunk id).
    #[arg(long)]
    pub json: bool,
}

/// Runs `deloop search`.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    // HyDE (docs/oracle.md): the LLM from the config file / environment.
    let hyde = if args.hyde { Some(hyde()?) } else { None };
    let mode = match args.retrieval.as_str() {
        "lexical" => Retrieval::Lexical,
        "vector" => Retrieval::Vector,
        _ => Retrieval::Hybrid,
    };
    let (db, db_timeout) = db_location(args.db.as_deref())?;
    let index = Index::open_existing_within(&db, db_timeout).map_err(map_index_error)?;
    let mut config = deloop_config::Config::load(None)?;
    if let Some(dir) = &args.minilm_dir {
        config.index.minilm_dir = Some(dir.clone());
    }
    let embedder = if mode == Retrieval::Lexical {
        deloop_oracle::index_search::QueryEmbedder::default()
    } else {
        query_embedder(&config, &index, args.onnx_dir.as_deref())
    };
    let searches = IndexSearch {
        index: &index,
        embedder,
        hyde,
        mode,
        k: args.k,
        rrf_k: args.rrf_k,
    };
    let search = |text: String| -> anyhow::Result<SearchOutcome> {
        let found = searches.search(&text).map_err(map_index_error)?;
        if let Some(reason) = found.hyde.and_then(|h| h.fallback_reason) {
            eprintln!("deloop search: HyDE fell back to the plain query: {reason}");
        }
        Ok(found.outcome)
    };

    if let Some(file) = &args.queries {
        let reader = std::fs::File::open(file)
            .map(std::io::BufReader::new)
            .map_err(|e| BadInput(format!("cannot read {}: {e}", file.display())))?;
        let mut noted = false;
        for (n, line) in reader.lines().enumerate() {
            let line =
                line.map_err(|e| BadInput(format!("{} line {}: {e}", file.display(), n + 1)))?;
            if line.trim().is_empty() {
                continue;
            }
            let (id, text) = parse_query_line(&line)
                .map_err(|e| BadInput(format!("{} line {}: {e}", file.display(), n + 1)))?;
            let started = Instant::now();
            let outcome = search(text)?;
            let took_ms = started.elapsed().as_secs_f64() * 1000.0;
            if !noted {
                if let Some(note) = fallback_note(mode, &outcome) {
                    eprintln!("{note}");
                }
                noted = true;
            }
            if args.json {
                println!("{}", batch_line(&id, &outcome, took_ms));
            } else {
                println!("{}", batch_human(&id, &outcome));
            }
        }
        return Ok(Exit::Ok);
    }

    let query = match args.query.as_deref() {
        Some("-") | None => crate::input::read_text(None, false)?,
        Some(q) => q.to_string(),
    };
    let query = query.trim().to_string();
    if query.is_empty() {
        return Err(BadInput("the query is empty".into()).into());
    }
    let outcome = search(query.clone())?;
    if let Some(note) = fallback_note(mode, &outcome) {
        eprintln!("{note}");
    }
    if args.json {
        println!("{}", outcome_json(&query, mode, &outcome));
    } else {
        println!("{}", outcome_human(&outcome));
    }
    Ok(Exit::Ok)
}

/// One BEIR query line: `_id` (string or number) and `text`.
fn parse_query_line(line: &str) -> Result<(String, String), String> {
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not a JSON object: {e}"))?;
    let id = match v.get("_id") {
        Some(serde_json::Value::String(s)) if !s.is_empty() => s.clone(),
        Some(serde_json::Value::Number(n)) => n.to_string(),
        _ => return Err("missing `_id`".into()),
    };
    let text = v
        .get("text")
        .and_then(|t| t.as_str())
        .ok_or("missing `text` (a string)")?;
    Ok((id, text.to_string()))
}

/// HyDE for `deloop search --hyde`: the LLM of the config file
/// (`$DELOOP_CONFIG` or `./deloop.toml`) and the environment, with their
/// HyDE settings; an error when no LLM is configured.
fn hyde() -> anyhow::Result<BlockingHyde> {
    let config = deloop_config::Config::load(None)?;
    let client = LlmClient::from_config(&config.llm)
        .map_err(|e| BadInput(e.to_string()))?
        .ok_or_else(|| {
            BadInput(
                "--hyde needs an LLM: set GEMINI_API_KEY, or OPENAI_BASE_URL and DELOOP_MODEL \
                 (see docs/oracle.md)"
                    .into(),
            )
        })?;
    Ok(BlockingHyde::new(crate::cmd::ask::runtime()?, client, &config).map_err(BadInput)?)
}
