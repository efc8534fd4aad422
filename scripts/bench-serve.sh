#!/usr/bin/env bash
# Load benchmark of `deloop serve` (issue 10, section 5). A benchmark, not a
# CI gate: it prints figures and whether each target was met, and exits 0
# unless the benchmark itself could not run.
#
# What it measures, with the load generator (oha) on the same machine:
#   calls    POST /v1/sessions/{session}/calls over 1,000 sessions, as fast
#            as it goes (target >= 20,000 requests/s);
#   clamp    POST /v1/clamp on a 4 KB healthy answer, as fast as it goes
#            (target >= 10,000 requests/s);
#   latency  both routes at a fixed 2,000 requests/s (oha -q 2000, latency
#            corrected): p99 <= 5 ms with zero errors;
#   soak     100,000 distinct sessions created over 60 s (oha -n 100000
#            -q 1667), resident memory sampled from /proc/PID/status every
#            second; twice: with server.sessions.max_sessions below 100,000
#            (the cap is reached and evicts, so memory must plateau: target
#            flat within 10% from the moment the cap is reached) and with
#            the default cap of 100,000 (every session fits, memory grows).
#
# Usage:
#   scripts/bench-serve.sh [--only calls,clamp,latency,soak] [--duration S]
#                          [--connections N] [--soak-cap N] [--quick]
#                          [--bin PATH] [--no-build] [--out FILE]
#
#   --only         phases to run (default: all four)
#   --duration     seconds of each throughput and latency run (default 10)
#   --connections  concurrent connections of the throughput runs (default 50)
#   --soak-cap     server.sessions.max_sessions of the capped soak (default 20000)
#   --quick        a smoke run of the script: 3 s runs, a 10 s soak of 10,000 sessions
#   --bin          the deloop binary to serve (default: build target/release/deloop)
#   --no-build     use ${CARGO_TARGET_DIR:-target}/release/deloop as it is
#   --out          also write the summary table (markdown) to FILE
#
# Each server runs from a fresh temporary folder with its own deloop.toml,
# DELOOP_EMBEDDER=none (the default index is built lexically, so startup is
# fast) and no LLM or API key; the runs start once /readyz answers 200.
# Next to every figure the 1-minute load average (/proc/loadavg) before and
# after the run is recorded: on a shared machine, other work shows there.
#
# oha (MIT), pinned below, is installed with `cargo install --locked` into
#   ${DELOOP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deloop}/oha-<version>
# and reused when it is there. Needs curl, jq and python3 (for the 4 KB
# answer, taken from the real-data corpus under DELOOP_SHARED_DIR or
# ../shared).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=bench-serve.sh
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"
SHARED=${DELOOP_SHARED_DIR:-$ROOT/../shared}

PHASES=calls,clamp,latency,soak
DURATION=10
CONNECTIONS=50
SOAK_CAP=20000
SOAK_SESSIONS=100000
SOAK_SECS=60
LATENCY_RATE=2000
BIN=
BUILD=1
OUT=

while [ $# -gt 0 ]; do
  common_option "$@"
  if [ "$SHIFT" -gt 0 ]; then
    shift "$SHIFT"
    continue
  fi
  case "$1" in
    --only) PHASES=${2:?--only needs a list}; shift 2 ;;
    --soak-cap) SOAK_CAP=${2:?--soak-cap needs a number}; shift 2 ;;
    --quick) DURATION=3; SOAK_SESSIONS=10000; SOAK_SECS=10; SOAK_CAP=2000; shift ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
has_phase() { [[ ",$PHASES," == *",$1,"* ]]; }
for p in ${PHASES//,/ }; do
  case "$p" in calls | clamp | latency | soak) ;; *) die "unknown phase $p (calls, clamp, latency, soak)" ;; esac
done
[ "$SOAK_CAP" -lt "$SOAK_SESSIONS" ] || die "--soak-cap must be below $SOAK_SESSIONS sessions, so that the cap is reached"
for tool in curl jq python3; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is needed"
done

ensure_oha
ensure_deloop
bench_scratch

CALLS_URL_RE='/v1/sessions/bench-[0-9]{3}/calls' # 1,000 sessions

