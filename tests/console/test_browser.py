"""The console in a real browser: the OS's Chromium driven by Playwright.

A gateway runs as its own process (h11 engine, a free loopback port) over
the demo backends ``notes`` and ``toolbox``, as the shipped config does. The
browser logs in, sees every backend, searches the catalog, calls
``toolbox__echo`` through the generated form, closes a client session
(whose host then gets 404), and finds a failed call on Recent errors. Each
page is saved as ``console-*.png`` (1280 px wide, one phone-width Overview
and one dark Overview): into the test's temporary directory, or, with
``MCP_GATEWAY_WRITE_SCREENSHOTS=1`` (``make screenshots``), into
``tests/artifacts/``, where the README shows them; so a test run never
rewrites tracked files.

No browser is downloaded: Playwright launches ``chromium`` from the OS
packages (``make test`` installs it with apt). Without it the test fails
under CI and is skipped, saying why, elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.harness import initialize_message
from tests.subprocess_servers import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "tests" / "artifacts"
WRITE_SCREENSHOTS = "MCP_GATEWAY_WRITE_SCREENSHOTS"
TOKEN = "browser-test-admin-token"
READY_TIMEOUT = 30.0
WIDE = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        reason = "no chromium on PATH (apt-get install -y chromium; `make test` does)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[str]:
    """A gateway process with the console on; yields its base URL once both backends are up."""
    port = free_port()
    demo = {"transport": "stdio", "command": sys.executable, "required": True, "stop_grace": 0.5}
    config = {
        "server": {"host": "127.0.0.1", "port": port, "engine": "h11"},
        "admin": {"enabled": True, "tokens": [TOKEN]},
        "logging": {"format": "json"},
        "backends": [
            {"name": "notes", "args": ["-m", "mcp_gateway_demo.notes"], **demo},
            {"name": "toolbox", "args": ["-m", "mcp_gateway_demo.toolbox"], **demo},
        ],
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps(config))
    log = tmp_path / "gateway.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve", "-c", str(path)],
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=REPO_ROOT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"gateway exited: {log.read_text()[-2000:]}")
            try:
                if httpx.get(base + "/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"gateway not ready: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    audit = [json.loads(line) for line in log.read_text().splitlines() if '"console.call"' in line]
    assert audit and audit[0]["tool"] == "toolbox__echo" and audit[0]["outcome"] == "ok"
    assert "hello from the console" not in log.read_text()  # no argument values at info


def initialize(client: httpx.Client) -> str:
    """A client session opened with a raw HTTP initialize; returns its id."""
    init = initialize_message("curious-host", "1.0")
    response = client.post("/mcp", json=init, headers=MCP_HEADERS)
    session_id = response.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    client.post("/mcp", json=note, headers=session_headers(session_id))
    return session_id


def session_headers(session_id: str) -> dict[str, str]:
    return {**MCP_HEADERS, "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}


@pytest.fixture(name="shots")
def _shots(tmp_path: Path) -> Path:
    """Where the pages go: tests/artifacts/ only when asked, else the test's own directory."""
    folder = ARTIFACTS if os.environ.get(WRITE_SCREENSHOTS) == "1" else tmp_path / "artifacts"
    folder.mkdir(exist_ok=True)
    return folder


def shot(page: Any, folder: Path, name: str) -> None:
    page.screenshot(path=str(folder / f"console-{name}.png"), full_page=True)


def test_console_in_a_browser(gateway: str, shots: Path) -> None:
    executable = chromium()
    from playwright.sync_api import expect, sync_playwright

    client = httpx.Client(base_url=gateway, timeout=30)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-gpu"]
        )
        context = browser.new_context(viewport=WIDE, color_scheme="light")
        page = context.new_page()

        # Log in: /admin sends a browser to the login form.
        page.goto(gateway + "/admin")
        expect(page).to_have_url(gateway + "/admin/login")
        shot(page, shots, "login")
        page.fill("#token", TOKEN)
        page.click("button[type=submit]")
        expect(page).to_have_url(gateway + "/admin/")

        # Overview: every backend, up; the SSE figures arrive (the live dot turns on).
        for name in ("notes", "toolbox"):
            row = page.locator(f'#backends tr[data-backend="{name}"]')
            expect(row.locator("[data-field=state]")).to_have_text("up")
        expect(page.locator("#live-status")).to_have_class("live on", timeout=10_000)

        # A session from a host, and a failed call of it (an unknown tool).
        session_id = initialize(client)
        failing = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "toolbox__no_such_tool", "arguments": {}},
        }
        assert (
            "error" in client.post("/mcp", json=failing, headers=session_headers(session_id)).json()
        )
        echo = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "toolbox__echo", "arguments": {"text": "from a host"}},
        }
        assert (
            "result" in client.post("/mcp", json=echo, headers=session_headers(session_id)).json()
        )
        page.reload()
        expect(page.locator("main")).to_contain_text("2025-11-25")  # the session, by revision
        shot(page, shots, "overview")

        # Catalog: search, then the tool's page and its form.
        page.click("nav >> text=Catalog")
        expect(page.locator("#catalog")).to_contain_text("notes__add_note")
        shot(page, shots, "catalog")
        page.fill("input[name=q]", "echo")
        page.press("input[name=q]", "Enter")
        expect(page.locator("#catalog tbody tr").first).to_contain_text("toolbox__echo")
        shot(page, shots, "catalog-search")
        page.click("#catalog >> text=toolbox__echo")
        page.fill('[name="arg.text"]', "hello from the console")
        page.click("#call-form button[type=submit]")
        expect(page.locator("#call-result")).to_contain_text("hello from the console")
        shot(page, shots, "tool")

        # Recent errors: the host's failed call is there.
        page.click("nav >> text=Recent errors")
        expect(page.locator("#errors")).to_contain_text("toolbox__no_such_tool")
        shot(page, shots, "errors")

        # Sessions: the host's session, by its short id only; close it.
        page.click("nav >> text=Sessions")
        row = page.locator(f'#sessions tr[data-session="{session_id[:8]}"]')
        expect(row).to_contain_text("curious-host")
        assert session_id not in page.content()
        shot(page, shots, "sessions")
        row.locator("button", has_text="Close").click()
        expect(page.locator(".notice")).to_contain_text(f"Session {session_id[:8]}")
        ping = {"jsonrpc": "2.0", "id": 4, "method": "ping"}
        assert (
            client.post("/mcp", json=ping, headers=session_headers(session_id)).status_code == 404
        )

        page.click("nav >> text=Config")
        expect(page.locator("pre.config")).to_contain_text("•••redacted•••")
        assert TOKEN not in page.content()
        # Reload re-reads the file the gateway was started with, and says how it went.
        page.click("main >> text=Reload config")
        expect(page.locator("main")).to_contain_text("applied")
        shot(page, shots, "config")

        page.click("nav >> text=Overview")

        # The theme toggle flips the page and is remembered.
        page.click("#theme-toggle")
        assert page.evaluate("document.documentElement.dataset.theme") == "dark"
        page.reload()
        assert page.evaluate("document.documentElement.dataset.theme") == "dark"
        shot(page, shots, "overview-dark")

        # The phone gets the login cookie, not the dark choice (localStorage).
        cookies = context.storage_state()["cookies"]
        phone = browser.new_context(
            viewport=PHONE, color_scheme="light", storage_state={"cookies": cookies, "origins": []}
        )
        small = phone.new_page()
        small.goto(gateway + "/admin/")
        expect(small.locator('#backends tr[data-backend="toolbox"]')).to_be_visible()
        shot(small, shots, "overview-phone")
        browser.close()
    client.close()
