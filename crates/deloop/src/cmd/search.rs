//! `deloop search`.

use crate::exit::{not_implemented, Exit};

/// Flags of `deloop search`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `deloop search`.
pub fn run(_args: Args) -> anyhow::Result<Exit> {
    Err(not_implemented("search", 5))
}
