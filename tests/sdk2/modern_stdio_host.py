"""A host on the official Python SDK 2.x, in its default mode, spawning the gateway over stdio.

Run by ``tests/e2e/test_sdk2_stdio_host.py`` with ``.venv-sdk2/bin/python``
(mcp 2.x cannot share a virtualenv with the 1.x peers). It spawns
``<python> -m gateway stdio -c <config>`` through ``Client(StdioServerParameters)``
(mode ``auto``: ``server/discover`` at 2026-07-28, falling back to
``initialize`` only when refused), then lists tools, calls one plainly and one
with progress, reads a resource, gets a prompt and completes an argument. Then it listens
(``subscriptions/listen``: tools list_changed and one ``watched`` resource),
makes both happen, leaves the listen block (the SDK cancels the listen with
``notifications/cancelled``) and, while still connected, waits for the
backend's ``resources/unsubscribe`` in the recorder's log (the third
argument). It prints one JSON object describing what it saw.

``--slow-start PROBE_TIMEOUT PYTHON CONFIG`` instead shortens the SDK's
``server/discover`` timeout (10 s) to PROBE_TIMEOUT, so a gateway still in its
startup wait misses it: the SDK then sends ``initialize``, which a connection
the probe already locked modern answers with -32022, and the SDK re-probes.
It prints the era it ended in and the tools of its first list.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.client import session as session_module
from mcp.types import PromptReference, TextContent


def _text(result: object) -> str | None:
    content = getattr(result, "content", None) or []
    first = content[0] if content else None
    return first.text if isinstance(first, TextContent) else None


def _sent_unsubscribe(log: Path) -> bool:
    return '"resources/unsubscribe"' in log.read_text(encoding="utf-8")


async def _unsubscribed(log: Path) -> bool:
    """Whether the backend was sent resources/unsubscribe (polled, at most 10 s)."""
    with anyio.move_on_after(10):
        while not _sent_unsubscribe(log):  # noqa: ASYNC110 - a file another process writes
            await anyio.sleep(0.05)
        return True
    return False


async def main(gateway_python: str, config: str, watched_log: str) -> None:
    """Drive the calls; print the summary as JSON on stdout."""
    params = StdioServerParameters(
        command=gateway_python, args=["-m", "gateway", "stdio", "-c", config]
    )
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with Client(params) as client:
        session = client.session
        tools = await client.list_tools()
        names = sorted(tool.name for tool in tools.tools)
        added = await client.call_tool("toolbox__add", {"a": 20, "b": 22})
        stepped = await client.call_tool(
            "alpha__progress", {"steps": 3}, progress_callback=on_progress
        )
        resources = await client.list_resources()
        uris = sorted(str(r.uri) for r in resources.resources)
        readme = next(uri for uri in uris if "readme" in uri)
        read = await client.read_resource(readme)
        prompt = await client.get_prompt("alpha__greet", {"name": "Ada"})
        completion = await client.complete(
            PromptReference(type="ref/prompt", name="toolbox__code_review"),
            {"name": "language", "value": "py"},
        )
        watched = sorted(uri for uri in uris if "watch" in uri)
        events: list[object] = []
        with anyio.fail_after(20):
            async with client.listen(
                tools_list_changed=True, resource_subscriptions=watched[:1]
            ) as sub:
                honored = sub.honored.model_dump(by_alias=True, exclude_none=True)
                await client.call_tool("watched__grow", {})
                events.append(type(await sub.__anext__()).__name__)
                await client.call_tool("watched__touch", {"uri": "watch://a"})
                updated = await sub.__anext__()
                events.append([type(updated).__name__, getattr(updated, "uri", None)])
            unsubscribed = await _unsubscribed(Path(watched_log))
        after_listen = len((await client.list_tools()).tools)
        summary = {
            "protocol_version": client.protocol_version,
            "discovered": session.discover_result is not None,
            "initialized": session.initialize_result is not None,
            "server_name": None if client.server_info is None else client.server_info.name,
            "tools": names,
            "add": _text(added),
            "add_is_error": added.is_error,
            "progress_result": _text(stepped),
            "progress": progress,
            "resources": uris,
            "read_text": getattr(read.contents[0], "text", None) if read.contents else None,
            "prompt_messages": len(prompt.messages),
            "completion_values": list(completion.completion.values),
            "watched": watched,
            "honored": honored,
            "events": events,
            "unsubscribed_while_connected": unsubscribed,
            "tools_after_listen": after_listen,
        }
    print(json.dumps(summary))


async def slow_start(probe_timeout: str, gateway_python: str, config: str) -> None:
    """Connect with a short probe timeout; print the era and the first tools/list."""
    session_module.DISCOVER_TIMEOUT_SECONDS = float(probe_timeout)
    params = StdioServerParameters(
        command=gateway_python, args=["-m", "gateway", "stdio", "-c", config]
    )
    async with Client(params) as client:
        tools = await client.list_tools()
        summary = {
            "protocol_version": client.protocol_version,
            "discovered": client.session.discover_result is not None,
            "initialized": client.session.initialize_result is not None,
            "tools": sorted(tool.name for tool in tools.tools),
        }
    print(json.dumps(summary))


if __name__ == "__main__":
    if sys.argv[1] == "--slow-start":
        anyio.run(slow_start, sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
