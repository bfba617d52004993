"""The installed wheel runs with no repository at hand (issue 19, step 3).

Builds the sdist and wheel with ``python -m build`` from a copy of the sources,
installs it with its ``demo`` extra into a fresh venv, and runs
``trio-mcp-gateway serve`` without ``-c`` from an empty folder outside the
repository: the packaged default config must serve the demo backends, say
which config it used, and answer the official MCP client (SDK 1.x).

Real processes and real time, bounded; marked ``wheel`` (tens of seconds:
a wheel build, a venv and a pip install), which ``make test`` runs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Final

import httpx
import pytest
import trio

from gateway import __version__
from tests.harness import open_client
from tests.subprocess_servers import free_port

pytestmark = pytest.mark.wheel

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
# What the wheel is built from; everything else in the repository stays behind.
SOURCES: Final = ("pyproject.toml", "README.md", "gateway", "mcp_gateway_demo")
BUILD_TIMEOUT: Final = 120.0
INSTALL_TIMEOUT: Final = 240.0
READY_TIMEOUT: Final = 30.0
POLL_INTERVAL: Final = 0.1
STOP_TIMEOUT: Final = 10.0


def _copy_sources(to: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SOURCES:
        source = REPO_ROOT / name
        if source.is_dir():
            shutil.copytree(source, to / name, ignore=ignore)
        else:
            shutil.copy2(source, to / name)


def _clean_env() -> dict[str, str]:
    """The environment of a user's shell: nothing pointing back into this repository."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "COV", "MCP_"))}
    env.pop("VIRTUAL_ENV", None)
    return env


async def _run(argv: list[str], cwd: Path) -> str:
    """Run a command to completion (the caller bounds it); its stdout."""
    done = await trio.run_process(
        argv, cwd=cwd, env=_clean_env(), capture_stdout=True, capture_stderr=True, check=False
    )
    output = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 0, f"{argv} failed ({done.returncode}):\n{output[-4000:]}"
    return done.stdout.decode()


async def test_the_installed_wheel_serves_the_packaged_default_config_outside_the_repository(
    tmp_path: Path,
) -> None:
    """Issue 19: build, install into a fresh venv, `serve` with no -c answers the official
    client with the demo backends, logging which config it used."""
    src = tmp_path / "src"
    src.mkdir()
    _copy_sources(src)
    dist = tmp_path / "dist"
    with trio.fail_after(BUILD_TIMEOUT):
        # Plain `python -m build`: the sdist, then the wheel built from it, so a
        # file the sdist leaves out is missing from the wheel too.
        await _run([sys.executable, "-m", "build", "--outdir", str(dist)], src)
    (wheel,) = dist.glob("trio_mcp_gateway-*.whl")
    assert wheel.name == f"trio_mcp_gateway-{__version__}-py3-none-any.whl"
    venv = tmp_path / "venv"
    base_python = getattr(sys, "_base_executable", sys.executable)
    with trio.fail_after(BUILD_TIMEOUT):
        await _run([base_python, "-m", "venv", str(venv)], tmp_path)
    with trio.fail_after(INSTALL_TIMEOUT):
        await _run([str(venv / "bin" / "pip"), "install", "--quiet", f"{wheel}[demo]"], tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = str(venv / "bin" / "trio-mcp-gateway")
    with trio.fail_after(READY_TIMEOUT):
        assert await _run([script, "--version"], elsewhere) == f"trio-mcp-gateway {__version__}\n"
        # init's starter and its schema are in the wheel, and check accepts the starter.
        await _run([script, "init", "starter.yaml"], elsewhere)
        assert (elsewhere / "gateway.schema.json").is_file()
        checked = await _run([script, "check", "-c", "starter.yaml"], elsewhere)
        assert checked == "starter.yaml: ok (1 backends)\n"
        # The console's templates and static files are package data (from the sdist too).
        render = (
            "from gateway.console.render import Renderer; r = Renderer(); "
            "print(sorted(r.static), b'Log in' in r.page('login.html', base='/admin', "
            "problem='', nav=False))"
        )
        rendered = await _run([str(venv / "bin" / "python"), "-c", render], elsewhere)
        assert rendered == "['console.css', 'live.js', 'theme.js'] True\n"
        # A host spawning the gateway gets this install's script and the packaged config.
        (elsewhere / "starter.yaml").unlink()
        entry = json.loads(await _run([script, "connect", "claude-desktop"], elsewhere))
        command = entry["mcpServers"]["trio-mcp-gateway"]
        assert command["command"] == script
        assert command["args"][:2] == ["stdio", "-c"]
        assert command["args"][2].endswith("gateway/data/default.yaml")

    port = free_port()
    log = tmp_path / "gateway.log"
    with log.open("wb") as sink:
        process = await trio.lowlevel.open_process(
            [script, "serve", "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=elsewhere,
            env=_clean_env(),
        )
        try:
            await _wait_ready(process, port, log)
            async with open_client(f"http://127.0.0.1:{port}/mcp") as client:
                tools = {tool.name for tool in (await client.list_tools()).tools}
                assert any(name.startswith("notes__") for name in tools), tools
                assert any(name.startswith("toolbox__") for name in tools), tools
            async with httpx.AsyncClient() as http:
                metrics = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
            assert f'mcp_gateway_build_info{{version="{__version__}"}} 1.0' in metrics
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    process.send_signal(signal.SIGTERM)
                    with trio.move_on_after(STOP_TIMEOUT):
                        await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    (choice,) = [e for e in events if e.get("event") == "config.file"]
    assert choice["chosen_by"] == "packaged default"
    assert choice["path"].startswith(str(venv))
    assert choice["path"].endswith("gateway/data/default.yaml")


async def _wait_ready(process: trio.Process, port: int, log: Path) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        with trio.fail_after(READY_TIMEOUT):
            while True:
                if process.returncode is not None:
                    output = await trio.Path(log).read_text()
                    raise RuntimeError(
                        f"gateway exited with {process.returncode}: {output[-3000:]}"
                    )
                try:
                    response = await client.get("/readyz")
                except httpx.TransportError:
                    response = None
                if response is not None and response.status_code == 200:
                    return
                await trio.sleep(POLL_INTERVAL)
