//! `deloop rescue`.

use crate::exit::{not_implemented, Exit};

/// Flags of `deloop rescue`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `deloop rescue`.
pub fn run(_args: Args) -> anyhow::Result<Exit> {
    Err(not_implemented("rescue", 3))
}
