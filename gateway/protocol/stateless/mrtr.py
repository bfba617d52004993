"""Multi round-trip requests (MRTR) of MCP 2026-07-28, and their legacy bridge (sans-IO).

A modern server never sends a request to the client; it answers
``resultType: "input_required"`` with ``inputRequests`` (keyed
``{method, params}`` objects, no ``jsonrpc``/``id``) and/or an opaque
``requestState``, and the client retries the original request with
``inputResponses`` (bare results under the same keys) and the state echoed
(``S/basic/patterns/mrtr.mdx``; schema.ts ``InputRequiredResult``). Rules:

- Only ``tools/call``, ``prompts/get`` and ``resources/read`` may answer
  ``input_required`` (§Supported Requests). At least one of the two fields
  is present (§Server Requirements 6).
- An input request's method is ``elicitation/create``,
  ``sampling/createMessage`` or ``roots/list``; the server MUST NOT ask for
  one the *request's* ``clientCapabilities`` lack (§Server Requirements 7):
  a need the client cannot meet is -32021 (``S/basic/index.mdx``).
  Fine-grained needs: URL-mode elicitation needs ``elicitation.url``, form
  (or no ``mode``) needs ``elicitation.form`` (``{}`` counts as form,
  ``S/client/elicitation.mdx``); ``tools``/``toolChoice`` need
  ``sampling.tools``; ``includeContext`` other than ``none`` needs
  ``sampling.context`` (schema.ts ``ClientCapabilities``).
- On a retry, keys not asked for are ignored; missing keys are reported,
  not raised: the server SHOULD ask again rather than fail (§Error
  Handling). A malformed ``inputResponses`` (not an object, a value not an
  object) is -32602.
- Legacy bridge: a backend's server-to-client request becomes one entry,
  keyed by its JSON-RPC id encoded as JSON (so ``1`` and ``"1"`` stay
  apart and the id comes back exactly); params lose ``progressToken`` and
  related-task ``_meta`` (meaningless to the host) and URL mode's
  ``elicitationId`` (removed in 2026-07-28, changelog). The host's
  response becomes the JSON-RPC result the backend waits for.
- A key the backend names: the spec lets the server choose its keys, and
  a handshake-era request has no field for one, so a backend that wants a
  key of its own (a fixture whose modern clients expect ``user_name``)
  puts it in ``_meta["dev.mcp-gateway/inputKey"]`` (gateway convention,
  removed before the host sees the entry). It is used when it is a
  non-empty string of at most 128 characters, not already taken in the
  round (or, for a task, over the task's life), and not shaped like a
  bridged id (JSON text of a number or string), so it never collides with
  a key :func:`key_for` makes; otherwise the id's key is used.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

import msgspec

from gateway.errors import INVALID_PARAMS
from gateway.protocol.stateless.cache_hints import INPUT_REQUIRED
from gateway.protocol.stateless.envelope import missing_capabilities
from gateway.protocol.stateless.error_codes import MissingClientCapability, ModernProtocolError

if TYPE_CHECKING:
    from collections.abc import Container, Mapping

MRTR_METHODS: Final = frozenset({"tools/call", "prompts/get", "resources/read"})
ELICIT: Final = "elicitation/create"
SAMPLE: Final = "sampling/createMessage"
ROOTS: Final = "roots/list"
INPUT_METHODS: Final = frozenset({ELICIT, SAMPLE, ROOTS})
INPUT_KEY_META: Final = "dev.mcp-gateway/inputKey"
INPUT_KEY_MAX: Final = 128
_BACKEND_ONLY_META: Final = (
    "progressToken",
    "io.modelcontextprotocol/related-task",
    INPUT_KEY_META,
)


class InputRequired(msgspec.Struct, frozen=True, kw_only=True):
    """A parsed ``input_required`` result.

    Attributes:
        input_requests: key → ``{"method", "params"}``; empty when state-only.
        request_state: the opaque state, or ``None``.
    """

    input_requests: dict[str, dict[str, Any]]
    request_state: str | None


class ResponsesCheck(msgspec.Struct, frozen=True, kw_only=True):
    """What a retry answered of what was asked.

    Attributes:
        responses: key → response, only for keys that were asked.
        missing: asked keys the retry did not answer, sorted.
    """

    responses: dict[str, dict[str, Any]]
    missing: tuple[str, ...]


class MalformedInputRequired(ModernProtocolError):
    """A backend's ``input_required`` result breaks the shape rules.

    Internal error towards the host (-32603): the backend, not the host, is
    at fault.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, -32603)


