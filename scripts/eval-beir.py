#!/usr/bin/env python3
"""Evaluate deloop retrieval on a BEIR dataset (SciFact by default).

Builds indexes with the `deloop` binary, runs `deloop search --queries
--json` for every retrieval mode, and computes nDCG@10 and recall@100 itself
from the qrels (no evaluation library), plus indexing throughput and query
latency (p50/p95 of the per-query `took_ms` that deloop reports: query
embedding + search, without process start-up or model loading).

Usage (release build first: `cargo build --release -p deloop`):

    python3 scripts/eval-beir.py [--deloop target/release/deloop]
        [--data ../shared/data/scifact] [--work /tmp/deloop-beir]
        [--reuse] [--json results.json] [--embedder minilm|minilm-onnx ...]
        [--indexes porter,unicode61,minilm,minilm-onnx]
        [--hyde agreement,fused,average[,concat]] [--hyde-weights 1,0.5]
        [--hyde-agreement-power 3] [--hyde-cached-only]
        [--backend sqlite|postgres|both]

`--backend postgres` (or `both`) builds and searches the same indexes in
PostgreSQL with pgvector as well: a throwaway cluster from
scripts/setup-postgres.sh (scripts/postgres_cluster.py), one database per
index, reached with `--db postgres://...`. Its runs are keyed `pg:NAME/MODE`.

HyDE (`--hyde MODES`): every run is repeated with `deloop search --hyde` for
each HyDE mode (`DELOOP_HYDE_QUERY_VECTOR`), `fused` once per weight of
`--hyde-weights` (`DELOOP_HYDE_FUSED_WEIGHT`) with a fixed weight
(`DELOOP_HYDE_AGREEMENT_POWER=0`), and `agreement` as `fused` with weight 1
scaled by the question's agreement to the power `--hyde-agreement-power`
(deloop's default, see docs/retrieval.md). The LLM comes from the
environment as for `deloop search --hyde` (OPENAI_BASE_URL, DELOOP_MODEL,
DELOOP_CONFIG for `[oracle] hyde_temperature` / `hyde_max_output_tokens` /
`hyde_timeout_secs`). Passages are cached in each index per model and
question, so the first HyDE run generates them and the others reuse them.
`--hyde-cached-only` scores every run (plain ones too) on the queries that
already have a cached passage for DELOOP_MODEL in the first index, and never
calls the LLM: for passages generated beforehand.

Standard library only. Prints a markdown table.
"""

import argparse
import json
import math
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))


def shared_dir() -> Path:
    env = os.environ.get("DELOOP_SHARED_DIR")
    return Path(env) if env else ROOT.parent / "shared"


def load_qrels(path: Path) -> dict:
    """query-id -> {corpus-id: relevance} (CRLF tolerated, header skipped)."""
    qrels: dict = {}
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f):
            parts = line.rstrip("\r\n").split("\t")
            if n == 0 and parts[0] == "query-id":
                continue
            if len(parts) != 3:
                continue
            qid, did, score = parts
            if int(score) > 0:
                qrels.setdefault(qid, {})[did] = int(score)
    return qrels


def ndcg_at(ranked: list, rel: dict, k: int) -> float:
    """nDCG@k with linear gains (as BEIR/pytrec_eval), log2(rank+1) discount."""
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(rel.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranked: list, rel: dict, k: int) -> float:
    if not rel:
        return 0.0
    top = set(ranked[:k])
    return sum(1 for d in rel if d in top) / len(rel)


def percentile(values: list, p: float) -> float:
    """Nearest-rank percentile."""
    if not values:
        return float("nan")
    s = sorted(values)
    idx = max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))
    return s[idx]


def run(cmd: list, **kw) -> subprocess.CompletedProcess:
    res = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if res.returncode != 0:
        sys.exit(f"command failed ({res.returncode}): {' '.join(map(str, cmd))}\n{res.stderr}")
    return res


def build(deloop: str, corpus: Path, db, embedder: str, stemmer: str, reuse: bool) -> dict:
    if reuse and isinstance(db, Path) and db.exists():
        return {}
    cmd = [deloop, "index", "--format", "beir", "--db", str(db), "--embedder", embedder,
           "--stemmer", stemmer, "--reindex", "--quiet", "--json", str(corpus)]
    t0 = time.time()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = run(cmd)
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    stats = json.loads(res.stdout.strip().splitlines()[-1])
    stats["wall_seconds"] = time.time() - t0
    # CPU seconds (user + system) of the index process: a figure that does
    # not depend on what else the machine runs.
    stats["cpu_seconds"] = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return stats


