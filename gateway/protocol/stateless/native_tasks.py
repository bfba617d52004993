"""A 2026-07-28 backend's own tasks behind a gateway task id, sans-IO (the route record).

The tasks extension (``io.modelcontextprotocol/tasks``, sep-2663) between
two 2026-07-28 peers needs no gateway task: the backend runs it, and the
gateway only stands between the host's ids and the backend's. The
router's driver is ``router/stateless/native_tasks.py``.

Rules (``ext:`` tasks; ``../docs/eras.md``, "A 2026-07-28 backend's own tasks"):

1. **Which backends.** A 2026-07-28 backend whose ``server/discover``
   capabilities declare the extension under ``extensions``. Its task tools'
   calls go to it with the extension declared in the envelope, per request
   (``with_task_extension``), as the host declared it.
2. **The id.** The backend's ``CreateTaskResult`` (flat: ``resultType:
   task``, ``taskId``) reaches the host with a gateway id instead: ``n.``
   followed by 128 random bits (``new_task_id``), so a tasks method can tell
   a routed id from a gateway-run one without asking the store. The
   backend's id never reaches the host: ``for_host`` swaps it on every
   answer, ``in_public_text`` in every error message.
3. **The route** (``NativeRoute``) is the state store's record under
   ``tasks-native:<gateway id>``: the backend, its task id, the creating
   principal, the public tool name and the creating request's bridgeable
   capabilities. It lives as long as the backend keeps the task: its
   ``ttlMs`` from creation; ``null`` (unlimited) is a day
   (``UNLIMITED_TTL``). Nothing else is kept, so any replica routes any
   tasks method with one store read.
4. **Another principal's id is unknown**: -32602 with the text an unknown
   id gets (``unknown_task``), so an id reveals nothing to anyone else.
5. **Forwarding.** ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` go
   to the owning backend with the backend's id (``backend_params``); the
   host's ``inputResponses`` travel unchanged, since the keys are the
   backend's own and the task is the backend's alone (the same as an MRTR
   round of a 2026-07-28 backend). An ``inputRequests`` entry asking for a
   capability the creating request did not declare is the backend's fault
   (``undeclared_need``).
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any, Final

import msgspec

from gateway.errors import INVALID_PARAMS, LocalProtocolError
from gateway.protocol.stateless.mrtr import missing_for
from gateway.protocol.stateless.tasks import EXTENSION

if TYPE_CHECKING:
    from collections.abc import Mapping

ROUTE_PREFIX: Final = "tasks-native:"
ID_MARK: Final = "n."
# How long a route to a task the backend keeps without limit lives (rule 3).
UNLIMITED_TTL: Final = 86_400.0


class NativeRoute(msgspec.Struct, frozen=True, kw_only=True):
    """Where a gateway task id leads (rule 3).

    Attributes:
        backend: the owning backend's name.
        task_id: the backend's own task id (never shown to the host).
        principal: the key of whoever created it (None: auth off).
        tool: the public tool name, for logs and the result filters.
        capabilities: the creating request's capabilities as the backend
            got them (rule 5's check of ``inputRequests``).
    """

    backend: str
    task_id: str
    principal: str | None
    tool: str
    capabilities: dict[str, Any] = msgspec.field(default_factory=dict)


def declares_extension(capabilities: Mapping[str, Any]) -> bool:
    """Rule 1: whether a backend's discovered capabilities declare the tasks extension."""
    extensions = capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION), dict)


def with_task_extension(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """``capabilities`` declaring the tasks extension too (rule 1); the input untouched."""
    out = dict(capabilities)
    extensions = out.get("extensions")
    out["extensions"] = {**(extensions if isinstance(extensions, dict) else {}), EXTENSION: {}}
    return out


def new_task_id() -> str:
    """A gateway id for a backend's task (rule 2)."""
    return ID_MARK + secrets.token_urlsafe(16)


def is_native_id(task_id: object) -> bool:
    """Whether ``task_id`` is one ``new_task_id`` could have made (rule 2)."""
    return isinstance(task_id, str) and task_id.startswith(ID_MARK) and len(task_id) <= 64


def route_key(task_id: str) -> str:
    """The store key of a gateway task id's route (rule 3)."""
    return ROUTE_PREFIX + task_id


def encode_route(route: NativeRoute) -> bytes:
    """The route as the store keeps it."""
    return msgspec.json.encode(route)


def decode_route(raw: bytes) -> NativeRoute | None:
    """A stored route; None when the bytes are not one (a foreign or damaged value)."""
    try:
        return msgspec.json.decode(raw, type=NativeRoute)
    except msgspec.DecodeError:
        return None


def backend_task(result: Mapping[str, Any] | None) -> str | None:
    """The backend's task id when ``result`` is a flat ``CreateTaskResult`` (rule 2)."""
    if result is None or result.get("resultType") != "task":
        return None
    task_id = result.get("taskId")
    return task_id if isinstance(task_id, str) and task_id else None


def route_ttl(created: Mapping[str, Any]) -> float:
    """Rule 3: how long the route lives, from the backend's ``ttlMs`` (at least a second)."""
    ttl_ms = created.get("ttlMs")
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int | float) or ttl_ms != ttl_ms:
        return UNLIMITED_TTL
    return max(1.0, min(float(ttl_ms) / 1000, UNLIMITED_TTL))


def for_host(body: Mapping[str, Any], task_id: str) -> dict[str, Any]:
    """A backend's task answer (created or detailed) under the gateway's id (rule 2)."""
    out = dict(body)
    if "taskId" in out:
        out["taskId"] = task_id
    return out


def in_public_text(text: str, route: NativeRoute, task_id: str) -> str:
    """``text`` (a backend's error message) with its task id swapped for ours (rule 2)."""
    return text.replace(route.task_id, task_id) if route.task_id else text


def backend_params(params: Mapping[str, Any], route: NativeRoute) -> dict[str, Any]:
    """A host's tasks method params as the backend gets them (rule 5).

    The backend's task id; the host's envelope left out (the driver builds
    the backend's own); ``inputResponses`` and anything else as they came.
    """
    out = {k: v for k, v in params.items() if k != "_meta"}
    out["taskId"] = route.task_id
    return out


def unknown_task(task_id: object) -> LocalProtocolError:
    """Rule 4: the answer for an unknown, expired or someone else's id."""
    shown = task_id[:64] if isinstance(task_id, str) else repr(task_id)[:64]
    return LocalProtocolError(f"unknown taskId: {shown}", INVALID_PARAMS)


def undeclared_need(body: Mapping[str, Any], route: NativeRoute) -> str | None:
    """Rule 5: the capabilities the backend asks for that the creating request lacks (names)."""
    requests = body.get("inputRequests")
    if not isinstance(requests, dict):
        return None
    entries = {k: v for k, v in requests.items() if isinstance(v, dict)}
    gap = missing_for(entries, route.capabilities)
    return ", ".join(sorted(gap)) or None


__all__ = [
    "ID_MARK",
    "ROUTE_PREFIX",
    "UNLIMITED_TTL",
    "NativeRoute",
    "backend_params",
    "backend_task",
    "declares_extension",
    "decode_route",
    "encode_route",
    "for_host",
    "in_public_text",
    "is_native_id",
    "new_task_id",
    "route_key",
    "route_ttl",
    "undeclared_need",
    "unknown_task",
]
