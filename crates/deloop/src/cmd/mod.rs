//! One module per subcommand: its flags (`Args`) and its `run` function,
//! which wires input, library calls and rendering.

pub mod ask;
pub mod check;
pub mod clamp;
pub mod index;
pub mod proxy;
pub mod repair;
pub mod rescue;
pub mod search;
pub mod serve;
