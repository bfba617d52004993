"""Issue 28 end to end: each person signs in to a backend that acts for them, in the host.

A real authorization server (oidc-provider, tests/node/consent_server.mjs:
authorization code with PKCE required, resource indicators, JWT access
tokens, its development login and consent pages) stands for the backend's
sign-in; the backend (tests/servers/consent_backend.py, the official SDK)
answers ``whoami`` with the ``sub`` of the bearer token each call carried.
Two principals (static tokens) use the official SDK client as host; a
person's browser is httpx following the redirects and posting the login
and consent forms.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

import httpx
import pytest
import trio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from mcp.types import ElicitRequestURLParams, ElicitResult, TextContent

from gateway.backends.credentials.consent_tokens import ConsentTokens
from gateway.consent.vault import generate_key
from tests.harness import Running, gateway_config, start_gateway
from tests.servers.paths import SERVERS_DIR
from tests.subprocess_servers import free_port, run_server

SCRIPT: Final = Path(__file__).parents[1] / "node" / "consent_server.mjs"
BACKEND: Final = SERVERS_DIR / "consent_backend.py"
STARTUP_TIMEOUT: Final = 20.0
TOKENS: Final = {"alice": "tok-alice", "bob": "tok-bob"}
TOOL: Final = "tracker__whoami"
ADMIN: Final = "tok-admin"


@asynccontextmanager
async def _authorization_server(port: int, resource: str, redirect_uri: str) -> AsyncIterator[str]:
    """Run oidc-provider until the block ends; yields its issuer."""
    # Its stderr is kept, so a start that fails (a port taken meanwhile by
    # another test worker) says why instead of only that it did.
    errors = tempfile.TemporaryFile()  # noqa: SIM115 - closed in the finally below
    process = await trio.lowlevel.open_process(
        ["node", str(SCRIPT), str(port), resource, redirect_uri],
        stdout=subprocess.PIPE,
        stderr=errors,
    )
    try:
        assert process.stdout is not None
        buffer = b""
        with trio.fail_after(STARTUP_TIMEOUT):
            while b"\n" not in buffer:
                chunk = await process.stdout.receive_some()
                if not chunk:
                    errors.seek(0)
                    said = errors.read()[-2000:].decode(errors="replace")
                    raise AssertionError(f"consent_server.mjs exited before it was ready: {said}")
                buffer += chunk
        issuer: str = json.loads(buffer.split(b"\n", 1)[0])["issuer"]
        yield issuer
    finally:
        with trio.CancelScope(shield=True):
            process.terminate()
            with trio.move_on_after(5):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
        errors.close()


class Setup:
    """The running pieces of one test."""

    def __init__(
        self, running: Running, record: Path, redirect_uri: str, scope: trio.CancelScope
    ) -> None:
        self.running = running
        self.record = record
        self.redirect_uri = redirect_uri
        self._scope = scope

    def stop(self) -> None:
        """Stop the gateway (its store file and the other servers stay)."""
        self._scope.cancel()

    def carried(self) -> list[tuple[str, str]]:
        """(sub, token) of each ``whoami`` call the backend served, in order."""
        if not self.record.exists():
            return []
        return [
            (entry["sub"], entry["token"])
            for entry in map(json.loads, self.record.read_text().splitlines())
        ]


async def _run(
    config: Any, *, task_status: trio.TaskStatus[tuple[Running, trio.CancelScope]]
) -> None:
    """Run a gateway under a cancel scope of its own, so a test can stop it and go on."""
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as inner:
            task_status.started((await start_gateway(inner, config), scope))
            await trio.sleep_forever()


@asynccontextmanager
async def _setup(
    nursery: trio.Nursery, tmp_path: Path, *, console: bool = False, **auth: Any
) -> AsyncIterator[Setup]:
    """Authorization server, backend and gateway, wired for ``user_consent``; with
    ``console``, the operator console too (admin token ``ADMIN``)."""
    gateway_port, idp_port, backend_port = free_port(), free_port(), free_port()
    redirect_uri = f"http://127.0.0.1:{gateway_port}/oauth/callback"
    backend_url = f"http://127.0.0.1:{backend_port}/mcp"
    record = tmp_path / "calls.jsonl"
    keys = tmp_path / "vault.keys"
    keys.write_text(generate_key() + "\n")
    argv = [sys.executable, str(BACKEND), str(backend_port), str(record)]
    with run_server(argv, backend_port):
        async with _authorization_server(idp_port, backend_url, redirect_uri) as issuer:
            config = gateway_config(
                [
                    {
                        "name": "tracker",
                        "transport": "http",
                        "url": backend_url,
                        "session": "per_principal",
                        "auth": {
                            "type": "user_consent",
                            "client_id": "gateway",
                            "client_secret": "gateway-secret",
                            "scopes": ["tracker:read"],
                            "authorization_server": issuer,
                            **auth,
                        },
                    }
                ],
                server={"port": gateway_port},
                auth={"tokens": TOKENS},
                consent={"vault_key_file": str(keys)},
                store={"path": str(tmp_path / "state.sqlite")},
                **({"admin": {"enabled": True, "tokens": [ADMIN]}} if console else {}),
            )
            running, scope = await nursery.start(_run, config)
            try:
                yield Setup(running, record, redirect_uri, scope)
            finally:
                scope.cancel()


async def _sign_in(url: str, login: str, *, stop_at: str = "") -> httpx.Response | str:
    """The person's browser: open ``url``, sign in as ``login``, consent, follow to the end.

    With ``stop_at``, the first redirect to a URL starting with it is returned
    unopened (the callback URL, for the replay tests).
    """
    async with httpx.AsyncClient(follow_redirects=False) as browser:
        response = await browser.get(url)
        for _ in range(20):
            if response.is_redirect:
                location = urljoin(str(response.url), response.headers["location"])
                if stop_at and location.startswith(stop_at):
                    return location
                response = await browser.get(location)
                continue
            text = response.text
            found = re.search(r'<form[^>]*action="([^"]+)"', text)
            if response.status_code != 200 or found is None:
                return response
            action = urljoin(str(response.url), html.unescape(found.group(1)))
            if 'value="login"' in text:
                form = {"prompt": "login", "login": login, "password": "any"}
            else:
                form = {"prompt": "consent"}
            response = await browser.post(action, data=form)
        raise AssertionError("the sign-in did not end")


@asynccontextmanager
async def _host(
    setup: Setup,
    principal: str,
    *,
    signs_in_as: str | None = None,
    declines: bool = False,
    elicit: Callable[[Any, Any], Awaitable[ElicitResult]] | None = None,
) -> AsyncIterator[tuple[ClientSession, list[str], list[str]]]:
    """The official client for ``principal``; with ``signs_in_as``, it declares URL
    elicitation and its person signs in when asked (with ``elicit``, that answers
    instead). Yields the session, the URLs it was asked to open, and the elicitation
    ids it was told completed."""
    asked: list[str] = []
    completed: list[str] = []

    async def answer(context: Any, params: Any) -> ElicitResult:
        assert isinstance(params, ElicitRequestURLParams)
        asked.append(params.url)
        if elicit is not None:
            return await elicit(context, params)
        if declines:
            return ElicitResult(action="decline")
        assert signs_in_as is not None
        page = await _sign_in(params.url, signs_in_as)
        assert isinstance(page, httpx.Response) and page.status_code == 200, page
        return ElicitResult(action="accept")

    async def messages(message: Any) -> None:
        root = getattr(message, "root", None)
        if getattr(root, "method", "") == "notifications/elicitation/complete":
            completed.append(root.params.elicitationId)  # type: ignore[union-attr]

    headers = {"Authorization": f"Bearer {TOKENS[principal]}"}
    async with (
        httpx.AsyncClient(headers=headers) as http,
        streamable_http_client(setup.running.url, http_client=http) as (read, write, _),
        ClientSession(
            read,
            write,
            elicitation_callback=(
                answer if signs_in_as is not None or declines or elicit is not None else None
            ),
            message_handler=messages,
        ) as session,
    ):
        await session.initialize()
        yield session, asked, completed


async def _whoami(session: ClientSession) -> str:
    result = await session.call_tool(TOOL, {})
    content = result.content[0]
    assert isinstance(content, TextContent)
    assert not result.isError, content.text
    return content.text


async def test_each_person_signs_in_once_and_every_call_carries_their_own_token(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """spec: URL elicitation (2025-11-25); gateway choice: a call to a user_consent backend
    waits for its person's sign-in, then carries that person's token, never another's."""
    async with _setup(nursery, tmp_path) as setup:
        async with _host(setup, "alice", signs_in_as="alice@tracker") as (alice, asked, done):
            # Listed without anyone's token (the catalog's session), marked for alice.
            assert _consent_mark(await alice.list_tools()) == {
                "required": True,
                "backend": "tracker",
            }
            assert await _whoami(alice) == "acting for alice@tracker"
            assert _consent_mark(await alice.list_tools()) is None
            assert len(asked) == 1 and "/oauth/start/" in asked[0]
            assert len(done) == 1  # notifications/elicitation/complete reached the host
            assert await _whoami(alice) == "acting for alice@tracker"
            assert len(asked) == 1  # signed in once
            async with _host(setup, "bob", signs_in_as="bob@tracker") as (bob, bob_asked, _):
                assert _consent_mark(await bob.list_tools()) is not None  # alice's is hers
                assert await _whoami(bob) == "acting for bob@tracker"
                assert await _whoami(alice) == "acting for alice@tracker"
                assert len(bob_asked) == 1
        carried = setup.carried()
        assert [sub for sub, _ in carried] == [
            "alice@tracker",
            "alice@tracker",
            "bob@tracker",
            "alice@tracker",
        ]
        alice_tokens = {token for sub, token in carried if sub == "alice@tracker"}
        bob_tokens = {token for sub, token in carried if sub == "bob@tracker"}
        assert alice_tokens and bob_tokens and not alice_tokens & bob_tokens


