//! `deloop repair`: one valid JSON document from broken model output.

use std::io::Write;
use std::path::PathBuf;

use deloop_core::rescue::{repair_json_with, RescueOptions};
use deloop_render as render;

use crate::exit::{BadInput, Exit};
use crate::input;

/// Flags of `deloop repair`.
///
/// Prints one compact, valid JSON document recovered from the input (code
/// fences, prose, `<think>` blocks, inner quotes, truncation...); with
/// --json, the object `{"value": <the repaired JSON>, "repairs": [...]}`.
/// Exit codes: 0 repaired, 1 the input holds no JSON at all, 2 bad input
/// (invalid UTF-8 without --lossy, too large, nested too deep); on exit 1
/// and 2 nothing is printed on standard output, and the error goes to
/// standard error, with or without --json.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The model output to read; `-` or nothing reads standard input.
    pub file: Option<PathBuf>,
    /// Print `{"value": <the repaired JSON>, "repairs": [...]}` (the repairs
    /// applied, in snake case) instead of the bare document.
    #[arg(long)]
    pub json: bool,
    /// Replace invalid UTF-8 with U+FFFD instead of refusing the input.
    #[arg(long)]
    pub lossy: bool,
    /// Also list the repairs applied, on standard error.
    #[arg(long)]
    pub explain: bool,
    /// Refuse inputs larger than this many bytes.
    #[arg(long, default_value_t = RescueOptions::default().max_input_bytes)]
    pub max_bytes: usize,
    /// Refuse JSON nested deeper than this many levels (the parser never
    /// recurses; the limit bounds the memory of the parsed value).
    #[arg(long, default_value_t = RescueOptions::default().max_depth)]
    pub max_depth: usize,
}

/// Runs `deloop repair`.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let text = input::read_text(args.file.as_deref(), args.lossy)?;
    let opts = RescueOptions {
        max_input_bytes: args.max_bytes,
        max_depth: args.max_depth,
    };
    match repair_json_with(&text, &opts) {
        Ok(r) => {
            let mut out = std::io::stdout().lock();
            let printed = if args.json {
                // The compact text is valid JSON by construction; read back
                // (keys keep their order) to print it with its repairs.
                let value: serde_json::Value = serde_json::from_str(&r.json).map_err(|e| {
                    anyhow::anyhow!("internal error: repaired JSON does not parse: {e}")
                })?;
                render::rescue::repair_json(&value, &r.repairs)
            } else {
                render::rescue::document_text(&r.json)
            };
            out.write_all(printed.as_bytes())?;
            out.flush()?;
            if args.explain {
                eprint!("{}", render::rescue::repairs_line(&r.repairs));
            }
            Ok(Exit::Ok)
        }
        Err(e) if e.is_input_limit() => Err(BadInput(e.to_string()).into()),
        Err(e) => Err(anyhow::anyhow!(
            "{e}: the input holds no JSON value to repair (is this the model's reply?)"
        )),
    }
}
