#!/usr/bin/env bash
# Installs LiteLLM's own proxy (PyPI `litellm[proxy]`, MIT), which
# crates/deloop-proxy/tests/litellm_guardrail.rs runs with deloop as its
# `generic_guardrail_api` guardrail (LiteLLM's Generic Guardrail API,
# `POST /beta/litellm_basic_guardrail_api`).
#
# Pinned below, installed with pip into a virtual environment OUTSIDE the
# checkout, and reused when it is there:
#   ${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}/litellm-<version>
# Only the package registry is contacted (pip's configured index). About 750
# MB and 6 to 7 minutes on 2 cores the first time (the proxy extra brings a web
# stack, boto3, polars and others); nothing is added beyond `litellm[proxy]`.
#
# Why 1.106.12: a recent release whose `proxy` extra resolves on the package
# index this project reaches (1.108.13, 1.108.14, 1.109.3 and 1.110.2 pin
# `litellm-proxy-extras` or `litellm-proxy` releases that index does not
# carry; 1.108.0 to 1.108.12 were not tried), and not 1.107.0, the release
# that was published compromised. Its generic guardrail
# (litellm/proxy/guardrails/guardrail_hooks/generic_guardrail_api/) is the
# one docs/proxy.md describes.
#
# Idempotent and quiet. Output (stdout): one line,
#   `litellm proxy: <venv>/bin/litellm`
# The test finds that program by itself (same cache rule), or through
# DELOOP_LITELLM.
set -euo pipefail

LITELLM=1.106.12
CACHE=${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}
VENV="$CACHE/litellm-$LITELLM"
PY="$VENV/bin/python"

# Complete when the venv holds the pinned version with its generic
# guardrail, the proxy extra's web stack, and the `litellm` command. A file
# check: importing LiteLLM's proxy takes 40 s of CPU, so that is done once,
# right after installing.
installed() {
  [ -x "$PY" ] && [ -x "$VENV/bin/litellm" ] || return 1
  "$PY" - "$LITELLM" >/dev/null 2>&1 <<'PYEOF'
import sys
from importlib.metadata import distribution, version
if version("litellm") != sys.argv[1]:
    sys.exit(1)
hook = "litellm/proxy/guardrails/guardrail_hooks/generic_guardrail_api/generic_guardrail_api.py"
if not distribution("litellm").locate_file(hook).exists():
    sys.exit(1)
version("fastapi"), version("uvicorn"), version("backoff")
PYEOF
}

# The proxy and the guardrail import (once, after installing).
imports() {
  LITELLM_LOCAL_MODEL_COST_MAP=True "$PY" -c '
import litellm.proxy.proxy_server
from litellm.proxy.guardrails.guardrail_hooks.generic_guardrail_api import GenericGuardrailAPI
' >/dev/null
}

if ! command -v python3 >/dev/null 2>&1; then
  echo "setup-litellm.sh: python3 (3.10 or later, with the venv module) is needed; install it first" >&2
  exit 1
fi

if ! installed; then
  mkdir -p "$CACHE"
  echo "setup-litellm.sh: installing litellm[proxy]==$LITELLM into $VENV (a few minutes)" >&2
  rm -rf "$VENV"
  python3 -m venv "$VENV" >&2
  "$PY" -m pip install --quiet --disable-pip-version-check --no-cache-dir "litellm[proxy]==$LITELLM" >&2
  if ! imports; then
    echo "setup-litellm.sh: litellm[proxy]==$LITELLM was installed in $VENV but its proxy does not import" >&2
    rm -rf "$VENV"
    exit 1
  fi
fi

if ! installed; then
  echo "setup-litellm.sh: litellm[proxy]==$LITELLM was installed in $VENV but is incomplete" >&2
  exit 1
fi
echo "litellm proxy: $VENV/bin/litellm"
