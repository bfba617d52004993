"""Relevance of the tool search on the real peers' own tools (issue 15, Tests).

``relevance/tools.json`` is the merged tools/list of the reference server,
the official filesystem server, the SDK test servers alpha and beta and the
two demo servers, named as the gateway names them (regenerate it with
``python -m tests.catalog.relevance.dump_tools``). ``relevance/requests.yaml``
holds natural-language requests, each labelled with the tools that answer it.

The thresholds sit just below what the ranking measures, so a change that
makes it worse fails here; `-s` prints the figures and every miss.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.catalog.naming import NamingRules
from gateway.catalog.search import ToolIndex, index_snapshot
from gateway.catalog.snapshot import BackendListing, Kind, Snapshot, build_snapshot

RELEVANCE_DIR = Path(__file__).resolve().parent / "relevance"
# Measured on 207 requests: recall@5 0.961, recall@1 0.826; on the 32
# held-out ones (written after tuning) 1.000 and 0.781. Plain BM25 without
# the synonym groups: 0.869 and 0.731 on the first 175.
MIN_RECALL_AT_5 = 0.95
MIN_RECALL_AT_1 = 0.82
MIN_REQUESTS = 150


@dataclass(frozen=True)
class Request:
    """One labelled request: the text and the tools that answer it."""

    query: str
    expect: tuple[str, ...]
    hard: bool
    heldout: bool


def load_tools_snapshot() -> Snapshot:
    """The fixture's tools as a catalog snapshot, one backend per prefix."""
    document = json.loads((RELEVANCE_DIR / "tools.json").read_text(encoding="utf-8"))
    separator: str = document["separator"]
    grouped: dict[str, list[dict[str, Any]]] = {}
    for item in document["tools"]:
        prefix, _, original = item["name"].partition(separator)
        grouped.setdefault(prefix, []).append({**item, "name": original})
    listings = [BackendListing(p, p, tools=tuple(tools)) for p, tools in grouped.items()]
    return build_snapshot(listings, NamingRules(separator=separator))


def load_requests() -> list[Request]:
    """The labelled requests."""
    document = yaml.safe_load((RELEVANCE_DIR / "requests.yaml").read_text(encoding="utf-8"))
    return [
        Request(
            r["q"], tuple(r["expect"]), bool(r.get("hard", False)), bool(r.get("heldout", False))
        )
        for r in document["requests"]
    ]


def recall(index: ToolIndex, requests: list[Request], k: int) -> tuple[float, list[Request]]:
    """Share of requests with a right tool in the top ``k``, and the requests that missed."""
    missed = [r for r in requests if not {h.name for h in index.search(r.query, k)} & set(r.expect)]
    return 1 - len(missed) / len(requests), missed


@pytest.fixture(name="snapshot", scope="module")
def _snapshot() -> Snapshot:
    return load_tools_snapshot()


@pytest.fixture(name="requests", scope="module")
def _requests() -> list[Request]:
    return load_requests()


def test_the_relevance_set_is_large_and_labelled_with_real_tools(
    snapshot: Snapshot, requests: list[Request]
) -> None:
    """Issue 15: at least 150 requests, each naming tools the real peers list."""
    known = set(snapshot.view(Kind.TOOLS).keys())
    assert len(requests) >= MIN_REQUESTS
    assert len({r.query for r in requests}) == len(requests)
    for request in requests:
        assert request.expect, request.query
        assert set(request.expect) <= known, request.query
    # Every tool is some request's answer.
    assert {name for r in requests for name in r.expect} == known


def test_recall_at_5_and_at_1_on_the_real_tools(
    snapshot: Snapshot, requests: list[Request]
) -> None:
    """Issue 15 target: recall@5 >= 0.9 (asserted at what is measured)."""
    index = index_snapshot(snapshot)
    at_5, missed_5 = recall(index, requests, 5)
    at_1, missed_1 = recall(index, requests, 1)
    hard_at_5, _ = recall(index, [r for r in requests if r.hard], 5)
    held = [r for r in requests if r.heldout]
    held_at_1, _ = recall(index, held, 1)
    held_at_5, _ = recall(index, held, 5)
    print(
        f"\nrecall@1 {at_1:.3f}  recall@5 {at_5:.3f}  hard recall@5 {hard_at_5:.3f}  "
        f"held-out ({len(held)}) recall@1 {held_at_1:.3f} recall@5 {held_at_5:.3f}"
    )
    for request in missed_1:
        top = [h.name for h in index.search(request.query, 3)]
        mark = "@5 miss" if request in missed_5 else "@1 miss"
        print(f"  {mark}: {request.query!r} -> {top} (want {request.expect[0]})")
    index.close()
    assert at_5 >= MIN_RECALL_AT_5
    assert at_1 >= MIN_RECALL_AT_1
