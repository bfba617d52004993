"""A 2026-07-28 backend's ``input_required``, for either kind of host (issue 14, step 4).

Rules:

1. **Modern host: pass through.** ``inputRequests`` go to the host
   unchanged; the backend's ``requestState`` is wrapped in a state the
   gateway seals (``protocol/sealed.py``: the backend, the expiry, the
   digest of the host's own request, and the backend's state bytes, marked
   ``BACKEND_STATE``). The retry is verified by ``router/held`` with the
   same sealer, so any replica sharing ``mrtr.state_secret`` routes it: the
   gateway holds nothing between rounds. The backend gets its own state back
   byte for byte (none if it sent none) and the host's ``inputResponses``
   as they are. A retry whose sealed backend is not the one its name routes
   to now is -32602, like any state that does not verify.
2. **Legacy host: the gateway drives it.** Each input request becomes an
   ordinary server-to-client request to the host over the call's stream
   (``ClientPeer.request``), but only when the host declared what it needs
   at ``initialize``; else the call fails with -32603 naming the capability.
   The answers become the ``inputResponses`` of a retry to the backend (a
   new request id, the same params, ``requestState`` echoed exactly), at
   most ``MAX_ROUNDS`` times; a round with nothing to ask (state only) is
   retried after ``STATE_ONLY_BACKOFF``. Each question the host is asked
   has the backend's ``timeouts.input`` to be answered (-32001 after it).
3. **URL elicitation to a legacy host.** 2026-07-28 has no
   ``elicitationId``; a 2025-11-25 host needs one (its URL-mode
   ``elicitation/create`` requires it). The gateway mints one per question
   and, once the backend's answer to the retry that carried the host's
   consent (``accept``) has come, sends the host
   ``notifications/elicitation/complete`` with it: the backend's result is
   the outcome of the out-of-band step (``S/client/elicitation.mdx``), so
   the interaction is complete then.
"""

from __future__ import annotations

import math
import secrets
from typing import TYPE_CHECKING, Any, Final

import trio

from gateway.errors import INTERNAL_ERROR, INVALID_PARAMS, REQUEST_TIMEOUT_CODE, LocalProtocolError
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.sealed import REQUEST_STATE
from gateway.protocol.stateless import mrtr
from gateway.protocol.stateless.cache_hints import INPUT_REQUIRED
from gateway.protocol.stateless.error_codes import ModernProtocolError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import msgspec

    from gateway.protocol.sealed import Sealer
    from gateway.router.context import ModernRequest
    from gateway.router.neighbours import ClientPeer, Emit

# Most rounds the gateway drives for a legacy host before it gives up.
MAX_ROUNDS: Final = 10
# Wait before retrying a round that asked nothing (the backend only wants
# its state back, e.g. while it works): a tight loop would hammer it.
STATE_ONLY_BACKOFF: Final = 0.5
# Marks a sealed state that carries a modern backend's own state; the
# legacy bridge's states (``router/held``) are ASCII and never start so.
BACKEND_STATE: Final = b"\x00B"
# Marks a sealed state for a backend that sent inputRequests and no state.
NO_BACKEND_STATE: Final = b"\x00N"


def is_input_required(body: dict[str, Any] | None) -> bool:
    """Whether a backend's result body asks for input."""
    return body is not None and body.get("resultType") == INPUT_REQUIRED


def restore(sealed_state: bytes) -> tuple[bool, str | None]:
    """Whether a verified state is a modern backend's, and that backend's own state."""
    if sealed_state.startswith(BACKEND_STATE):
        return True, sealed_state[len(BACKEND_STATE) :].decode("utf-8")
    if sealed_state == NO_BACKEND_STATE:
        return True, None
    return False, None


def seal_for_host(
    sealer: Sealer,
    *,
    now: float,
    lifetime: float,
    backend: str,
    request: ModernRequest,
    method: str,
    body: dict[str, Any],
) -> dict[str, Any]:
    """The backend's ``input_required`` as the modern host receives it (rule 1).

    Raises:
        MalformedInputRequired: the backend's result breaks the shape rules.
        MissingClientCapability: -32021, the backend asks for a capability the
            host's request did not declare.
        ModernProtocolError: -32603 when the call is not one a host may retry.
    """
    parsed = mrtr.parse_input_required(method, body)
    # The host must not be asked for what its request did not declare
    # (mrtr.mdx: servers MUST NOT send such inputRequests), whoever asks.
    mrtr.require_capabilities(parsed.input_requests, request.capabilities)
    held = request.held
    if held is None:  # pragma: no cover - every MRTR method runs as a held call
        raise ModernProtocolError("input_required outside a held call", INTERNAL_ERROR)
    own = parsed.request_state
    state = NO_BACKEND_STATE if own is None else BACKEND_STATE + own.encode("utf-8")
    token = sealer.seal(
        purpose=REQUEST_STATE,
        backend=backend,
        principal=request.principal,
        now=now,
        ttl=lifetime,
        method=held.method,
        params=held.params,
        state=state,
    )
    out = {k: v for k, v in body.items() if k not in ("ttlMs", "cacheScope")}
    out["requestState"] = token
    return out


