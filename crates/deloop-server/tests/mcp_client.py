"""Drives deloop's MCP server with the official MCP Python SDK (PyPI `mcp`).

Run by crates/deloop-server/tests/mcp_clients.rs, with the interpreter that
scripts/setup-mcp-client.sh installs:

    python mcp_client.py http URL        # streamable HTTP (DELOOP_MCP_KEY: bearer key)
    python mcp_client.py stdio PROGRAM   # spawns PROGRAM and speaks over its stdio

For each protocol negotiation the SDK offers ("auto": the 2026-07-28
discover flow, "legacy": the initialize handshake) it lists the tools, calls
every guard tool and checks the answers it can judge alone (shape, isError,
structuredContent equal to the JSON text). It prints one JSON line per mode,
`{"mode", "protocol", "tools", "verdicts", "clamp_input", "clamp",
"transcript_input", "transcript", "result"}`, for the
Rust test to compare with the HTTP API; any failed check exits non-zero with
a message on stderr.
"""

import asyncio
import json
import os
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

GUARD_TOOLS = {
    "clamp_text",
    "rescue_json",
    "repair_json",
    "check_tool_call",
    "record_tool_result",
    "forget_session",
    "check_transcript",
}

LOOPING = "Here is the plan. " + "We read the file and then we read the file again " * 30

TRANSCRIPT = "\n".join(
    json.dumps(e)
    for i in range(12)
    for e in (
        {"type": "call", "id": f"c{i}", "tool": "read", "args": {"path": "/etc/hosts"}},
        {"type": "result", "id": f"c{i}", "result": "127.0.0.1 localhost"},
    )
)


def fail(message):
    raise AssertionError(message)


def value_of(result, what):
    """The tool's value: JSON text content equal to structuredContent."""
    if result.is_error:
        fail(f"{what}: unexpected tool error: {result.content}")
    if len(result.content) != 1 or result.content[0].type != "text":
        fail(f"{what}: expected one text content block, got {result.content}")
    text_value = json.loads(result.content[0].text)
    if text_value != result.structured_content:
        fail(f"{what}: text content {text_value!r} != structuredContent {result.structured_content!r}")
    return text_value


def error_text(result, what, must_name):
    if not result.is_error:
        fail(f"{what}: expected a tool error, got {result.structured_content!r}")
    text = " ".join(c.text for c in result.content if c.type == "text")
    if must_name not in text:
        fail(f"{what}: the error {text!r} does not name {must_name!r}")
    return text


