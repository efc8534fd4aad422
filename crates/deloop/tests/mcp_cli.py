"""Drives the `deloop mcp` command itself with the official MCP Python SDK.

Run by crates/deloop/tests/mcp_cli.rs, with the interpreter that
scripts/setup-mcp-client.sh installs:

    python mcp_cli.py DELOOP [ARGS...]   # spawns `DELOOP mcp ARGS...`

It lists the tools, then calls `search` and `ask` (retrying while the index
is still being built, at most 240 s) on deloop's embedded documentation,
and prints one JSON line: {"tools", "search", "ask"}. A failed check exits
non-zero with a message on stderr.
"""

import asyncio
import json
import os
import sys
import time

from mcp import Client
from mcp.client.stdio import StdioServerParameters

QUESTION = "How do I stop a looping stream?"


def fail(message):
    raise AssertionError(message)


def value_of(result, what):
    if result.is_error:
        return None, result.content[0].text if result.content else "(no text)"
    if result.structured_content is not None:
        return result.structured_content, None
    return json.loads(result.content[0].text), None


async def call_when_ready(client, tool, args):
    deadline = time.monotonic() + 240
    while True:
        value, error = value_of(await client.call_tool(tool, args), tool)
        if value is not None:
            return value
        if "still opening" not in error or time.monotonic() > deadline:
            fail(f"{tool}: {error}")
        await asyncio.sleep(0.5)


async def main():
    if len(sys.argv) < 2:
        sys.exit("usage: mcp_cli.py DELOOP [ARGS...]")
    params = StdioServerParameters(
        command=sys.argv[1], args=["mcp", *sys.argv[2:]], env=dict(os.environ)
    )
    async with Client(params) as client:
        tools = sorted(t.name for t in (await client.list_tools()).tools)
        for name in ("ask", "search", "clamp_text"):
            if name not in tools:
                fail(f"tool {name} missing from {tools}")
        search = await call_when_ready(client, "search", {"query": QUESTION, "k": 3})
        ask = await call_when_ready(client, "ask", {"question": QUESTION})
    print(json.dumps({"tools": tools, "search": search, "ask": ask}), flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except AssertionError as e:
        print(f"mcp_cli.py: {e}", file=sys.stderr)
        sys.exit(1)
