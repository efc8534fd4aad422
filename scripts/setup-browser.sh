#!/usr/bin/env bash
# Installs what the web console's browser suite needs
# (crates/deloop/tests/console_browser.rs, which runs
# crates/deloop/tests/console/e2e.mjs):
#   * Debian's `chromium` (apt), started headless by the test as
#     /usr/bin/chromium;
#   * `playwright-core` from npm, pinned, into a cache folder OUTSIDE the
#     checkout: ${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}/playwright-core-<version>
#     (playwright-core downloads no browser; it drives the system one);
#   * `axe-core` from npm, pinned, beside it (axe-core-<version>): the
#     accessibility rules the suite runs on every page.
# Idempotent and quiet. Output (stdout): two lines,
#   `playwright-core: <dir>/node_modules/playwright-core`
#   `axe-core: <dir>/node_modules/axe-core`
set -euo pipefail

VERSION=1.65.2
CACHE=${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}
DIR="$CACHE/playwright-core-$VERSION"
PKG_DIR="$DIR/node_modules/playwright-core"

if ! [ -x /usr/bin/chromium ]; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi

installed() {
  [ -f "$PKG_DIR/package.json" ] &&
    node -e 'process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)' \
      "$PKG_DIR/package.json" "$VERSION"
}

if ! installed; then
  rm -rf "$DIR.tmp"
  mkdir -p "$DIR.tmp"
  (cd "$DIR.tmp" && npm init -y >/dev/null &&
    npm install --silent --no-audit --no-fund --ignore-scripts "playwright-core@$VERSION" >/dev/null)
  rm -rf "$DIR"
  mv "$DIR.tmp" "$DIR"
fi
installed
echo "playwright-core: $PKG_DIR"

AXE_VERSION=4.14.1
AXE_DIR="$CACHE/axe-core-$AXE_VERSION"
AXE_PKG="$AXE_DIR/node_modules/axe-core"
axe_installed() {
  [ -f "$AXE_PKG/axe.min.js" ] &&
    node -e 'process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)' \
      "$AXE_PKG/package.json" "$AXE_VERSION"
}
if ! axe_installed; then
  rm -rf "$AXE_DIR.tmp"
  mkdir -p "$AXE_DIR.tmp"
  (cd "$AXE_DIR.tmp" && npm init -y >/dev/null &&
    npm install --silent --no-audit --no-fund --ignore-scripts "axe-core@$AXE_VERSION" >/dev/null)
  rm -rf "$AXE_DIR"
  mv "$AXE_DIR.tmp" "$AXE_DIR"
fi
axe_installed
echo "axe-core: $AXE_PKG"
