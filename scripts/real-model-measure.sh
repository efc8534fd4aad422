#!/usr/bin/env bash
# Records greedy generations of SmolLM2-135M-Instruct and Gemma 3 270M from a
# real llama-server for every prompt of testdata/real-model/prompts.jsonl,
# judges each with `deloop clamp --json` / `--stream`, and prints the table
# of loops, cuts and tokens/seconds saved (scripts/real-model-measure.py).
#
# Usage:
#   bash scripts/real-model-measure.sh                 # record both models, then the table
#   bash scripts/real-model-measure.sh --report        # the table from the recorded set only
#   bash scripts/real-model-measure.sh --models smollm2 --only en-list-01,es-list-01 --out /tmp/x.jsonl
#   (--max-tokens N, default 400; --verify-plain also compares with a non-streamed request)
#   bash scripts/real-model-measure.sh --proxy --out /tmp/p.jsonl --models smollm2 --max-tokens 400 --only ...
#       every request THROUGH `deloop proxy` (client -> proxy -> llama-server), then the
#       table of cuts and tokens/seconds llama-server did not generate, against the recorded set
#   bash scripts/real-model-measure.sh --report-proxy --out /tmp/p.jsonl   # that table again
#
# Needs scripts/setup-llama.sh and scripts/setup-models.sh run first (their
# paths are read from the environment or from <cache>/llama.env), and builds
# the deloop CLI (`cargo build -p deloop`) unless DELOOP_BIN names one.
# Recording takes about 15-30 minutes on 2 cores. It overwrites --out
# (default testdata/real-model/generations.jsonl); the hand labels in
# testdata/real-model/labels.jsonl are matched by id and must be checked
# again when a generation changes.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}
if [ -f "$CACHE/llama.env" ]; then
  while IFS='=' read -r key value; do
    case "$key" in
      DELOOP_LLAMA_SERVER | DELOOP_MODEL_SMOLLM2 | DELOOP_MODEL_GEMMA3)
        if [ -z "${!key:-}" ]; then export "$key=$value"; fi
        ;;
    esac
  done <"$CACHE/llama.env"
fi

report_only=0
for a in "$@"; do
  case "$a" in --report | --report-proxy) report_only=1 ;; esac
done
if [ "$report_only" = 0 ] && [ -z "${DELOOP_BIN:-}" ]; then
  cargo build --quiet -p deloop
  DELOOP_BIN="${CARGO_TARGET_DIR:-target}/debug/deloop"
fi
exec python3 scripts/real-model-measure.py ${DELOOP_BIN:+--deloop "$DELOOP_BIN"} "$@"
