"""The router's four guardrail points: a call and its result, a tool list, a backend's request.

Rules:

1. **Requests** (``tools/call``): the subject is ``{"name", "arguments"}``
   under the tool's public name, with the caller's principal and profile
   and, for a ``schema`` filter, the tool's ``inputSchema``. A deny is
   :class:`FilterRefused` (-32602 with ``data: {filter, reason}``) and the
   backend never sees the call; a modify sends the changed arguments.
2. **Results** (``tools/call``, ``resources/read``, ``prompts/get``): the
   decoded result in public names. A modify replaces it; a deny of a tool
   result is an ``isError`` result whose text names the filter and its
   reason; a deny of a read or a prompt is :class:`FilterRefused`. An
   ``input_required`` result is not a result yet: its questions go through
   rule 4, and the result that ends its rounds (a retry's, in either era)
   comes back through this point like any. Nor is a backend's
   ``CreateTaskResult`` (``resultType: task``): its result is filtered when
   ``tasks/get`` inlines it.
3. **Lists** (``tools/list``, and a search-mode ``search_tools``'s hits):
   each tool definition is its own subject (its public name is the item, so
   ``tools`` globs apply); a deny leaves the tool out, a modify replaces its
   definition.
4. **Backend requests** (sampling, elicitation, roots): the params of the
   request, with no item (so ``tools`` globs do not narrow them); a deny answers the backend with
   -32602 and the host never sees the request; a modify sends the changed
   params. A 2026-07-28 backend asks inside an ``input_required`` result
   (``inputRequests``), in either host era: each entry's params go through
   the same chain, round by round; a modify changes what the host is asked;
   a deny ends the call with the same -32602 ``{filter, reason}``, now to
   the host (MRTR answers a question with a result, never an error, and the
   backend is not retried), and the host is asked nothing of that round.
5. A fail-closed policy service that could not decide raises
   :class:`PolicyUnavailable` at every point (-32603, ``policy_unavailable``).

Every function here is called only when a :class:`Guardrails` exists
(``chains`` rule 2), and returns at once when the point's chain is empty.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from gateway.errors import FilterRefused, GuardrailError, to_protocol_error
from gateway.guardrails.filters import Deny, Modify, Subject
from gateway.protocol import mcp
from gateway.router.stateless.input_required import is_input_required

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from gateway.backends.state import BackendView
    from gateway.catalog.kindview import Entry
    from gateway.config.schema_filters import FilterConfig
    from gateway.guardrails.chains import Guardrails
    from gateway.router.context import Call
    from gateway.router.neighbours import ClientPeer

__all__ = [
    "filter_backend_request",
    "filter_input_requests",
    "filter_definition",
    "filter_list",
    "filter_request",
    "filter_result",
]


def _subject(
    point: str, client: ClientPeer, backend: str, item: str, payload: dict[str, Any]
) -> Subject:
    return Subject(
        point=point,
        item=item,
        payload=payload,
        principal=client.principal or "",
        profile=client.profile,
        backend=backend,
    )


async def filter_request(
    guard: Guardrails,
    call: Call,
    backend: BackendView,
    public: str,
    params: dict[str, Any],
    input_schema: Callable[[], dict[str, Any] | None],
) -> None:
    """Rule 1: run the request chain; ``params["arguments"]`` changes in place on modify.

    Args:
        guard: the chains.
        call: the host request.
        backend: the tool's backend.
        public: the tool's public name.
        params: the ``tools/call`` params (``name`` already the backend's).
        input_schema: returns the tool's ``inputSchema`` (called only when a
            ``schema`` filter runs).

    Raises:
        FilterRefused: a filter denied the call.
        PolicyUnavailable: a fail-closed policy service could not decide.
    """
    steps = guard.steps("requests", call.client.profile, backend.name, backend.config.filters)
    if not steps:
        return
    schema = input_schema() if guard.needs_schema(steps) else None
    subject = _subject(
        "requests",
        call.client,
        backend.name,
        public,
        {"name": public, "arguments": params.get("arguments") or {}},
    )
    if schema is not None:
        subject = msgspec.structs.replace(subject, input_schema=schema)
    decision = await guard.check(steps, subject)
    if isinstance(decision, Deny):
        raise FilterRefused(decision.filter, decision.reason)
    if isinstance(decision, Modify):
        arguments = decision.payload.get("arguments")
        params["arguments"] = arguments if isinstance(arguments, dict) else {}


async def filter_result(
    guard: Guardrails,
    call: Call,
    backend: BackendView,
    public: str,
    result: msgspec.Raw,
    *,
    tool: bool,
) -> msgspec.Raw:
    """Rule 2: run the result chain over a result in public names.

    Raises:
        FilterRefused: a filter denied a read or prompt result.
        PolicyUnavailable: a fail-closed policy service could not decide.
    """
    steps = guard.steps("results", call.client.profile, backend.name, backend.config.filters)
    if not steps:
        return result
    body = mcp.decode_object(result)
    if body is None or is_input_required(body) or body.get("resultType") == "task":
        return result
    decision = await guard.check(
        steps, _subject("results", call.client, backend.name, public, body)
    )
    # The decoded original is not needed past the chain: let it go before
    # the new encoding, so a large result never has three copies alive.
    del body
    if isinstance(decision, Modify):
        return mcp.encode(decision.payload)
    if isinstance(decision, Deny):
        if not tool:
            raise FilterRefused(decision.filter, decision.reason)
        text = f"Withheld by the gateway's filter {decision.filter!r}: {decision.reason}"
        return mcp.encode({"content": [{"type": "text", "text": text}], "isError": True})
    return result


async def filter_list(
    guard: Guardrails,
    call: Call,
    entries: Sequence[Entry],
    items: list[bytes],
    filters_of: Callable[[str], Sequence[FilterConfig]],
) -> list[bytes]:
    """Rule 3: each tool definition of a page through the list chain of its backend.

    Args:
        guard: the chains.
        call: the host's ``tools/list``.
        entries: the page's catalog entries.
        items: their encoded definitions, in the same order.
        filters_of: a backend's configured filters, by its name.

    Raises:
        PolicyUnavailable: a fail-closed policy service could not decide.
    """
    kept: list[bytes] = []
    for entry, item in zip(entries, items, strict=True):
        shown = await filter_definition(guard, call, entry, item, filters_of)
        if shown is not None:
            kept.append(shown)
    return kept


async def filter_definition(
    guard: Guardrails,
    call: Call,
    entry: Entry,
    item: bytes,
    filters_of: Callable[[str], Sequence[FilterConfig]],
) -> bytes | None:
    """Rule 3 for one tool definition (a list's, or a search-mode search's hit).

    Returns:
        The definition to show (``item`` itself when nothing changed), or
        None when a filter denied it.

    Raises:
        PolicyUnavailable: a fail-closed policy service could not decide.
    """
    backend = entry.backend
    steps = guard.steps("lists", call.client.profile, backend, filters_of(backend))
    if not steps:
        return item
    definition = msgspec.json.decode(item)
    if not isinstance(definition, dict):
        return item
    subject = _subject("lists", call.client, backend, entry.key, definition)
    decision = await guard.check(steps, subject)
    if isinstance(decision, Deny):
        return None
    return bytes(mcp.encode(decision.payload)) if isinstance(decision, Modify) else item


async def filter_backend_request(
    guard: Guardrails,
    peer: ClientPeer,
    backend: BackendView,
    method: str,
    params: msgspec.Raw | None,
) -> msgspec.Raw | None:
    """Rule 4: a backend's request to ``peer`` through the backend-request chain.

    Raises:
        ProtocolError: the backend's answer: -32602 when a filter denied the
            request, -32603 ``policy_unavailable`` when a fail-closed policy
            service could not decide.
    """
    steps = guard.steps("backend_requests", peer.profile, backend.name, backend.config.filters)
    if not steps or params is None:
        return params
    body = mcp.decode_object(params)
    if body is None:
        return params
    try:
        decision = await guard.check(
            steps, _subject("backend_requests", peer, backend.name, "", body)
        )
    except GuardrailError as exc:
        raise to_protocol_error(exc) from None  # the backend's answer is a JSON-RPC error
    if isinstance(decision, Deny):
        raise to_protocol_error(FilterRefused(decision.filter, decision.reason))
    if isinstance(decision, Modify):
        return mcp.encode(decision.payload)
    return params


async def filter_input_requests(
    guard: Guardrails, call: Call, backend: BackendView, body: dict[str, Any]
) -> dict[str, Any]:
    """Rule 4 for a 2026-07-28 backend's ``input_required``: each input request's params.

    Args:
        guard: the chains.
        call: the host request the backend answered.
        backend: the backend that asks.
        body: its decoded ``input_required`` result.

    Returns:
        ``body`` itself when nothing changed, else a copy with the changed
        params in their entries.

    Raises:
        FilterRefused: a filter denied a question (-32602 to the host).
        PolicyUnavailable: a fail-closed policy service could not decide.
    """
    steps = guard.steps(
        "backend_requests", call.client.profile, backend.name, backend.config.filters
    )
    asked = body.get("inputRequests")
    if not steps or not isinstance(asked, dict):
        return body
    changed: dict[str, Any] = {}
    for key, entry in asked.items():
        params = entry.get("params") if isinstance(entry, dict) else None
        if not isinstance(params, dict):
            continue  # a malformed entry is the shape check's to refuse (mrtr)
        subject = _subject("backend_requests", call.client, backend.name, "", params)
        decision = await guard.check(steps, subject)
        if isinstance(decision, Deny):
            raise FilterRefused(decision.filter, decision.reason)
        if isinstance(decision, Modify):
            changed[key] = {**entry, "params": decision.payload}
    if not changed:
        return body
    return {**body, "inputRequests": {**asked, **changed}}
