"""The console's store page: kind, location without a password, state, keys, latencies."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import httpx
import trio

from gateway.console.page_data import store_latency_rows
from gateway.console.store_page import NAMESPACES, namespace_counts
from gateway.store.embedded import EmbeddedStore
from gateway.telemetry.metrics import Metrics
from tests.harness import Running, gateway_config, start_gateway
from tests.redis_server import RedisServer

ADMIN: Final = "admin-token-of-the-store-page-0123"
PASSWORD: Final = "store-password-canary-9f8e7d"


async def _console(nursery: trio.Nursery, store: dict[str, object]) -> Running:
    config = gateway_config([], admin={"enabled": True, "tokens": [ADMIN]}, store=store)
    return await start_gateway(nursery, config)


def _cells(html: str, table: str) -> list[list[str]]:
    body = html.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)
    return [[re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(
        r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)] for row in rows]  # fmt: skip


async def test_the_store_page_shows_the_embedded_file_its_keys_and_its_operations(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 26: kind, file, state, reconnects; keys per namespace; each operation's figures."""
    path = tmp_path / "state.sqlite"
    running = await _console(nursery, {"path": str(path)})
    async with httpx.AsyncClient(base_url=running.base_url) as http:
        login = await http.post("/admin/login", data={"token": ADMIN})
        assert login.status_code == 303
        page = await http.get("/admin/store", headers={"authorization": f"Bearer {ADMIN}"})
    assert page.status_code == 200
    assert 'href="/admin/store" aria-current="page"' in page.text  # in the nav, marked
    health = dict(_cells(page.text, "store-health"))
    assert health["Kind"] == "embedded" and health["Location"] == str(path)
    assert (health["State"], health["Reconnects"]) == ("ok", "0")
    keys = dict(_cells(page.text, "store-keys")[1:])
    assert list(keys) == list(NAMESPACES)
    assert int(keys["console"]) >= 2  # the signing key and the login
    operations = {row[0]: row for row in _cells(page.text, "store-operations")[1:]}
    assert int(operations["scan"][1]) >= len(NAMESPACES)  # this page's own count
    assert operations["put_new"][5] == "0"


async def test_a_redis_store_shows_its_address_without_its_password_and_when_it_is_down(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Gateway choice: never the password; the page answers while the store is down."""
    server = RedisServer(tmp_path, password=PASSWORD)
    server.start()
    try:
        url = f"redis://:{PASSWORD}@127.0.0.1:{server.port}/0"
        running = await _console(nursery, {"url": url, "timeout": 0.5})
        async with httpx.AsyncClient(base_url=running.base_url) as http:
            up = await http.get("/admin/store", headers={"authorization": f"Bearer {ADMIN}"})
            server.stop()
            down = await http.get("/admin/store", headers={"authorization": f"Bearer {ADMIN}"})
    finally:
        server.stop()
    assert (up.status_code, down.status_code) == (200, 200)
    assert PASSWORD not in up.text and PASSWORD not in down.text
    health = dict(_cells(up.text, "store-health"))
    assert (health["Kind"], health["State"]) == ("redis", "ok")
    assert health["Location"] == f"127.0.0.1:{server.port}/0"
    assert int(dict(_cells(up.text, "store-keys")[1:])["console"]) == 1  # the signing key
    health = dict(_cells(down.text, "store-health"))
    assert health["State"] == "down" and "none" not in health["Last failure"]
    assert 'id="store-keys-unknown"' in down.text


async def test_keys_are_counted_per_namespace_up_to_the_limit() -> None:
    """Gateway choice: one bounded scan per namespace; a full one says so."""
    store = EmbeddedStore()
    for i in range(5):
        await store.put(f"limits:token:{i}", b"1")
    await store.put("pins:svc", b"1")
    counts = {name: (keys, full) for name, keys, full in await namespace_counts(store, limit=3)}
    assert counts["limits"] == (3, True)
    assert counts["pins"] == (1, False)
    assert counts["console"] == (0, False)


def test_latency_rows_read_the_store_histogram_busiest_first() -> None:
    """Gateway choice: count, mean and the buckets p50 and p99 fall under, and errors."""
    metrics = Metrics()
    for seconds in (0.0002, 0.0002, 0.0002, 0.003):
        metrics.store_operation_duration.labels("get").observe(seconds)
    metrics.store_operation_duration.labels("spend").observe(2.0)
    metrics.store_errors.labels("spend").inc()
    rows = store_latency_rows(metrics.store_operation_duration, metrics.store_errors)
    assert [row.operation for row in rows] == ["get", "spend"]
    get, spend = rows
    assert (get.count, get.mean_ms, get.p50_ms, get.p99_ms, get.errors) == (4, 0.9, 0.25, 5.0, 0)
    assert (spend.count, spend.p50_ms, spend.errors) == (1, None, 1)
