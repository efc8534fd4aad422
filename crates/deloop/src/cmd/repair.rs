//! `deloop repair`.

use crate::exit::{not_implemented, Exit};

/// Flags of `deloop repair`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `deloop repair`.
pub fn run(_args: Args) -> anyhow::Result<Exit> {
    Err(not_implemented("repair", 3))
}
