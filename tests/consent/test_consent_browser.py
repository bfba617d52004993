"""A person's real browser through the consent flow: the OS's Chromium driven by Playwright.

The link the gateway hands the host is opened in Chromium, which follows
the gateway's redirect to oidc-provider (tests/node/consent_server.mjs),
signs in on its development login page, confirms on its consent page, and
lands on the gateway's callback page; the host's waiting call then goes on
with that person's own token. For a 2025-11-25 host (URL elicitation, then
``notifications/elicitation/complete``) and a 2026-07-28 request
(``input_required`` with the URL request, then the accepting retry). Each
page is saved as ``consent-*.png`` in the test's temporary directory.

No browser is downloaded: Playwright launches ``chromium`` from the OS
packages (``make test`` installs it with apt). Without it the test fails
under CI and is skipped, saying why, elsewhere (as tests/console/test_browser.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from mcp.types import ElicitRequestURLParams, ElicitResult

from tests.consent.test_consent_flow import (
    TOKENS,
    _answer,
    _declaring_url,
    _host,
    _setup,
    _whoami,
)
from tests.console.test_browser import chromium

#: Playwright's own waits, in milliseconds (the pages are local; this bounds a hang).
WAIT_MS = 30_000


def sign_in_with_chromium(executable: str, url: str, login: str, shots: Path) -> str:
    """Open ``url`` in Chromium, sign in as ``login``, consent; the callback page's text.

    Blocking (Playwright's sync API): run in a worker thread by the trio test.
    """
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page()
            page.set_default_timeout(WAIT_MS)
            page.goto(url)  # the gateway's /oauth/start/... → 302 → the provider's login
            login_box = page.locator('input[name="login"]')
            expect(login_box).to_be_visible()
            page.screenshot(path=str(shots / "consent-login.png"))
            login_box.fill(login)
            page.fill('input[name="password"]', "any")
            page.click('button[type="submit"]')
            expect(page.locator('button[type="submit"]')).to_have_text("Continue")
            page.screenshot(path=str(shots / "consent-confirm.png"))
            page.click('button[type="submit"]')
            heading = page.locator("h1")
            expect(heading).to_have_text("Signed in")
            page.screenshot(path=str(shots / "consent-callback.png"))
            text: str = page.locator("body").inner_text()
            return f"{page.url}\n{text}"
        finally:
            browser.close()


async def test_a_person_signs_in_with_a_real_browser_and_the_waiting_call_carries_their_token(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """spec: URL elicitation (2025-11-25): the person opens the URL in their browser;
    gateway choice: after the provider's login and consent pages and the gateway's
    callback page, the waiting call goes on with that person's own token."""
    executable = chromium()
    pages: list[str] = []
    async with _setup(nursery, tmp_path) as setup:

        async def elicit(_context: Any, params: Any) -> ElicitResult:
            assert isinstance(params, ElicitRequestURLParams)
            pages.append(
                await trio.to_thread.run_sync(
                    sign_in_with_chromium, executable, params.url, "alice@tracker", tmp_path
                )
            )
            return ElicitResult(action="accept")

        async with _host(setup, "alice", elicit=elicit) as (alice, asked, done):
            assert await _whoami(alice) == "acting for alice@tracker"
            assert len(asked) == 1 and len(done) == 1
            assert await _whoami(alice) == "acting for alice@tracker"  # signed in once
        (page,) = pages
        assert page.startswith(setup.redirect_uri + "?")  # the callback's own page
        assert "The gateway may now use your account at tracker." in page
        assert [sub for sub, _ in setup.carried()] == ["alice@tracker", "alice@tracker"]
        assert (tmp_path / "consent-confirm.png").stat().st_size > 0


async def test_a_2026_07_28_request_goes_on_after_the_person_signed_in_with_a_real_browser(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """spec: mrtr.mdx, a URL request in input_required; gateway choice: the link opened in
    a browser, then the accepting retry carries that person's token."""
    from tests.frontend.test_modern_http import send
    from tests.frontend.test_streamable_http import http_client

    executable = chromium()
    async with _setup(nursery, tmp_path) as setup, http_client(setup.running) as client:
        client.headers["authorization"] = f"Bearer {TOKENS['bob']}"
        first = _answer(await send(client, _declaring_url(1)))["result"]
        assert first["resultType"] == "input_required"
        ((key, entry),) = first["inputRequests"].items()
        page = await trio.to_thread.run_sync(
            sign_in_with_chromium, executable, entry["params"]["url"], "bob@tracker", tmp_path
        )
        assert "The gateway may now use your account at tracker." in page
        retry = _declaring_url(
            2, inputResponses={key: {"action": "accept"}}, requestState=first["requestState"]
        )
        answered = _answer(await send(client, retry))
        assert answered["result"]["content"][0]["text"] == "acting for bob@tracker"
        assert [sub for sub, _ in setup.carried()] == ["bob@tracker"]