def evaluate(deloop: str, db, queries: Path, mode: str, qrels: dict,
             hyde: tuple = None) -> dict:
    """One run; `hyde` = (mode, weight) adds `--hyde` with those settings."""
    cmd = [deloop, "search", "--db", str(db), "--queries", str(queries), "--json",
           "--k", "100", "--retrieval", mode]
    env = None
    if hyde:
        cmd.append("--hyde")
        mode, weight, power = hyde
        env = dict(os.environ, DELOOP_HYDE_QUERY_VECTOR="fused" if mode == "agreement" else mode,
                   DELOOP_HYDE_FUSED_WEIGHT=str(weight),
                   DELOOP_HYDE_AGREEMENT_POWER=str(power))
    res = run(cmd, env=env)
    ndcg, recall, took = [], [], []
    got = {}
    for line in res.stdout.splitlines():
        if line.strip():
            row = json.loads(line)
            got[row["query_id"]] = row
    for qid, rel in qrels.items():
        row = got.get(qid)
        ranked = [h["id"] for h in row["hits"]] if row else []
        ndcg.append(ndcg_at(ranked, rel, 10))
        recall.append(recall_at(ranked, rel, 100))
        if row:
            took.append(row.get("took_ms", float("nan")))
    return {
        "ranked": {qid: [h["id"] for h in row["hits"]] for qid, row in got.items()},
        "ndcg@10": statistics.fmean(ndcg),
        "recall@100": statistics.fmean(recall),
        "p50_ms": percentile(took, 50),
        "p95_ms": percentile(took, 95),
        "queries": len(qrels),
        "fallback": res.stderr.strip()[:2000] or None,
        "hyde_fallbacks": res.stderr.count("HyDE fell back"),
    }


