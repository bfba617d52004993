"""The official SDK 2.x client making a mixed load through replicas behind a balancer.

Run by ``benchmarks/replicas.py`` with ``.venv-sdk2/bin/python``. Each of
``--workers`` clients (``Client(url)``, default mode: 2026-07-28) repeats one
of three operations until ``--operations`` are done in all:

- ``add``: ``{prefix}add`` with random integers; the answer must be their sum.
- ``walk``: a full ``tools/list`` walk, page by page with the gateway's
  cursors (each page may reach another replica); the names seen must be
  exactly the expected set, each once.
- ``confirm``: an MRTR tool; the SDK answers the elicitation from its
  callback and retries with the sealed ``requestState`` (again, maybe on
  another replica); the answer must name the item and the person.

Every outcome is one of ``ok``, ``wrong`` (an answer that is not the right
one: what must never happen) or ``failed`` (an error or exception, kept with
its type). A line ``progress N`` goes to stdout every 50 operations, so the
run can kill a replica in the middle; the last line is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from typing import Any

import anyio
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult, TextContent

OPERATIONS = ("add", "walk", "confirm")


def _text(result: Any) -> str | None:
    content = getattr(result, "content", None) or []
    first = content[0] if content else None
    return first.text if isinstance(first, TextContent) else None


async def _answer_elicitation(context: Any, params: Any) -> ElicitResult:
    return ElicitResult(action="accept", content={"name": "ada"})


class Run:
    """Shared counters of one run."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.expected = set(args.expect_tools.split(",")) if args.expect_tools else None
        self.started = 0
        self.outcomes: Counter[str] = Counter()
        self.by_operation: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.wrong: list[str] = []
        self.pages = 0
        self.mrtr_rounds = 0
        self.latencies: list[float] = []
        self.reconnects = 0

    def take(self) -> bool:
        if self.started >= self.args.operations:
            return False
        self.started += 1
        return True

    def record(self, operation: str, outcome: str, detail: str = "") -> None:
        self.outcomes[outcome] += 1
        self.by_operation[f"{operation}:{outcome}"] += 1
        if outcome == "wrong":
            self.wrong.append(f"{operation}: {detail}")
        elif outcome == "failed":
            self.failures[f"{operation}: {detail}"] += 1
        done = sum(self.outcomes.values())
        if done % 50 == 0:
            print(f"progress {done}", flush=True)


async def _add(client: Client, run: Run, rng: random.Random) -> tuple[str, str]:
    a, b = rng.randrange(10**6), rng.randrange(10**6)
    result = await client.call_tool(f"{run.args.prefix}add", {"a": a, "b": b})
    got = _text(result)
    return (
        ("ok", "") if got == str(a + b) and not result.is_error else ("wrong", f"{a}+{b} -> {got}")
    )


async def _walk(client: Client, run: Run, rng: random.Random) -> tuple[str, str]:
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        run.pages += 1
        seen.extend(tool.name for tool in page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    twice = len(seen) - len(set(seen))
    if run.expected is not None and (set(seen) != run.expected or twice):
        missing = sorted(run.expected - set(seen))
        extra = sorted(set(seen) - run.expected)
        return "wrong", f"missing={missing[:5]} extra={extra[:5]} dup={twice}"
    return "ok", ""


async def _confirm(client: Client, run: Run, rng: random.Random) -> tuple[str, str]:
    item = f"item-{rng.randrange(10**9)}"
    result = await client.call_tool(f"{run.args.mrtr_prefix}confirm", {"item": item})
    got = _text(result)
    run.mrtr_rounds += 1
    want = f"{item} confirmed by ada"
    return ("ok", "") if got == want and not result.is_error else ("wrong", f"{want!r} -> {got!r}")


async def _worker(run: Run, seed: int) -> None:
    rng = random.Random(seed)
    handlers = {"add": _add, "walk": _walk, "confirm": _confirm}
    weights = [run.args.weight_add, run.args.weight_walk, run.args.weight_confirm]
    pending: str | None = None
    while run.started < run.args.operations or pending is not None:
        # A connection broken under the SDK (a replica killed mid-response)
        # can end the whole Client context, not just the call: count the
        # operation in flight as failed and connect again.
        try:
            async with Client(run.args.url, elicitation_callback=_answer_elicitation) as client:
                while pending is not None or run.take():
                    operation = pending or rng.choices(OPERATIONS, weights)[0]
                    pending = operation
                    began = time.perf_counter()
                    try:
                        outcome, detail = await handlers[operation](client, run, rng)
                    except MCPError as exc:
                        outcome = "failed"
                        detail = f"MCPError {exc.error.code}: {exc.error.message[:80]}"
                    except Exception as exc:
                        outcome, detail = "failed", type(exc).__name__
                    pending = None
                    run.latencies.append(time.perf_counter() - began)
                    run.record(operation, outcome, detail)
        except Exception as exc:
            if pending is not None:
                run.record(pending, "failed", f"client context: {type(exc).__name__}")
                pending = None
            run.reconnects += 1


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--operations", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--prefix", default="toolbox__")
    parser.add_argument("--mrtr-prefix", default="remote__")
    parser.add_argument("--expect-tools", default="")
    parser.add_argument("--weight-add", type=float, default=6)
    parser.add_argument("--weight-walk", type=float, default=2)
    parser.add_argument("--weight-confirm", type=float, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    run = Run(args)
    began = time.perf_counter()
    async with anyio.create_task_group() as group:
        for index in range(args.workers):
            group.start_soon(_worker, run, args.seed * 1000 + index)
    latencies = sorted(run.latencies)
    summary = {
        "operations": sum(run.outcomes.values()),
        "outcomes": dict(run.outcomes),
        "by_operation": dict(sorted(run.by_operation.items())),
        "failures": dict(run.failures.most_common(10)),
        "wrong": run.wrong[:10],
        "pages": run.pages,
        "mrtr_calls": run.mrtr_rounds,
        "reconnects": run.reconnects,
        "seconds": round(time.perf_counter() - began, 2),
        "p50_ms": round(1000 * latencies[len(latencies) // 2], 2) if latencies else None,
        "p99_ms": round(1000 * latencies[int(len(latencies) * 0.99)], 2) if latencies else None,
    }
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    sys.exit(anyio.run(main))
