# Shared pieces of the load benchmarks of `deloop serve`
# (scripts/bench-serve.sh, scripts/bench-sessions.sh): sourced, not run.
#
# The sourcing script sets ROOT (the checkout) and BENCH (its name, for
# messages) first, then calls, in order: ensure_oha, ensure_deloop (after
# setting BIN and BUILD from its flags), bench_scratch. Servers are started
# with start_server and all stopped by stop_servers (also on exit).
#
# oha (MIT), pinned below, is installed with `cargo install --locked` into
#   ${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}/oha-<version>
# and reused when it is there.

OHA_VERSION=1.16.0
CACHE=${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}
OHA="$CACHE/oha-$OHA_VERSION/bin/oha"

die() {
  echo "$BENCH: $*" >&2
  exit 1
}
note() { echo "$BENCH: $*" >&2; }

# common_option "$@": one option every benchmark takes (--duration,
# --connections, --bin, --no-build, --out, --help); sets SHIFT to the words
# it used, 0 when $1 is not one of them.
common_option() {
  SHIFT=0
  case "$1" in
    --duration) DURATION=${2:?--duration needs seconds}; SHIFT=2 ;;
    --connections) CONNECTIONS=${2:?--connections needs a number}; SHIFT=2 ;;
    --bin) BIN=${2:?--bin needs a path}; BUILD=0; SHIFT=2 ;;
    --no-build) BUILD=0; SHIFT=1 ;;
    --out) OUT=${2:?--out needs a file}; SHIFT=2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  esac
}

load1() { cut -d' ' -f1 /proc/loadavg; }

ensure_oha() {
  if ! { [ -x "$OHA" ] && "$OHA" --version 2>/dev/null | grep -q "$OHA_VERSION"; }; then
    note "installing oha $OHA_VERSION into $CACHE/oha-$OHA_VERSION (cargo install --locked)"
    cargo install oha --version "$OHA_VERSION" --locked --root "$CACHE/oha-$OHA_VERSION" >&2
  fi
}

# Sets BIN to the release deloop (built unless BUILD=0) when it is empty.
ensure_deloop() {
  if [ -z "$BIN" ]; then
    BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/deloop"
    if [ "$BUILD" = 1 ]; then
      note "building the release deloop"
      (cd "$ROOT" && cargo build --release --locked -p deloop >&2)
    fi
  fi
  [ -x "$BIN" ] || die "no deloop binary at $BIN (build it, or pass --bin)"
}

# A scratch folder removed on exit, with every server stopped first.
SERVER_PID=
SERVER_PIDS=()
bench_scratch() {
  SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/deloop-bench.XXXXXX")
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
}
bench_cleanup() {
  stop_servers
  if declare -F bench_extra_cleanup >/dev/null; then bench_extra_cleanup; fi
  rm -rf "$SCRATCH"
}

# start_server NAME TOML [SERVE ARGS...]: `deloop serve` from a fresh folder
# with TOML as its deloop.toml; sets SERVER_PID and URL once /readyz
# answers 200.
start_server() {
  local name=$1 toml=$2 dir="$SCRATCH/$1"
  shift 2
  mkdir -p "$dir"
  printf '%s\n' "$toml" >"$dir/deloop.toml"
  (cd "$dir" && exec env -u DELOOP_CONFIG -u DELOOP_API_KEYS -u DELOOP_API_KEYS_FILE \
    -u DELOOP_DB -u DELOOP_LISTEN -u DELOOP_LOG -u DELOOP_LOOP_PROFILE -u DELOOP_LOOP_CONFIG \
    -u DELOOP_SESSION_STORE -u DELOOP_REDIS_PASSWORD \
    -u GEMINI_API_KEY -u OPENAI_API_KEY -u OPENAI_BASE_URL -u DELOOP_LLM_PROVIDER \
    DELOOP_EMBEDDER=none "$BIN" serve --listen 127.0.0.1:0 --config "$dir/deloop.toml" "$@" \
    </dev/null >/dev/null 2>"$dir/server.log") &
  SERVER_PID=$!
  SERVER_PIDS+=("$SERVER_PID")
  URL=
  for _ in $(seq 1 600); do
    URL=$(sed -n 's/^deloop: listening on //p' "$dir/server.log" | head -n1)
    [ -n "$URL" ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || die "the server exited: $(cat "$dir/server.log")"
    sleep 0.1
  done
  [ -n "$URL" ] || die "the server did not listen within 60 s"
  for _ in $(seq 1 1200); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/readyz")" = 200 ] && break
    kill -0 "$SERVER_PID" 2>/dev/null || die "the server exited: $(cat "$dir/server.log")"
    sleep 0.1
  done
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/readyz")" = 200 ] ||
    die "the server was not ready within 120 s"
  note "$name: deloop serve (pid $SERVER_PID) at $URL"
}

stop_servers() {
  local pid
  for pid in "${SERVER_PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${SERVER_PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  SERVER_PIDS=()
  SERVER_PID=
}

# Resident memory of a process in MB.
rss_mb() { awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

metric() { curl -s "$URL/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

# run_oha OUT.json ARGS...: oha with JSON output; no TUI.
run_oha() {
  local out=$1
  shift
  "$OHA" --no-tui --output-format json --wait-ongoing-requests-after-deadline "$@" >"$out"
}

# Figures from an oha JSON report.
rps() { jq -r '.summary.requestsPerSec | floor' "$1"; }
p50_ms() { jq -r '.latencyPercentiles.p50 * 1000 * 100 | round / 100' "$1"; }
p99_ms() { jq -r '.latencyPercentiles.p99 * 1000 * 100 | round / 100' "$1"; }
# Responses that are not 2xx, plus transport errors.
errors() {
  jq -r '([.statusCodeDistribution | to_entries[] | select((.key | tonumber) >= 300) | .value] | add // 0)
         + ([.errorDistribution | to_entries[] | .value] | add // 0)' "$1"
}
total() { jq -r '([.statusCodeDistribution[]] | add // 0) + ([.errorDistribution[]] | add // 0)' "$1"; }

# The summary table: one row per run.
ROWS=()
row() { ROWS+=("| $1 | $2 | $3 | $4 | $5 |"); }
met() { if [ "$1" = 1 ]; then echo met; else echo "**missed**"; fi; }
ge() { python3 -c "import sys; print(1 if float(sys.argv[1]) >= float(sys.argv[2]) else 0)" "$1" "$2"; }
le() { python3 -c "import sys; print(1 if float(sys.argv[1]) <= float(sys.argv[2]) else 0)" "$1" "$2"; }

# print_table TITLE [OUT]: the rows as markdown, to stdout and OUT.
print_table() {
  {
    echo
    echo "$1: $(date -u +%Y-%m-%d), $(nproc) cores ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), oha $OHA_VERSION on the same machine, deloop $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo
    echo "| run | result | target | | load avg (1 min) before / after |"
    echo "|---|---|---|---|---|"
    printf '%s\n' "${ROWS[@]}"
  } | tee ${2:+"$2"}
}

# The machine and the tools, with the load average (other work shows there).
print_machine() {
  note "oha $("$OHA" --version | awk '{print $2}'), deloop $("$BIN" --version | awk '{print $2}') ($(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?')), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

# One call, the same for every session (a read of one file).
CALL_BODY='{"tool":"read","args":{"path":"/workspace/src/main.rs"}}'
