"""The official OpenAI and Anthropic Python SDKs reading replies whose tool
calls `deloop proxy` cut (tests/tool_args.rs scripts the fake upstream in
the same order).

Usage: tool_args_client.py CLOSE_PROXY_URL DROP_PROXY_URL (proxies with
proxy.tool_args_loops = "close" and "drop")

Prints one JSON line per scenario: what the SDK returned or raised.
"""

import json
import sys

import anthropic
import openai

PROXY, DROP = sys.argv[1], sys.argv[2]
MODEL = "fake-model"
MESSAGES = [{"role": "user", "content": "write my notes"}]
TOOLS = [{"type": "function", "function": {"name": "write_file", "parameters": {"type": "object"}}}]
AN_TOOLS = [{"name": "write_file", "input_schema": {"type": "object"}}]

oa = openai.OpenAI(base_url=PROXY + "/v1", api_key="sk-placeholder", max_retries=0, timeout=60)
an = anthropic.Anthropic(base_url=PROXY, api_key="sk-ant-placeholder", max_retries=0, timeout=60)
oa_drop = openai.OpenAI(base_url=DROP + "/v1", api_key="sk-placeholder", max_retries=0, timeout=60)
an_drop = anthropic.Anthropic(base_url=DROP, api_key="sk-ant-placeholder", max_retries=0, timeout=60)


def extra(obj, name):
    """A field the SDK's model does not declare (pydantic keeps it)."""
    return (getattr(obj, "model_extra", None) or {}).get(name)


def openai_closed_call_stream():
    cut = None
    with oa.chat.completions.stream(model=MODEL, messages=MESSAGES, tools=TOOLS) as s:
        for ev in s:
            if ev.type == "chunk" and extra(ev.chunk, "deloop"):
                cut = extra(ev.chunk, "deloop").get("tool_call_cut")
        final = s.get_final_completion()
    c = final.choices[0]
    calls = [
        {"name": t.function.name, "arguments": t.function.arguments, "parsed": json.loads(t.function.arguments)}
        for t in (c.message.tool_calls or [])
    ]
    return {"tool_calls": calls, "finish_reason": c.finish_reason, "cut": cut}


def openai_dropped_call_stream():
    calls, finish, cut = {}, None, None
    for chunk in oa_drop.chat.completions.create(model=MODEL, messages=MESSAGES, tools=TOOLS, stream=True):
        if extra(chunk, "deloop"):
            cut = extra(chunk, "deloop").get("tool_call_cut")
        for c in chunk.choices:
            for t in c.delta.tool_calls or []:
                calls.setdefault(t.index, "")
                calls[t.index] += (t.function and t.function.arguments) or ""
            finish = c.finish_reason or finish
    return {"arguments": [calls[i] for i in sorted(calls)], "finish_reason": finish, "cut": cut}


def anthropic_closed_input_stream():
    with an.messages.stream(model=MODEL, max_tokens=4096, messages=MESSAGES, tools=AN_TOOLS) as s:
        for _ in s:
            pass
        final = s.get_final_message()
    blocks = [b.model_dump() for b in final.content]
    return {"content": blocks, "stop_reason": final.stop_reason, "cut": (extra(final, "deloop") or {}).get("tool_call_cut")}


def anthropic_dropped_input_stream():
    with an_drop.messages.stream(model=MODEL, max_tokens=4096, messages=MESSAGES, tools=AN_TOOLS) as s:
        for _ in s:
            pass
        final = s.get_final_message()
    return {"content": [b.model_dump() for b in final.content], "stop_reason": final.stop_reason}


SCENARIOS = [
    openai_closed_call_stream,
    openai_dropped_call_stream,
    anthropic_closed_input_stream,
    anthropic_dropped_input_stream,
]

if __name__ == "__main__":
    for scenario in SCENARIOS:
        try:
            result = scenario()
        except Exception as e:  # reported, judged by the Rust test
            result = {"unexpected": type(e).__name__, "message": str(e)}
        result["scenario"] = scenario.__name__
        print(json.dumps(result), flush=True)
