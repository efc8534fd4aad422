#!/usr/bin/env python3
"""Streams through LiteLLM's proxy with and without deloop (issue 22,
section 6). A benchmark, not a CI gate: it prints figures and exits 0
unless the benchmark itself could not run.

What it measures: the wall time of healthy streamed chat completions
(client to last byte), in two workloads:
  one   one stream of 2,000 chunks;
  many  50 streams of 500 chunks, one after the other;
through each set-up (the model is a fake OpenAI-compatible server in this
script that streams prose, one word a chunk, as fast as it can):
  litellm           client -> LiteLLM -> model;
  guardrail-full    the same, with deloop as LiteLLM's guardrail
                    (generic_guardrail_api, post_call), every check judged
                    in full (the guardrail sends x-deloop-full-check: 1:
                    deloop as it was before the checks of a stream were
                    judged incrementally);
  guardrail         the same, incremental (deloop's default);
  guardrail-end     the same, with LiteLLM's
                    streaming_end_of_stream_only: true (one check, when
                    the stream has ended);
  deloop-upstream   client -> LiteLLM -> deloop proxy -> model (the model's
                    api_base is deloop);
  deloop-front      client -> deloop proxy -> LiteLLM -> model;
  deloop            client -> deloop proxy -> model (for reference);
  checks-full       deloop's share of the guardrail set-ups alone: the
                    checks LiteLLM posts for each stream (the text so far
                    every 5th chunk, then the whole text) posted straight
                    to deloop, one after the other, judged in full;
  checks            the same, incremental.
Each stream's text is checked: every set-up must pass the healthy text
whole. For the guardrail set-ups the bytes of texts LiteLLM posted and the
bytes deloop judged are read from deloop's /deloop/metrics.

Usage:
    python3 scripts/bench-litellm.py [--proxy PATH] [--litellm PATH]
        [--only litellm,guardrail,...] [--quick] [--out FILE]

  --proxy    the proxy program (default: the example built by
             `cargo build --release -p deloop-proxy --example proxy`, in
             ${CARGO_TARGET_DIR:-target}/release/examples/proxy); it is run
             as `PROXY <upstream> <listen>`. To run the CLI instead, pass
             `--proxy "deloop proxy"`: it is then run with --upstream and
             --listen.
  --litellm  LiteLLM's program (default: the cache of
             scripts/setup-litellm.sh, or DELOOP_LITELLM)
  --quick    one stream of 400 chunks and 5 of 100 (a smoke run)
  --out      also write the table (markdown) to FILE

Next to every figure the 1-minute load average (/proc/loadavg) before and
after the run is printed: on a shared machine, other work shows there.
Only standard-library Python; nothing leaves 127.0.0.1.
"""

import argparse
import http.server
import json
import os
import shlex
import signal
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

LITELLM = "1.106.12"
MASTER_KEY = "sk-deloop-bench-7f3a9c2e41b84d0a9e6f5c1b2d3e4f50"
VOCAB = (
    "river stone light bridge market winter garden letter engine harbor window "
    "forest castle mirror silver thunder meadow canyon lantern orchard velvet "
    "compass harvest island journey kingdom ladder marble needle ocean pepper "
    "quarry ribbon saddle tunnel valley whistle yellow anchor basket candle "
    "desert feather glacier hammer jungle kettle lemon magnet nectar oyster "
    "pillow quartz rocket shadow timber umbrella violet walnut barrel cobalt "
    "dragon ember falcon granite hollow ivory"
).split()


def prose(chunks):
    """Healthy prose, one word a chunk: a fixed walk over VOCAB that never
    repeats a word within three (the test's walk)."""
    state = 0x2545F4914F6CDD1D
    last = [None, None, None]
    out = []
    for i in range(chunks):
        while True:
            state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            w = (state >> 33) % len(VOCAB)
            if w not in last:
                break
        last = last[1:] + [w]
        out.append(VOCAB[w] + (". " if i % 11 == 10 else " "))
    return out


def sse_chunk(delta, finish=None):
    v = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return ("data: " + json.dumps(v) + "\n\n").encode()


