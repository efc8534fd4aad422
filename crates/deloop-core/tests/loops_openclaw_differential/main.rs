//! Differential test of the `openclaw` profile against the real thing:
//! random transcripts (this file's own generator, deterministic seeds) are
//! replayed through deloop and through OpenClaw 2026.9.6's own detector
//! (`scripts/openclaw-oracle.mjs`, run by Node), and the verdicts (level,
//! detector, count) must agree on every call.
//!
//! The generator covers run ids (with blanks to trim, and calls without a
//! run among scoped ones), two agents, pipelined results (late, out of
//! order, or so late that their call has left the window), missing results,
//! errors, unknown tools, compactions, user turns, reused and absent call
//! ids, and long runs, with loops of every detector mixed into noise.
//!
//! OpenClaw is installed by `bash scripts/setup-openclaw.sh` (npm, outside
//! the checkout). When it (or Node) is absent the test prints one line
//! saying what it skipped and passes, unless `CI=true` or
//! `DELOOP_REQUIRE_REAL=1`, where absence is a failure.
//!
//! Knobs: `DELOOP_OPENCLAW_SCENARIOS` (default 1000),
//! `DELOOP_OPENCLAW_SEED` (default 1; scenario `i` uses seed `SEED + i`),
//! `DELOOP_OPENCLAW_DIR` (the installed `node_modules/openclaw`).

mod differential;
mod generator;
#[path = "../loops_support/mod.rs"]
mod loops_support;
mod scenario;
mod sides;
