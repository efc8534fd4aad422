#!/usr/bin/env python3
"""Offline HyDE fusion study: the rankings of deloop, fused in Python by any rule.

Runs `deloop search --queries --json --k 100` three times on one index (the
test questions lexically and by vector, and the cached HyDE passages of one
model by vector, each passage searched on its own), then fuses the lists as
deloop's hybrid search with a HyDE passage does (weighted reciprocal rank
fusion, k = 60, ties by chunk id) with each weighting rule, and scores
nDCG@10 / recall@100 on the SciFact qrels, with the paired difference to
plain hybrid (mean ± standard error, and on the two halves of the queries).

The rules: a fixed weight w (`hyde_agreement_power = 0`), and the agreement
rule (`[oracle] hyde_agreement_power = p`, weight 1): the passage's list
weighs agreementᵖ, the share of the passage's top 10 that the question's
lexical top 10 holds. The plain row reproduces `deloop search --retrieval
hybrid` exactly (every list identical on SciFact).

    python3 scripts/hyde-fusion-offline.py --deloop target/release/deloop \\
        --db /tmp/deloop-beir/minilm-onnx.db --model MODEL [--powers 2,3,4]

The index must hold vectors and HyDE passages cached for MODEL (from
`deloop search --hyde`, see scripts/eval-beir.py); only the test questions
with a cached passage are scored. Standard library only.
"""

import argparse
import json
import math
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
beir = __import__("eval-beir")

DEPTH = 10  # deloop_index::AGREEMENT_DEPTH


def f32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


def lists(deloop, db, queries, mode):
    res = beir.run([deloop, "search", "--db", str(db), "--queries", str(queries), "--json",
                    "--k", "100", "--retrieval", mode])
    out = {}
    for line in res.stdout.splitlines():
        if line.strip():
            row = json.loads(line)
            out[row["query_id"]] = [h["id"] for h in row["hits"]]
    return out


def fuse(weighted, chunk_id, rrf_k=60.0, k=100):
    """deloop's weighted RRF in f32, best first, ties by smaller chunk id."""
    score = {}
    for ids, w in weighted:
        for rank, d in enumerate(ids):
            score[d] = f32(score.get(d, 0.0) + f32(f32(w) / f32(rrf_k + rank + 1)))
    return sorted(score, key=lambda d: (-score[d], chunk_id[d]))[:k]


def agreement(passage, question):
    p, q = passage[:DEPTH], question[:DEPTH]
    if not p or not q:
        return 0.0
    return len(set(p) & set(q)) / max(len(p), len(q))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--deloop", default=str(ROOT / "target/release/deloop"))
    ap.add_argument("--db", required=True)
    ap.add_argument("--model", required=True, help="the HyDE model name of the cached passages")
    ap.add_argument("--data", default=str(beir.shared_dir() / "data/scifact"))
    ap.add_argument("--weights", default="1,0.5,0.25,0.1")
    ap.add_argument("--powers", default="2,3,4")
    a = ap.parse_args()

    data = Path(a.data)
    qrels = beir.load_qrels(data / "qrels" / "test.tsv")
    con = sqlite3.connect(f"file:{a.db}?mode=ro", uri=True)
    cached = dict(con.execute("SELECT question, passage FROM hyde_cache WHERE model = ?",
                              (a.model,)))
    chunk_id = {d: c for c, d in con.execute(
        "SELECT c.id, d.doc_id FROM chunks c JOIN documents d ON c.document_id = d.id")}
    con.close()
    work = Path(tempfile.mkdtemp(prefix="hyde-offline-"))
    qfile, pfile = work / "questions.jsonl", work / "passages.jsonl"
    qids = []
    with (data / "queries.jsonl").open(encoding="utf-8") as f, qfile.open("w") as qo, \
            pfile.open("w") as po:
        for line in f:
            q = json.loads(line)
            passage = cached.get(q["text"].strip())
            if q["_id"] in qrels and passage:
                qids.append(q["_id"])
                qo.write(json.dumps({"_id": q["_id"], "text": q["text"]}) + "\n")
                po.write(json.dumps({"_id": q["_id"], "text": passage}) + "\n")
    if not qids:
        sys.exit(f"no test question has a passage cached for model {a.model!r} in {a.db}")
    lex = lists(a.deloop, a.db, qfile, "lexical")
    vec = lists(a.deloop, a.db, qfile, "vector")
    pas = lists(a.deloop, a.db, pfile, "vector")

    rules = [("plain", lambda q: 0.0)]
    rules += [(f"fused w={w}", (lambda w: lambda q: w)(float(w))) for w in a.weights.split(",")]
    rules += [(f"agreement p={p}", (lambda p: lambda q: agreement(pas[q], lex[q]) ** p)(float(p)))
              for p in a.powers.split(",")]
    per = {}
    for name, rule in rules:
        runs = {}
        for q in qids:
            w = rule(q)
            extra = [(pas[q], w)] if w > 0 else []
            runs[q] = fuse([(lex[q], 1.0), (vec[q], 1.0)] + extra, chunk_id)
        per[name] = {q: (beir.ndcg_at(runs[q], qrels[q], 10), beir.recall_at(runs[q], qrels[q], 100))
                     for q in qids}
    print(f"{len(qids)} test queries with a passage from {a.model}\n")
    print("| hybrid | nDCG@10 | recall@100 | Δ nDCG@10 ± SE | Δ on halves |")
    print("|---|---|---|---|---|")
    for name, _ in rules:
        nd = [per[name][q][0] for q in qids]
        rc = [per[name][q][1] for q in qids]
        d = [per[name][q][0] - per["plain"][q][0] for q in qids]
        se = statistics.stdev(d) / math.sqrt(len(d)) if len(d) > 1 else float("nan")
        halves = [statistics.fmean(d[h::2]) for h in (0, 1)] if len(d) > 1 else [0.0, 0.0]
        print(f"| {name} | {statistics.fmean(nd):.4f} | {statistics.fmean(rc):.4f} "
              f"| {statistics.fmean(d):+.4f} ± {se:.4f} | {halves[0]:+.4f} / {halves[1]:+.4f} |")
    for f in (qfile, pfile):
        f.unlink()
    work.rmdir()


if __name__ == "__main__":
    main()
