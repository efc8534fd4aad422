//! `deloop clamp`: cut periodic loops (repeated words or substrings) out of
//! LLM text, in batch or while the text streams in.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use deloop_core::repetition::{
    clamp, ClampConfig, Forward, GuardedStream, InvalidUtf8, SettingsError,
};
use deloop_render as render;

use crate::exit::{BadInput, Exit};
use crate::input;

/// Flags of `deloop clamp`.
///
/// Prints the guarded text: the healthy prefix, one copy of the repeated
/// unit and the marker ` […]` when a loop was cut, the input unchanged
/// otherwise. Exit codes: 0 nothing cut, 3 a loop was cut, 2 bad input or
/// usage (invalid UTF-8 without --lossy, unreadable or invalid --config),
/// 1 I/O failure while reading or writing.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The text to read; `-` or nothing reads standard input.
    pub file: Option<PathBuf>,
    /// Print one JSON object: `text`, `clamped`, the first report's fields
    /// (`detector`, `period`, `unit`, `start`, `keep_bytes`,
    /// `removed_bytes`) and `reports` (every guard that fired).
    #[arg(long, conflicts_with = "stream")]
    pub json: bool,
    /// Copy the input to standard output as it arrives (flushed per chunk)
    /// and stop reading where the batch guard would first fire: the output
    /// ends at the cut plus the marker. Bytes of the loop written in
    /// earlier chunks cannot be taken back (use --exact); the cut offset
    /// goes to stderr.
    #[arg(long)]
    pub stream: bool,
    /// With --stream: hold back the bytes a later cut could still remove,
    /// so the output is exactly the batch guard's output on what was read
    /// (the healthy prefix, one copy of the unit, the marker). Output then
    /// trails the input by the guards' look-back: a few hundred words, or
    /// an exempt repetition (table, code) still going on.
    #[arg(long, requires = "stream")]
    pub exact: bool,
    /// The seed's exact rules (`clampRepetition` + `clampSubstringRepetition`):
    /// no long periods, no protections for tables/code/rules, tokens
    /// re-joined with spaces, substring cut before the loop and trimmed.
    #[arg(long)]
    pub seed_compat: bool,
    /// Replace invalid UTF-8 with U+FFFD instead of refusing the input
    /// (with --stream invalid bytes pass through unchanged and count as
    /// U+FFFD for detection).
    #[arg(long)]
    pub lossy: bool,
    /// A TOML (or `.json`) file with guard settings: `[words]`,
    /// `[substring]`, `[healthy]` tables (see docs/repetition.md). Flags
    /// below override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Largest short word period (words.max_period, at most 16).
    #[arg(long, value_name = "N")]
    pub max_period: Option<usize>,
    /// Minimum run of repeated words (words.min_run).
    #[arg(long, value_name = "N")]
    pub min_run: Option<usize>,
    /// Largest long word period, 0 turns long periods off
    /// (words.long_max_period).
    #[arg(long, value_name = "N")]
    pub long_max_period: Option<usize>,
    /// Copies of a short unit needed by the substring guard
    /// (substring.min_copies).
    #[arg(long, value_name = "N")]
    pub min_copies: Option<usize>,
    /// Text appended where a loop was cut (both guards).
    #[arg(long, value_name = "TEXT")]
    pub marker: Option<String>,
    /// Turn off the false-positive protections (healthy.enabled = false).
    #[arg(long)]
    pub no_protections: bool,
}

/// Runs `deloop clamp`.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let config = build_config(&args)?;
    if args.stream {
        return run_stream(&args, config);
    }
    let text = input::read_text(args.file.as_deref(), args.lossy)?;
    let out = clamp(&text, &config);
    let clamped = out.is_clamped();
    let mut stdout = std::io::stdout().lock();
    if args.json {
        stdout.write_all(render::clamp::json(&out).as_bytes())?;
    } else {
        stdout.write_all(render::clamp::text(&out).as_bytes())?;
        if let Some(note) = render::clamp::note(&out) {
            eprint!("{note}");
        }
    }
    stdout.flush()?;
    Ok(if clamped { Exit::LoopFound } else { Exit::Ok })
}

