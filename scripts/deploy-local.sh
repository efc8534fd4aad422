#!/usr/bin/env bash
# The deployment of docs/deployment.md on one machine, from packages: one
# valkey-server, N `deloop serve` replicas sharing their sessions through
# it, and HAProxy in front (when it is installed: Debian's `haproxy`), the
# same topology as deploy/compose.yaml. Prints the URLs, then waits; Ctrl-C
# (or SIGTERM) stops everything and removes the scratch folder.
#
# Usage:
#   scripts/deploy-local.sh [--replicas N] [--port PORT] [--bin PATH] [--no-build]
#
#   --replicas  deloop serve replicas (default 3, 1 to 16)
#   --port      the load balancer's port on 127.0.0.1 (default 8080)
#   --bin       the deloop binary (default: build target/release/deloop)
#   --no-build  use ${CARGO_TARGET_DIR:-target}/release/deloop as it is
#
# valkey-server comes from scripts/setup-valkey.sh (run here; it installs
# once into the cache and is a no-op afterwards). Each replica listens on a
# free loopback port, runs from its own folder under the scratch folder and
# reads the environment as `deloop serve` always does (DELOOP_EMBEDDER
# defaults to `none` here so the replicas start in seconds; set it to use
# another embedder). Without haproxy on PATH the replicas' own URLs are the
# entry points (`apt-get install haproxy` adds the balancer).
#
# PostgreSQL: the hook below starts the shared index's database when
# scripts/setup-postgres.sh is in the checkout (issue 19, section 2) and
# the deloop binary takes `--db postgres://…`; until then every replica
# keeps its own SQLite index, built from deloop's docs.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}
REPLICAS=3
PORT=8080
BIN=
BUILD=1

die() {
  echo "deploy-local.sh: $*" >&2
  exit 1
}
say() { echo "deploy-local.sh: $*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --replicas) REPLICAS=${2:?--replicas needs a number}; shift 2 ;;
    --port) PORT=${2:?--port needs a number}; shift 2 ;;
    --bin) BIN=${2:?--bin needs a path}; BUILD=0; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[[ "$REPLICAS" =~ ^[0-9]+$ ]] && [ "$REPLICAS" -ge 1 ] && [ "$REPLICAS" -le 16 ] ||
  die "--replicas must be 1 to 16"
[[ "$PORT" =~ ^[0-9]+$ ]] && [ "$PORT" -ge 1 ] && [ "$PORT" -le 65535 ] ||
  die "--port must be 1 to 65535"
command -v curl >/dev/null 2>&1 || die "curl is needed"
command -v python3 >/dev/null 2>&1 || die "python3 is needed"

if [ -z "$BIN" ]; then
  BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/deloop"
  if [ "$BUILD" = 1 ]; then
    say "building the release deloop"
    (cd "$ROOT" && cargo build --release --locked -p deloop >&2)
  fi
fi
[ -x "$BIN" ] || die "no deloop binary at $BIN (build it, or pass --bin)"

VALKEY=${DELOOP_VALKEY_SERVER:-}
if [ -z "$VALKEY" ]; then
  bash "$ROOT/scripts/setup-valkey.sh" >&2
  VALKEY=$(sed -n 's/^DELOOP_VALKEY_SERVER=//p' "$CACHE/valkey.env")
fi
[ -x "$VALKEY" ] || die "no valkey-server at $VALKEY"

RUN=$(mktemp -d "${TMPDIR:-/tmp}/deloop-deploy.XXXXXX")
PIDS=()
stop_all() {
  local rc=$? pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  PIDS=()
  if [ "$rc" = 0 ]; then
    rm -rf "$RUN"
  else
    say "the logs are kept in $RUN"
  fi
}
trap stop_all EXIT
trap 'say "stopping"; exit 0' INT TERM

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_for WHAT PID CHECK...: until the command CHECK succeeds (60 s).
wait_for() {
  local what=$1 pid=$2
  shift 2
  for _ in $(seq 1 600); do
    "$@" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || die "$what exited"
    sleep 0.1
  done
  die "$what did not come up within 60 s"
}

# --- Valkey -------------------------------------------------------------------
VALKEY_PORT=$(free_port)
mkdir -p "$RUN/valkey"
"$VALKEY" --port "$VALKEY_PORT" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$RUN/valkey" >"$RUN/valkey/log" 2>&1 &
PIDS+=($!)
# In a subshell: a refused connection must not end the script.
valkey_pings() (
  exec 3<>"/dev/tcp/127.0.0.1/$VALKEY_PORT" || exit 1
  printf 'PING\r\n' >&3
  read -r -t 2 reply <&3 || exit 1
  [ "${reply%$'\r'}" = +PONG ]
)
wait_for "valkey-server" "${PIDS[-1]}" valkey_pings
STORE="redis://127.0.0.1:$VALKEY_PORT/0"

