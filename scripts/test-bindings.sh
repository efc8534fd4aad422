#!/usr/bin/env bash
# Builds the Python and Node packages and runs their own test suites
# against the built packages (pytest, node --test). Called by
# scripts/test.sh after the workspace's tests; needs what
# scripts/setup-bindings.sh installs (it runs it first; it is quick when
# everything is there).
#
# Both packages are built in the dev profile into the workspace's target
# folder (CARGO_TARGET_DIR, default ./target), where `cargo test
# --workspace` has already built the crates they share; the differential
# tests compare them with target/debug/deloop.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}

PY=$(bash scripts/setup-bindings.sh | sed -n 's/^bindings python: //p')
VENV_BIN=$(dirname "$PY")

# The bindings workspace: formatting and lints, like the main one.
(cd bindings && cargo fmt --all --check && cargo clippy --workspace --all-targets --locked -- -D warnings)
(cd bindings && cargo test --locked -p deloop-bindings)

# The CLI the differential tests compare against.
cargo build --locked -q -p deloop
export DELOOP_BIN=$CARGO_TARGET_DIR/debug/deloop

# Python: `pip install ./bindings/python`, maturin as the PEP 517 backend
# (already in the venv, so no build isolation), dev profile.
PATH="$VENV_BIN:$PATH" MATURIN_PEP517_ARGS="--profile dev" \
  "$PY" -m pip install --quiet --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps ./bindings/python
(cd bindings/python && "$PY" -m pytest -q -p no:cacheprovider tests)

# Node: `npm test` builds the addon (napi build, dev profile) and runs node --test.
(cd bindings/node && npm test --silent)
