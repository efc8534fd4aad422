#!/usr/bin/env python3
"""Records greedy generations of the real small models and judges each with
deloop's own guard. Run it through scripts/real-model-measure.sh, which finds
llama-server, the models and the deloop binary.

For each model and each prompt of testdata/real-model/prompts.jsonl it starts
(once per model) llama-server on 127.0.0.1, streams one greedy generation
(temperature 0, top_k 1, seed 0, max_tokens limit) straight from the server,
and writes one JSON line with the text, the token count and the seconds the
server reports, and the byte length of each streamed chunk (`chunk_bytes`: one
chunk per token, except where llama-server holds back a split UTF-8
character), so that a stream guard can be replayed token by token.

Each text then goes through `deloop clamp --json` (the batch verdict) and
`deloop clamp --stream` (where the streaming watcher first sees the loop, the
point at which a proxy would cut): from that byte and the chunk offsets it
computes the tokens and seconds of generation a cut would have saved.

With --proxy, each generation goes THROUGH `deloop proxy` instead (client ->
proxy -> llama-server; the proxy is the deloop binary's `proxy` command with
its default config): the record then holds what the client received (the cut
text ends with the guard's marker), the proxy's `deloop` object when it cut,
and what llama-server itself counted for the request (`/metrics`:
tokens_predicted_total and tokens_predicted_seconds_total, read once its slot
is idle), which shows whether dropping the stream stopped the generation.
--report-proxy joins such a file with the recorded direct set and the labels:
loops cut by the proxy, tokens and seconds the server did not generate, and
any healthy answer that changed. A proxied run never writes the recorded set.

Hand labels (loop / healthy / ambiguous) are NOT made here: they live in
testdata/real-model/labels.jsonl and were written by reading the outputs.
With --report, the summary table joins them.

Only the Python standard library is used.
"""

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

MODELS = {
    # key: (env var, display name, endpoint)
    "smollm2": ("DELOOP_MODEL_SMOLLM2", "SmolLM2-135M-Instruct Q4_1", "chat"),
    "gemma3": ("DELOOP_MODEL_GEMMA3", "Gemma 3 270M Q4_K_M (base)", "completion"),
}


def die(msg):
    print(f"real-model-measure: {msg}", file=sys.stderr)
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url, body=None, timeout=600):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


class Server:
    def __init__(self, binary, model_path, ctx_size, threads):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile(prefix="deloop-llama-", suffix=".log", delete=False)
        args = [binary, "--model", model_path, "--host", "127.0.0.1", "--port", str(self.port),
                "--ctx-size", str(ctx_size), "--parallel", "1", "--metrics", "--slots"]
        if threads:
            args += ["--threads", str(threads)]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = time.time() + 180
        while True:
            if self.proc.poll() is not None:
                die(f"llama-server exited ({self.proc.returncode}); log: {self.log.name}")
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.time() > deadline:
                self.close()
                die(f"llama-server did not answer /health in 180 s; log: {self.log.name}")
            time.sleep(0.2)

    def close(self):
        self.proc.kill()
        self.proc.wait()
        os.unlink(self.log.name)


    def get(self, path):
        with urllib.request.urlopen(self.base + path, timeout=60) as r:
            return r.read().decode("utf-8")

    def counters(self):
        """llama-server's own counters (`/metrics`, `llamacpp:` names)."""
        out = {}
        for line in self.get("/metrics").splitlines():
            if line.startswith("llamacpp:"):
                name, value = line.split()[:2]
                out[name[len("llamacpp:"):]] = float(value)
        return out

    def wait_idle(self, timeout=900):
        deadline = time.time() + timeout
        while any(s.get("is_processing") for s in json.loads(self.get("/slots"))):
            if time.time() > deadline:
                die(f"llama-server still busy {timeout} s after a request")
            time.sleep(0.05)


