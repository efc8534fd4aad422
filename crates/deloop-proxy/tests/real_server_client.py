"""The official OpenAI and Anthropic Python SDKs (PyPI `openai` and
`anthropic`, pinned and installed by `bash scripts/setup-proxy-clients.sh`)
against `deloop proxy` in front of a real llama-server (SmolLM2-135M-Instruct,
greedy decoding; llama-server serves Anthropic's `/v1/messages` too).

Usage: real_server_client.py PROXY_URL LOOPING_PROMPT HEALTHY_PROMPT MAX_TOKENS

Runs the scenarios below in order and prints one JSON line per scenario:
what the SDK returned or raised. The Rust test (tests/real_server.rs)
judges the lines; this script only checks that the SDK parsed what it got.
"""

import json
import sys

import anthropic
import openai

PROXY, LOOPING, HEALTHY, MAX_TOKENS = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

oa = openai.OpenAI(base_url=PROXY + "/v1", api_key="sk-placeholder", max_retries=0, timeout=300)
an = anthropic.Anthropic(base_url=PROXY, api_key="sk-ant-placeholder", max_retries=0, timeout=300)
# Greedy decoding, as the recorded set (testdata/real-model) was made;
# `top_k` and `cache_prompt` are llama.cpp's own fields, which the proxy
# passes through untouched.
GREEDY = dict(model="smollm2", temperature=0, seed=0, max_tokens=MAX_TOKENS,
              extra_body={"top_k": 1, "cache_prompt": False})


def messages(prompt):
    return [{"role": "user", "content": prompt}]


def extra(obj, name):
    """A field the SDK's model does not declare (pydantic keeps it)."""
    return (getattr(obj, "model_extra", None) or {}).get(name)


def looping_stream_with_usage():
    text, finish, deloop, usage_chunks, last_usage, ids = "", None, None, 0, "absent", set()
    stream = oa.chat.completions.create(
        messages=messages(LOOPING), stream=True, stream_options={"include_usage": True}, **GREEDY
    )
    for chunk in stream:
        ids.add(chunk.id)
        for c in chunk.choices:
            text += c.delta.content or ""
            finish = c.finish_reason or finish
        deloop = extra(chunk, "deloop") or deloop
        if not chunk.choices:
            usage_chunks += 1
            last_usage = chunk.usage.model_dump() if chunk.usage else None
    return {
        "text": text,
        "finish_reason": finish,
        "deloop": deloop,
        "usage_chunks": usage_chunks,
        "usage": last_usage,
        "ids": len(ids),
    }


def looping_stream_helper():
    # The SDK's accumulating helper: it rebuilds the completion from the chunks.
    with oa.chat.completions.stream(messages=messages(LOOPING), **GREEDY) as s:
        for _ in s:
            pass
        final = s.get_final_completion()
    c = final.choices[0]
    return {"text": c.message.content, "finish_reason": c.finish_reason}


def healthy_reply():
    raw = oa.chat.completions.with_raw_response.create(messages=messages(HEALTHY), **GREEDY)
    completion = raw.parse()
    c = completion.choices[0]
    return {
        "text": c.message.content,
        "finish_reason": c.finish_reason,
        "deloop": extra(completion, "deloop"),
        "x_deloop_cuts": raw.headers.get("x-deloop-cuts"),
    }


def healthy_stream():
    text, finish = "", None
    for chunk in oa.chat.completions.create(messages=messages(HEALTHY), stream=True, **GREEDY):
        for c in chunk.choices:
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    return {"text": text, "finish_reason": finish}


# This version of the Anthropic SDK takes no `temperature` or `top_k`
# arguments: the sampling fields go in the body as they are.
ANTHROPIC_GREEDY = {"temperature": 0, "top_k": 1, "seed": 0, "cache_prompt": False}


def anthropic_looping_stream():
    with an.messages.stream(
        model="smollm2", max_tokens=MAX_TOKENS, messages=messages(LOOPING), extra_body=ANTHROPIC_GREEDY,
    ) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    return {"text": text, "stop_reason": final.stop_reason, "final_text": final.content[0].text}


def anthropic_healthy_reply():
    message = an.messages.create(
        model="smollm2", max_tokens=MAX_TOKENS, messages=messages(HEALTHY), extra_body=ANTHROPIC_GREEDY,
    )
    return {"text": message.content[0].text, "stop_reason": message.stop_reason,
            "deloop": extra(message, "deloop")}


SCENARIOS = [
    looping_stream_with_usage,
    looping_stream_helper,
    healthy_reply,
    healthy_stream,
    anthropic_looping_stream,
    anthropic_healthy_reply,
]

if __name__ == "__main__":
    for scenario in SCENARIOS:
        try:
            result = scenario()
        except Exception as e:  # reported, judged by the Rust test
            result = {"unexpected": type(e).__name__, "message": str(e)}
        result["scenario"] = scenario.__name__
        print(json.dumps(result), flush=True)
