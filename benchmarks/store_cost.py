"""Issue 26's figure: what the state store costs per call, embedded against a local redis-server.

Two parts, one process, one run:

1. **Per operation.** Each :class:`~gateway.store.api.Store` operation, timed
   alone, on the three stores a gateway can have: the embedded store in
   memory (``limits``, ``reload``), the embedded store's SQLite file (the
   durable namespaces: ``console``, ``pins``, ``tasks``, ``consent``) and a
   redis-server on loopback through coredis (append-only file on,
   ``--appendfsync`` everysec by default). Median µs of ``--ops`` in a row.
2. **Per call.** Whole requests through in-process gateways (HTTP on
   loopback, the h11 or hypercorn engine as configured by default), the
   paths that touch the store on every request:

   - a 2026-07-28 ``tools/call`` of the demo toolbox's ``add`` with a
     bearer token, with no rate limit (**the baseline**), with
     ``limits.token_rate`` on the embedded store (the replica's own
     bucket, no store operation) and on redis (one Lua ``spend`` a call);
   - a console page with a login cookie (one ``get`` of the login record a
     request) on the embedded file and on redis, against the same page
     with a bearer admin token (no store operation).

   Rounds alternate between the gateways, each starting at the next one, so
   a busy machine slows all alike; the figure per path is the median over
   rounds of µs per request and its ratio to its baseline.

Pins touch the store when a listing changes or an approval is given, not per
call, so they are not here (``benchmarks/pinning_cost.py`` times a change).

Run: ``.venv/bin/python -m benchmarks.store_cost [--quick]``. Needs
``redis-server`` on PATH (``make redis``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import httpx
import trio

from benchmarks.common import machine, write_results
from gateway.config import StoreConfig
from gateway.store.api import Store
from gateway.store.embedded import EmbeddedStore
from gateway.store.redis_store import open_redis_store
from gateway.telemetry.logs import configure_logging
from tests.frontend.test_modern_http import modern, modern_headers
from tests.harness import Running, gateway_config, start_gateway
from tests.redis_server import RedisServer

TOKEN: Final = "token-of-the-benchmark-0123456789"
ADMIN: Final = "admin-of-the-benchmark-0123456789"
TOOLBOX: Final = {
    "name": "toolbox",
    "transport": "stdio",
    "command": sys.executable,
    "args": ["-m", "mcp_gateway_demo.toolbox"],
}
#: A budget no run reaches: every call is admitted, and every call spends.
LIMITS: Final = {"token_rate": 1000.0, "token_burst": 1_000_000.0}
VALUE: Final = b'{"status":"working","owner":"replica-1","ttl":60}'


# -- part 1: per operation ------------------------------------------------------------


def _operations(store: Store, prefix: str) -> dict[str, Callable[[int], Awaitable[Any]]]:
    """One callable per operation; ``i`` makes keys distinct where it matters."""

    async def publish(_i: int) -> None:
        await store.publish("bench", b"1")

    return {
        "put": lambda i: store.put(f"{prefix}:k{i}", VALUE, ttl=600),
        "get": lambda i: store.get(f"{prefix}:k{i}"),
        "put_new": lambda i: store.put_new(f"{prefix}:n{i}", VALUE, ttl=600),
        "swap": lambda i: store.swap(f"{prefix}:k{i}", VALUE, VALUE, ttl=600),
        "add": lambda i: store.add(f"{prefix}:counter", 1, ttl=600),
        "spend": lambda i: store.spend(f"{prefix}:bucket", rate=1e6, burst=1e9),
        "take": lambda i: store.take(f"{prefix}:n{i}"),
        "delete": lambda i: store.delete(f"{prefix}:k{i}"),
        "scan (100 keys)": lambda i: store.scan(f"{prefix}:s:", limit=1000),
        "publish": publish,
    }


async def _per_operation(store: Store, prefix: str, ops: int) -> dict[str, float]:
    for i in range(100):
        await store.put(f"{prefix}:s:{i}", VALUE, ttl=600)
    figures = {}
    for name, operation in _operations(store, prefix).items():
        count = ops // 10 if name.startswith("scan") else ops
        samples = []
        for i in range(count):
            start = time.perf_counter()
            await operation(i)
            samples.append(time.perf_counter() - start)
        figures[name] = round(statistics.median(samples) * 1e6, 1)
    return figures


# -- part 2: per call -----------------------------------------------------------------


async def _tool_call(http: httpx.AsyncClient, running: Running, n: int) -> None:
    message = modern(n, "tools/call", {"name": "toolbox__add", "arguments": {"a": n, "b": 1}})
    headers = {**modern_headers(message), "authorization": f"Bearer {TOKEN}"}
    response = await http.post(running.url, json=message, headers=headers)
    if response.status_code != 200 or str(n + 1) not in response.text:
        raise RuntimeError(f"the call failed: {response.status_code} {response.text[:200]}")


def _console_page(credential: dict[str, str]) -> Callable[..., Awaitable[None]]:
    async def page(http: httpx.AsyncClient, running: Running, _n: int) -> None:
        response = await http.get(running.base_url + "/admin/config", headers=credential)
        if response.status_code != 200:
            raise RuntimeError(f"the console answered {response.status_code}")

    return page


async def _login(http: httpx.AsyncClient, running: Running) -> dict[str, str]:
    response = await http.post(running.base_url + "/admin/login", data={"token": ADMIN})
    found = re.match(r"mcp_gateway_console=([^;]+);", response.headers.get("set-cookie", ""))
    if response.status_code != 303 or found is None:
        raise RuntimeError(f"the console login failed: {response.status_code}")
    return {"cookie": f"mcp_gateway_console={found.group(1)}"}


async def _gateway(nursery: trio.Nursery, store: dict[str, Any], limits: bool) -> Running:
    config = gateway_config(
        [TOOLBOX],
        auth={"tokens": {"bench": TOKEN}},
        admin={"enabled": True, "tokens": [ADMIN]},
        store=store,
        **({"limits": LIMITS} if limits else {}),
    )
    return await start_gateway(nursery, config)


async def _rounds(
    http: httpx.AsyncClient,
    cases: list[tuple[str, Running, Callable[..., Awaitable[None]]]],
    calls: int,
    rounds: int,
) -> dict[str, float]:
    samples: dict[str, list[float]] = {label: [] for label, _, _ in cases}
    for _label, running, request in cases:  # warm each path once
        for n in range(20):
            await request(http, running, n)
    for round_ in range(rounds):
        for offset in range(len(cases)):
            label, running, request = cases[(round_ + offset) % len(cases)]
            start = time.perf_counter()
            for n in range(calls):
                await request(http, running, n)
            samples[label].append((time.perf_counter() - start) / calls)
    return {label: round(statistics.median(values) * 1e6, 1) for label, values in samples.items()}


@contextlib.asynccontextmanager
async def _redis_store(url: str) -> AsyncIterator[Store]:
    async with open_redis_store(StoreConfig(url=url, key_prefix="bench-ops:")) as store:
        yield store


async def measure(
    calls: int, rounds: int, ops: int, tmp: Path, redis: RedisServer
) -> dict[str, Any]:
    """Both parts; returns the figures."""
    per_operation: dict[str, dict[str, float]] = {}
    per_operation["embedded, memory"] = await _per_operation(EmbeddedStore(), "limits", ops)
    file_store = EmbeddedStore(str(tmp / "ops.sqlite"))
    per_operation["embedded, SQLite file"] = await _per_operation(file_store, "console", ops)
    file_store.close()
    async with _redis_store(redis.url) as shared:
        per_operation["redis-server (loopback)"] = await _per_operation(shared, "console", ops)
    embedded = {"path": str(tmp / "gateway.sqlite")}
    shared_config = {"url": redis.url, "key_prefix": "bench-calls:"}
    async with trio.open_nursery() as nursery, httpx.AsyncClient(timeout=60) as http:
        plain = await _gateway(nursery, embedded, limits=False)
        local = await _gateway(nursery, {"path": str(tmp / "local.sqlite")}, limits=True)
        on_redis = await _gateway(nursery, shared_config, limits=True)
        calls_figures = await _rounds(
            http,
            [
                ("tools/call, no rate limit (baseline)", plain, _tool_call),
                ("tools/call, rate limit, embedded store", local, _tool_call),
                ("tools/call, rate limit, redis store", on_redis, _tool_call),
            ],
            calls,
            rounds,
        )
        bearer = {"authorization": f"Bearer {ADMIN}"}
        console_figures = await _rounds(
            http,
            [
                ("console page, bearer admin token (baseline)", plain, _console_page(bearer)),
                (
                    "console page, login cookie, embedded file",
                    plain,
                    _console_page(await _login(http, plain)),
                ),
                (
                    "console page, login cookie, redis store",
                    on_redis,
                    _console_page(await _login(http, on_redis)),
                ),
            ],
            max(1, calls // 4),
            rounds,
        )
        nursery.cancel_scope.cancel()
    return {
        "per_operation_us": per_operation,
        "per_call_us": _with_ratios(calls_figures),
        "per_console_request_us": _with_ratios(console_figures),
    }


def _with_ratios(figures: dict[str, float]) -> dict[str, dict[str, float]]:
    baseline = next(iter(figures.values()))
    return {
        label: {"us": value, "ratio": round(value / baseline, 3)}
        for label, value in figures.items()
    }


def main() -> None:
    """Measure and print the tables; write the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds")
    parser.add_argument("--calls", type=int, default=200, help="calls per round and path")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--ops", type=int, default=2000, help="operations per store operation")
    parser.add_argument(
        "--appendfsync",
        default="everysec",
        choices=("always", "everysec", "no"),
        help="the redis-server's fsync policy (append-only file on; everysec is its default)",
    )
    args = parser.parse_args()
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is not on PATH: `make redis` installs it")
    calls, rounds, ops = (40, 3, 300) if args.quick else (args.calls, args.rounds, args.ops)
    with tempfile.TemporaryDirectory() as workdir:
        tmp = Path(workdir)
        (tmp / "redis").mkdir()
        redis = RedisServer(tmp / "redis", appendfsync=args.appendfsync)
        redis.start()
        try:
            with open(os.devnull, "w") as devnull:
                configure_logging("info", "json", devnull)  # as deployed, written nowhere
                figures = trio.run(measure, calls, rounds, ops, tmp, redis)
        finally:
            redis.stop()
    kinds = list(figures["per_operation_us"])
    print("operation        " + "".join(f"{kind:>26}" for kind in kinds))
    for operation in figures["per_operation_us"][kinds[0]]:
        row = "".join(f"{figures['per_operation_us'][k][operation]:>23} µs" for k in kinds)
        print(f"{operation:<17}{row}")
    for table in ("per_call_us", "per_console_request_us"):
        print()
        for label, value in figures[table].items():
            print(f"{label:<48} {value['us']:>9} µs   x{value['ratio']}")
    write_results(
        "store_cost",
        {"machine": machine(), "calls": calls, "rounds": rounds, "ops": ops, **figures},
    )


if __name__ == "__main__":
    main()
