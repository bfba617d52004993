"""``trio-mcp-gateway consent {list,revoke}``: the people's stored consents, from the state store.

The command opens the store the config names (the embedded file beside the
config, or the shared server) and the vault's keys, as the daemon does, so
it works with the daemon running or not: a revoked consent is gone for the
daemon's next request to that backend (it reads the store each time), and
that person is asked to sign in again.

``list`` prints one line per consent: principal, backend, whether a refresh
token is held, when the access token expires (UTC); a record that does not
open with the vault's keys is listed as ``unreadable``. No token is ever
printed.

``revoke`` first asks the backend's authorization server to revoke the
tokens (RFC 7009) where it offers a ``revocation_endpoint``, then deletes
them; one line per consent says what the server did (``revoked``, ``no
revocation endpoint``, ``failed``: unreachable or refused, deleted here all
the same).
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from gateway.errors import ConfigError
from gateway.runtime.app import consent_flow
from gateway.store.api import StoreUnavailable
from gateway.store.opening import open_store

if TYPE_CHECKING:
    from gateway.config import GatewayConfig


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


async def run_consent(
    config: GatewayConfig,
    config_file: str,
    action: str,
    principal: str | None = None,
    backend: str | None = None,
) -> int:
    """Run ``consent list`` or ``consent revoke``; the exit code.

    Args:
        config: the loaded config.
        config_file: its path (the embedded store's file is beside it).
        action: ``list`` or ``revoke``.
        principal: revoke: the principal key (``token:NAME``, ``jwt:ISS|SUB``).
        backend: revoke: the backend's name; None revokes at every backend.

    Returns:
        0 done; 1 nothing to revoke or the store did not answer; 2 no
        ``user_consent`` backend or an unusable vault key file.
    """
    try:
        async with open_store(config.store, config_file=config_file) as store:
            try:
                flow = consent_flow(config, store)
            except ConfigError as exc:
                print("\n".join(exc.problems), file=sys.stderr)
                return 2
            if flow is None:
                print("no backend uses auth type user_consent", file=sys.stderr)
                return 2
            found = await flow.list()
            if action == "list":
                for who, where, tokens in sorted(found, key=lambda t: (t[0], t[1])):
                    if tokens is None:
                        print(f"{who}\t{where}\tunreadable")
                        continue
                    refresh = "refresh" if tokens.refresh_token else "no-refresh"
                    print(f"{who}\t{where}\t{refresh}\texpires {_when(tokens.expires_at)}")
                return 0
            revoked = 0
            for who, where, _ in found:
                if who == principal and backend in (None, where):
                    deleted, at_server = await flow.revoke(who, where)
                    revoked += deleted
                    print(f"{who}\t{where}\tdeleted\tat the server: {at_server.value}")
            print(f"revoked {revoked} consent(s) of {principal}")
            return 0 if revoked else 1
    except StoreUnavailable as exc:
        print(f"the state store did not answer: {exc}", file=sys.stderr)
        return 1
