"""Fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    """Each test starts with structlog's defaults (cli configures it in production)."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()