def cached_questions(db: Path, model: str) -> set:
    """The questions with a HyDE passage cached in `db` for `model`."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {q for (q,) in con.execute(
            "SELECT question FROM hyde_cache WHERE model = ?", (model,))}
    finally:
        con.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--deloop", default=str(ROOT / "target/release/deloop"))
    ap.add_argument("--data", default=str(shared_dir() / "data/scifact"))
    ap.add_argument("--work", default="/tmp/deloop-beir")
    ap.add_argument("--split", default="test")
    ap.add_argument("--reuse", action="store_true", help="keep existing index files")
    ap.add_argument("--no-minilm", action="store_true", help="lexical runs only")
    ap.add_argument("--indexes", default="porter,unicode61,minilm,minilm-onnx",
                    help="the indexes to build and run, comma-separated")
    ap.add_argument("--embedder", action="append", choices=["minilm", "minilm-onnx"],
                    help="embedder(s) to build and evaluate (repeatable; default minilm)")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--hyde", default="", help="HyDE modes to run, comma-separated "
                    "(agreement, fused, average, concat); the LLM comes from the environment")
    ap.add_argument("--hyde-agreement-power", default="3", help="the exponent of the "
                    "agreement for `agreement` runs (weight 1)")
    ap.add_argument("--hyde-weights", default="1", help="weights of the HyDE ranking "
                    "for `fused`, comma-separated")
    ap.add_argument("--hyde-cached-only", action="store_true", help="score only the "
                    "queries with a cached HyDE passage for DELOOP_MODEL; never generate")
    ap.add_argument("--backend", default="sqlite", choices=["sqlite", "postgres", "both"],
                    help="where the indexes live: SQLite files in --work, databases of a "
                    "throwaway PostgreSQL cluster, or both")
    a = ap.parse_args()
    with ExitStack() as stack:
        run_all(a, stack)


def run_all(a, stack) -> None:
    hyde_runs = []
    for m in filter(None, a.hyde.split(",")):
        if m == "fused":
            hyde_runs += [(m, float(w), 0.0) for w in a.hyde_weights.split(",")]
        elif m == "agreement":
            hyde_runs.append((m, 1.0, float(a.hyde_agreement_power)))
        else:
            hyde_runs.append((m, 1.0, 0.0))

    data = Path(a.data)
    corpus, qfile = data / "corpus.jsonl", data / "queries.jsonl"
    qrels = load_qrels(data / "qrels" / f"{a.split}.tsv")
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)

    # Only the queries of the split (queries.jsonl holds train and test).
    test_queries = work / f"queries-{a.split}.jsonl"
    with qfile.open(encoding="utf-8") as f, test_queries.open("w", encoding="utf-8") as out:
        for line in f:
            q = json.loads(line)
            if q["_id"] in qrels:
                out.write(json.dumps({"_id": q["_id"], "text": q["text"]}) + "\n")

    results = {"queries": len(qrels), "builds": {}, "runs": {}}
    builds = [("porter", "none", "porter"), ("unicode61", "none", "none")]
    embedders = [] if a.no_minilm else (a.embedder or ["minilm"])
    for e in embedders:
        builds.append((e, e, "porter"))
    builds = [b for b in builds if b[0] in a.indexes.split(",")]
    # Where each index lives: (key prefix, index name) -> --db value.
    locations = {}
    if a.backend in ("sqlite", "both"):
        for name, _, _ in builds:
            locations[("", name)] = work / f"{name}.db"
    if a.backend in ("postgres", "both"):
        from postgres_cluster import Cluster
        pg = stack.enter_context(Cluster())
        for name, _, _ in builds:
            pg.create_database(f"beir_{name}")
            locations[("pg:", name)] = pg.url(f"beir_{name}")
    for (prefix, name), db in locations.items():
        embedder, stemmer = next((e, st) for n, e, st in builds if n == name)
        stats = build(a.deloop, corpus, db, embedder, stemmer, a.reuse)
        if a.hyde_cached_only:
            if not isinstance(db, Path):
                sys.exit("--hyde-cached-only reads the passages from an SQLite index: "
                         "use --backend sqlite or both")
            # Keep the queries whose passage the first index has cached.
            cached = cached_questions(db, os.environ.get("DELOOP_MODEL", ""))
            texts = {}
            with qfile.open(encoding="utf-8") as f:
                for line in f:
                    q = json.loads(line)
                    texts[q["_id"]] = q["text"].strip()
            qrels = {qid: rel for qid, rel in qrels.items() if texts.get(qid) in cached}
            results["queries"] = len(qrels)
            with test_queries.open("w", encoding="utf-8") as out:
                for qid in qrels:
                    out.write(json.dumps({"_id": qid, "text": texts[qid]}) + "\n")
            a.hyde_cached_only = False
            # No LLM: a passage missing from a later index falls back at once.
            os.environ["OPENAI_BASE_URL"] = "http://127.0.0.1:9/v1"
            print(f"{len(qrels)} queries with a cached passage", file=sys.stderr)
        results["builds"][prefix + name] = stats
        if stats:
            rate = stats["chunks_written"] / stats["seconds"] if stats["seconds"] else 0
            print(f"index {prefix}{name}: {stats['chunks_written']} chunks in {stats['seconds']:.1f}s "
                  f"= {rate:.1f} chunks/s (embedder {stats['embedder']})", file=sys.stderr)

    plan = [("porter", "lexical"), ("unicode61", "lexical")]
    for e in embedders:
        plan += [(e, "lexical"), (e, "vector"), (e, "hybrid")]
    plan = [p for p in plan if p[0] in a.indexes.split(",")]
    plan = [(prefix, n, mode) for prefix in ("", "pg:") for n, mode in plan
            if (prefix, n) in locations]
    for prefix, db_name, mode in plan:
        for hyde in [None] + hyde_runs:
            r = evaluate(a.deloop, locations[(prefix, db_name)], test_queries, mode, qrels, hyde)
            key = f"{prefix}{db_name}/{mode}"
            if hyde:
                key += f" + HyDE {hyde[0]}" + (f" w={hyde[1]:g}" if hyde[0] == "fused" else "") \
                    + (f" p={hyde[2]:g}" if hyde[0] == "agreement" else "")
            results["runs"][key] = r
            print(f"{key}: nDCG@10 {r['ndcg@10']:.4f} recall@100 {r['recall@100']:.4f}"
                  + (f" ({r['hyde_fallbacks']} HyDE fallbacks)" if hyde else ""),
                  file=sys.stderr)

    # Offline fusion sweep over the lexical and vector runs (same depth, 100,
    # as deloop's hybrid search at k=100): how sensitive RRF is to its k.
    first = embedders[0] if embedders else "minilm"
    lex, vec = results["runs"].get(f"{first}/lexical"), results["runs"].get(f"{first}/vector")
    if lex and vec:
        sweep = {}
        for rk in (10, 20, 40, 60, 100):
            nd, rc = [], []
            for qid, rel in qrels.items():
                fused: dict = {}
                for lst in (lex["ranked"].get(qid, []), vec["ranked"].get(qid, [])):
                    for rank, d in enumerate(lst):
                        fused[d] = fused.get(d, 0.0) + 1.0 / (rk + rank + 1)
                ranked = sorted(fused, key=lambda d: -fused[d])
                nd.append(ndcg_at(ranked, rel, 10))
                rc.append(recall_at(ranked, rel, 100))
            sweep[rk] = (statistics.fmean(nd), statistics.fmean(rc))
        results["rrf_sweep"] = {str(k): v for k, v in sweep.items()}
        print("\nRRF k sweep (offline, from the lexical and vector runs): " + ", ".join(
            f"k={k}: nDCG@10 {v[0]:.4f} R@100 {v[1]:.4f}" for k, v in sweep.items()))

    for r in results["runs"].values():
        r.pop("ranked", None)
    print(f"\n| index / retrieval | nDCG@10 | recall@100 | p50 ms | p95 ms |")
    print("|---|---|---|---|---|")
    for key, r in results["runs"].items():
        print(f"| {key} | {r['ndcg@10']:.4f} | {r['recall@100']:.4f} "
              f"| {r['p50_ms']:.2f} | {r['p95_ms']:.2f} |")
    print(f"\n{len(qrels)} queries ({a.split} split)")
    if hyde_runs:
        print(f"HyDE model: {os.environ.get('DELOOP_MODEL', '(default)')}")
    for name, s in results["builds"].items():
        if s:
            rate = s["chunks_written"] / s["seconds"] if s["seconds"] else 0
            cpu = s["chunks_written"] / s["cpu_seconds"] if s.get("cpu_seconds") else 0
            print(f"- index {name}: {s['chunks_written']} chunks, {s['seconds']:.1f} s, "
                  f"{rate:.1f} chunks/s wall, {cpu:.1f} chunks per CPU-second")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
