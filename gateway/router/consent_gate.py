"""Asking a person to sign in to a ``user_consent`` backend before their call goes on.

Rules:

1. **Before the call is sent.** A call, read or get for a ``user_consent``
   backend by a principal with no token there (never consented, revoked,
   its refresh refused) is not sent; the person is asked to sign in, in
   the host, through a link to the gateway's ``/oauth/start/...`` made for
   this principal and backend (single use, short-lived).
2. **How the host is asked** depends on what it declared:
   a handshake-era host that declared URL elicitation
   (``capabilities.elicitation.url``) gets ``elicitation/create`` with
   ``mode: url``; once the person accepted and the callback stored the
   token, the host gets ``notifications/elicitation/complete`` and the call
   goes on, with the person's own token. A decline or cancel fails the call
   naming the backend. A handshake-era host without URL elicitation gets
   -32042 (URLElicitationRequired) with the link in
   ``data.elicitations``. A 2026-07-28 request that declared
   ``elicitation.url`` and may carry ``input_required`` (a held call:
   ``tools/call``, ``prompts/get``, ``resources/read``) is answered
   ``input_required`` with the URL request (``ModernRequest.ask``, the
   held call's round); its retry with ``accept`` goes on once the sign-in
   stored the token, like the handshake-era host's, without
   ``notifications/elicitation/complete`` (2026-07-28 has no
   ``elicitationId``). Any other 2026-07-28 request gets -32021 naming
   ``elicitation.url``, the link in ``data``. Either may retry once the
   person signed in.
3. **Bounded.** A host has ``consent.login_timeout`` for the whole sign-in
   (-32001 after it), and the waiting call holds nothing else.
4. The link is the only secret here; the principal's token never reaches
   the router.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import trio

from gateway.errors import (
    INTERNAL_ERROR,
    REQUEST_TIMEOUT_CODE,
    URL_ELICITATION_REQUIRED,
    LocalProtocolError,
)
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.stateless.error_codes import MissingClientCapability
from gateway.router.context import ModernRequest

if TYPE_CHECKING:
    from gateway.router.context import Call


class ConsentDesk(Protocol):
    """What the gate needs of the consent flow (``ConsentTokens`` provides it)."""

    @property
    def login_timeout(self) -> float:
        """How long a sign-in may take."""
        ...

    def acts_for_people(self, backend: str) -> bool:
        """Whether ``backend`` is a ``user_consent`` backend."""
        ...

    async def access_token(self, principal: str, backend: str) -> str | None:
        """The principal's token there (refreshed when due); None: no consent."""
        ...

    async def has_consent(self, principal: str, backend: str) -> bool:
        """Whether the principal holds a token there (no refresh: for lists)."""
        ...

    async def new_link(self, principal: str, backend: str) -> tuple[str, str]:
        """A sign-in link for the principal's call: (URL, elicitation id)."""
        ...

    def expect(self, elicitation_id: str) -> None:
        """A call will wait for that sign-in."""
        ...

    async def completed(self, elicitation_id: str) -> None:
        """Return once that sign-in stored its tokens."""
        ...

    def forget(self, elicitation_id: str) -> None:
        """Nobody waits for that sign-in any more."""
        ...


class ConsentRequired(LocalProtocolError):
    """-32042: the host must have the person open a URL first (2025-11-25, URL elicitation).

    Args:
        backend: the backend that needs the person's consent.
        url: the sign-in link.
        elicitation_id: its elicitation id.
        message: what the host may show the person.
    """

    def __init__(self, backend: str, url: str, elicitation_id: str, message: str) -> None:
        self.url = url
        super().__init__(
            message,
            URL_ELICITATION_REQUIRED,
            {
                "elicitations": [
                    {
                        "mode": "url",
                        "elicitationId": elicitation_id,
                        "url": url,
                        "message": message,
                    }
                ],
                "backend": backend,
            },
        )


def declares_url_elicitation(capabilities: dict[str, Any]) -> bool:
    """Whether a host declared URL-mode elicitation (at ``initialize``, or in a 2026-07-28
    request's capabilities: the same shape)."""
    elicitation = capabilities.get("elicitation")
    return isinstance(elicitation, dict) and isinstance(elicitation.get("url"), dict)


class ConsentGate:
    """Rule 1-3: the person signs in before a call reaches a ``user_consent`` backend.

    Args:
        desk: the consent flow.
    """

    def __init__(self, desk: ConsentDesk) -> None:
        self._desk = desk

    async def ensure(self, call: Call, backend: str) -> None:
        """Return once the caller has a token at ``backend`` (at once when it has, or needs none).

        Raises:
            ConsentRequired: -32042, the host cannot be asked in the session.
            MissingClientCapability: -32021 for a 2026-07-28 request that cannot
                be answered ``input_required`` with the URL request.
            LocalProtocolError: declined or cancelled (-32603), or not done in
                ``consent.login_timeout`` (-32001).
            RemoteProtocolError: the host answered the elicitation with an error.
        """
        desk = self._desk
        if not desk.acts_for_people(backend):
            return
        principal = call.client.principal
        if principal is None:
            raise LocalProtocolError(
                f"backend {backend!r} acts for a signed-in person; the call has no principal",
                INTERNAL_ERROR,
            )
        if await desk.access_token(principal, backend) is not None:
            return
        url, elicitation_id = await desk.new_link(principal, backend)
        message = (
            f"The tool server {backend!r} acts with your own account there: "
            "sign in to it to let the gateway use it for you."
        )
        client = call.client
        modern = isinstance(client, ModernRequest)
        if isinstance(client, ModernRequest) and (
            client.held is None or not declares_url_elicitation(client.capabilities)
        ):
            error = MissingClientCapability({"elicitation": {"url": {}}})
            error.data = {
                **error.data,
                "url": url,
                "elicitationId": elicitation_id,
                "message": message,
            }
            raise error
        if not modern and not declares_url_elicitation(client.capabilities):
            raise ConsentRequired(backend, url, elicitation_id, message)
        desk.expect(elicitation_id)
        try:
            with trio.move_on_after(desk.login_timeout) as waited:
                params = {
                    "mode": "url",
                    "message": message,
                    "url": url,
                    "elicitationId": elicitation_id,
                }
                if isinstance(client, ModernRequest):  # the held call's input_required round
                    asked = await client.ask(backend, "elicitation/create", mcp.encode(params))
                else:
                    asked = await client.request(
                        "elicitation/create", mcp.encode(params), call.emit
                    )
                answer = mcp.decode_object(asked)
                action = answer.get("action") if answer is not None else None
                if action != "accept":
                    raise LocalProtocolError(
                        f"sign-in to backend {backend!r} was not accepted ({action}); "
                        "the call needs the person's consent",
                        INTERNAL_ERROR,
                        {"reason": "consent_declined", "backend": backend},
                    )
                await desk.completed(elicitation_id)
        finally:
            desk.forget(elicitation_id)
        if waited.cancelled_caught:
            raise LocalProtocolError(
                f"sign-in to backend {backend!r} did not complete within "
                f"{desk.login_timeout:g} s (consent.login_timeout)",
                REQUEST_TIMEOUT_CODE,
            )
        if modern:
            return  # 2026-07-28 has no elicitationId to complete
        done = jsonrpc.encode_notification(
            "notifications/elicitation/complete", mcp.encode({"elicitationId": elicitation_id})
        )
        if call.emit is None or not call.emit(done):
            client.notify_nowait(done)