class Proxy:
    """`deloop proxy` in front of a server, on a free port."""

    def __init__(self, deloop, upstream):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile(prefix="deloop-proxy-", suffix=".log", delete=False)
        env = {k: v for k, v in os.environ.items() if not k.startswith("DELOOP_PROXY_")}
        self.proc = subprocess.Popen(
            [deloop, "proxy", "--upstream", upstream, "--listen", f"127.0.0.1:{self.port}"],
            stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL, env=env)
        deadline = time.time() + 60
        while True:
            if self.proc.poll() is not None:
                die(f"deloop proxy exited ({self.proc.returncode}); log: {self.log.name}")
            try:
                with urllib.request.urlopen(self.base + "/deloop/healthz", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.time() > deadline:
                self.close()
                die(f"deloop proxy did not answer /deloop/healthz in 60 s; log: {self.log.name}")
            time.sleep(0.1)

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.unlink(self.log.name)


def request_body(endpoint, prompt, max_tokens, stream):
    common = {
        "max_tokens": max_tokens,
        "temperature": 0,
        "top_k": 1,
        "seed": 0,
        "stream": stream,
        "cache_prompt": False,
    }
    if stream:
        common["stream_options"] = {"include_usage": True}
    if endpoint == "chat":
        return "/v1/chat/completions", {"messages": [{"role": "user", "content": prompt}], **common}
    # A base model continues a document. Its GGUF has no chat template
    # (llama-server would fall back to ChatML, which Gemma does not know), so
    # the prompt is framed as a question-and-answer document instead.
    return "/v1/completions", {"prompt": f"Question: {prompt}\nAnswer:", **common}


def generate_stream(base, endpoint, prompt, max_tokens):
    """Streams one generation from `base` (the server or the proxy); returns
    (text, chunk_bytes, usage, timings, finish, wall seconds, the proxy's deloop object)."""
    path, body = request_body(endpoint, prompt, max_tokens, stream=True)
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    text = bytearray()
    chunk_bytes = []
    usage = timings = finish = cut = None
    started = time.time()
    with urllib.request.urlopen(req, timeout=900) as r:
        for raw in r:
            line = raw.decode("utf-8").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            ev = json.loads(data)
            if ev.get("usage"):
                usage = ev["usage"]
            if ev.get("timings"):
                timings = ev["timings"]
            if ev.get("deloop"):
                cut = ev["deloop"]
            if ev.get("error"):
                die(f"the stream ended with an error: {ev['error']}")
            for choice in ev.get("choices", []):
                piece = choice.get("delta", {}).get("content") if endpoint == "chat" else choice.get("text")
                if piece:
                    piece = piece.encode("utf-8")
                    text += piece
                    chunk_bytes.append(len(piece))
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
    wall = time.time() - started
    return text.decode("utf-8"), chunk_bytes, usage, timings, finish, wall, cut


def generate_plain(server, endpoint, prompt, max_tokens):
    path, body = request_body(endpoint, prompt, max_tokens, stream=False)
    out = http_json(server.base + path, body)
    choice = out["choices"][0]
    return choice["message"]["content"] if endpoint == "chat" else choice["text"]


def deloop_verdicts(deloop, text):
    """(batch verdict of `clamp --json`, byte where `clamp --stream` saw the loop or None)."""
    data = text.encode("utf-8")
    batch = subprocess.run([deloop, "clamp", "--json"], input=data, capture_output=True)
    if batch.returncode not in (0, 3):
        die(f"deloop clamp --json failed ({batch.returncode}): {batch.stderr.decode(errors='replace')}")
    verdict = json.loads(batch.stdout)
    stream = subprocess.run([deloop, "clamp", "--stream"], input=data, capture_output=True)
    if stream.returncode not in (0, 3):
        die(f"deloop clamp --stream failed ({stream.returncode}): {stream.stderr.decode(errors='replace')}")
    seen = None
    m = re.search(rb"seen at byte (\d+)", stream.stderr)
    if stream.returncode == 3:
        if not m:
            die(f"deloop clamp --stream cut without saying where: {stream.stderr!r}")
        seen = int(m.group(1))
    return verdict, seen


def savings(rec, seen):
    """Tokens and seconds generated after the chunk in which the watcher saw the loop."""
    if seen is None:
        return 0, 0.0
    ends, end = [], 0
    for n in rec["chunk_bytes"]:
        end += n
        ends.append(end)
    upto = next((i + 1 for i, e in enumerate(ends) if e >= seen), len(ends))
    # Chunks are tokens, except where a split UTF-8 character joins two; the
    # token count comes from the server, so scale by it.
    tokens = rec["tokens"]
    saved = round(tokens * (len(ends) - upto) / len(ends)) if ends else 0
    per_token = rec["seconds"] / tokens if tokens else 0.0
    return saved, round(saved * per_token, 3)


def record(args):
    prompts = [json.loads(l) for l in open(args.prompts, encoding="utf-8") if l.strip()]
    if args.only:
        keep = set(args.only.split(","))
        prompts = [p for p in prompts if p["id"] in keep]
    out = open(args.out, "w", encoding="utf-8")
    for key in args.models.split(","):
        if key not in MODELS:
            die(f"unknown model {key!r}; known: {', '.join(MODELS)}")
        env, display, endpoint = MODELS[key]
        model_path = os.environ.get(env)
        if not model_path or not os.path.isfile(model_path):
            die(f"{env} does not name a model file; run scripts/setup-models.sh")
        server = Server(args.llama_server, model_path, args.ctx_size, args.threads)
        proxy = None
        try:
            if args.proxy:
                proxy = Proxy(args.deloop, server.base)
            for p in prompts:
                if proxy:
                    out.write(json.dumps(through_proxy(args, server, proxy, key, display, endpoint, p),
                                         ensure_ascii=False) + "\n")
                    out.flush()
                    continue
                text, chunks, usage, timings, finish, wall, _ = generate_stream(
                    server.base, endpoint, p["prompt"], args.max_tokens)
                tokens = (timings or {}).get("predicted_n") or (usage or {}).get("completion_tokens") or len(chunks)
                seconds = ((timings or {}).get("predicted_ms") or wall * 1000) / 1000
                rec = {
                    "id": f"{key}/{p['id']}",
                    "model": display,
                    "prompt_id": p["id"],
                    "lang": p["lang"],
                    "kind": p["kind"],
                    "endpoint": "/v1/chat/completions" if endpoint == "chat" else "/v1/completions",
                    "max_tokens": args.max_tokens,
                    "text": text,
                    "finish_reason": finish,
                    "tokens": tokens,
                    "seconds": round(seconds, 3),
                    "chunk_bytes": chunks,
                }
                if args.verify_plain:
                    plain = generate_plain(server, endpoint, p["prompt"], args.max_tokens)
                    rec["plain_matches_stream"] = plain == text
                verdict, seen = deloop_verdicts(args.deloop, text)
                saved_tokens, saved_secs = savings(rec, seen)
                rec["deloop"] = {
                    "clamped": verdict["clamped"],
                    "detector": verdict["detector"],
                    "start": verdict["start"],
                    "keep_bytes": verdict["keep_bytes"],
                    "stream_seen_at_byte": seen,
                    "tokens_saved": saved_tokens,
                    "seconds_saved": saved_secs,
                }
                out.write(json.dumps(rec, ensure_ascii=False) + "\n")
                out.flush()
                flag = "CUT " if verdict["clamped"] else "    "
                print(f"{flag}{rec['id']:<24} {tokens:>4} tok {seconds:6.2f} s {finish}", file=sys.stderr)
        finally:
            if proxy:
                proxy.close()
            server.close()
    out.close()


def through_proxy(args, server, proxy, key, display, endpoint, p):
    """One generation through `deloop proxy`; what the client received and
    what llama-server counted for it (read once its slot is idle, so a
    generation the cut did not stop shows up here)."""
    server.wait_idle()
    before = server.counters()
    text, chunks, usage, timings, finish, wall, cut = generate_stream(
        proxy.base, endpoint, p["prompt"], args.max_tokens)
    server.wait_idle()
    after = server.counters()
    tokens = round(after["tokens_predicted_total"] - before["tokens_predicted_total"])
    seconds = after["tokens_predicted_seconds_total"] - before["tokens_predicted_seconds_total"]
    rec = {
        "id": f"{key}/{p['id']}",
        "model": display,
        "prompt_id": p["id"],
        "endpoint": "/v1/chat/completions" if endpoint == "chat" else "/v1/completions",
        "max_tokens": args.max_tokens,
        "text": text,
        "finish_reason": finish,
        "proxy_cut": cut,
        "server_tokens": tokens,
        "server_seconds": round(seconds, 3),
        "client_wall_seconds": round(wall, 3),
        "chunk_bytes": chunks,
    }
    flag = "CUT " if cut else "    "
    print(f"{flag}{rec['id']:<24} {tokens:>4} tok {seconds:6.2f} s {finish}", file=sys.stderr)
    return rec


def report_proxy(args):
    """The table of a --proxy run, joined with the recorded direct set (same
    prompts, same greedy decoding) and the hand labels."""
    proxied = [json.loads(l) for l in open(args.out, encoding="utf-8") if l.strip()]
    direct = {json.loads(l)["id"]: json.loads(l) for l in open(args.direct, encoding="utf-8") if l.strip()}
    labels = {json.loads(l)["id"]: json.loads(l) for l in open(args.labels, encoding="utf-8") if l.strip()}
    marker = " [\u2026]"
    rows, notes = {}, []
    for r in proxied:
        key = r["id"].split("/")[0]
        d = direct.get(r["id"])
        if d is None:
            die(f"{r['id']} is not in {args.direct}")
        label = labels.get(r["id"], {}).get("label", "unlabelled")
        row = rows.setdefault(key, {"model": r["model"], "n": 0, "loop": 0, "healthy": 0, "ambiguous": 0,
                                    "unlabelled": 0, "cut_loops": 0, "cut_other": 0, "healthy_changed": 0,
                                    "direct_tokens": 0, "direct_seconds": 0.0, "tokens": 0, "seconds": 0.0,
                                    "diverged": 0, "after_cut": 0})
        row["n"] += 1
        row[label] += 1
        cut = r["proxy_cut"] is not None
        if cut and label == "loop":
            row["cut_loops"] += 1
        elif cut:
            row["cut_other"] += 1
            notes.append(f"{r['id']} ({label}) was cut: {r['proxy_cut']}")
        # The marker loses its space where the kept text ends a line.
        kept = r["text"]
        for m in (marker, marker.lstrip()):
            if cut and kept.endswith(m):
                kept = kept[:-len(m)]
                break
        if not d["text"].startswith(kept) or (not cut and kept != d["text"]):
            # Greedy decoding should give the recorded text; say so when not.
            row["diverged"] += 1
            notes.append(f"{r['id']}: the text differs from the recorded generation")
        if label == "healthy" and r["text"] != d["text"]:
            row["healthy_changed"] += 1
            notes.append(f"{r['id']}: a healthy answer changed")
        row["direct_tokens"] += d["tokens"]
        row["direct_seconds"] += d["seconds"]
        row["tokens"] += r["server_tokens"]
        if cut:
            # Tokens the server generated that the client never got (one
            # chunk per token, within a split UTF-8 character): what the
            # server made before it noticed the dropped connection.
            row["after_cut"] += max(0, r["server_tokens"] - len(r["chunk_bytes"]))
        row["seconds"] += r["server_seconds"]
    print("| model (greedy, max_tokens) | prompts | loops (hand) | loops cut by the proxy | other cuts | healthy (changed) | "
          "tokens generated direct | tokens generated through the proxy | tokens saved | seconds saved (at this run's rate) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    if len(rows) > 1:
        both = {"model": "both"}
        for x in list(rows.values()):
            for k, v in x.items():
                if k != "model":
                    both[k] = both.get(k, 0) + v
        rows["both"] = both
    for key, x in rows.items():
        saved = x["direct_tokens"] - x["tokens"]
        rate = x["seconds"] / x["tokens"] if x["tokens"] else 0.0
        share = 100 * saved / x["direct_tokens"] if x["direct_tokens"] else 0
        print(f"| {x['model']} | {x['n']} | {x['loop']} | {x['cut_loops']} | {x['cut_other']} | "
              f"{x['healthy']} ({x['healthy_changed']}) | {x['direct_tokens']:,} | {x['tokens']:,} | "
              f"{saved:,} ({share:.0f}%) | {saved * rate:.0f} |")
    for key, x in rows.items():
        print(f"\n{key}: {x['tokens']:,} tokens in {x['seconds']:.1f} s of generation through the proxy "
              f"(llama-server's own counters); the recorded direct run: {x['direct_tokens']:,} tokens in "
              f"{x['direct_seconds']:.0f} s (another load); {x['diverged']} texts differ from the recorded ones; "
              f"{x['after_cut']} tokens generated after the cuts and never sent")
    for n in notes:
        print(n)


def report(args):
    recs = [json.loads(l) for l in open(args.out, encoding="utf-8") if l.strip()]
    labels = {}
    if os.path.exists(args.labels):
        labels = {json.loads(l)["id"]: json.loads(l) for l in open(args.labels, encoding="utf-8") if l.strip()}
    rows = {}
    for r in recs:
        key = r["id"].split("/")[0]
        label = labels.get(r["id"], {}).get("label", "unlabelled")
        row = rows.setdefault(key, {"n": 0, "loop": 0, "healthy": 0, "ambiguous": 0, "unlabelled": 0,
                                    "caught": 0, "healthy_changed": 0, "tokens": 0, "seconds": 0.0,
                                    "tokens_saved": 0, "seconds_saved": 0.0, "model": r["model"]})
        row["n"] += 1
        row[label] += 1
        row["tokens"] += r["tokens"]
        row["seconds"] += r["seconds"]
        cut = r["deloop"]["clamped"]
        if label == "loop" and cut:
            row["caught"] += 1
        if label == "healthy" and cut:
            row["healthy_changed"] += 1
        row["tokens_saved"] += r["deloop"]["tokens_saved"]
        row["seconds_saved"] += r["deloop"]["seconds_saved"]
    print("| model | prompts | loops (hand) | cut by deloop | healthy | healthy changed | ambiguous | tokens generated | seconds | tokens saved | seconds saved |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for key, x in rows.items():
        print(f"| {x['model']} | {x['n']} | {x['loop']} | {x['caught']} | {x['healthy']} | {x['healthy_changed']} | "
              f"{x['ambiguous']} | {x['tokens']} | {x['seconds']:.0f} | {x['tokens_saved']} | {x['seconds_saved']:.0f} |")
    if any(x["unlabelled"] for x in rows.values()):
        print(f"\n{sum(x['unlabelled'] for x in rows.values())} generations have no hand label in {args.labels}")


def main():
    # A TERM (a killed job) must still stop the llama-server this started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-server", default=os.environ.get("DELOOP_LLAMA_SERVER"))
    ap.add_argument("--deloop", required=False)
    ap.add_argument("--models", default="smollm2,gemma3")
    ap.add_argument("--prompts", default="testdata/real-model/prompts.jsonl")
    ap.add_argument("--out", default="testdata/real-model/generations.jsonl")
    ap.add_argument("--labels", default="testdata/real-model/labels.jsonl")
    ap.add_argument("--max-tokens", type=int, default=400)
    ap.add_argument("--ctx-size", type=int, default=2048)
    # One thread: on a machine whose cores are busy (CI, other builds), two
    # threads spinning on ggml's barriers ran 13x slower than one here.
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", help="comma-separated prompt ids")
    ap.add_argument("--verify-plain", action="store_true",
                    help="also request each prompt without streaming and record whether the texts match")
    ap.add_argument("--report", action="store_true", help="only print the table from --out and --labels")
    ap.add_argument("--proxy", action="store_true",
                    help="send every request through `deloop proxy` (needs --out; the recorded set is not touched)")
    ap.add_argument("--report-proxy", action="store_true",
                    help="only print the table of a --proxy run (--out) against the recorded set (--direct)")
    ap.add_argument("--direct", default="testdata/real-model/generations.jsonl",
                    help="the recorded direct generations a --proxy run is compared with")
    args = ap.parse_args()
    if args.proxy and os.path.abspath(args.out) == os.path.abspath(ap.get_default("out")):
        die("--proxy needs --out FILE: a proxied run must not overwrite the recorded set")
    if args.report_proxy:
        report_proxy(args)
        return
    if args.report:
        report(args)
        return
    if not args.llama_server or not os.path.isfile(args.llama_server):
        die("no llama-server binary (DELOOP_LLAMA_SERVER); run scripts/setup-llama.sh")
    if not args.deloop or not os.path.isfile(args.deloop):
        die("no deloop binary (--deloop); build it with cargo build -p deloop")
    record(args)
    if args.proxy:
        report_proxy(args)
    else:
        report(args)


if __name__ == "__main__":
    main()
