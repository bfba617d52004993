"""A host on the official Python SDK 2.x that reads one resource twice.

Run by ``tests/e2e/test_response_cache.py`` with ``.venv-sdk2/bin/python``:
``Client(url)`` in its default mode (2026-07-28 when the gateway offers it),
two ``resources/read`` of the URI given, and one JSON line with the
negotiated revision and each read's text and ``ttlMs``.
"""

from __future__ import annotations

import json
import sys

import anyio
from mcp import Client


async def main(url: str, uri: str) -> None:
    """Read ``uri`` twice; print what was seen as JSON."""
    async with Client(url) as client:
        reads = [await client.read_resource(uri) for _ in range(2)]
        seen = {
            "protocol_version": client.protocol_version,
            "texts": [getattr(r.contents[0], "text", None) for r in reads],
            "ttls": [getattr(r, "ttl_ms", None) for r in reads],
        }
    print(json.dumps(seen))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
