#!/usr/bin/env bash
# Figures of the language packages (docs/bindings.md), not a test: the
# per-call cost of `clamp` on a 200-byte text, and `clamp` of 8 MiB of
# healthy prose (SciFact abstracts, built as the Rust benches build it)
# through Python and Node against the Rust API in process
# (crates/deloop-core/examples/repetition_cpu.rs). Every figure is CPU time
# of the calling thread (median of several runs), so it holds on a busy
# machine. Release builds, into a temporary folder (the test builds are
# left alone, except the Node addon in bindings/node, rebuilt by `npm test`).
#
# Needs scripts/setup-bindings.sh (run first) and ../shared/data/scifact.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
PY=$(bash scripts/setup-bindings.sh | sed -n 's/^bindings python: //p')
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
SHARED=${DELOOP_SHARED_DIR:-$ROOT/../shared}
export DELOOP_SHARED_DIR=$SHARED

echo "== Rust, in process (repetition_cpu, release)"
cargo run -q --release -p deloop-core --example repetition_cpu -- 8 clamp 7

PATH="$(dirname "$PY"):$PATH" maturin build -q --release -m bindings/python/Cargo.toml --out "$TMP/wheels" >&2
"$PY" -m pip install -q --disable-pip-version-check --no-deps --target "$TMP/site" "$TMP"/wheels/*.whl
(cd bindings/node && npx napi build --platform --release --js native.js --dts native.d.ts >&2)

echo "== Python (abi3 wheel, release)"
PYTHONPATH="$TMP/site" "$PY" - "$SHARED/data/scifact/corpus.jsonl" <<'PYEOF'
import json, statistics, sys, time
import deloop

def prose(size, path):
    out, n = [], 0
    docs = [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]
    while n < size:
        for d in docs:
            for part in (d.get("title", ""), "\n\n", d.get("text", ""), "\n\n"):
                out.append(part)
                n += len(part.encode())
            if n >= size:
                break
    return b"".join(p.encode() for p in out)[:size].decode("utf-8", "ignore")

small = prose(200, sys.argv[1])
n = 200_000
for _ in range(3):
    t0 = time.thread_time_ns()
    for _ in range(n):
        deloop.clamp(small)
    per = (time.thread_time_ns() - t0) / n / 1000
print(f"clamp, {len(small.encode())} bytes: {per:.2f} us per call (CPU, {n} calls)")
big = prose(8 << 20, sys.argv[1])
rates = []
for _ in range(7):
    t0 = time.thread_time_ns()
    deloop.clamp(big)
    rates.append(len(big.encode()) / ((time.thread_time_ns() - t0) / 1e9) / 1e6)
print(f"clamp, {len(big.encode())} bytes of prose: {statistics.median(rates):.1f} MB/s (CPU, median of 7)")
# The same text as UTF-8 bytes: no str-to-UTF-8 encoding in the call.
raw = big.encode()
rates = []
for _ in range(7):
    t0 = time.thread_time_ns()
    deloop.clamp(raw)
    rates.append(len(raw) / ((time.thread_time_ns() - t0) / 1e9) / 1e6)
print(f"clamp, {len(raw)} bytes of prose as bytes: {statistics.median(rates):.1f} MB/s (CPU, median of 7)")
t0 = time.thread_time_ns()
for _ in range(7):
    big.encode()
enc = (time.thread_time_ns() - t0) / 7 / 1e6
print(f"str.encode() of the same text alone: {enc:.1f} ms")
PYEOF

echo "== Node (napi addon, release)"
node - "$SHARED/data/scifact/corpus.jsonl" <<'JSEOF'
const fs = require('fs')
const deloop = require(process.cwd() + '/bindings/node')
const cpu = () => process.cpuUsage()
const ns = (u) => (u.user + u.system) * 1000
function prose(size, file) {
  const docs = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l))
  const parts = []
  let n = 0
  while (n < size) {
    for (const d of docs) {
      for (const p of [d.title || '', '\n\n', d.text || '', '\n\n']) {
        parts.push(p)
        n += Buffer.byteLength(p)
      }
      if (n >= size) break
    }
  }
  return Buffer.from(parts.join('')).subarray(0, size).toString('utf8').replace(/\ufffd+$/, '')
}
const file = process.argv[2]
const small = prose(200, file)
const n = 200000
let per
for (let k = 0; k < 3; k++) {
  const t0 = cpu()
  for (let i = 0; i < n; i++) deloop.clamp(small)
  per = ns(process.cpuUsage(t0)) / n / 1000
}
console.log(`clamp, ${Buffer.byteLength(small)} bytes: ${per.toFixed(2)} us per call (CPU, ${n} calls)`)
const big = prose(8 << 20, file)
const rates = []
for (let k = 0; k < 7; k++) {
  const t0 = cpu()
  deloop.clamp(big)
  rates.push(Buffer.byteLength(big) / (ns(process.cpuUsage(t0)) / 1e9) / 1e6)
}
rates.sort((a, b) => a - b)
console.log(`clamp, ${Buffer.byteLength(big)} bytes of prose: ${rates[3].toFixed(1)} MB/s (CPU, median of 7)`)
// The same text as a UTF-8 Buffer: no string transcoding in the call.
const raw = Buffer.from(big)
const brates = []
for (let k = 0; k < 7; k++) {
  const t0 = cpu()
  deloop.clamp(raw)
  brates.push(raw.length / (ns(process.cpuUsage(t0)) / 1e9) / 1e6)
}
brates.sort((a, b) => a - b)
console.log(`clamp, ${raw.length} bytes of prose as a Buffer: ${brates[3].toFixed(1)} MB/s (CPU, median of 7)`)
const t1 = cpu()
for (let k = 0; k < 7; k++) Buffer.from(big)
console.log(`Buffer.from() of the same text alone: ${(ns(process.cpuUsage(t1)) / 7 / 1e6).toFixed(1)} ms`)
JSEOF
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
