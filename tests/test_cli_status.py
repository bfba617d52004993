"""``trio-mcp-gateway status`` against a real running gateway (issue 18 item 3).

The gateway runs in-process (tests/harness.py) with real backend processes;
the command runs as a real subprocess, as an operator runs it, and reads the
gateway's ``/readyz`` over HTTP.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any, Final

import httpx
import msgspec
import pytest
import trio
import yaml

from gateway.cli.status_report import duration, render
from gateway.telemetry.overview import BackendStatus, LastError, Overview, Readyz, SessionGroup
from tests.harness import gateway_config, open_client, sdk_backend, start_gateway, stdio_backend

ADMIN: Final = "admin-token-0123456789"
# The command answers in well under a second; this bounds a broken run.
RUN_TIMEOUT: Final = 30.0
BROKEN: Final = stdio_backend(
    "broken",
    [sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"],
    required=True,
    restart={"initial_delay": 30, "max_delay": 60},
)


async def status(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run ``python -m gateway status ARGS``; (exit code, stdout, stderr)."""
    environment = {k: v for k, v in os.environ.items() if k != "MCP_GATEWAY_ADMIN_TOKEN"}
    environment.update(env or {})
    with trio.fail_after(RUN_TIMEOUT):
        done = await trio.run_process(
            [sys.executable, "-m", "gateway", "status", *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env=environment,
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def _port(base_url: str) -> int:
    return int(base_url.rsplit(":", 1)[1])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _write_config(path: Path, **document: Any) -> str:
    path.write_text(yaml.safe_dump({"backends": [], **document}))
    return str(path)


async def test_a_ready_gateway_exits_0_and_shows_every_backend_and_the_sessions(
    nursery: trio.Nursery,
) -> None:
    """Issue 18: each backend with transport, era, state, uptime, restarts, in-flight; the
    client sessions by era and profile; exit 0 when ready."""
    running = await start_gateway(nursery, gateway_config([sdk_backend("alpha")]))
    async with open_client(running.url), open_client(running.url):
        code, out, err = await status("--url", running.base_url)
        json_code, json_out, _ = await status("--url", running.base_url + "/mcp", "--json")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("mcp-gateway ") and "  ready  " in lines[0]
    header = next(line for line in lines if line.startswith("BACKEND"))
    assert header.split() == [
        "BACKEND",
        "TRANSPORT",
        "ERA",
        "PROTOCOL",
        "STATE",
        "UPTIME",
        "RESTARTS",
        "IN-FLIGHT",
        "LAST",
        "ERROR",
    ]
    row = next(line for line in lines if line.startswith("alpha"))
    assert row.split()[:8] == [
        "alpha",
        "stdio",
        "legacy",
        "2025-11-25",
        "up",
        row.split()[5],
        "0",
        "0",
    ]
    assert "client sessions: 2" in lines
    assert any(line.split() == ["legacy", "2025-11-25", "default", "2"] for line in lines)
    assert "\x1b[" not in out  # not a terminal: plain text
    assert json_code == 0
    body = msgspec.json.decode(json_out.encode(), type=Readyz)
    assert body.ready is True and body.backends == {"alpha": "up"}
    assert body.overview is not None
    (alpha,) = body.overview.backends
    assert (alpha.transport, alpha.era, alpha.state, alpha.restarts) == (
        "stdio",
        "legacy",
        "up",
        0,
    )
    assert alpha.uptime_seconds is not None and alpha.uptime_seconds >= 0
    assert body.overview.sessions == [
        SessionGroup(era="legacy", protocol_version="2025-11-25", profile="default", count=2)
    ]


async def test_a_required_backend_that_fails_to_start_exits_1_with_its_last_error(
    nursery: trio.Nursery,
) -> None:
    """Issue 18: exit 1 when not ready; the failing backend's state and last error show."""
    running = await start_gateway(
        nursery, gateway_config([sdk_backend("alpha"), BROKEN]), wait_up=["alpha"]
    )
    with trio.fail_after(RUN_TIMEOUT):
        await running.gateway.pool.backends["broken"].settled.wait()
    code, out, err = await status("--url", running.base_url)
    json_code, json_out, _ = await status("--url", running.base_url, "--json")
    assert (code, json_code, err) == (1, 1, "")
    assert "NOT READY" in out.splitlines()[0]
    row = next(line for line in out.splitlines() if line.startswith("broken*"))
    assert row.split()[4] == "down"
    document = json.loads(json_out)
    assert document["ready"] is False
    assert document["required_down"] == ["broken"]
    broken = next(b for b in document["overview"]["backends"] if b["name"] == "broken")
    assert broken["state"] == "down" and broken["required"] is True
    assert broken["era"] is None and broken["uptime_seconds"] is None
    assert broken["last_error"]["message"]
    assert broken["last_error"]["message"][:40] in row.replace("…", "")
    assert abs(broken["last_error"]["at"] - time.time()) < RUN_TIMEOUT


async def test_a_backend_that_exits_at_start_says_why_in_status_and_the_console(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 24: its last stderr lines are its last error, with the extra that installs a
    missing module; a real child that fails to import the SDK, as a bare install's demo."""
    server = tmp_path / "server.py"
    server.write_text("import mcp\n")
    # -S: no site-packages, so `mcp` is missing as in an install without [demo].
    missing = stdio_backend(
        "demo", [sys.executable, "-I", "-S", str(server)], restart={"initial_delay": 30}
    )
    running = await start_gateway(
        nursery,
        gateway_config([sdk_backend("alpha"), missing], admin={"enabled": True}),
        wait_up=["alpha"],
    )
    with trio.fail_after(RUN_TIMEOUT):
        await running.gateway.pool.backends["demo"].settled.wait()
    code, out, _ = await status("--url", running.base_url, "--json")
    assert code == 0  # not required: the gateway is ready without it
    (demo,) = (b for b in json.loads(out)["overview"]["backends"] if b["name"] == "demo")
    message = demo["last_error"]["message"]
    assert message.startswith(
        "process exited with code 1: ModuleNotFoundError: No module named 'mcp' "
        "(install the demo extra: pip install 'trio-mcp-gateway[demo]'); before it: "
    )
    assert message.endswith(", line 1, in <module> | import mcp")
    code, table, _ = await status("--url", running.base_url)
    assert code == 0
    assert f"  demo: {message}" in table.split("why not up:\n")[1].splitlines()
    async with httpx.AsyncClient(base_url=running.base_url, timeout=RUN_TIMEOUT) as client:
        page = await client.get("/admin/")
    assert page.status_code == 200
    assert "No module named &#39;mcp&#39;" in page.text
    assert "pip install &#39;trio-mcp-gateway[demo]&#39;" in page.text


async def test_off_loopback_details_need_the_admin_token_from_flag_env_or_config(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """A49 + issue 18: without the admin token only ready/not shows (exit code still
    right); --token, $MCP_GATEWAY_ADMIN_TOKEN or the config's auth.admin_tokens show all."""
    auth = {"admin_tokens": [ADMIN], "tokens": {"a": "tok-a-1234"}}
    running = await start_gateway(nursery, gateway_config([sdk_backend("alpha")], auth=auth))
    running.gateway.app.operations = "admin"  # as on a 0.0.0.0 bind (tests bind loopback)
    url = running.base_url
    code, out, _ = await status("--url", url, "--json")
    assert (code, json.loads(out)) == (0, {"ready": True})
    code, out, _ = await status("--url", url)
    assert code == 0 and "no details" in out and "--token" in out
    code, out, _ = await status("--url", url, "--token", "tok-a-1234", "--json")
    assert json.loads(out) == {"ready": True}  # a host's token is not an admin's
    code, out, _ = await status("--url", url, "--token", ADMIN, "--json")
    assert code == 0 and json.loads(out)["overview"]["backends"][0]["name"] == "alpha"
    code, out, _ = await status("--url", url, "--json", env={"MCP_GATEWAY_ADMIN_TOKEN": ADMIN})
    assert "overview" in json.loads(out)
    config = _write_config(
        tmp_path / "gateway.yaml",
        server={"host": "127.0.0.1", "port": _port(url)},
        auth={"admin_tokens": [ADMIN]},
    )
    code, out, _ = await status("-c", config, "--json")
    assert code == 0 and "overview" in json.loads(out)


async def test_with_a_metrics_listener_the_config_leads_status_there(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 18: `metrics: {port}` in the config: status asks the operations listener."""
    port = _free_port()
    running = await start_gateway(
        nursery,
        gateway_config([sdk_backend("alpha")], metrics={"host": "127.0.0.1", "port": port}),
    )
    running.gateway.app.operations = "elsewhere"
    # The main listener's port in the file is closed: only the metrics one answers.
    config = _write_config(
        tmp_path / "gateway.yaml",
        server={"host": "127.0.0.1", "port": _free_port()},
        metrics={"host": "0.0.0.0", "port": port},
    )
    code, out, err = await status("-c", config, "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["overview"]["backends"][0]["name"] == "alpha"


async def test_an_unreachable_gateway_exits_2_with_a_clear_message() -> None:
    """Issue 18: 2 when nobody answers, naming the URL; a bad --url is 2 as well."""
    port = _free_port()
    code, out, err = await status("--url", f"http://127.0.0.1:{port}")
    assert (code, out) == (2, "")
    assert err.startswith(f"trio-mcp-gateway status: cannot reach http://127.0.0.1:{port}/readyz")
    code, _, err = await status("--url", "ftp://example.invalid")
    assert code == 2 and "expected http://HOST:PORT" in err


async def _serve_fixed(nursery: trio.Nursery, response: bytes) -> str:
    """A tiny HTTP server that answers every request with ``response`` (not a gateway)."""

    async def answer(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        await stream.send_all(response)
        await stream.aclose()

    listeners = await nursery.start(partial(trio.serve_tcp, answer, 0, host="127.0.0.1"))
    port = listeners[0].socket.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize(
    ("response", "said"),
    [
        (b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n", "answered HTTP 404"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello", "not JSON"),
        (b'HTTP/1.1 200 OK\r\ncontent-length: 13\r\n\r\n{"ready": 42}', "not a gateway"),
    ],
)
async def test_something_that_is_not_a_gateway_exits_2(
    nursery: trio.Nursery, response: bytes, said: str
) -> None:
    """Issue 18: an answer that is not a gateway's /readyz is exit 2 with what came back."""
    url = await _serve_fixed(nursery, response)
    code, out, err = await status("--url", url)
    assert (code, out) == (2, "")
    assert err.startswith("trio-mcp-gateway status: ") and said in err


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (0.4, "0s"), (59, "59s"), (61, "1m01s"), (3725, "1h02m"), (90061, "1d01h")],
)
def test_durations_read_at_a_glance(seconds: float | None, text: str) -> None:
    """Gateway choice: the largest two units, fixed width after the first."""
    assert duration(seconds) == text


def test_on_a_terminal_the_state_is_coloured_and_a_long_error_is_cut() -> None:
    """Gateway choice: colour only on a TTY; one line per backend, whatever the error."""
    row = BackendStatus(
        name="notes",
        transport="http",
        state="down",
        reason="connect failed",
        required=False,
        last_error=LastError(message="connect failed:\n" + "x" * 200, at=1_000_000.0),
    )
    overview = Overview(
        version="1", uptime_seconds=5, ready=True, draining=False, backends=[row], sessions=[]
    )
    text = render(Readyz(ready=True, overview=overview), "u", colour=True, now=1_000_090.0)
    line = next(line for line in text.splitlines() if line.startswith("notes"))
    assert "\x1b[31mdown" in line
    assert "1970-01-12T13:46:40Z (1m30s ago) connect failed: xxx" in line
    assert line.endswith("…") and "\n" not in line
    plain = render(Readyz(ready=True, overview=overview), "u", colour=False, now=1_000_090.0)
    assert "\x1b[" not in plain