# --- PostgreSQL (hook: issue 19, section 2) -----------------------------------
# When scripts/setup-postgres.sh is in the checkout, it installs PostgreSQL
# with pgvector and writes $CACHE/postgres.env (DELOOP_PG_BIN, DELOOP_PG_USER);
# the cluster then starts here and the replicas share its index through
# `--db`. Until that lands, DB_ARGS stays empty and each replica keeps its
# own SQLite index.
DB_ARGS=()
PG_URL=
if [ -f "$ROOT/scripts/setup-postgres.sh" ] && "$BIN" serve --help 2>/dev/null | grep -q 'postgres://'; then
  bash "$ROOT/scripts/setup-postgres.sh" >&2
  PG_BIN=$(sed -n 's/^DELOOP_PG_BIN=//p' "$CACHE/postgres.env")
  PG_USER=$(sed -n 's/^DELOOP_PG_USER=//p' "$CACHE/postgres.env")
  AS=()
  if [ -n "$PG_USER" ] && [ "$(id -u)" = 0 ]; then
    AS=(runuser -u "$PG_USER" --)
    mkdir -p "$RUN/postgres"
    chown "$PG_USER" "$RUN/postgres"
  fi
  PG_PORT=$(free_port)
  "${AS[@]}" "$PG_BIN/initdb" -D "$RUN/postgres/data" -U deloop -E UTF8 --locale=C \
    --auth=trust >"$RUN/postgres-initdb.log" 2>&1 || die "initdb failed: $(tail -n5 "$RUN/postgres-initdb.log")"
  "${AS[@]}" "$PG_BIN/postgres" -D "$RUN/postgres/data" -p "$PG_PORT" -k "$RUN/postgres" \
    -c listen_addresses=127.0.0.1 >"$RUN/postgres.log" 2>&1 &
  PIDS+=($!)
  wait_for "postgres" "${PIDS[-1]}" "$PG_BIN/pg_isready" -h 127.0.0.1 -p "$PG_PORT"
  "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U deloop -d postgres -c 'CREATE DATABASE deloop' >&2
  PG_URL="postgres://deloop@127.0.0.1:$PG_PORT/deloop"
  # One index for every replica: built once from deloop's docs.
  (cd "$ROOT" && DELOOP_EMBEDDER=${DELOOP_EMBEDDER:-none} "$BIN" index --db "$PG_URL" README.md docs >&2)
  DB_ARGS=(--db "$PG_URL")
fi

# --- the replicas -------------------------------------------------------------
listening() { grep -q '^deloop: listening on ' "$1/server.log"; }
REPLICA_URLS=()
for i in $(seq 1 "$REPLICAS"); do
  dir="$RUN/replica-$i"
  mkdir -p "$dir"
  (cd "$dir" && DELOOP_EMBEDDER=${DELOOP_EMBEDDER:-none} exec "$BIN" serve \
    --listen 127.0.0.1:0 --session-store "$STORE" "${DB_ARGS[@]}" \
    </dev/null >"$dir/out.log" 2>"$dir/server.log") &
  PIDS+=($!)
  wait_for "replica $i" "${PIDS[-1]}" listening "$dir"
  url=$(sed -n 's/^deloop: listening on //p' "$dir/server.log" | head -n1)
  wait_for "replica $i" "${PIDS[-1]}" curl -sf "$url/readyz"
  REPLICA_URLS+=("$url")
done

# --- the load balancer --------------------------------------------------------
LB_URL=
if command -v haproxy >/dev/null 2>&1; then
  {
    echo "global"
    echo "  maxconn 4096"
    echo "defaults"
    echo "  mode http"
    echo "  timeout connect 2s"
    echo "  timeout client 130s"
    echo "  timeout server 130s"
    echo "frontend deloop"
    echo "  bind 127.0.0.1:$PORT"
    echo "  default_backend replicas"
    echo "backend replicas"
    echo "  balance roundrobin"
    echo "  option httpchk GET /readyz"
    for i in "${!REPLICA_URLS[@]}"; do
      echo "  server replica-$((i + 1)) ${REPLICA_URLS[$i]#http://} check inter 2s"
    done
  } >"$RUN/haproxy.cfg"
  haproxy -W -db -f "$RUN/haproxy.cfg" >"$RUN/haproxy.log" 2>&1 &
  PIDS+=($!)
  LB_URL="http://127.0.0.1:$PORT"
  wait_for "haproxy (is port $PORT free? --port picks another)" "${PIDS[-1]}" curl -sf "$LB_URL/readyz"
fi

echo "valkey:  $STORE"
[ -z "$PG_URL" ] || echo "postgres: $PG_URL"
for i in "${!REPLICA_URLS[@]}"; do echo "replica $((i + 1)): ${REPLICA_URLS[$i]}"; done
if [ -n "$LB_URL" ]; then
  echo "balancer: $LB_URL (haproxy, round robin over the replicas)"
else
  echo "balancer: none (haproxy is not installed); use the replicas' URLs"
fi
echo "logs:    $RUN (removed on exit); Ctrl-C stops everything"
# Runs until a signal, or until a process of the topology exits.
while :; do
  for pid in "${PIDS[@]}"; do
    kill -0 "$pid" 2>/dev/null || die "process $pid of the topology exited"
  done
  sleep 1
done
