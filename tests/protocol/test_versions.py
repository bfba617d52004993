"""Specification tests for ``gateway.protocol.versions`` (pure functions).

MCP lifecycle, "Version Negotiation": the client offers its newest revision;
a server that supports it answers with it, otherwise with its own newest.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.protocol import versions
from gateway.protocol.versions import (
    LATEST_VERSION,
    SUPPORTED_VERSIONS,
    accept_as_client,
    negotiate_as_server,
    resource_not_found_code,
    supports_batches,
)

UNKNOWN_VERSIONS = ["1.0.0", "2099-01-01", "2024-11-04", "", " 2025-06-18", "2025-06-18 "]
NON_STRINGS = [None, 20250618, 2025.0618, ["2025-06-18"], {"v": "2025-06-18"}, b"2025-06-18"]


def test_supported_versions_are_the_four_revisions_oldest_first() -> None:
    """Gateway choice: the gateway speaks 2024-11-05 through 2025-11-25."""
    assert SUPPORTED_VERSIONS == ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
    assert list(SUPPORTED_VERSIONS) == sorted(SUPPORTED_VERSIONS)
    assert SUPPORTED_VERSIONS[-1] == LATEST_VERSION


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_server_answers_a_supported_version_with_that_version(version: str) -> None:
    """Spec: a server that supports the requested version MUST answer with it."""
    assert negotiate_as_server(version) == version


@pytest.mark.parametrize("requested", UNKNOWN_VERSIONS + NON_STRINGS)
def test_server_answers_an_unknown_or_malformed_version_with_its_newest(requested: Any) -> None:
    """Spec: otherwise the server answers with its latest; the host decides to disconnect."""
    assert negotiate_as_server(requested) == LATEST_VERSION


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_client_accepts_a_supported_answer(version: str) -> None:
    """Spec: the client may proceed when it supports the server's answer."""
    assert accept_as_client(version) == version


@pytest.mark.parametrize("answered", UNKNOWN_VERSIONS + NON_STRINGS)
def test_client_rejects_an_unknown_or_malformed_answer(answered: Any) -> None:
    """Spec: a client that does not support the server's version SHOULD disconnect."""
    assert accept_as_client(answered) is None


@pytest.mark.parametrize(
    ("version", "expected"),
    [("2024-11-05", False), ("2025-03-26", True), ("2025-06-18", False), ("2025-11-25", False)],
)
def test_only_2025_03_26_supports_batches(version: str, expected: bool) -> None:
    """Spec: JSON-RPC batching was added in 2025-03-26 and removed in 2025-06-18."""
    assert supports_batches(version) is expected


@pytest.mark.parametrize(
    ("version", "code"),
    [
        ("2024-11-05", -32602),
        ("2025-03-26", -32602),
        ("2025-06-18", -32002),
        ("2025-11-25", -32002),
        ("2026-07-28", -32602),  # sep-2164: -32002 removed again
    ],
)
def test_resource_not_found_code_depends_on_the_revision(version: str, code: int) -> None:
    """Spec: 2025-06-18 names -32002 for an unknown resource; older hosts expect -32602."""
    assert resource_not_found_code(version) == code


@given(st.one_of(st.text(), st.none(), st.integers(), st.binary(), st.lists(st.text())))
def test_negotiation_always_yields_a_supported_version(requested: Any) -> None:
    """Spec: whatever a host offers, the gateway answers with a version it speaks."""
    assert negotiate_as_server(requested) in SUPPORTED_VERSIONS


@given(st.one_of(st.text(), st.none(), st.integers(), st.sampled_from(SUPPORTED_VERSIONS)))
def test_client_acceptance_is_the_answer_or_none(answered: Any) -> None:
    """Spec: the client either uses exactly what the server said or gives up."""
    accepted = versions.accept_as_client(answered)
    assert accepted is None or accepted == answered
    assert (accepted is not None) == (answered in SUPPORTED_VERSIONS)
