#!/usr/bin/env bash
# Installs what the language packages' tests need, outside the checkout:
# * a Python venv with maturin (the PEP 517 backend of bindings/python),
#   pytest, and the official openai and anthropic SDKs (the same pinned
#   versions as scripts/setup-proxy-clients.sh; pip's cache is shared), at
#   ${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}/bindings-py-<versions>;
# * the npm packages of bindings/node (@napi-rs/cli, pinned in its
#   package.json and package-lock.json), into bindings/node/node_modules.
# Only the package registries are contacted. Idempotent and quiet. Output
# (stdout): one line, `bindings python: <venv>/bin/python`.
set -euo pipefail
cd "$(dirname "$0")/.."

MATURIN=1.16.0
PYTEST=9.2.0
OPENAI=3.57.0
ANTHROPIC=2.15.0
CACHE=${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}
VENV="$CACHE/bindings-py-maturin$MATURIN-pytest$PYTEST-openai$OPENAI-anthropic$ANTHROPIC"
PY="$VENV/bin/python"

installed() {
  [ -x "$PY" ] || return 1
  "$PY" - "$MATURIN" "$PYTEST" "$OPENAI" "$ANTHROPIC" >/dev/null 2>&1 <<'PYEOF'
import sys
from importlib.metadata import version
want = dict(zip(["maturin", "pytest", "openai", "anthropic"], sys.argv[1:]))
if any(version(name) != v for name, v in want.items()):
    sys.exit(1)
import openai, anthropic, pytest  # noqa: F401
PYEOF
}

if ! command -v python3 >/dev/null 2>&1; then
  echo "setup-bindings.sh: python3 (3.9 or later, with the venv module) is needed; install it first" >&2
  exit 1
fi
if ! installed; then
  mkdir -p "$CACHE"
  echo "setup-bindings.sh: installing maturin, pytest, openai and anthropic into $VENV" >&2
  rm -rf "$VENV"
  python3 -m venv "$VENV" >&2
  "$PY" -m pip install --quiet --disable-pip-version-check \
    "maturin==$MATURIN" "pytest==$PYTEST" "openai==$OPENAI" "anthropic==$ANTHROPIC" >&2
fi
if ! installed; then
  echo "setup-bindings.sh: the packages were installed in $VENV but do not import" >&2
  exit 1
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "setup-bindings.sh: node and npm (Node.js 18 or later) are needed; install them first" >&2
  exit 1
fi
if [ ! -x bindings/node/node_modules/.bin/napi ]; then
  (cd bindings/node && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
echo "bindings python: $PY"
