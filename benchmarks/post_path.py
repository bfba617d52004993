"""The cost of the POST's response scaffolding alone: plain JSON path against the nursery path.

``respond_to_request`` (``gateway/frontend/streamable/post_response.py``) with a route
that answers at once and a ``send`` that does nothing, in one trio loop:
what is left is the scaffolding (the nursery, the writer object, the event
stream object) per POST. Process CPU time, builds alternating by round, so
a shared machine's load falls on both alike; the figure to read is the
difference per POST and the ratio of the same round.

Usage::

    .venv/bin/python -m benchmarks.post_path [--posts 100000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import trio

from gateway.frontend.streamable.post_response import respond_to_request

ANSWER = b'{"jsonrpc":"2.0","id":1,"result":{"content":[]}}'


async def _send(message: Any) -> None:
    return None


async def _route(emit: Any) -> bytes:
    return ANSWER


async def _posts(count: int, may_emit: bool) -> float:
    """CPU seconds for ``count`` POSTs on one path."""
    started = time.process_time()
    for _ in range(count):
        await respond_to_request(_send, "sid", _route, may_emit=may_emit)
    return time.process_time() - started


def _fmt(values: list[float]) -> str:
    return " ".join(f"{v:.2f}" for v in values)


def main() -> None:
    """Alternate the two paths; print µs per POST and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    per: dict[bool, list[float]] = {True: [], False: []}
    for round_ in range(args.rounds):
        for may_emit in (True, False) if round_ % 2 == 0 else (False, True):
            seconds = trio.run(_posts, args.posts, may_emit)
            per[may_emit].append(seconds / args.posts * 1e6)
    nursery, plain = statistics.median(per[True]), statistics.median(per[False])
    print(f"POST scaffolding, median of {args.rounds} x {args.posts:,} (CPU µs per POST):")
    print(f"  with the nursery (may emit): {nursery:.2f} µs  rounds {_fmt(per[True])}")
    print(f"  plain JSON path:             {plain:.2f} µs  rounds {_fmt(per[False])}")
    print(f"  saved {nursery - plain:.2f} µs a POST; plain / nursery {plain / nursery:.2f}")


if __name__ == "__main__":
    main()