def _consent_mark(listed: Any) -> Any:
    """The consent mark of the tracker's tool in a tools/list result (None: unmarked)."""
    (tool,) = [tool for tool in listed.tools if tool.name == TOOL]
    return (tool.meta or {}).get("dev.mcp-gateway/consent")


async def _required_link(session: ClientSession) -> str:
    """The link of a -32042 answer to a call."""
    with pytest.raises(McpError) as caught:
        await session.call_tool(TOOL, {})
    assert caught.value.error.code == -32042
    data = caught.value.error.data
    assert isinstance(data, dict)
    (elicitation,) = data["elicitations"]
    assert elicitation["mode"] == "url"
    url: str = elicitation["url"]
    return url


async def test_a_host_without_url_elicitation_gets_32042_with_the_link_then_the_call_works(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """spec: URLElicitationRequiredError (-32042) carries the URL; once the person signed
    in there, the same call goes through with their token."""
    async with _setup(nursery, tmp_path) as setup, _host(setup, "alice") as (alice, _, _):
        url = await _required_link(alice)
        assert url.startswith(setup.running.base_url + "/oauth/start/")
        page = await _sign_in(url, "alice@tracker")
        assert isinstance(page, httpx.Response) and page.status_code == 200
        assert "Signed in" in page.text
        assert await _whoami(alice) == "acting for alice@tracker"
        assert [sub for sub, _ in setup.carried()] == ["alice@tracker"]


async def test_a_replayed_or_tampered_callback_and_a_reused_link_are_refused_with_a_page(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """gateway choice: links and logins are single use and bound to their state; a refusal
    is a 400 page, never a 500, and stores no token."""
    async with _setup(nursery, tmp_path) as setup, _host(setup, "alice") as (alice, _, _):
        url = await _required_link(alice)
        callback = await _sign_in(url, "alice@tracker", stop_at=setup.redirect_uri)
        assert isinstance(callback, str)
        parts = urlsplit(callback)
        query = dict(parse_qsl(parts.query))
        tampered = urlunsplit(
            parts._replace(query=urlencode({**query, "state": "x" + query["state"]}))
        )
        async with httpx.AsyncClient() as browser:
            refused = await browser.get(tampered)
            assert refused.status_code == 400
            assert "unknown or already used" in refused.text
            reused = await browser.get(url)  # the link was used when the sign-in started
            assert reused.status_code == 400
            empty = await browser.get(setup.redirect_uri)
            assert empty.status_code == 400
            denied = await browser.get(setup.redirect_uri + "?state=s&error=access_denied")
            assert denied.status_code == 400
        await _required_link(alice)  # still no token: nothing above stored one
        async with httpx.AsyncClient() as browser:
            first = await browser.get(callback)
            replayed = await browser.get(callback)
        assert first.status_code == 200
        assert replayed.status_code == 400 and "unknown or already used" in replayed.text
        assert await _whoami(alice) == "acting for alice@tracker"


def _answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC answer of a POST, as JSON or the last SSE message."""
    from tests.frontend.test_modern_http import sse_messages

    if "event-stream" in response.headers.get("content-type", ""):
        last: dict[str, Any] = sse_messages(response)[-1]
        return last
    body: dict[str, Any] = response.json()
    return body


async def test_a_2026_07_28_request_gets_32021_naming_url_elicitation_with_the_link(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """spec: -32021 names the missing capability (the request declared no URL elicitation);
    gateway choice: its data carries the link, and after sign-in the retry works."""
    from tests.frontend.test_modern_http import modern, send
    from tests.frontend.test_streamable_http import http_client

    async with _setup(nursery, tmp_path) as setup, http_client(setup.running) as client:
        client.headers["authorization"] = f"Bearer {TOKENS['alice']}"
        refused = await send(client, modern(1, "tools/call", {"name": TOOL, "arguments": {}}))
        error = _answer(refused)["error"]
        assert error["code"] == -32021
        assert error["data"]["requiredCapabilities"] == {"elicitation": {"url": {}}}
        page = await _sign_in(error["data"]["url"], "alice@tracker")
        assert isinstance(page, httpx.Response) and page.status_code == 200
        retried = await send(client, modern(2, "tools/call", {"name": TOOL, "arguments": {}}))
        result = _answer(retried)["result"]
        assert result["content"][0]["text"] == "acting for alice@tracker"


async def test_a_declined_sign_in_fails_the_call_naming_the_backend_and_sends_nothing(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """spec: URL elicitation may be declined; gateway choice: the call fails with -32603 and
    data.reason consent_declined, and nothing reaches the backend."""
    async with _setup(nursery, tmp_path) as setup:
        async with _host(setup, "alice", declines=True) as (alice, asked, _):
            with pytest.raises(McpError) as caught:
                await alice.call_tool(TOOL, {})
        assert len(asked) == 1
        assert caught.value.error.code == -32603
        assert caught.value.error.data == {"reason": "consent_declined", "backend": "tracker"}
        assert setup.carried() == []


async def test_a_consent_survives_a_gateway_restart(nursery: trio.Nursery, tmp_path: Path) -> None:
    """gateway choice: sealed tokens live in the store's file; a restarted gateway with the
    same vault keys uses them without asking again."""
    async with _setup(nursery, tmp_path) as setup:
        async with _host(setup, "alice") as (alice, _, _):
            page = await _sign_in(await _required_link(alice), "alice@tracker")
            assert isinstance(page, httpx.Response) and page.status_code == 200
        config = setup.running.gateway.config
        setup.stop()
        setup.running, restarted = await nursery.start(_run, config)
        try:
            async with _host(setup, "alice") as (alice, _, _):
                assert await _whoami(alice) == "acting for alice@tracker"
        finally:
            restarted.cancel()
        assert [sub for sub, _ in setup.carried()] == ["alice@tracker"]


async def test_a_due_token_is_refreshed_at_the_authorization_server_for_the_same_person(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """gateway choice: from refresh_at on, the refresh token gets a new access token (same
    person, same resource) without asking the person again."""
    # 300 s tokens replaced 299.5 s early: due half a second after the sign-in.
    async with (
        _setup(nursery, tmp_path, refresh_skew=299.5) as setup,
        _host(setup, "alice", signs_in_as="alice@tracker") as (alice, asked, _),
    ):
        assert await _whoami(alice) == "acting for alice@tracker"
        await trio.sleep(0.6)  # real time: the sign-in's token is now due
        assert await _whoami(alice) == "acting for alice@tracker"
        assert len(asked) == 1
    (first_sub, first), (second_sub, second) = setup.carried()
    assert first_sub == second_sub == "alice@tracker"
    assert first != second


def _declaring_url(msg_id: int, **extra: Any) -> dict[str, Any]:
    """A 2026-07-28 call of the tracker's tool whose request declares URL elicitation."""
    from tests.frontend.test_modern_http import modern

    caps: dict[str, Any] = {"elicitation": {"url": {}}}
    return modern(
        msg_id,
        "tools/call",
        {"name": TOOL, "arguments": {}, **extra},
        **{"io.modelcontextprotocol/clientCapabilities": caps},
    )


async def test_a_2026_07_28_request_declaring_url_elicitation_gets_input_required_with_the_link(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """spec: mrtr.mdx, a URL request in input_required for a request that declared
    elicitation.url; gateway choice: the retry that accepts, after the sign-in, carries
    that person's token, and nothing reached the backend before it."""
    from tests.frontend.test_modern_http import send
    from tests.frontend.test_streamable_http import http_client

    async with _setup(nursery, tmp_path) as setup, http_client(setup.running) as client:
        client.headers["authorization"] = f"Bearer {TOKENS['alice']}"
        first = _answer(await send(client, _declaring_url(1)))["result"]
        assert first["resultType"] == "input_required"
        ((key, entry),) = first["inputRequests"].items()
        assert entry["method"] == "elicitation/create"
        assert entry["params"]["mode"] == "url"
        assert "elicitationId" not in entry["params"]  # 2026-07-28 has none
        url = entry["params"]["url"]
        assert url.startswith(setup.running.base_url + "/oauth/start/")
        assert setup.carried() == []
        page = await _sign_in(url, "alice@tracker")
        assert isinstance(page, httpx.Response) and page.status_code == 200
        retry = _declaring_url(
            2, inputResponses={key: {"action": "accept"}}, requestState=first["requestState"]
        )
        answered = _answer(await send(client, retry))
        assert "result" in answered, answered
        assert answered["result"]["content"][0]["text"] == "acting for alice@tracker"
        assert [sub for sub, _ in setup.carried()] == ["alice@tracker"]
        # Signed in once: the next call goes straight through.
        again = _answer(await send(client, _declaring_url(3)))["result"]
        assert again["content"][0]["text"] == "acting for alice@tracker"


async def test_a_2026_07_28_retry_declining_the_sign_in_fails_naming_the_backend(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """spec: a URL elicitation may be declined; gateway choice: the retry fails with -32603
    and data.reason consent_declined, and nothing reaches the backend."""
    from tests.frontend.test_modern_http import send
    from tests.frontend.test_streamable_http import http_client

    async with _setup(nursery, tmp_path) as setup, http_client(setup.running) as client:
        client.headers["authorization"] = f"Bearer {TOKENS['alice']}"
        first = _answer(await send(client, _declaring_url(1)))["result"]
        ((key, _),) = first["inputRequests"].items()
        retry = _declaring_url(
            2, inputResponses={key: {"action": "decline"}}, requestState=first["requestState"]
        )
        error = _answer(await send(client, retry))["error"]
        assert error["code"] == -32603
        assert error["data"] == {"reason": "consent_declined", "backend": "tracker"}
        assert setup.carried() == []


async def _console_consents(setup: Setup) -> str:
    """The tracker's cell of the console overview's consent column."""
    async with httpx.AsyncClient() as browser:
        page = await browser.get(
            setup.running.base_url + "/admin/", headers={"authorization": f"Bearer {ADMIN}"}
        )
    assert page.status_code == 200, page.text
    found = re.search(r'<td class="num" data-consents="tracker">([^<]*)</td>', page.text)
    assert found is not None, "no consent column for the tracker"
    return found.group(1)


async def test_the_console_counts_the_principals_who_consented_per_backend(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """gateway choice: the overview shows how many principals hold a token at each
    user_consent backend; a revoked consent no longer counts."""
    async with _setup(nursery, tmp_path, console=True) as setup:
        assert await _console_consents(setup) == "0"
        for principal in ("alice", "bob"):
            async with _host(setup, principal) as (session, _, _):
                page = await _sign_in(await _required_link(session), f"{principal}@tracker")
                assert isinstance(page, httpx.Response) and page.status_code == 200
        assert await _console_consents(setup) == "2"
        consent = setup.running.gateway.pool.personal
        assert isinstance(consent, ConsentTokens)
        deleted, _ = await consent.revoke("token:bob", "tracker")
        assert deleted
        assert await _console_consents(setup) == "1"


async def test_status_shows_how_many_principals_consented_per_backend_never_who(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """gateway choice: `status` (and /readyz's overview) counts per user_consent backend
    the principals signed in, those expiring soon and refused refreshes; no name, no token."""
    import io

    from gateway.cli.status_report import run_status

    async def status() -> tuple[int, str, str]:
        text, raw = io.StringIO(), io.StringIO()
        url = setup.running.base_url

        def ask() -> int:
            run_status(None, url, ADMIN, as_json=True, out=raw)
            return run_status(None, url, ADMIN, as_json=False, out=text)

        code = await trio.to_thread.run_sync(ask)
        return code, text.getvalue(), raw.getvalue()

    async with _setup(nursery, tmp_path, console=True) as setup:
        _, shown, _ = await status()
        assert re.search(r"^tracker\s+0\s+0\s+0$", shown, re.MULTILINE), shown
        for principal in ("alice", "bob"):
            async with _host(setup, principal) as (session, _, _):
                page = await _sign_in(await _required_link(session), f"{principal}@tracker")
                assert isinstance(page, httpx.Response) and page.status_code == 200
        # run() counts again soon after each sign-in (test_consent_tokens.py, on a mock
        # clock); here the count is taken at once, so no outcome waits on the machine.
        consent = setup.running.gateway.consent
        assert consent is not None
        await consent.survey()
        code, shown, raw = await status()
        assert code == 0
        assert re.search(r"^tracker\s+2\s+0\s+0$", shown, re.MULTILINE), shown
        assert "CONSENT BACKEND" in shown and "PRINCIPALS" in shown
        counted = json.loads(raw)["overview"]["consent"]
        assert counted["backends"] == [
            {"backend": "tracker", "consented": 2, "expiring_soon": 0, "refresh_failures": 0}
        ]
        for text in (shown, raw):
            assert "alice" not in text and "bob" not in text and "tok-" not in text
