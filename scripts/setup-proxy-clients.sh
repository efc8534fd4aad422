#!/usr/bin/env bash
# Installs the official OpenAI and Anthropic Python SDKs (PyPI `openai` and
# `anthropic`), the real clients that the proxy tests drive through
# `deloop proxy` (crates/deloop-proxy/tests/sdk_clients.rs runs
# tests/sdk_client.py).
#
# Both packages (Apache-2.0 and MIT), pinned below, are installed with pip
# into a virtual environment OUTSIDE the checkout, and reused when it is there:
#   ${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}/proxy-clients-openai<v>-anthropic<v>
# Only the package registry is contacted (pip's configured index).
#
# Idempotent and quiet. Output (stdout): one line,
#   `proxy SDK clients python: <venv>/bin/python`
# The test finds that interpreter by itself (same cache rule), or through
# DELOOP_PROXY_PYTHON.
set -euo pipefail

OPENAI=3.57.0
ANTHROPIC=2.15.0
CACHE=${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}
VENV="$CACHE/proxy-clients-openai$OPENAI-anthropic$ANTHROPIC"
PY="$VENV/bin/python"

# Complete when the venv's python imports both pinned SDKs.
installed() {
  [ -x "$PY" ] || return 1
  "$PY" - "$OPENAI" "$ANTHROPIC" >/dev/null 2>&1 <<'PYEOF'
import sys
from importlib.metadata import version
if version("openai") != sys.argv[1] or version("anthropic") != sys.argv[2]:
    sys.exit(1)
import openai, anthropic  # noqa: F401
PYEOF
}

if ! command -v python3 >/dev/null 2>&1; then
  echo "setup-proxy-clients.sh: python3 (3.9 or later, with the venv module) is needed; install it first" >&2
  exit 1
fi

if ! installed; then
  mkdir -p "$CACHE"
  echo "setup-proxy-clients.sh: installing openai==$OPENAI and anthropic==$ANTHROPIC into $VENV" >&2
  rm -rf "$VENV"
  python3 -m venv "$VENV" >&2
  "$PY" -m pip install --quiet --disable-pip-version-check "openai==$OPENAI" "anthropic==$ANTHROPIC" >&2
fi

if ! installed; then
  echo "setup-proxy-clients.sh: the SDKs were installed in $VENV but do not import" >&2
  exit 1
fi
echo "proxy SDK clients python: $PY"
