"""The cost of parsing one request alone: llhttp (httptools) against h11, as the engine used each.

The request is the one the calls section sends (``benchmarks.lean``: a
``tools/call`` POST with the host's six headers and a small JSON body),
arriving in one read. ``h11`` is the engine's path before
``request_parser.py``: a fresh ``h11.Connection`` a request, the bytes
received, the head, body and end taken with ``next_event``, the headers
lowercased from ``raw_items``. ``llhttp`` is the engine's path now: one
``RequestParser`` a connection, the bytes fed, the three events taken from
its queue. Process CPU time, parsers alternating by round, so a shared
machine's load falls on both alike; the figure to read is the ratio of the
same round.

Usage::

    .venv/bin/python -m benchmarks.request_parse [--requests 100000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import h11

from gateway.frontend.engine.request_parser import END, Request, RequestParser

REQUEST = (
    b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:8000\r\n"
    b"accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n"
    b"mcp-session-id: 4f0c3a8e5b9d4c2e8f1a6b7c9d0e1f2a\r\nmcp-protocol-version: 2025-06-18\r\n"
    b"content-length: 93\r\n\r\n"
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"x":1}}}  '
)
MAX_HEADER_BYTES = 64 * 1024


def _h11(count: int) -> float:
    """CPU seconds for ``count`` requests through h11, as the engine took them."""
    started = time.process_time()
    for _ in range(count):
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
        conn.receive_data(REQUEST)
        request = conn.next_event()
        assert isinstance(request, h11.Request)
        headers = [(name.lower(), value) for name, value in request.headers.raw_items()]
        data = conn.next_event()
        end = conn.next_event()
        assert isinstance(data, h11.Data) and isinstance(end, h11.EndOfMessage), headers
    return time.process_time() - started


def _llhttp(count: int) -> float:
    """CPU seconds for ``count`` requests through the engine's parser."""
    parser = RequestParser(MAX_HEADER_BYTES)
    events = parser.events
    started = time.process_time()
    for _ in range(count):
        parser.feed(REQUEST)
        request = events.popleft()
        data = events.popleft()
        end = events.popleft()
        assert type(request) is Request and type(data) is bytes and end is END
    return time.process_time() - started


def main() -> None:
    """Alternate the two parsers; print µs a request and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    per: dict[str, list[float]] = {"h11": [], "llhttp": []}
    ratios: list[float] = []
    for round_ in range(args.rounds):
        order = (_h11, _llhttp) if round_ % 2 == 0 else (_llhttp, _h11)
        seconds = {run.__name__.strip("_"): run(args.requests) for run in order}
        for name, value in seconds.items():
            per[name].append(value / args.requests * 1e6)
        ratios.append(seconds["llhttp"] / seconds["h11"])
    for name, values in per.items():
        print(f"{name:>6}: {statistics.median(values):.2f} µs a request (rounds: ", end="")
        print(" ".join(f"{v:.2f}" for v in values) + ")")
    print(f"llhttp ÷ h11, same round: median {statistics.median(ratios):.3f}", end="")
    print(" (" + " ".join(f"{r:.3f}" for r in ratios) + ")")


if __name__ == "__main__":
    main()