class Model(http.server.BaseHTTPRequestHandler):
    """The fake model: a healthy stream of as many chunks as the user's
    message says (`chunks=N`)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = b'{"object": "list", "data": []}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("content-length", "0"))
        req = json.loads(self.rfile.read(n) or b"{}")
        text = req["messages"][-1]["content"]
        chunks = int(text.split("chunks=")[1].split()[0])
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

        def send(b):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))

        send(sse_chunk({"role": "assistant", "content": ""}))
        for piece in prose(chunks):
            send(sse_chunk({"content": piece}))
        send(sse_chunk({}, "stop"))
        send(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, proc, what, timeout=300):
    start = time.time()
    while time.time() - start < timeout:
        if proc.poll() is not None:
            sys.exit(f"{what} exited while starting (code {proc.returncode})")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except Exception:
            time.sleep(0.25)
    sys.exit(f"{what} did not answer {url} within {timeout} s")


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def stream(url, model, chunks, guardrail=None, key=MASTER_KEY):
    """One streamed chat completion: its content."""
    body = {
        "model": model,
        "stream": True,
        "messages": [{"role": "user", "content": f"Tell me a story, chunks={chunks} ."}],
    }
    if guardrail:
        body["guardrails"] = [guardrail]
    req = urllib.request.Request(
        url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", "authorization": f"Bearer {key}"},
    )
    out = []
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            v = json.loads(line[6:])
            for c in v.get("choices") or []:
                piece = (c.get("delta") or {}).get("content")
                if piece:
                    out.append(piece)
    return "".join(out)


def checks(deloop_url, chunks, full, stream_id):
    """The response checks LiteLLM posts for one stream, posted straight
    to deloop: the text so far every 5th chunk, then the whole text. The
    whole text."""
    words = prose(chunks)
    headers = {"content-type": "application/json"}
    if full:
        headers["x-deloop-full-check"] = "1"
    for k in list(range(5, chunks + 1, 5)) + [chunks]:
        body = {
            "texts": ["".join(words[:k])],
            "input_type": "response",
            "litellm_call_id": stream_id,
            "request_data": {},
        }
        req = urllib.request.Request(
            deloop_url + "/beta/litellm_basic_guardrail_api",
            data=json.dumps(body).encode(),
            headers=headers,
        )
        with urllib.request.urlopen(req, timeout=60) as r:
            answer = json.loads(r.read())
        if answer.get("action") != "NONE":
            sys.exit(f"deloop cut the healthy text: {answer}")
    return "".join(words)


def text_bytes(deloop_url):
    """deloop's (received, judged) guardrail text bytes."""
    with urllib.request.urlopen(deloop_url + "/deloop/metrics", timeout=10) as r:
        metrics = r.read().decode()
    got = {"received": 0, "judged": 0}
    for line in metrics.splitlines():
        if line.startswith("deloop_proxy_guardrail_text_bytes_total"):
            for kind in got:
                if f'kind="{kind}"' in line:
                    got[kind] = int(float(line.rsplit(" ", 1)[1]))
    return got["received"], got["judged"]


def default_proxy():
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    return os.path.join(target, "release", "examples", "proxy")


def default_litellm():
    if os.environ.get("DELOOP_LITELLM"):
        return os.environ["DELOOP_LITELLM"]
    cache = os.environ.get("DELOOP_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "deloop"
    )
    return os.path.join(cache, f"litellm-{LITELLM}", "bin", "litellm")


