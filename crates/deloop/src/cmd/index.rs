//! `deloop index`.

use crate::exit::{not_implemented, Exit};

/// Flags of `deloop index`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `deloop index`.
pub fn run(_args: Args) -> anyhow::Result<Exit> {
    Err(not_implemented("index", 5))
}