async def scenario(client, mode):
    listed = await client.list_tools()
    tools = {t.name: t for t in listed.tools}
    if set(tools) != GUARD_TOOLS:
        fail(f"tools: expected {sorted(GUARD_TOOLS)}, got {sorted(tools)}")
    for t in tools.values():
        if not t.description or len(t.description) < 80:
            fail(f"tool {t.name}: description missing or too short")
        if t.input_schema.get("type") != "object" or "properties" not in t.input_schema:
            fail(f"tool {t.name}: input schema is not an object schema: {t.input_schema}")

    clamp = value_of(await client.call_tool("clamp_text", {"text": LOOPING}), "clamp_text")
    if clamp["clamped"] is not True or len(clamp["text"]) >= len(LOOPING):
        fail(f"clamp_text did not cut the loop: {clamp}")
    healthy = value_of(
        await client.call_tool("clamp_text", {"text": "A short healthy answer."}), "clamp_text"
    )
    if healthy["clamped"] is not False:
        fail(f"clamp_text cut healthy text: {healthy}")

    rescued = value_of(
        await client.call_tool(
            "rescue_json", {"text": 'Sure! ```json\n{"answer": "forty-two", "n": 4', "key": "answer"}
        ),
        "rescue_json",
    )
    if rescued["ok"] is not True or rescued["value"] != "forty-two":
        fail(f"rescue_json: {rescued}")
    repaired = value_of(
        await client.call_tool("repair_json", {"text": "{'a': 1, 'b': [1, 2,"}), "repair_json"
    )
    if repaired["value"] != {"a": 1, "b": [1, 2]} or not repaired["repairs"]:
        fail(f"repair_json: {repaired}")

    # One session: the same call with the same result, 21 times.
    session = f"py-{mode}"
    verdicts = []
    for i in range(21):
        v = value_of(
            await client.call_tool(
                "check_tool_call",
                {
                    "session_id": session,
                    "run_id": "r1",
                    "tool": "read",
                    "args": {"path": "/etc/hosts"},
                    "id": f"c{i}",
                },
            ),
            "check_tool_call",
        )
        verdicts.append(v)
        value_of(
            await client.call_tool(
                "record_tool_result",
                {"session_id": session, "run_id": "r1", "id": f"c{i}", "result": "127.0.0.1 localhost"},
            ),
            "record_tool_result",
        )
    levels = [v["level"] for v in verdicts]
    if levels[0] != "ok" or levels[-1] != "critical" or "warning" not in levels:
        fail(f"check_tool_call x21 should go ok -> warning -> critical, got {levels}")
    # A result without id names its call by tool and args.
    value_of(
        await client.call_tool(
            "check_tool_call",
            {"session_id": session, "tool": "ls", "args": {"dir": "/"}},
        ),
        "check_tool_call without id",
    )
    by_args = value_of(
        await client.call_tool(
            "record_tool_result",
            {"session_id": session, "tool": "ls", "args": {"dir": "/"}, "error": "permission denied"},
        ),
        "record_tool_result by tool and args",
    )

    transcript = value_of(
        await client.call_tool("check_transcript", {"transcript": TRANSCRIPT}), "check_transcript"
    )
    if len(transcript["verdicts"]) != 12 or transcript["summary"]["calls"] != 12:
        fail(f"check_transcript: {transcript}")

    # Errors the model reads: tool errors naming the argument.
    error_text(await client.call_tool("clamp_text", {}), "clamp_text without text", "`text`")
    error_text(
        await client.call_tool("clamp_text", {"text": 42}), "clamp_text with a number", "`text`"
    )
    error_text(
        await client.call_tool("clamp_text", {"text": "x", "colour": "red"}),
        "clamp_text with an unknown argument",
        "`colour`",
    )
    error_text(
        await client.call_tool("repair_json", {"text": "no JSON here at all"}),
        "repair_json without JSON",
        "no JSON",
    )
    error_text(
        await client.call_tool("check_tool_call", {"session_id": "", "tool": "read", "args": {}}),
        "check_tool_call with an empty session_id",
        "`session_id`",
    )
    error_text(
        await client.call_tool("record_tool_result", {"session_id": session, "id": "nope", "result": 1}),
        "record_tool_result for an unknown id",
        "nope",
    )
    error_text(
        await client.call_tool("check_transcript", {"transcript": '{"type": "call", "tool": "x"}\n{oops'}),
        "check_transcript with a malformed line",
        "line 2",
    )
    error_text(
        await client.call_tool("check_transcript", {"transcript": TRANSCRIPT, "profile": "lenient"}),
        "check_transcript with an unknown profile",
        "`profile`",
    )
    try:
        await client.call_tool("no_such_tool", {})
    except MCPError as e:
        if "no_such_tool" not in str(e):
            fail(f"unknown tool: the protocol error does not name it: {e}")
    else:
        fail("unknown tool: expected a protocol error")

    forgotten = value_of(
        await client.call_tool("forget_session", {"session_id": session}), "forget_session"
    )
    if forgotten != {"session_id": session, "forgotten": True}:
        fail(f"forget_session: {forgotten}")
    again = value_of(
        await client.call_tool("forget_session", {"session_id": session}), "forget_session again"
    )
    if again["forgotten"] is not False:
        fail(f"forget_session twice: {again}")

    return {
        "mode": mode,
        "protocol": client.protocol_version,
        "tools": sorted(tools),
        "verdicts": verdicts,
        "clamp_input": LOOPING,
        "clamp": clamp,
        "transcript_input": TRANSCRIPT,
        "transcript": transcript,
        "result": by_args,
    }


async def over_http(url, mode):
    key = os.environ.get("DELOOP_MCP_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else None
    async with create_mcp_http_client(headers=headers) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            return await scenario(client, mode)


async def over_stdio(program, mode):
    params = StdioServerParameters(command=program, args=[])
    async with Client(params, mode=mode) as client:
        return await scenario(client, mode)


async def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("http", "stdio"):
        sys.exit("usage: mcp_client.py http URL | stdio PROGRAM")
    transport, target = sys.argv[1], sys.argv[2]
    for mode in ("auto", "legacy"):
        if transport == "http":
            report = await over_http(target, mode)
        else:
            report = await over_stdio(target, mode)
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except AssertionError as e:
        print(f"mcp_client.py: {e}", file=sys.stderr)
        sys.exit(1)
