"""A small real MCP server for the gateway's tests: ``python -m tests.mcp_upstream LEDGER``
on stdio, or ``... LEDGER --http-fd FD`` over Streamable HTTP on an inherited listening socket.

``read_note`` only reads (``readOnlyHint``; the note ``env:NAME`` holds the server's
variable ``NAME``); ``delete_note`` is destructive and
``archive_note`` reaches the open world (``openWorldHint``): each real call of those two
appends one line to the LEDGER file, so a test can count the calls that happened.
``delete_note`` takes only a ``title`` (and ``seconds``: it then says it began, in
``LEDGER.begun``, and waits that long before it deletes).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp import stdio_server, types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

TOOLS = [
    types.Tool(
        name="read_note",
        description="Read a note.",
        input_schema={"type": "object", "properties": {"title": {"type": "string"}}},
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="delete_note",
        description="Delete a note (after ``seconds``, if given).",
        input_schema={
            "type": "object",
            "properties": {"title": {"type": "string"}, "seconds": {"type": "number"}},
            "required": ["title"],
            "additionalProperties": False,
        },
        annotations=types.ToolAnnotations(destructive_hint=True, read_only_hint=False),
    ),
    types.Tool(
        name="archive_note",
        description="Send a note to the archive service.",
        input_schema={"type": "object", "properties": {"title": {"type": "string"}}},
        annotations=types.ToolAnnotations(destructive_hint=False, open_world_hint=True),
    ),
]


def build(ledger: Path) -> Server[Any]:
    """Return the server, appending each real call with a side effect to ``ledger``."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        args = params.arguments or {}
        if params.name == "read_note":
            return _text(f"the note {args.get('title')} says {_content(str(args.get('title')))}")
        if args.get("seconds"):  # a slow call: say it began, then take its time
            with begun(ledger).open("a", encoding="utf-8") as out:
                out.write(json.dumps({"tool": params.name, **args}, sort_keys=True) + "\n")
            await anyio.sleep(float(args["seconds"]))
        with ledger.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"tool": params.name, **args}, sort_keys=True) + "\n")
        return _text(f"{params.name}: done with {args.get('title')}")

    return Server("notes", on_list_tools=list_tools, on_call_tool=call_tool)


def begun(ledger: Path) -> Path:
    """The file a slow call (``seconds``) appends its line to when it begins."""
    return ledger.with_name(ledger.name + ".begun")


def _content(title: str) -> str:
    """What a note says: ``hello``, but the note ``env:NAME`` reads the variable ``NAME`` of
    this server's environment (so that tests see what it inherited)."""
    prefix, _, name = title.partition(":")
    return os.environ.get(name, "(unset)") if prefix == "env" else "hello"


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)])


async def main(ledger: Path) -> None:
    """Serve on stdio until the client disconnects."""
    server = build(ledger)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve_http(ledger: Path, fd: int) -> None:
    """Serve Streamable HTTP at ``/mcp`` on the listening socket ``fd``."""
    uvicorn.run(build(ledger).streamable_http_app(), fd=fd, log_level="warning")


if __name__ == "__main__":
    if sys.argv[2:3] == ["--http-fd"]:
        serve_http(Path(sys.argv[1]), int(sys.argv[3]))
    else:
        anyio.run(main, Path(sys.argv[1]))
