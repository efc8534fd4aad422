#!/usr/bin/env bash
# Installs OpenClaw's tool-loop detector, the reference that deloop's
# `openclaw` loop profile must agree with call by call
# (crates/deloop-core/tests/loops_openclaw_differential.rs).
#
# The npm package `openclaw` (MIT), pinned to 2026.9.6, is installed with
# --ignore-scripts (no install scripts run) into a cache folder OUTSIDE the
# checkout, and reused when it is already there:
#   ${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}/openclaw-2026.9.6
# Only the package registry is contacted (npm's configured registry).
# The package declares Node >= 24; Node 20 runs the detector module, and npm
# prints an engine warning only.
#
# Idempotent and quiet. Output (stdout): one line,
#   `OpenClaw package: <dir>/node_modules/openclaw`
# The differential test finds that folder by itself (same cache rule), or
# through DELOOP_OPENCLAW_DIR.
set -euo pipefail

PKG=openclaw
VERSION=2026.9.6
CACHE=${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}
DIR="$CACHE/$PKG-$VERSION"
PKG_DIR="$DIR/node_modules/$PKG"

# The install is complete when the detector module imports and exports the
# three functions the oracle needs (a half-finished install fails this).
installed() {
  [ -f "$PKG_DIR/package.json" ] || return 1
  node --input-type=module -e '
    import { readdirSync, readFileSync } from "node:fs";
    import { join } from "node:path";
    import { pathToFileURL } from "node:url";
    const pkg = process.argv[1];
    const { version } = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8"));
    if (version !== process.argv[2]) process.exit(1);
    const dist = join(pkg, "dist");
    const file = readdirSync(dist).find((f) => /^tool-loop-detection-[A-Za-z0-9_-]+\.mjs$/.test(f));
    if (!file) process.exit(1);
    await import(pathToFileURL(join(dist, file)).href);
  ' "$PKG_DIR" "$VERSION" >/dev/null 2>&1
}

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "setup-openclaw.sh: node and npm are needed (Node 20 or later); install them first" >&2
  exit 1
fi

if ! installed; then
  mkdir -p "$DIR"
  # A private package.json so npm installs here, not in a parent project.
  if [ ! -f "$DIR/package.json" ]; then
    printf '{ "name": "deloop-openclaw-oracle", "private": true }\n' >"$DIR/package.json"
  fi
  echo "setup-openclaw.sh: installing $PKG@$VERSION into $DIR (a few minutes the first time)" >&2
  npm install --prefix "$DIR" --ignore-scripts --no-audit --no-fund --omit=dev \
    --save-exact --loglevel=error "$PKG@$VERSION" >&2
fi

if ! installed; then
  echo "setup-openclaw.sh: $PKG@$VERSION was installed in $DIR but its tool-loop-detection module does not load" >&2
  exit 1
fi
echo "OpenClaw package: $PKG_DIR"
