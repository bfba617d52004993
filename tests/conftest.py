"""Fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
from hypothesis import HealthCheck, settings

from gateway.config import StoreConfig
from gateway.store.api import Store
from gateway.store.embedded import EmbeddedStore
from gateway.store.redis_store import open_redis_store
from gateway.telemetry import logs
from tests import harness
from tests.redis_server import RedisServer

# No test's outcome may depend on how fast the machine is (docs/style.md):
# Hypothesis's per-example deadline and its "input generation is slow"
# health check both do, and both failed runs on 2 loaded cores (a clean
# clone's `make test` failed on the second). Every other check stays on.
settings.register_profile("gateway", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("gateway")

# The same rule for the tests' own HTTP clients: httpx's default 5 s read
# timeout is a speed assertion no test means to make, and it failed requests
# on 2 cores shared by two pytest workers and a CPU hog. Every client built
# without a timeout of its own waits 60 s; the tests that are about timeouts
# set theirs. (httpx binds this object as the constructors' default, so it
# is changed in place; the gateway's own clients always pass one.)
_LOADED_MACHINE_TIMEOUT = 60.0
httpx._config.DEFAULT_TIMEOUT_CONFIG.read = _LOADED_MACHINE_TIMEOUT
httpx._config.DEFAULT_TIMEOUT_CONFIG.write = _LOADED_MACHINE_TIMEOUT
httpx._config.DEFAULT_TIMEOUT_CONFIG.connect = _LOADED_MACHINE_TIMEOUT
httpx._config.DEFAULT_TIMEOUT_CONFIG.pool = _LOADED_MACHINE_TIMEOUT


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    """Each test starts with structlog's defaults (cli configures it in production)."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


@pytest.fixture(name="debug_logs")
def _debug_logs() -> Iterator[None]:
    """The level gate at debug for the test: events a hot path builds only when they
    would be written (``request.routed`` at debug) reach ``capture_logs``."""
    logs.set_log_level("debug")
    yield
    logs.set_log_level("info")


@pytest.fixture(params=harness.ENGINES)
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test once per HTTP engine (``server.engine``): everything that holds on
    hypercorn must hold on the h11 engine. Modules opt in with
    ``pytestmark = pytest.mark.usefixtures("engine")``."""
    engine: str = request.param
    monkeypatch.setattr(harness, "ENGINE", engine)
    return engine


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


@pytest.fixture(name="spans")
def _spans() -> Iterator[Any]:
    """Tracing on, exporting to memory (an ``InMemorySpanExporter``), for this test only:
    the tracer is process-wide. Imported here, so a test without spans never loads the SDK."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from gateway.config import TracingConfig
    from gateway.telemetry import tracing

    exporter = InMemorySpanExporter()
    tracing.configure(TracingConfig(enabled=True), exporter)
    yield exporter
    tracing.shutdown()
