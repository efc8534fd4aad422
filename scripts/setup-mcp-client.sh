#!/usr/bin/env bash
# Installs the official MCP Python SDK (PyPI `mcp`), the real MCP client the
# MCP server tests drive over stdio and streamable HTTP
# (crates/deloop-server/tests/mcp_clients.rs runs tests/mcp_client.py).
#
# The package `mcp` (MIT), pinned below, is installed with pip into a
# virtual environment OUTSIDE the checkout, and reused when it is there:
#   ${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}/mcp-client-<version>
# Only the package registry is contacted (pip's configured index).
#
# Idempotent and quiet. Output (stdout): one line,
#   `MCP client python: <venv>/bin/python`
# The test finds that interpreter by itself (same cache rule), or through
# DELOOP_MCP_PYTHON.
set -euo pipefail

VERSION=2.3.0
CACHE=${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}
VENV="$CACHE/mcp-client-$VERSION"
PY="$VENV/bin/python"

# Complete when the venv's python imports the pinned SDK and both clients.
installed() {
  [ -x "$PY" ] || return 1
  "$PY" - "$VERSION" >/dev/null 2>&1 <<'PYEOF'
import sys
from importlib.metadata import version
if version("mcp") != sys.argv[1]:
    sys.exit(1)
import mcp.client.stdio, mcp.client.streamable_http  # noqa: F401
PYEOF
}

if ! command -v python3 >/dev/null 2>&1; then
  echo "setup-mcp-client.sh: python3 (3.10 or later, with the venv module) is needed; install it first" >&2
  exit 1
fi

if ! installed; then
  mkdir -p "$CACHE"
  echo "setup-mcp-client.sh: installing mcp==$VERSION into $VENV" >&2
  rm -rf "$VENV"
  python3 -m venv "$VENV" >&2
  "$PY" -m pip install --quiet --disable-pip-version-check "mcp==$VERSION" >&2
fi

if ! installed; then
  echo "setup-mcp-client.sh: mcp==$VERSION was installed in $VENV but does not import" >&2
  exit 1
fi
echo "MCP client python: $PY"
