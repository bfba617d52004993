"""The benchmark's peer plumbing, without running a peer (issue 17).

The peers themselves run only in ``make bench``; what is checked here is
what decides their figures: how each is started over the backends, how an
SSE answer is read, and how the side-by-side table turns load results into
factors and a pass/miss. No timing is asserted.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest

from benchmarks.lean import HttpResponse, _json_body
from benchmarks.peers import _command, _endpoints
from benchmarks.peers.compare import peer_table

BACKENDS = [
    ("bench", ["/usr/bin/python3", "/srv/bench server.py"]),
    ("sdk", ["/usr/bin/python3", "sdk.py"]),
]


def test_an_sse_answer_is_read_from_its_last_data_line() -> None:
    body = b'event: message\r\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\r\n\r\n'
    response = HttpResponse(200, {"content-type": "text/event-stream"}, body)
    assert json.loads(_json_body(response)) == {"jsonrpc": "2.0", "id": 1, "result": {}}


def test_a_json_answer_is_read_as_it_is() -> None:
    body = b'{"jsonrpc":"2.0","id":1,"result":{}}'
    assert _json_body(HttpResponse(200, {"content-type": "application/json"}, body)) == body


def test_an_sse_answer_without_data_is_an_error_not_an_empty_result() -> None:
    with pytest.raises(RuntimeError, match="without data"):
        _json_body(HttpResponse(200, {"content-type": "text/event-stream"}, b": ping\r\n\r\n"))


def test_mcp_proxy_gets_one_named_server_per_backend_on_loopback() -> None:
    command = _command("mcp-proxy", 9000, BACKENDS)
    assert command[command.index("--host") + 1] == "127.0.0.1"
    assert command[command.index("--port") + 1] == "9000"
    named = [command[i + 1 : i + 3] for i, arg in enumerate(command) if arg == "--named-server"]
    assert [name for name, _ in named] == ["bench", "sdk"]
    assert shlex.split(named[0][1]) == BACKENDS[0][1]  # a path with a space survives
    assert _endpoints("mcp-proxy", 9000, BACKENDS)["sdk"] == (
        "http://127.0.0.1:9000/servers/sdk/mcp",
        "echo",
    )


def test_fastmcp_gets_every_backend_as_name_and_argv() -> None:
    command = _command("fastmcp", 9001, BACKENDS)
    assert command[2] == "9001"
    specs = dict(spec.split("=", 1) for spec in command[3:])
    assert {name: json.loads(argv) for name, argv in specs.items()} == dict(BACKENDS)
    assert _endpoints("fastmcp", 9001, BACKENDS)["bench"] == (
        "http://127.0.0.1:9001/mcp",
        "bench_echo",
    )


def _run(backend: str, concurrency: int, engine: str, rate: float, direct: float) -> dict[str, Any]:
    return {
        "backend": backend,
        "concurrency": concurrency,
        "engine": engine,
        "gateway": {"calls_per_s": rate},
        "direct": {"calls_per_s": direct},
    }


def test_the_table_has_a_column_per_peer_and_passes_only_when_ahead_of_every_one() -> None:
    runs = [
        _run("sdk", 1, "h11", 400.0, 500.0),
        _run("sdk", 1, "peer:fastmcp", 100.0, 500.0),
        _run("sdk", 1, "peer:mcp-proxy", 200.0, 500.0),
        _run("sdk", 8, "h11", 300.0, 500.0),
        _run("sdk", 8, "peer:fastmcp", 100.0, 500.0),
        _run("sdk", 8, "peer:mcp-proxy", 320.0, 500.0),
    ]
    table = peer_table(runs, "h11", ["fastmcp", "mcp-proxy"])
    assert table["headers"][3:5] == ["fastmcp", "mcp-proxy"]
    first, second = table["rows"]
    assert first["gateway_over_peer"] == {"fastmcp": 4.0, "mcp-proxy": 2.0}
    assert first["pass"] is True
    assert second["gateway_over_peer"]["mcp-proxy"] == pytest.approx(300 / 320)
    assert second["pass"] is False
    assert table["cells"][0][2] == "400/s 0.80x"
    assert table["cells"][0][4] == "200/s 0.40x (us 2.00x)"
    assert table["cells"][1][-1].startswith("MISS (min 0.94x)")


def test_a_peer_missing_from_a_row_is_a_dash_not_a_pass() -> None:
    runs = [_run("bench", 1, "h11", 900.0, 20000.0)]
    table = peer_table(runs, "h11", ["fastmcp"])
    assert table["cells"][0][3] == "-"
    assert table["rows"][0]["pass"] is None
