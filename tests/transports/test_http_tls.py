"""TLS settings of the HTTP transports, against the fake server over HTTPS.

Certificates come from a throwaway CA (tests/transports/tls_certs.py, which
needs ``cryptography``; the tests are skipped without it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from gateway.config import HttpBackend
from gateway.errors import ConnectError, TransportError
from gateway.session.peer import open_session
from tests.transports.fake_http import serve_fake
from tests.transports.peer_helpers import initialize

pytest.importorskip("cryptography")

from gateway.transports.streamable_http import open_streamable_http
from tests.transports.tls_certs import Pki, make_pki

DEADLINE = 5.0


@pytest.fixture(name="pki")
def _pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path)


def backend(url: str, **extra: Any) -> HttpBackend:
    return HttpBackend(name="tls", url=url + "/mcp", **extra)


async def test_server_signed_by_the_configured_ca_is_trusted(pki: Pki) -> None:
    """Config: `ca_file` verifies the backend against that CA instead of the system's."""
    async with serve_fake(certfile=pki.server_cert, keyfile=pki.server_key) as (fake, url):
        assert url.startswith("https://")
        with trio.fail_after(DEADLINE):
            async with (
                open_streamable_http(backend(url, ca_file=pki.ca_cert)) as channel,
                open_session(channel) as peer,
            ):
                await initialize(peer)
    assert fake.of("POST")


async def test_unknown_ca_is_a_connect_error(pki: Pki) -> None:
    """Config: with the default `verify_tls: true`, an untrusted certificate fails."""
    async with serve_fake(certfile=pki.server_cert, keyfile=pki.server_key) as (_, url):
        with trio.fail_after(DEADLINE):
            async with open_streamable_http(backend(url)) as channel:
                with pytest.raises(ConnectError):
                    await channel.send(b'{"jsonrpc":"2.0","id":1,"method":"initialize"}')


async def test_verify_tls_false_accepts_any_certificate(pki: Pki) -> None:
    """Config: `verify_tls: false` skips verification (for labs, never by default)."""
    async with serve_fake(certfile=pki.server_cert, keyfile=pki.server_key) as (_, url):
        with trio.fail_after(DEADLINE):
            async with (
                open_streamable_http(backend(url, verify_tls=False)) as channel,
                open_session(channel) as peer,
            ):
                await initialize(peer)


async def test_client_certificate_is_presented_for_mutual_tls(pki: Pki) -> None:
    """Config: `client_cert`/`client_key` are presented to a server that requires one;
    without them the request fails (with TLS 1.3 the server refuses after the client
    finished its handshake, so the client sees a broken read, not a connect error)."""
    served = serve_fake(certfile=pki.server_cert, keyfile=pki.server_key, client_ca=pki.ca_cert)
    async with served as (_, url):
        mutual = backend(
            url, ca_file=pki.ca_cert, client_cert=pki.client_cert, client_key=pki.client_key
        )
        with trio.fail_after(DEADLINE):
            async with open_streamable_http(mutual) as channel, open_session(channel) as peer:
                await initialize(peer)
            async with open_streamable_http(backend(url, ca_file=pki.ca_cert)) as channel:
                with pytest.raises(TransportError):
                    await channel.send(b'{"jsonrpc":"2.0","id":1,"method":"initialize"}')
