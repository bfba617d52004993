"""Replicas without affinity (issue 14, step 8), as a test: a smaller replica run.

Three gateways behind HAProxy balancing every request round robin with no
stickiness; the official SDK 2.x client adds, walks paginated lists and
answers MRTR rounds through them; one replica is SIGKILLed half-way. The
full-size run (1,000 operations) is ``benchmarks/replicas.py``; its figures
are in docs/eras.md.
"""

from __future__ import annotations

import shutil

import pytest

from benchmarks.replicas import run
from tests.harness import NEEDS_SDK2

OPERATIONS = 240
WORKERS = 6

pytestmark = [
    *NEEDS_SDK2,
    pytest.mark.skipif(
        shutil.which("haproxy") is None,
        reason="haproxy is missing: run `make haproxy` (make test always installs it)",
    ),
]


def test_any_replica_serves_any_modern_request_and_a_killed_one_loses_only_its_own_calls() -> None:
    """Gateway choice (issue 14 step 8): zero wrong answers; failures only from the kill."""
    figures = run(OPERATIONS, WORKERS, replicas=3, kill=True, seed=7)
    outcomes = figures["outcomes"]
    assert figures["operations"] == OPERATIONS
    assert outcomes.get("wrong", 0) == 0, figures["wrong"]
    # Every replica served requests before the kill: no affinity hid anything.
    assert all(count and count > 10 for count in figures["requests_per_replica_before_kill"])
    assert figures["requests_per_replica_at_end"][-1] is None  # the killed one
    # Only what was in flight on the killed replica fails: at most one
    # operation per worker, each broken by the connection reset.
    failures = figures["failures"]
    assert outcomes.get("failed", 0) <= WORKERS, failures
    assert all("client context" in kind or "RemoteProtocolError" in kind for kind in failures), (
        failures
    )
    # Cursor walks and MRTR rounds crossed replicas and came out right.
    assert figures["by_operation"].get("walk:ok", 0) > 10
    assert figures["by_operation"].get("confirm:ok", 0) > 10