/// The guard settings: defaults or the seed's, then `--config`, then flags.
fn build_config(args: &Args) -> anyhow::Result<ClampConfig> {
    let mut config = match &args.config {
        Some(path) => load_config(path)?,
        None if args.seed_compat => ClampConfig::seed_compat(),
        None => ClampConfig::default(),
    };
    if args.seed_compat && args.config.is_some() {
        return Err(BadInput(
            "--seed-compat and --config both set the guard rules; use one of them".into(),
        )
        .into());
    }
    if let Some(n) = args.max_period {
        config.words.max_period = n;
    }
    if let Some(n) = args.min_run {
        config.words.min_run = n;
    }
    if let Some(n) = args.long_max_period {
        config.words.long_max_period = n;
    }
    if let Some(n) = args.min_copies {
        config.substring.min_copies = n;
    }
    if let Some(m) = &args.marker {
        config.words.marker = m.clone();
        config.substring.marker = m.clone();
    }
    if args.no_protections {
        config.healthy.enabled = false;
    }
    config
        .check_bounds()
        .map_err(|e| BadInput(SettingsError::from(e).to_string()))?;
    Ok(config)
}

fn load_config(path: &Path) -> anyhow::Result<ClampConfig> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| BadInput(format!("cannot read config {}: {e}", path.display())))?;
    let parsed = if path.extension().is_some_and(|e| e == "json") {
        serde_json::from_str(&text).map_err(|e| e.to_string())
    } else {
        toml::from_str(&text).map_err(|e| e.to_string())
    };
    parsed.map_err(|e| {
        BadInput(format!(
            "invalid guard config {}: {e} (keys are listed in docs/repetition.md)",
            path.display()
        ))
        .into()
    })
}

fn not_utf8(e: InvalidUtf8) -> anyhow::Error {
    BadInput(format!(
        "input is not valid UTF-8 (first invalid byte at offset {}); \
         fix the encoding or pass --lossy to let invalid bytes through",
        e.offset
    ))
    .into()
}

/// `--stream`: the input copied through a [`GuardedStream`], flushed per
/// chunk, up to the cut and its marker.
fn run_stream(args: &Args, config: ClampConfig) -> anyhow::Result<Exit> {
    let mut reader: Box<dyn Read> = match args.file.as_deref() {
        None => Box::new(std::io::stdin().lock()),
        Some(p) if p.as_os_str() == "-" => Box::new(std::io::stdin().lock()),
        Some(p) => Box::new(
            File::open(p).map_err(|e| BadInput(format!("cannot read {}: {e}", p.display())))?,
        ),
    };
    let mut stdout = std::io::stdout().lock();
    let mut stream = GuardedStream::new(config)
        .exact(args.exact)
        .lossy(args.lossy);
    let mut buf = vec![0u8; 8192];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(anyhow::Error::new(e).context("reading the stream")),
        };
        let step = stream.push_bytes(&buf[..n]).map_err(not_utf8)?;
        if let Some(exit) = forward(&mut stdout, &step)? {
            return Ok(exit);
        }
    }
    let step = stream.finish().map_err(not_utf8)?;
    Ok(forward(&mut stdout, &step)?.unwrap_or(Exit::Ok))
}

/// Writes what the stream lets through; at the cut, the marker and the
/// note on stderr (`Some(exit)`: stop).
fn forward(out: &mut impl Write, step: &Forward<'_>) -> anyhow::Result<Option<Exit>> {
    if !step.bytes.is_empty() {
        out.write_all(step.bytes)?;
    }
    let Some(cut) = step.cut else {
        if !step.bytes.is_empty() {
            out.flush()?;
        }
        return Ok(None);
    };
    out.write_all(render::clamp::stream_tail(&cut.cut).as_bytes())?;
    out.flush()?;
    eprint!(
        "{}",
        render::clamp::stream_note(&cut.cut, cut.forwarded_before)
    );
    Ok(Some(Exit::LoopFound))
}