# The 4 KB healthy answer: two real healthy answers of the corpus (lists,
# GPT-4 in AlpacaEval; see ../shared/data/real-llm-text/SOURCE.md), joined
# and cut to 4,096 bytes.
CLAMP_BODY="$SCRATCH/clamp.json"
make_clamp_body() {
  local cases="$SHARED/data/real-llm-text/cases.jsonl"
  [ -f "$cases" ] || die "no $cases (set DELOOP_SHARED_DIR)"
  python3 - "$cases" "$CLAMP_BODY" <<'PY'
import json, sys
want = ["healthy-ae-gpt4-499", "healthy-ae-gpt4-9"]
texts = {}
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        c = json.loads(line)
        if c["id"] in want:
            assert c["label"] == "healthy", c["id"]
            texts[c["id"]] = c["text"]
missing = [w for w in want if w not in texts]
if missing:
    sys.exit(f"cases not found: {missing}")
raw = "\n\n".join(texts[w] for w in want).encode("utf-8")
if len(raw) < 4096:
    sys.exit(f"the joined answers are {len(raw)} bytes, under 4096")
text = raw[:4096].decode("utf-8", errors="ignore")
with open(sys.argv[2], "w", encoding="utf-8") as f:
    json.dump({"text": text}, f)
PY
}

# throughput NAME URL-ARGS... : as fast as it goes.
throughput() {
  local name=$1 target=$2 out="$SCRATCH/$1.json" before after
  shift 2
  before=$(load1)
  run_oha "$out" -z "${DURATION}s" -c "$CONNECTIONS" -m POST -T application/json "$@"
  after=$(load1)
  local r e n
  r=$(rps "$out") e=$(errors "$out") n=$(total "$out")
  note "$name: $r requests/s, $n requests, $e errors, p99 $(p99_ms "$out") ms"
  row "$name, ${DURATION} s, $CONNECTIONS connections" "$r requests/s ($n requests, $e errors; p50 $(p50_ms "$out") ms, p99 $(p99_ms "$out") ms)" \
    ">= $target requests/s" "$(met "$(ge "$r" "$target")")" "$before / $after"
}

# fixed_rate NAME URL-ARGS... : oha -q 2000, latency corrected.
fixed_rate() {
  local name=$1 out="$SCRATCH/$1.json" before after
  shift
  before=$(load1)
  run_oha "$out" -z "${DURATION}s" -c "$CONNECTIONS" -q "$LATENCY_RATE" --latency-correction \
    -m POST -T application/json "$@"
  after=$(load1)
  local p e r ok
  p=$(p99_ms "$out") e=$(errors "$out") r=$(rps "$out")
  ok=$(( $(le "$p" 5) && e == 0 ))
  note "$name: p99 $p ms at $r requests/s, $e errors"
  row "$name at $LATENCY_RATE requests/s, ${DURATION} s" "p99 $p ms, p50 $(p50_ms "$out") ms, $e errors ($r requests/s served)" \
    "p99 <= 5 ms, 0 errors" "$(met "$ok")" "$before / $after"
}

