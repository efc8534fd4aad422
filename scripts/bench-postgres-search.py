#!/usr/bin/env python3
"""Hybrid search on PostgreSQL over the SciFact corpus (issue 19, section 3):
latency per query (p95) and queries per second. A benchmark, not a CI
gate: it prints figures and whether each target was met (p95 <= 20 ms,
>= 100 queries/s), and exits 0 unless the benchmark itself could not run.

What it does:
1. starts a throwaway PostgreSQL 18 + pgvector cluster on 127.0.0.1
   (scripts/postgres_cluster.py; install it with scripts/setup-postgres.sh);
2. indexes SciFact's 5,183 documents into it with `deloop index --format
   beir --db postgres://... --embedder E` (default minilm-onnx), then runs
   `VACUUM ANALYZE` (the state autovacuum reaches on its own);
3. runs the example `search_load` (crates/deloop-index/examples): every
   SciFact query embedded first (not timed), then each searched once on one
   thread (per-query p50/p95/p99), then all queries `--rounds` times over
   `--threads` threads (queries per second, and latency under that load).
   The timed part is the search: BM25 over the term table, HNSW cosine,
   reciprocal rank fusion, loading the chunks.
With `--sqlite`, the same is measured on an SQLite file built the same way.

Usage (release builds first: `cargo build --release -p deloop` and
`cargo build --release -p deloop-index --example search_load`):

    python3 scripts/bench-postgres-search.py [--deloop target/release/deloop]
        [--search-load target/release/examples/search_load]
        [--data ../shared/data/scifact] [--embedder minilm-onnx|minilm|none]
        [--mode hybrid] [--k 10] [--threads 4] [--rounds 2] [--sqlite]
        [--json results.json]

The 1-minute load average before and after each run is printed next to
its figures: on a shared machine, other work shows there.

Standard library only.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from postgres_cluster import Cluster  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
P95_TARGET_MS = 20.0
QPS_TARGET = 100.0


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def run(cmd: list) -> str:
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"command failed ({res.returncode}): {' '.join(map(str, cmd))}\n{res.stderr}")
    return res.stdout


def index(deloop: str, corpus: Path, db: str, embedder: str) -> dict:
    t0 = time.time()
    out = run([deloop, "index", "--format", "beir", "--db", db, "--embedder", embedder,
               "--reindex", "--quiet", "--json", str(corpus)])
    stats = json.loads(out.strip().splitlines()[-1])
    stats["wall_seconds"] = time.time() - t0
    return stats


def measure(search_load: str, db: str, queries: Path, a) -> dict:
    before = loadavg()
    out = run([search_load, "--db", db, "--queries", str(queries), "--mode", a.mode,
               "--k", str(a.k), "--threads", str(a.threads), "--rounds", str(a.rounds)])
    r = json.loads(out.strip().splitlines()[-1])
    r["loadavg_before"], r["loadavg_after"] = before, loadavg()
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--deloop", default=str(TARGET / "release/deloop"))
    ap.add_argument("--search-load", default=str(TARGET / "release/examples/search_load"))
    ap.add_argument("--data", default=str(ROOT.parent / "shared/data/scifact"))
    ap.add_argument("--embedder", default="minilm-onnx")
    ap.add_argument("--mode", default="hybrid", choices=["hybrid", "lexical", "vector"])
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sqlite", action="store_true", help="also measure an SQLite file")
    ap.add_argument("--json", help="also write the results to this file")
    a = ap.parse_args()
    data = Path(a.data)
    corpus, queries = data / "corpus.jsonl", data / "queries.jsonl"
    for tool in (a.deloop, a.search_load):
        if not Path(tool).is_file():
            sys.exit(f"{tool} is missing: build it first (see --help)")

    results = {"machine": {"cpus": os.cpu_count(), "loadavg_start": loadavg()}, "runs": {}}
    with Cluster() as pg, tempfile.TemporaryDirectory(prefix="deloop-bench-") as tmp:
        pg.create_database("scifact")
        targets = [("postgresql", pg.url("scifact"))]
        if a.sqlite:
            targets.append(("sqlite", str(Path(tmp) / "scifact.db")))
        for name, db in targets:
            stats = index(a.deloop, corpus, db, a.embedder)
            print(f"{name}: indexed {stats['chunks_total']} chunks in "
                  f"{stats['wall_seconds']:.0f} s (embedder {stats['embedder']})", file=sys.stderr)
            if name == "postgresql":
                # The steady state autovacuum reaches: visibility map set
                # (index-only scans of the term table), planner statistics.
                pg.psql("scifact", "VACUUM ANALYZE")
            r = measure(a.search_load, db, queries, a)
            r["index"] = stats
            results["runs"][name] = r

    print(f"\n| backend | mode | queries | p50 ms | p95 ms | p99 ms | threads | queries/s "
          f"| p95 ms under load | load avg before/after |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, r in results["runs"].items():
        s, c = r["sequential"], r["concurrent"]
        print(f"| {name} | {r['mode']} (k={r['k']}, {r['embedder']}) | {s['queries']} "
              f"| {s['p50_ms']:.2f} | {s['p95_ms']:.2f} | {s['p99_ms']:.2f} | {c['threads']} "
              f"| {c['queries_per_second']:.0f} | {c['latency']['p95_ms']:.2f} "
              f"| {r['loadavg_before']:.2f} / {r['loadavg_after']:.2f} |")
    pg_run = results["runs"]["postgresql"]
    p95 = pg_run["sequential"]["p95_ms"]
    qps = pg_run["concurrent"]["queries_per_second"]
    print(f"\nPostgreSQL {pg_run['mode']}: p95 {p95:.2f} ms (target <= {P95_TARGET_MS:g}: "
          f"{'met' if p95 <= P95_TARGET_MS else 'NOT met'}), {qps:.0f} queries/s "
          f"(target >= {QPS_TARGET:g}: {'met' if qps >= QPS_TARGET else 'NOT met'}); "
          f"{os.cpu_count()} CPUs")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
