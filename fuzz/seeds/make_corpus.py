#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<target>/ (run from fuzz/).

Seeds are small inputs in the targets' layout (docs/fuzzing.md): byte 0
options, byte 1 the number of chunk sizes, the sizes, then the payload.
Sources: texts written here for deloop; the first cases of the vendored
jsonrepair (ISC) and json-repair (MIT) conformance corpora and the
smallest OpenClaw loop scenarios (MIT), from /work/shared/corpora (or
$DELOOP_CORPORA). Each is at most a few KiB; the whole set stays < 1 MB.
"""
import json, os, pathlib

CORPORA = pathlib.Path(os.environ.get("DELOOP_CORPORA", "/work/shared/corpora"))
OUT = pathlib.Path("corpus")


def write(target, name, payload, flags=0, sizes=()):
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    if isinstance(payload, str):
        payload = payload.encode()
    head = bytes([flags, len(sizes)] + [s - 1 for s in sizes])
    (d / name).write_bytes(head + payload)


TEXTS = {
    "words": "Intro sentence here. " + "the cat sat on the mat " * 20,
    "substring": "Answer: " + "ab" * 30,
    "long_period": "Minutes. " + ("The committee reviewed the proposal and decided that the budget "
                                  "should be approved after one more round of comments. ") * 3,
    "near": "Spices:\n" + "".join(f"{i}. Anise\n" for i in range(51, 70)),
    "code": "```\n" + "x = 1\ny = 2\nprint(x + y)\n" * 8 + "```\n",
    "healthy": "A healthy answer with no loop at all, just a few sentences of plain text.",
    "cjk": "答案是" + "好的" * 40,
    "utf8": "café " * 30 + "naïve",
    "table": "| a | b |\n|---|---|\n" + "| 1 | 2 |\n" * 12,
}

def text_seeds():
    for name, t in TEXTS.items():
        write("clamp", name, t)
        write("clamp", name + "_seed", t, flags=1)
        write("stream", name, t, sizes=(3, 7))
        write("stream", name + "_exact", t, flags=1, sizes=(1, 16, 5))
    write("stream", "invalid_utf8", b"abc \xff\xc3 " + b"over and over again " * 20, sizes=(2,))


def rescue_seeds():
    n = 0
    for src in ("jsonrepair", "json-repair-py"):
        for line in (CORPORA / src / "cases.jsonl").read_text().splitlines()[::6]:
            case = json.loads(line)
            raw = case.get("input")
            if not isinstance(raw, str) or len(raw) > 2000:
                continue
            write("rescue", f"{src}_{n:03}", raw, sizes=(5,))
            n += 1
    for i, t in enumerate([
        '```json\n{"answer": "He said "hi" and left"}\n```',
        '<think>{"answer": "draft"}</think>{"answer": "final", "n": 1}',
        '{"answer": "cut at the tok',
        "{'answer': True, 'text': None}",
        '{"a": [1, 2, {"b": "c"', 
    ]):
        write("rescue", f"deloop_{i}", t, flags=i & 3, sizes=(4, 9))


def transcript_seeds():
    scen = sorted((CORPORA / "openclaw-loops" / "scenarios").glob("*.jsonl"), key=lambda p: p.stat().st_size)
    for i, p in enumerate(scen[:8]):
        write("transcript", p.stem, p.read_bytes(), flags=(i & 3) << 2 | (16 if i % 2 else 0), sizes=(64, 200))
    openai = [{"role": "user", "content": "read it"}] + [
        m for i in range(6) for m in (
            {"role": "assistant", "tool_calls": [{"id": f"c{i}", "type": "function",
             "function": {"name": "read", "arguments": "{\"path\": \"/a\"}"}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "same"})]
    write("transcript", "openai", json.dumps(openai), flags=2 | 16)
    write("transcript", "openai_auto", json.dumps({"messages": openai}))
    anth = [{"role": "user", "content": "go"}] + [
        m for i in range(6) for m in (
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "ls", "input": {"d": "."}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "x", "is_error": i == 3}]})]
    write("transcript", "anthropic", json.dumps(anth), flags=3 | 16)
    write("transcript", "anthropic_lines", "\n".join(json.dumps(m) for m in anth), flags=0, sizes=(17,))


def sse(events):
    return "".join(f"data: {json.dumps(e) if not isinstance(e, str) else e}\n\n" for e in events)


def proxy_seeds():
    loop = "the cat sat on the mat " * 8
    chat = [{"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": w + " "}, "finish_reason": None}]}
            for w in ("Intro. " + loop).split()]
    chat.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    write("proxy_sse", "chat", sse(chat + ["[DONE]"]), flags=0, sizes=(13, 40))
    write("proxy_sse", "chat_exact_crlf", sse(chat[:10] + ["[DONE]"]).replace("\n", "\r\n"), flags=4, sizes=(7,))
    comp = [{"choices": [{"index": 0, "text": w + " "}]} for w in loop.split()]
    write("proxy_sse", "completion", sse(comp + ["[DONE]"]), flags=1)
    reasoning = [{"choices": [{"index": i % 2, "delta": {"reasoning_content": "hmm "}}]} for i in range(30)]
    write("proxy_sse", "chat_reasoning_n2", sse(reasoning + ["[DONE]"]), flags=0 | 16, sizes=(31,))
    anth = [("message_start", {"type": "message_start", "message": {"id": "m", "role": "assistant", "content": []}}),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})]
    anth += [("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w + " "}}) for w in loop.split()]
    anth += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
             ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
             ("message_stop", {"type": "message_stop"})]
    write("proxy_sse", "anthropic", "".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in anth), flags=2, sizes=(50,))
    write("proxy_sse", "comments", ": ping\n\nevent: x\ndata: a\ndata: b\nid: 1\nretry: 5\n\n\xef\xbb\xbfdata: [DONE]", flags=0)


def server_seeds():
    bodies = [
        (0, {"text": "Intro. " + "the cat sat on the mat " * 10}),
        (0, {"text": "abababababababababababab", "config": {"seed_compat": True}}),
        (0, {"text": "x", "config": {"words": {"max_period": 8}, "substring": {"min_repeats": 12}}}),
        (1, {"text": '{"answer": "hi" there"}', "key": "answer"}),
        (2, {"text": "```json\n{'a': 1,}\n```"}),
        (4, {"tool": "read", "args": {"path": "/a"}, "id": "c1", "run": "r"}),
        (5, {"id": "c1", "result": "same"}),
        (5, {"tool": "read", "args": {"path": "/a"}, "error": "boom"}),
        (6, {"agent": "main", "run": "r"}),
        (7, {"question": "How do I stop a looping stream?", "k": 3, "lang": "en"}),
    ]
    for i, (route, b) in enumerate(bodies):
        write("server_bodies", f"body_{i}", json.dumps(b), flags=route)
    tr = '{"type":"call","id":"c1","tool":"read","args":{"p":1}}\n{"type":"result","id":"c1","result":"x"}\n'
    write("server_bodies", "check", tr, flags=3)


text_seeds(); rescue_seeds(); transcript_seeds(); proxy_seeds(); server_seeds()
