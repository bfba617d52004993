"""One store suite, run against the embedded store (memory and file) and a real redis-server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from gateway.config import StoreConfig
from gateway.store.api import Store
from gateway.store.embedded import EmbeddedStore
from gateway.store.redis_store import open_redis_store
from tests.store.redis_server import RedisServer


@pytest.fixture(scope="session", name="redis_server")
def _redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=["memory", "file", "redis"], name="store")
async def _store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Each test once per store kind: whatever holds on one holds on all."""
    if request.param == "memory":
        yield EmbeddedStore()
    elif request.param == "file":
        store = EmbeddedStore(str(tmp_path / "state.sqlite"))
        yield store
        store.close()
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        server.flush()
        async with open_redis_store(StoreConfig(url=server.url, key_prefix="t:")) as shared:
            yield shared
