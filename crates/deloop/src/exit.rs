//! Exit codes, documented in the README and in `deloop --help`.

use std::process::ExitCode;

/// How the process ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: success, nothing to report.
    Ok = 0,
    /// 1: a runtime failure (I/O, network, model) or nothing could be rescued.
    Failure = 1,
    /// 2: a usage error or bad input (clap also exits 2 on bad flags).
    Usage = 2,
    /// 3: a guard fired: a loop was cut or a critical tool-call loop found.
    LoopFound = 3,
}

impl Exit {
    /// The exit code for an error: [`BadInput`] and an invalid
    /// configuration ([`deloop_config::ConfigError`]) map to 2, anything
    /// else to 1.
    pub fn for_error(err: &anyhow::Error) -> Exit {
        if err.downcast_ref::<BadInput>().is_some()
            || err.downcast_ref::<deloop_config::ConfigError>().is_some()
        {
            Exit::Usage
        } else {
            Exit::Failure
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit as u8)
    }
}

/// Input the user must fix (bad UTF-8, malformed lines, invalid config):
/// reported with exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// An oracle error for the CLI: what the user must fix (the configuration,
/// the request) exits 2, a runtime failure 1.
pub fn oracle_error(e: deloop_oracle::OracleError) -> anyhow::Error {
    if e.is_usage() {
        BadInput(e.to_string()).into()
    } else {
        e.into()
    }
}
