//! `deloop check`.

use crate::exit::{not_implemented, Exit};

/// Flags of `deloop check`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `deloop check`.
pub fn run(_args: Args) -> anyhow::Result<Exit> {
    Err(not_implemented("check", 4))
}
