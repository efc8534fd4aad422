#!/usr/bin/env bash
# Copies the console screenshots docs/console.md shows from a folder the
# browser suite filled (DELOOP_CONSOLE_SHOTS=<folder> cargo test -p deloop
# --test console_browser) into docs/img/, as 8-bit palette PNGs when
# pngquant is installed (apt-get install pngquant), else as they are.
# Usage: scripts/console-shots.sh <folder>
set -euo pipefail
SRC=${1:?usage: scripts/console-shots.sh <folder the browser suite filled>}
DST="$(cd "$(dirname "$0")/.." && pwd)/docs/img"
mkdir -p "$DST"
for name in ask live live-load sessions session check clamp; do
  from="$SRC/doc-$name.png"
  [ -f "$from" ] || { echo "console-shots.sh: $from is missing" >&2; exit 1; }
  if command -v pngquant >/dev/null; then
    pngquant --force --quality 60-90 --speed 1 --strip --output "$DST/$name.png" -- "$from"
  else
    cp "$from" "$DST/$name.png"
  fi
done
ls -l "$DST"
