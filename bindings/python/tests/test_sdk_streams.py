"""`deloop.openai.guard` on the official openai and anthropic SDKs (sync
and async), talking to a server on 127.0.0.1 that streams a looping reply
without end: the guard yields the healthy text and the marker, then the
client closes the connection, which the server sees as a failed write."""

import asyncio
import http.server
import json
import threading
import time

import pytest

import deloop
import deloop.openai

openai = pytest.importorskip("openai", reason="the openai SDK (scripts/setup-bindings.sh)")
anthropic = pytest.importorskip("anthropic", reason="the anthropic SDK (scripts/setup-bindings.sh)")

INTRO = "Here is the plan for the migration of the archive. "
UNIT = "we check the logs and then "
# The server gives up after this many deltas: far more than any cut needs.
MAX_DELTAS = 20_000


class LoopServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.closed_by_client = threading.Event()
        self.sent = 0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("content-length", 0))
        self.rfile.read(length)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        anthropic_api = self.path.endswith("/messages")
        try:
            for event in self.events(anthropic_api):
                data = event.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
                self.server.sent += 1
                time.sleep(0.001)
        except (BrokenPipeError, ConnectionResetError):
            self.server.closed_by_client.set()
            return
        self.wfile.write(b"0\r\n\r\n")

    def events(self, anthropic_api):
        deltas = [INTRO] + [UNIT] * MAX_DELTAS
        if anthropic_api:
            start = {
                "type": "message_start",
                "message": {
                    "id": "msg_1", "type": "message", "role": "assistant", "content": [],
                    "model": "loop", "stop_reason": None, "stop_sequence": None,
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                },
            }
            yield f"event: message_start\ndata: {json.dumps(start)}\n\n"
            block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
            yield f"event: content_block_start\ndata: {json.dumps(block)}\n\n"
            for d in deltas:
                ev = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": d}}
                yield f"event: content_block_delta\ndata: {json.dumps(ev)}\n\n"
        else:
            for d in deltas:
                chunk = {
                    "id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "loop",
                    "choices": [{"index": 0, "delta": {"content": d}, "finish_reason": None}],
                }
                yield f"data: {json.dumps(chunk)}\n\n"
            yield "data: [DONE]\n\n"


@pytest.fixture
def server():
    s = LoopServer()
    t = threading.Thread(target=s.serve_forever, daemon=True)
    t.start()
    yield s
    s.shutdown()
    s.server_close()


def base_url(s):
    return f"http://127.0.0.1:{s.server_address[1]}"


def assert_cut(server, text, cut):
    assert cut is not None and cut.detector == "word_period"
    assert text.startswith(INTRO)
    assert text.endswith(" […]")
    assert text == deloop.clamp(INTRO + UNIT * 40).text
    # The server's next writes fail once the client has closed the
    # connection (the wait is a deadline, not a measurement).
    assert server.closed_by_client.wait(60), "the client did not close the connection"
    assert server.sent < MAX_DELTAS


def test_openai_sync(server):
    client = openai.OpenAI(base_url=base_url(server) + "/v1", api_key="test", max_retries=0)
    stream = client.chat.completions.create(model="loop", messages=[{"role": "user", "content": "go"}], stream=True)
    g = deloop.openai.guard(stream)
    text = "".join(g)
    assert_cut(server, text, g.cut)


def test_openai_async(server):
    async def run():
        client = openai.AsyncOpenAI(base_url=base_url(server) + "/v1", api_key="test", max_retries=0)
        stream = await client.chat.completions.create(
            model="loop", messages=[{"role": "user", "content": "go"}], stream=True
        )
        g = deloop.openai.guard(stream)
        parts = [t async for t in g]
        await client.close()
        return "".join(parts), g.cut

    text, cut = asyncio.run(run())
    assert_cut(server, text, cut)


def test_anthropic_sync(server):
    client = anthropic.Anthropic(base_url=base_url(server), api_key="test", max_retries=0)
    stream = client.messages.create(
        model="loop", max_tokens=10, messages=[{"role": "user", "content": "go"}], stream=True
    )
    g = deloop.openai.guard(stream)
    text = "".join(g)
    assert_cut(server, text, g.cut)


def test_anthropic_async(server):
    async def run():
        client = anthropic.AsyncAnthropic(base_url=base_url(server), api_key="test", max_retries=0)
        stream = await client.messages.create(
            model="loop", max_tokens=10, messages=[{"role": "user", "content": "go"}], stream=True
        )
        g = deloop.openai.guard(stream)
        parts = [t async for t in g]
        await client.close()
        return "".join(parts), g.cut

    text, cut = asyncio.run(run())
    assert_cut(server, text, cut)