def _invalid(message: str) -> ModernProtocolError:
    return ModernProtocolError(message, INVALID_PARAMS)


def input_required_result(
    input_requests: Mapping[str, Mapping[str, Any]] | None = None,
    request_state: str | None = None,
) -> dict[str, Any]:
    """An ``InputRequiredResult`` to send a modern client.

    Raises:
        ValueError: neither field given (§Server Requirements 6).
    """
    if not input_requests and request_state is None:
        raise ValueError("an input_required result needs inputRequests or requestState")
    out: dict[str, Any] = {"resultType": INPUT_REQUIRED}
    if input_requests:
        out["inputRequests"] = {k: dict(v) for k, v in input_requests.items()}
    if request_state is not None:
        out["requestState"] = request_state
    return out


def parse_input_required(method: str, result: Mapping[str, Any]) -> InputRequired:
    """Read a backend's ``input_required`` result, proving its shape.

    Raises:
        MalformedInputRequired: on a method that may not answer so, with no
            field, a non-string state, or a bad entry.
    """
    if method not in MRTR_METHODS:
        raise MalformedInputRequired(f"{method} may not answer input_required")
    requests = result.get("inputRequests")
    state = result.get("requestState")
    if requests is None and state is None:
        raise MalformedInputRequired("input_required without inputRequests or requestState")
    if state is not None and not isinstance(state, str):
        raise MalformedInputRequired("requestState must be a string")
    if requests is not None and not isinstance(requests, dict):
        raise MalformedInputRequired("inputRequests must be an object")
    parsed: dict[str, dict[str, Any]] = {}
    for key, entry in (requests or {}).items():
        if not isinstance(entry, dict) or entry.get("method") not in INPUT_METHODS:
            raise MalformedInputRequired(f"inputRequests[{key!r}] is not an input request")
        if "id" in entry or "jsonrpc" in entry:
            raise MalformedInputRequired(f"inputRequests[{key!r}] must not carry id or jsonrpc")
        parsed[key] = entry
    return InputRequired(input_requests=parsed, request_state=state)


def required_capability(request: Mapping[str, Any]) -> dict[str, Any]:
    """The client capabilities one input request needs, as ClientCapabilities."""
    method = request.get("method")
    params = request.get("params")
    p: Mapping[str, Any] = params if isinstance(params, dict) else {}
    if method == ELICIT:
        return {"elicitation": {"url" if p.get("mode") == "url" else "form": {}}}
    if method == SAMPLE:
        need: dict[str, Any] = {}
        if "tools" in p or "toolChoice" in p:
            need["tools"] = {}
        if p.get("includeContext") not in (None, "none"):
            need["context"] = {}
        return {"sampling": need}
    if method == ROOTS:
        return {"roots": {}}
    return {}


def missing_for(
    input_requests: Mapping[str, Mapping[str, Any]], client_capabilities: Mapping[str, Any]
) -> dict[str, Any]:
    """What the requests need that the request's client did not declare."""
    gap: dict[str, Any] = {}
    for request in input_requests.values():
        for key, want in missing_capabilities(
            client_capabilities, required_capability(request)
        ).items():
            gap.setdefault(key, {}).update(want)
    return gap


def require_capabilities(
    input_requests: Mapping[str, Mapping[str, Any]], client_capabilities: Mapping[str, Any]
) -> None:
    """Refuse to ask a client for what it did not declare on this request.

    Raises:
        MissingClientCapability: -32021 with ``requiredCapabilities``.
    """
    gap = missing_for(input_requests, client_capabilities)
    if gap:
        raise MissingClientCapability(gap)


