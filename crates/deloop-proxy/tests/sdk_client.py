"""The official OpenAI and Anthropic Python SDKs, used as they are used in
apps, against `deloop proxy` (which fronts a scripted fake upstream).

Usage: sdk_client.py PROXY_URL

Runs the scenarios below in order (the Rust test scripts the fake upstream
in the same order) and prints one JSON line per scenario: what the SDK
returned or raised. The Rust test (tests/sdk_clients.rs) judges the lines;
this script only checks that the SDK parsed what it got.
"""

import json
import sys

import anthropic
import openai

PROXY = sys.argv[1]
MODEL = "fake-model"
MESSAGES = [{"role": "user", "content": "hi"}]

oa = openai.OpenAI(base_url=PROXY + "/v1", api_key="sk-placeholder", max_retries=0, timeout=60)
an = anthropic.Anthropic(base_url=PROXY, api_key="sk-ant-placeholder", max_retries=0, timeout=60)


def extra(obj, name):
    """A field the SDK's model does not declare (pydantic keeps it)."""
    return (getattr(obj, "model_extra", None) or {}).get(name)


def openai_healthy_stream():
    text, finish = "", None
    for chunk in oa.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True):
        for c in chunk.choices:
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    return {"text": text, "finish_reason": finish}


def openai_looping_stream_with_usage():
    text, finish, deloop, usage_chunks, last_usage = "", None, None, 0, "absent"
    stream = oa.chat.completions.create(
        model=MODEL, messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    for chunk in stream:
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
    }


def openai_stream_helper():
    # The SDK's accumulating helper: it rebuilds the completion from the chunks.
    with oa.chat.completions.stream(model=MODEL, messages=MESSAGES) as s:
        for _ in s:
            pass
        final = s.get_final_completion()
    c = final.choices[0]
    return {"text": c.message.content, "finish_reason": c.finish_reason, "id": final.id}


def openai_tool_calls_stream():
    with oa.chat.completions.stream(
        model=MODEL,
        messages=MESSAGES,
        tools=[
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                },
            }
        ],
    ) as s:
        for _ in s:
            pass
        final = s.get_final_completion()
    c = final.choices[0]
    calls = [
        {"id": t.id, "name": t.function.name, "arguments": t.function.arguments}
        for t in (c.message.tool_calls or [])
    ]
    return {"tool_calls": calls, "finish_reason": c.finish_reason}


def openai_looping_reply():
    raw = oa.chat.completions.with_raw_response.create(model=MODEL, messages=MESSAGES)
    completion = raw.parse()
    c = completion.choices[0]
    return {
        "text": c.message.content,
        "finish_reason": c.finish_reason,
        "deloop": extra(completion, "deloop"),
        "x_deloop_cuts": raw.headers.get("x-deloop-cuts"),
    }


def openai_json_reply():
    completion = oa.chat.completions.create(
        model=MODEL, messages=MESSAGES, response_format={"type": "json_object"}
    )
    content = completion.choices[0].message.content
    return {"value": json.loads(content)}


def openai_drop_mid_stream():
    text = ""
    try:
        for chunk in oa.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True):
            for c in chunk.choices:
                text += c.delta.content or ""
    except openai.APIError as e:
        return {"text": text, "raised": type(e).__name__, "message": e.message}
    return {"text": text, "raised": None}


def openai_rate_limited():
    try:
        oa.chat.completions.create(model=MODEL, messages=MESSAGES)
    except openai.RateLimitError as e:
        return {"raised": type(e).__name__, "retry_after": e.response.headers.get("retry-after")}
    return {"raised": None}


def anthropic_healthy_stream():
    with an.messages.stream(model=MODEL, max_tokens=100, messages=MESSAGES) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    return {"text": text, "stop_reason": final.stop_reason, "final_text": final.content[0].text}


def anthropic_looping_stream():
    with an.messages.stream(model=MODEL, max_tokens=1000, messages=MESSAGES) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    return {
        "text": text,
        "stop_reason": final.stop_reason,
        "final_text": final.content[0].text,
        "output_tokens": final.usage.output_tokens,
    }


def anthropic_looping_events():
    deloop, names = None, []
    for event in an.messages.create(model=MODEL, max_tokens=1000, messages=MESSAGES, stream=True):
        names.append(event.type)
        if event.type == "message_delta":
            deloop = extra(event, "deloop")
    return {"events": names[-3:], "deloop": deloop}


def anthropic_looping_reply():
    message = an.messages.create(model=MODEL, max_tokens=1000, messages=MESSAGES)
    return {
        "text": message.content[0].text,
        "stop_reason": message.stop_reason,
        "deloop": extra(message, "deloop"),
    }


def anthropic_drop_mid_stream():
    try:
        with an.messages.stream(model=MODEL, max_tokens=100, messages=MESSAGES) as s:
            text = "".join(s.text_stream)
    except anthropic.APIError as e:
        return {"raised": type(e).__name__, "message": str(e)}
    return {"raised": None, "text": text}


# An answer that looped until max_tokens, sent back as the client
# auto-continues (issue 22 section 4): the proxy clamps it before the model
# sees it again and says so in headers.
LOOPED = "Intro sentence. " + "and then the model says the same thing again " * 60


def openai_looped_history():
    raw = oa.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": LOOPED},
            {"role": "user", "content": "continue"},
        ],
    )
    reply = raw.parse()
    return {
        "text": reply.choices[0].message.content,
        "history_loops": raw.headers.get("x-deloop-history-loops"),
        "history_loops_at": raw.headers.get("x-deloop-history-loops-at"),
    }


def anthropic_looped_prefill():
    raw = an.messages.with_raw_response.create(
        model=MODEL,
        max_tokens=100,
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "text", "text": LOOPED}]},
        ],
    )
    message = raw.parse()
    return {
        "text": message.content[0].text,
        "history_loops": raw.headers.get("x-deloop-history-loops"),
        "history_loops_at": raw.headers.get("x-deloop-history-loops-at"),
    }


SCENARIOS = [
    openai_healthy_stream,
    openai_looping_stream_with_usage,
    openai_stream_helper,
    openai_tool_calls_stream,
    openai_looping_reply,
    openai_json_reply,
    openai_drop_mid_stream,
    openai_rate_limited,
    anthropic_healthy_stream,
    anthropic_looping_stream,
    anthropic_looping_events,
    anthropic_looping_reply,
    anthropic_drop_mid_stream,
    openai_looped_history,
    anthropic_looped_prefill,
]

if __name__ == "__main__":
    for scenario in SCENARIOS:
        try:
            result = scenario()
        except Exception as e:  # reported, judged by the Rust test
            result = {"unexpected": type(e).__name__, "message": str(e)}
        result["scenario"] = scenario.__name__
        print(json.dumps(result), flush=True)
