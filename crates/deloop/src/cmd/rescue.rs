//! `deloop rescue`: the value of one key from broken JSON model output.

use std::io::Write;
use std::path::PathBuf;

use deloop_core::rescue::{rescue_with, RescueOptions};
use deloop_render as render;

use crate::exit::{BadInput, Exit};
use crate::input;

/// Flags of `deloop rescue`.
///
/// Prints the value of KEY: a string raw, any other value as compact JSON.
/// The key is found at any depth (shallowest first, then first in document
/// order); among several JSON values in the reply, the last complete one
/// that has the key wins. Exit codes: 0 rescued, 1 nothing rescued (no
/// JSON, or no such key), 2 bad input (invalid UTF-8 without --lossy, too
/// large, nested too deep).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The key whose value to rescue (e.g. `answer`).
    #[arg(long, short = 'k')]
    pub key: String,
    /// The model output to read; `-` or nothing reads standard input.
    pub file: Option<PathBuf>,
    /// Print `{"ok": bool, "value": ..., "repairs": [...]}` (plus `"error"`
    /// when nothing was rescued) instead of the bare value.
    #[arg(long)]
    pub json: bool,
    /// Replace invalid UTF-8 with U+FFFD instead of refusing the input.
    #[arg(long)]
    pub lossy: bool,
    /// Refuse inputs larger than this many bytes.
    #[arg(long, default_value_t = RescueOptions::default().max_input_bytes)]
    pub max_bytes: usize,
    /// Refuse JSON nested deeper than this many levels (the parser never
    /// recurses; the limit bounds the memory of the parsed value).
    #[arg(long, default_value_t = RescueOptions::default().max_depth)]
    pub max_depth: usize,
}

/// Runs `deloop rescue`.
pub fn run(args: Args) -> anyhow::Result<Exit> {
    let text = match input::read_text(args.file.as_deref(), args.lossy) {
        Ok(t) => t,
        Err(e) if args.json => {
            print_out(&render::rescue::report_json(
                None,
                &[],
                Some(&format!("{e:#}")),
            ))?;
            return Ok(Exit::for_error(&e));
        }
        Err(e) => return Err(e),
    };
    let opts = RescueOptions {
        max_input_bytes: args.max_bytes,
        max_depth: args.max_depth,
    };
    match rescue_with(&text, &args.key, &opts) {
        Ok(r) => {
            let out = if args.json {
                render::rescue::report_json(Some(&r.value), &r.repairs, None)
            } else {
                render::rescue::value_plain(&r.value)
            };
            print_out(&out)?;
            Ok(Exit::Ok)
        }
        Err(e) => {
            let bad = e.is_input_limit();
            if args.json {
                print_out(&render::rescue::report_json(
                    None,
                    &[],
                    Some(&e.to_string()),
                ))?;
                return Ok(if bad { Exit::Usage } else { Exit::Failure });
            }
            if bad {
                Err(BadInput(e.to_string()).into())
            } else {
                Err(anyhow::anyhow!(
                    "{e}; nothing rescued (check the key, or use `deloop repair` to see the JSON)"
                ))
            }
        }
    }
}

fn print_out(s: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(s.as_bytes())?;
    out.flush()?;
    Ok(())
}
