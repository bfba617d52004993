"""The era matrix (issue 14): legacy/modern host x legacy/modern backend x feature.

Each cell starts one gateway in front of one real backend named ``b``:

* **legacy backend**: ``tests/servers/era_legacy.py`` (official SDK 1.x,
  handshake era: the gateway sends ``initialize``);
* **modern backend**: ``tests/servers/modern_sdk2.py`` on the official SDK 2.x
  (the gateway's probe finds 2026-07-28 and speaks it), over stdio
  (``modern``) and over Streamable HTTP (``modern_http``: one process for the
  module, since a trio test's own nursery cannot outlive it).

Both have tools of the same contract (``add``, progress, ``wait_forever``,
``ask_name``, ``ask_sample``, ``ask_visit``, ``grow``), so one assertion reads both. Hosts:

* **legacy host**: the official SDK 1.x ``ClientSession`` with callbacks
  (``initialize``, ``Mcp-Session-Id``, server-to-client requests on the
  call's stream, list_changed on the GET stream), and raw ``httpx`` for
  ``notifications/cancelled`` (the SDK gives no handle on its request id);
* **modern host**: raw ``httpx`` with the 2026-07-28 envelope and headers,
  answering ``input_required`` with a retry carrying ``inputResponses`` and
  ``requestState``, list_changed on ``subscriptions/listen``.

The cells themselves (one function per host era and feature) are in
``tests/interaction/era_cells.py``; this module is the matrix and its gaps.

A cell the gateway does not serve yet is ``xfail(strict=True)`` naming the gap
(``GAPS``), never skipped. One gateway per cell: pytest-trio's nursery is
function-scoped, and one backend per gateway keeps each start to one child.
Rules: ``docs/eras.md``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
import trio

from tests.e2e.test_modern_backend import (
    SDK2_PYTHON,
    SERVER,
    sdk2_stdio,
    text_of,
)
from tests.e2e.test_modern_backend import pytestmark as pytestmark  # skip without .venv-sdk2
from tests.frontend.test_listen_http import SUB_ID, listen
from tests.frontend.test_modern_http import modern, send
from tests.harness import gateway_config, sdk_backend, start_gateway
from tests.interaction.era_cells import (
    CELLS,
    WAIT,
    GapSeen,
)
from tests.interaction.test_beside_a_call import messages_of
from tests.subprocess_servers import RunningServer, free_port, run_server

HOSTS: Final = ("legacy", "modern")
# ``modern_http``: the same SDK 2.x peer over Streamable HTTP (one process for the
# module): the backend leg's other transport (headers, cancel by closing the stream).
BACKENDS: Final = ("legacy", "modern", "modern_http")
FEATURES: Final = (
    "list",
    "call",
    "progress",
    "cancel",
    "list_changed",
    "elicitation",
    "sampling",
    "url_elicitation",
    "undeclared",
)
# (host, backend, feature) -> (the gap, the GapSeen it raises). Empty: every
# cell passes. The gateway's standing listen towards 2026-07-28 backends
# (gateway/backends/stateless/listen_client.py) closed the last gap, list_changed.
GAPS: Final[dict[tuple[str, str, str], tuple[str, type[GapSeen]]]] = {}


def _cells() -> list[Any]:
    cells = []
    for host in HOSTS:
        for backend in BACKENDS:
            for feature in FEATURES:
                marks = []
                if (host, backend, feature) in GAPS:
                    reason, seen = GAPS[host, backend, feature]
                    # pytest-trio's nursery wraps the cell's exception in a group.
                    raises = pytest.RaisesGroup(seen)
                    marks.append(pytest.mark.xfail(strict=True, raises=raises, reason=reason))
                cell_id = f"{host}_host-{backend}_backend-{feature}"
                cells.append(pytest.param(host, backend, feature, marks=marks, id=cell_id))
    return cells


def _sdk2_over_http() -> Iterator[RunningServer]:
    port = free_port()
    with run_server([str(SDK2_PYTHON), str(SERVER), "http", str(port)], port) as server:
        yield server


sdk2_shared = pytest.fixture(scope="module", name="sdk2_shared")(_sdk2_over_http)
"""The SDK 2.x peer over HTTP for the ``modern_http`` cells (its tools grow as they run)."""
sdk2_direct = pytest.fixture(name="sdk2_direct")(_sdk2_over_http)
"""A fresh SDK 2.x peer over HTTP for the control test."""


def _backend(backend: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    if backend == "legacy":
        return sdk_backend("era_legacy", "b")
    if backend == "modern":
        return sdk2_stdio("b")
    shared: RunningServer = request.getfixturevalue("sdk2_shared")  # only the cells using it
    return {"name": "b", "transport": "http", "url": shared.url("/mcp")}


@pytest.mark.parametrize(("host", "backend", "feature"), _cells())
async def test_era_matrix(
    nursery: trio.Nursery,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    host: str,
    backend: str,
    feature: str,
) -> None:
    """One cell: ``host`` era x ``backend`` era x ``feature``, observed at both ends."""
    running = await start_gateway(nursery, gateway_config([_backend(backend, request)]))
    era = "legacy" if backend == "legacy" else "modern"
    info = running.gateway.pool.backends["b"].info
    assert info is not None and info.modern is (era == "modern")
    await CELLS[host, feature](running, era, tmp_path)
    nursery.cancel_scope.cancel()


async def test_control_the_modern_backend_announces_its_change_on_its_own_listen_stream(
    sdk2_direct: RunningServer,
) -> None:
    """The peer itself: spoken to directly (no gateway), the SDK 2.x backend's
    ``grow`` reaches a listen stream, and only there (what the gateway's own
    standing listen relies on)."""
    base = sdk2_direct.url("")
    async with (
        httpx.AsyncClient(base_url=base, trust_env=False, timeout=WAIT) as client,
        listen(client, "L1", {"toolsListChanged": True}) as stream,
    ):
        ack = await stream.next()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        grown = await send(client, modern(2, "tools/call", {"name": "grow", "arguments": {}}))
        assert text_of(messages_of(grown)[-1]["result"]) == "grown_1"
        changed = await stream.next()
    assert changed["method"] == "notifications/tools/list_changed"
    assert changed["params"]["_meta"] == {SUB_ID: "L1"}
