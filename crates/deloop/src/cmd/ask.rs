//! `deloop ask`.

use crate::exit::{not_implemented, Exit};

/// Flags of `deloop ask`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `deloop ask`.
pub fn run(_args: Args) -> anyhow::Result<Exit> {
    Err(not_implemented("ask", 5))
}
