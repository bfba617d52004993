"""Fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, settings

from tests import harness

# No test's outcome may depend on how fast the machine is (docs/style.md):
# Hypothesis's per-example deadline and its "input generation is slow"
# health check both do, and both failed runs on 2 loaded cores (a clean
# clone's `make test` failed on the second). Every other check stays on.
settings.register_profile("gateway", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("gateway")


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    """Each test starts with structlog's defaults (cli configures it in production)."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


@pytest.fixture(params=harness.ENGINES)
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test once per HTTP engine (``server.engine``): everything that holds on
    hypercorn must hold on the h11 engine. Modules opt in with
    ``pytestmark = pytest.mark.usefixtures("engine")``."""
    engine: str = request.param
    monkeypatch.setattr(harness, "ENGINE", engine)
    return engine


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
