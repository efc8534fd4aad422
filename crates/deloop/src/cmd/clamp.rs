//! `deloop clamp`.

use crate::exit::{not_implemented, Exit};

/// Flags of `deloop clamp`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `deloop clamp`.
pub fn run(_args: Args) -> anyhow::Result<Exit> {
    Err(not_implemented("clamp", 2))
}