class Procs:
    """The processes this script started, each in its own process group,
    ended at exit."""

    def __init__(self):
        self.procs = []

    def start(self, cmd, log, **kw):
        p = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            **kw,
        )
        self.procs.append(p)
        return p

    def stop(self):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def start_proxy(procs, command, upstream, dir, name):
    port = free_port()
    listen = f"127.0.0.1:{port}"
    parts = shlex.split(command)
    if os.path.basename(parts[0]) == "deloop" or parts[-1] == "proxy":
        cmd = parts + ["--upstream", upstream, "--listen", listen]
    else:
        cmd = parts + [upstream, listen]
    log = open(os.path.join(dir, f"{name}.log"), "w")
    env = dict(os.environ, RUST_LOG="warn", NO_PROXY="127.0.0.1,localhost")
    p = procs.start(cmd, log, env=env, cwd=dir)
    url = f"http://{listen}"
    wait_http(url + "/deloop/healthz", p, name)
    return url


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--proxy", default=None)
    ap.add_argument("--litellm", default=default_litellm())
    ap.add_argument("--only", default="")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    proxy = args.proxy or default_proxy()
    if not args.proxy and not os.path.exists(proxy):
        sys.exit(f"{proxy} is missing: cargo build --release -p deloop-proxy --example proxy")
    if not os.path.exists(args.litellm):
        sys.exit(f"{args.litellm} is missing: bash scripts/setup-litellm.sh")
    one, many, many_chunks = (400, 5, 100) if args.quick else (2000, 50, 500)

    procs = Procs()
    dir = tempfile.mkdtemp(prefix="deloop-bench-litellm-")
    try:
        model = Server(("127.0.0.1", 0), Model)
        threading.Thread(target=model.serve_forever, daemon=True).start()
        model_url = f"http://127.0.0.1:{model.server_address[1]}"
        deloop = start_proxy(procs, proxy, model_url, dir, "deloop")
        port = free_port()
        lite = f"http://127.0.0.1:{port}"
        guardrail = (
            "  - guardrail_name: {name}\n"
            "    litellm_params:\n"
            "      guardrail: generic_guardrail_api\n"
            "      mode: [post_call]\n"
            "      api_base: {deloop}\n"
            "      headers: {headers}\n"
            "      default_on: false\n"
            "      streaming_end_of_stream_only: {end_only}\n"
        )
        model_entry = (
            "  - model_name: {name}\n"
            "    litellm_params:\n"
            "      model: openai/fake-model\n"
            "      api_base: {base}/v1\n"
            "      api_key: sk-upstream-unused\n"
        )
        config = (
            "model_list:\n"
            + model_entry.format(name="direct", base=model_url)
            + model_entry.format(name="behind-deloop", base=deloop)
            + "guardrails:\n"
            + guardrail.format(name="deloop", deloop=deloop, headers="{}", end_only="false")
            + guardrail.format(
                name="deloop-full",
                deloop=deloop,
                headers="{x-deloop-full-check: '1'}",
                end_only="false",
            )
            + guardrail.format(name="deloop-end", deloop=deloop, headers="{}", end_only="true")
            + "litellm_settings:\n  telemetry: false\n"
            + f"general_settings:\n  master_key: {MASTER_KEY}\n"
        )
        with open(os.path.join(dir, "config.yaml"), "w") as f:
            f.write(config)
        env = dict(
            os.environ,
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            LITELLM_TELEMETRY="False",
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
        )
        for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            env.pop(k, None)
        log = open(os.path.join(dir, "litellm.log"), "w")
        cmd = [args.litellm, "--config", "config.yaml", "--host", "127.0.0.1", "--port", str(port)]
        p = procs.start(cmd, log, env=env, cwd=dir)
        print("starting LiteLLM ...", file=sys.stderr)
        wait_http(lite + "/health/liveliness", p, "litellm")
        front = start_proxy(procs, proxy, lite, dir, "deloop-front")

        setups = [
            ("litellm", lite, "direct", None),
            ("guardrail-full", lite, "direct", "deloop-full"),
            ("guardrail", lite, "direct", "deloop"),
            ("guardrail-end", lite, "direct", "deloop-end"),
            ("deloop-upstream", lite, "behind-deloop", None),
            ("deloop-front", front, "direct", None),
            ("deloop", deloop, "fake-model", None),
            ("checks-full", deloop, None, "full"),
            ("checks", deloop, None, "incremental"),
        ]
        only = [s for s in args.only.split(",") if s]
        rows = []
        # A warm-up stream through LiteLLM (its first request loads more).
        stream(lite, "direct", 10)
        for name, url, model_name, g in setups:
            if only and name not in only:
                continue
            for label, count, chunks in (
                (f"1 x {one}", 1, one),
                (f"{many} x {many_chunks}", many, many_chunks),
            ):
                expected = "".join(prose(chunks))
                before = text_bytes(deloop)
                load0 = loadavg()
                start = time.time()
                for i in range(count):
                    if model_name is None:
                        got = checks(url, chunks, g == "full", f"{name}-{label}-{i}")
                    else:
                        got = stream(url, model_name, chunks, g)
                    if got != expected:
                        sys.exit(
                            f"{name}: the healthy text did not pass whole "
                            f"({len(got)} of {len(expected)} bytes)"
                        )
                seconds = time.time() - start
                load1 = loadavg()
                after = text_bytes(deloop)
                received, judged = after[0] - before[0], after[1] - before[1]
                row = (name, label, seconds, received, judged, load0, load1)
                rows.append(row)
                print(
                    f"{name:16} {label:10} {seconds:8.2f} s  posted {received:>11,} B  "
                    f"judged {judged:>9,} B  load {load0:.2f} -> {load1:.2f}",
                    file=sys.stderr,
                )
        table = [
            "| set-up | streams | seconds | texts posted to deloop | judged by deloop | load avg (1 min) before -> after |",
            "|---|---|---:|---:|---:|---|",
        ]
        for name, label, seconds, received, judged, load0, load1 in rows:
            posted = f"{received:,} B" if received else "-"
            judged_s = f"{judged:,} B" if received else "-"
            table.append(
                f"| {name} | {label} | {seconds:.2f} | {posted} | {judged_s} | {load0:.2f} -> {load1:.2f} |"
            )
        text = "\n".join(table)
        print(text)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text + "\n")
    finally:
        procs.stop()


if __name__ == "__main__":
    main()