def check_responses(params: Mapping[str, Any], asked: Mapping[str, object]) -> ResponsesCheck:
    """Match a retry's ``inputResponses`` against the keys that were asked.

    Args:
        params: the retry's params.
        asked: the ``inputRequests`` (or just their keys) of the last round.

    Raises:
        ModernProtocolError: -32602 when ``inputResponses`` or an asked
            entry is not an object.
    """
    given = params.get("inputResponses", {})
    if not isinstance(given, dict):
        raise _invalid("inputResponses must be an object")
    responses: dict[str, dict[str, Any]] = {}
    for key in asked:
        if key not in given:
            continue
        value = given[key]
        if not isinstance(value, dict):
            raise _invalid(f"inputResponses[{key!r}] must be an object")
        responses[key] = value
    missing = tuple(sorted(k for k in asked if k not in responses))
    return ResponsesCheck(responses=responses, missing=missing)


# --- legacy bridge -------------------------------------------------------------


def key_for(request_id: int | str) -> str:
    """The inputRequests key for a backend request id (JSON text, reversible)."""
    return json.dumps(request_id, ensure_ascii=False)


def id_for(key: str) -> int | str:
    """The backend request id an inputRequests key stands for.

    Raises:
        ValueError: a key :func:`key_for` did not make.
    """
    try:
        value = json.loads(key)
    except json.JSONDecodeError:
        raise ValueError(f"not a bridged key: {key!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"not a bridged key: {key!r}")
    return value


def _named_key(meta: object, taken: Container[str]) -> str | None:
    """The key a backend named in ``_meta`` (see the module rules), if usable."""
    named = meta.get(INPUT_KEY_META) if isinstance(meta, dict) else None
    if not isinstance(named, str) or not 0 < len(named) <= INPUT_KEY_MAX or named in taken:
        return None
    try:
        id_for(named)
    except ValueError:
        return named
    return None  # shaped like a bridged id: it could collide with one


def from_legacy_request(
    message: Mapping[str, Any], taken: Container[str] = ()
) -> tuple[str, dict[str, Any]]:
    """A backend's server-to-client JSON-RPC request as ``(key, inputRequests entry)``.

    Args:
        message: the backend's request.
        taken: keys already in use, which a key the backend names may not reuse.

    Raises:
        ValueError: not an elicitation, sampling or roots request with an id.
    """
    method = message.get("method")
    request_id = message.get("id")
    if method not in INPUT_METHODS or isinstance(request_id, bool):
        raise ValueError(f"cannot bridge {method!r} as an input request")
    if not isinstance(request_id, int | str):
        raise ValueError("a bridged request needs an id")
    raw = message.get("params")
    params: dict[str, Any] = dict(raw) if isinstance(raw, dict) else {}
    params.pop("elicitationId", None)
    meta = params.get("_meta")
    named = _named_key(meta, taken)
    if isinstance(meta, dict):
        kept = {k: v for k, v in meta.items() if k not in _BACKEND_ONLY_META}
        if kept:
            params["_meta"] = kept
        else:
            del params["_meta"]
    entry: dict[str, Any] = {"method": method}
    if params or method != ROOTS:
        entry["params"] = params
    return (named if named is not None else key_for(request_id)), entry


def without_key_hint(params: msgspec.Raw | None) -> msgspec.Raw | None:
    """A backend's request params as a handshake-era host gets them: no key hint.

    The hint is addressed to the gateway; a legacy host is sent the request
    itself, so the key it named means nothing there. Params without it are
    returned as they are (byte for byte).
    """
    if params is None or INPUT_KEY_META.encode() not in bytes(params):
        return params
    body = msgspec.json.decode(params)
    meta = body.get("_meta") if isinstance(body, dict) else None
    if not isinstance(meta, dict) or INPUT_KEY_META not in meta:
        return params
    kept = {k: v for k, v in meta.items() if k != INPUT_KEY_META}
    if kept:
        body["_meta"] = kept
    else:
        del body["_meta"]
    return msgspec.Raw(msgspec.json.encode(body))


def legacy_result(response: Mapping[str, Any]) -> dict[str, Any]:
    """The host's input response as the JSON-RPC result a backend waits for."""
    return {k: v for k, v in response.items() if k != "resultType"}
