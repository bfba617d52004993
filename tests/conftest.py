"""Fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog

from tests import harness


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
