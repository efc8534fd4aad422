#!/usr/bin/env bash
# False-positive rates of deloop's guards on real healthy text (issue 22 §5):
# prints the table of docs/false-positives.md, then every firing.
#
# Usage:
#   bash scripts/false-positive-rates.sh           # the table, then the first 5 firings per cell
#   bash scripts/false-positive-rates.sh --list    # every firing
#
# Reads ../shared/data (beside the checkout; DELOOP_SHARED_DIR overrides):
# real-llm-text, scifact and trajectories. A missing source prints "absent".
# The real-model generations and the repository's own files are in the
# checkout. Takes a few seconds after the build (release mode).
# Also installs one public chat data set from PyPI into the cache
# ($DELOOP_CACHE, else $XDG_CACHE_HOME/deloop, else ~/.cache/deloop):
# chitchat-dataset 0.9.0 (BYU PCC lab, 7,168 human conversations, MIT),
# fetched with `pip download --no-deps`, checked against its SHA-256, and
# its dataset.json unpacked; DELOOP_NO_CHITCHAT=1 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="$HOME/.cache/deloop"
[ -n "${DELOOP_CACHE:-}" ] || [ -z "${XDG_CACHE_HOME:-}" ] || cache="$XDG_CACHE_HOME/deloop"
[ -n "${DELOOP_CACHE:-}" ] || [ -n "${XDG_CACHE_HOME:-}" ] || cache="$HOME/.cache/deloop"
chitchat="$cache/chitchat-dataset-0.9.0"
wheel_sha=7bf89f36645e2d5ec87d53370c8e851b5a688479c7beb7079cb4c87fc5acea3e
if [ -z "${DELOOP_NO_CHITCHAT:-}" ] && [ ! -f "$chitchat/dataset.json" ]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  if pip download --quiet --no-deps --dest "$tmp" chitchat-dataset==0.9.0 >&2; then
    whl="$tmp/chitchat_dataset-0.9.0-py3-none-any.whl"
    echo "$wheel_sha  $whl" | sha256sum --check --quiet
    mkdir -p "$chitchat"
    python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); open(sys.argv[2], "wb").write(z.read("chitchat_dataset/dataset.json")); open(sys.argv[3], "wb").write(z.read("chitchat_dataset-0.9.0.dist-info/LICENSE"))' \
      "$whl" "$chitchat/dataset.json" "$chitchat/LICENSE"
  else
    echo "false-positive-rates: pip could not fetch chitchat-dataset; that row is absent" >&2
  fi
fi
[ -z "${DELOOP_NO_CHITCHAT:-}" ] && export DELOOP_CHITCHAT_JSON="$chitchat/dataset.json"
exec cargo run --quiet --release --locked -p deloop-core --example false_positive_rates -- "$@"