# soak NAME MAX_SESSIONS: SOAK_SESSIONS new sessions over SOAK_SECS seconds.
soak() {
  local name=$1 cap=$2 samples="$SCRATCH/$1.rss" out="$SCRATCH/$1.json" before after
  start_server "$name" "[server]
concurrency_limit = 1024
[server.sessions]
max_sessions = $cap"
  local rate=$(( (SOAK_SESSIONS + SOAK_SECS - 1) / SOAK_SECS ))
  before=$(load1)
  # The sampler: seconds, VmRSS (kB), sessions held.
  (
    t=0
    while kill -0 "$SERVER_PID" 2>/dev/null; do
      rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$SERVER_PID/status" 2>/dev/null || true)
      held=$(metric deloop_sessions || true)
      echo "$t ${rss:-0} ${held:-0}"
      sleep 1
      t=$((t + 1))
    done
  ) >"$samples" &
  local sampler=$!
  sleep 2 # two samples of the idle server first
  # 16 random hex digits per session: 2^64 names, so 100,000 draws are
  # distinct (a repeat has odds of about 3e-10); counted below anyway.
  run_oha "$out" -n "$SOAK_SESSIONS" -c 32 -q "$rate" -m POST -T application/json \
    -d "$CALL_BODY" --rand-regex-url "$URL/v1/sessions/soak-[0-9a-f]{16}/calls"
  sleep 3 # the server settles
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  after=$(load1)
  local held evicted expired e secs
  held=$(metric deloop_sessions)
  evicted=$(metric deloop_sessions_evicted_total)
  expired=$(metric deloop_sessions_expired_total)
  e=$(errors "$out")
  secs=$(jq -r '.summary.total | round' "$out")
  stop_servers
  # first / last / max RSS, and the spread once the cap is reached.
  local stats
  stats=$(python3 - "$samples" "$cap" <<'PY'
import sys
rows = [tuple(int(float(x)) for x in l.split()) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if r[1] > 0]
cap = int(sys.argv[2])
mb = lambda kb: kb / 1024
first, last = rows[0][1], rows[-1][1]
peak = max(r[1] for r in rows)
at_cap = [r for r in rows if r[2] >= cap]
if at_cap:
    t0 = at_cap[0][0]
    rss = [r[1] for r in rows if r[0] >= t0]
    lo, hi = min(rss), max(rss)
    spread = 100 * (hi - lo) / lo
    plateau = f"cap reached at {t0} s; after it {mb(lo):.1f}-{mb(hi):.1f} MB ({spread:.1f}% spread)"
else:
    spread = -1
    plateau = "cap not reached"
print(f"{mb(first):.1f}|{mb(last):.1f}|{mb(peak):.1f}|{spread:.1f}|{plateau}|{len(rows)}")
PY
)
  local first last peak spread plateau nsamples
  IFS='|' read -r first last peak spread plateau nsamples <<<"$stats"
  local created=$((held + evicted + expired))
  note "$name: RSS first $first MB, last $last MB, max $peak MB; $plateau; sessions created $created (held $held, evicted $evicted, expired $expired); $e errors"
  local result="RSS first $first MB, last $last MB, max $peak MB; $plateau; $created sessions created in $secs s (held $held, evicted $evicted), $e errors"
  if [ "$cap" -lt "$SOAK_SESSIONS" ]; then
    local ok=0
    if [ "$spread" != "-1.0" ] && [ "$(le "$spread" 10)" = 1 ] && [ "$e" = 0 ]; then ok=1; fi
    row "soak, max_sessions $cap: $SOAK_SESSIONS new sessions at $rate/s" "$result" \
      "flat within 10% at the cap" "$(met "$ok")" "$before / $after"
  else
    row "soak, max_sessions $cap: $SOAK_SESSIONS new sessions at $rate/s (all fit)" "$result" \
      "(reference: no eviction, memory grows)" "-" "$before / $after"
  fi
}

# --- the runs ---------------------------------------------------------------
print_machine

if has_phase calls || has_phase clamp || has_phase latency; then
  make_clamp_body
  start_server guards "[server]
concurrency_limit = 1024"
  # The answer must be healthy: nothing cut.
  clamped=$(curl -s -H 'content-type: application/json' --data-binary "@$CLAMP_BODY" "$URL/v1/clamp" | jq -r .clamped)
  [ "$clamped" = false ] || die "the 4 KB answer is not healthy to the clamp (clamped: $clamped)"
  if has_phase calls; then
    throughput "calls, 1,000 sessions" 20000 -d "$CALL_BODY" --rand-regex-url "$URL$CALLS_URL_RE"
  fi
  if has_phase clamp; then
    throughput "clamp, 4 KB answer" 10000 -D "$CLAMP_BODY" "$URL/v1/clamp"
  fi
  if has_phase latency; then
    fixed_rate "calls p99" -d "$CALL_BODY" --rand-regex-url "$URL$CALLS_URL_RE"
    fixed_rate "clamp p99" -D "$CLAMP_BODY" "$URL/v1/clamp"
  fi
  stop_servers
fi
if has_phase soak; then
  soak "soak-capped" "$SOAK_CAP"
  soak "soak-all-fit" "$SOAK_SESSIONS"
fi

print_table "deloop serve load benchmark" "$OUT"