def for_backend(request: ModernRequest, backend: str, params: dict[str, Any]) -> None:
    """Put the backend's own state back into a verified retry's params (rule 1).

    Raises:
        ModernProtocolError: -32602, the state was sealed for another backend.
    """
    restored = request.backend_state
    if restored is None:
        params.pop("requestState", None)  # the gateway's own token means nothing there
        return
    owner, state = restored
    if owner != backend:
        raise ModernProtocolError("Invalid or expired requestState", INVALID_PARAMS)
    if state is None:
        params.pop("requestState", None)
    else:
        params["requestState"] = state


def _capability_gap(client: ClientPeer, entry: dict[str, Any]) -> str | None:
    """The capability a legacy host lacks for ``entry``, named, or None."""
    gap = mrtr.missing_for({"_": entry}, client.capabilities)
    if not gap:
        return None
    return ", ".join(
        f"{key}.{sub}" if sub else key
        for key, subs in sorted(gap.items())
        for sub in (sorted(subs) if isinstance(subs, dict) and subs else [""])
    )


async def drive(
    client: ClientPeer,
    emit: Emit | None,
    *,
    backend: str,
    method: str,
    params: dict[str, Any],
    body: dict[str, Any],
    send: Callable[[dict[str, Any]], Awaitable[msgspec.Raw]],
    input_timeout: float = math.inf,
    screen: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = None,
) -> msgspec.Raw:
    """Answer a modern backend's ``input_required`` by asking a legacy host (rule 2).

    Args:
        client: the legacy host.
        emit: the host request's stream, for the server-to-client requests.
        backend: the backend's name, for messages.
        method: the backend-side method.
        params: the backend-side params of the first request.
        body: the backend's first ``input_required`` result.
        send: sends the retry to the backend, returns its result.
        input_timeout: the backend's ``timeouts.input``: how long the host
            has to answer each question.
        screen: each round's result before the host is asked anything (the
            guardrails' backend-request chain: it may change the questions,
            or raise to end the call).

    Raises:
        LocalProtocolError: -32603 when the host lacks a capability, or the
            rounds run out; -32001 when the host did not answer a question
            within ``input_timeout``.
        MalformedInputRequired: the backend's result breaks the shape rules.
        RemoteProtocolError: the host answered a request with an error.
    """
    for _ in range(MAX_ROUNDS):
        if screen is not None:
            body = await screen(body)
        parsed = mrtr.parse_input_required(method, body)
        responses: dict[str, Any] = {}
        minted: dict[str, str] = {}  # key -> the elicitationId minted for it
        for key, entry in parsed.input_requests.items():
            gap = _capability_gap(client, entry)
            if gap is not None:
                raise LocalProtocolError(
                    f"backend {backend!r} asks the client for {entry['method']}, which needs "
                    f"the capability {gap}; the client did not declare it at initialize",
                    INTERNAL_ERROR,
                )
            asked = dict(entry.get("params") or {})
            if entry["method"] == mrtr.ELICIT and asked.get("mode") == "url":
                asked["elicitationId"] = minted[key] = secrets.token_urlsafe(12)  # rule 3
            with trio.move_on_after(input_timeout):
                answer = await client.request(entry["method"], mcp.encode(asked), emit)
                responses[key] = mcp.decode_object(answer) or {}
            if key not in responses:
                raise LocalProtocolError(
                    f"{entry['method']}: the client did not answer within "
                    f"{input_timeout:g} s (timeouts.input)",
                    REQUEST_TIMEOUT_CODE,
                )
        if not parsed.input_requests:
            await trio.sleep(STATE_ONLY_BACKOFF)
        retry = dict(params)
        retry["inputResponses"] = responses
        if parsed.request_state is None:
            retry.pop("requestState", None)
        else:
            retry["requestState"] = parsed.request_state
        result = await send(retry)
        for key, elicitation in minted.items():  # rule 3: the backend has the outcome now
            if responses[key].get("action") != "accept":
                continue  # declined or cancelled: nothing went on out of band
            client.notify_nowait(
                jsonrpc.encode_notification(
                    "notifications/elicitation/complete",
                    mcp.encode({"elicitationId": elicitation}),
                )
            )
        decoded = mcp.decode_object(result)
        if not is_input_required(decoded):
            return result
        assert decoded is not None
        body = decoded
    raise LocalProtocolError(
        f"backend {backend!r} still asked for input after {MAX_ROUNDS} rounds", INTERNAL_ERROR
    )
