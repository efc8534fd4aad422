//! `deloop check`: replay an agent transcript through the tool-call loop
//! guard and report a verdict per call.
//!
//! Transcript formats: see `deloop_core::loops::transcript` (events JSON
//! lines, OpenAI chat messages, Anthropic messages; auto-detected). The
//! flow itself (parsing, replay) is `deloop_check::run`, shared with the
//! server; the output is one of deloop-render's sinks. This command parses
//! flags, opens the input, wires the two and maps the outcome to an exit
//! code.
//!
//! Bad input (malformed JSON, missing fields, a result for an id no earlier
//! call is waiting on) is an error naming the line (events) or the message
//! (openai/anthropic), exit code 2; what was already settled has been
//! written by then.
//!
//! Tolerant rule (the replay's): a call still waiting for its result
//! [`DEFAULT_MAX_OPEN`] calls later is settled as it stands, and its late
//! result is ignored with a note on standard error instead of being
//! reported as an unknown id.

use std::io::Read;
use std::path::PathBuf;

use deloop_check::{CheckError, CheckOptions};
use deloop_core::loops::replay::DEFAULT_MAX_OPEN;
use deloop_core::loops::transcript::TranscriptFormat;
use deloop_core::loops::{LoopConfig, Profile};
use deloop_render::check::{HumanTimeline, JsonLines};

use crate::exit::{BadInput, Exit};

/// Transcript format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Detect from the content.
    Auto,
    /// deloop's events format (JSON lines).
    Events,
    /// OpenAI chat messages with `tool_calls`.
    Openai,
    /// Anthropic messages with `tool_use` / `tool_result` blocks.
    Anthropic,
}

impl From<Format> for TranscriptFormat {
    fn from(f: Format) -> TranscriptFormat {
        match f {
            Format::Auto => TranscriptFormat::Auto,
            Format::Events => TranscriptFormat::Events,
            Format::Openai => TranscriptFormat::OpenAi,
            Format::Anthropic => TranscriptFormat::Anthropic,
        }
    }
}

/// `--profile`: the names, help lines and parser all come from
/// [`Profile::ALL`], so a new profile needs no change here.
fn profile_parser() -> impl clap::builder::TypedValueParser<Value = Profile> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(Profile::ALL.map(|p| PossibleValue::new(p.name()).help(p.summary())))
        .try_map(|name| name.parse::<Profile>())
}

/// Flags of `deloop check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Transcript file; `-` or absent reads standard input.
    pub file: Option<PathBuf>,
    /// Transcript format.
    #[arg(long, value_enum, default_value = "auto")]
    pub format: Format,
    /// Detection profile (default: the config file's `profile`, else `default`).
    #[arg(long, value_parser = profile_parser())]
    pub profile: Option<Profile>,
    /// OpenClaw `tools.loopDetection` config (JSON5 or JSON), full config or bare block.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Machine output: one JSON line per call, then a summary line.
    #[arg(long)]
    pub json: bool,
    /// Replace invalid UTF-8 with U+FFFD instead of failing.
    #[arg(long)]
    pub lossy: bool,
}

/// Runs `deloop check`.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let (config, adjustments) = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| BadInput(format!("cannot read config {}: {e}", path.display())))?;
            LoopConfig::from_json5(&text)
                .map_err(|e| BadInput(format!("config {}: {e}", path.display())))?
        }
        None => (LoopConfig::default(), Vec::new()),
    };
    for a in &adjustments {
        eprintln!(
            "deloop: note: config {}: {} adjusted to {} ({})",
            a.key, a.from, a.to, a.reason
        );
    }
    let profile: Profile = match args.profile {
        Some(p) => p,
        None => config.base().profile.unwrap_or_default(),
    };
    let options = CheckOptions {
        format: args.format.into(),
        profile,
        config: Some(config),
        lossy: args.lossy,
    };
    let input = open_input(args.file.as_deref())?;
    let stdout = std::io::stdout();
    let out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let ran = if args.json {
        deloop_check::run(input, &options, &mut JsonLines::new(out))
    } else {
        deloop_check::run(input, &options, &mut HumanTimeline::new(out))
    };
    let summary = match ran {
        Ok(s) => s,
        Err(e @ CheckError::Input { .. }) => return Err(BadInput(e.to_string()).into()),
        Err(CheckError::Io(e)) => return Err(e.into()),
    };
    if summary.ignored_results > 0 {
        eprintln!(
            "deloop: note: {} calls were still waiting for their result {} calls later; \
             their verdicts were settled as they stood and {} late results were ignored",
            summary.forgotten_calls, DEFAULT_MAX_OPEN, summary.ignored_results
        );
    }
    Ok(if summary.criticals > 0 {
        Exit::LoopFound
    } else {
        Exit::Ok
    })
}

/// Opens the file, or standard input for `None` / `-`.
fn open_input(path: Option<&std::path::Path>) -> anyhow::Result<Box<dyn Read>> {
    Ok(match path {
        Some(p) if p.as_os_str() != "-" => {
            let f = std::fs::File::open(p)
                .map_err(|e| BadInput(format!("cannot read {}: {e}", p.display())))?;
            Box::new(f)
        }
        _ => Box::new(std::io::stdin().lock()),
    })
}
