//! `deloop`: the command line. It parses flags, reads input, calls the
//! library crates and hands their typed results to [`render`]. Nothing else
//! lives here.

mod cmd;
mod exit;
mod input;
mod render;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

use crate::exit::Exit;

/// Make LLM answers and agents loop-proof.
///
/// Exit codes: 0 success (nothing to report), 1 runtime failure or nothing
/// could be rescued, 2 usage error or bad input, 3 a guard fired (a loop
/// was cut, or a critical tool-call loop was found).
#[derive(Debug, Parser)]
#[command(name = "deloop", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Cut periodic loops (repeated words or substrings) out of LLM text.
    Clamp(cmd::clamp::Args),
    /// Rescue the value of one key from broken JSON model output.
    Rescue(cmd::rescue::Args),
    /// Repair broken JSON model output into one valid JSON document.
    Repair(cmd::repair::Args),
    /// Replay an agent transcript and report tool-call loops.
    Check(cmd::check::Args),
    /// Index markdown and text files (or a BEIR corpus) for the oracle.
    Index(cmd::index::Args),
    /// Search the index (hybrid, lexical or vector retrieval).
    Search(cmd::search::Args),
    /// Ask the library oracle a question about the indexed docs.
    Ask(cmd::ask::Args),
    /// Serve deloop over HTTP: the guards, live-agent sessions, MCP at /mcp, metrics.
    Serve(cmd::serve::Args),
    /// Serve deloop's guards as MCP tools over stdio (for agents' MCP configs).
    Mcp(cmd::serve::McpArgs),
    /// Guard an OpenAI- or Anthropic-compatible server: cut looping streams, repair JSON replies.
    Proxy(cmd::proxy::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The server sets up its own logging once its config (log format) is read.
    if !matches!(
        cli.command,
        Command::Serve(_) | Command::Mcp(_) | Command::Proxy(_)
    ) {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_env("DELOOP_LOG"))
            .with_writer(std::io::stderr)
            .init();
    }
    render::fetch::install();
    let outcome = match cli.command {
        Command::Clamp(args) => cmd::clamp::run(args),
        Command::Rescue(args) => cmd::rescue::run(args),
        Command::Repair(args) => cmd::repair::run(args),
        Command::Check(args) => cmd::check::run(args),
        Command::Index(args) => cmd::index::run(args),
        Command::Search(args) => cmd::search::run(args),
        Command::Ask(args) => cmd::ask::run(args),
        Command::Serve(args) => cmd::serve::run(args),
        Command::Mcp(args) => cmd::serve::run_mcp(args),
        Command::Proxy(args) => cmd::proxy::run(args),
    };
    match outcome {
        Ok(exit) => exit.into(),
        Err(err) => {
            eprintln!("deloop: {err:#}");
            Exit::for_error(&err).into()
        }
    }
}
