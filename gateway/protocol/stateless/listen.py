"""``subscriptions/listen`` (2026-07-28), sans-IO: the filter, the ack, the tags.

Rules (``S/basic/patterns/subscriptions.mdx``):

1. The request's ``params.notifications`` is an object of optional fields
   (``toolsListChanged``, ``promptsListChanged``, ``resourcesListChanged``
   booleans, ``resourceSubscriptions`` a list of strings); anything else of
   the wrong type is -32602. Omitted means not asked for.
2. The acknowledgement ``notifications/subscriptions/acknowledged`` names the
   *honoured* subset: the spec says types the server does not support "are
   omitted". A URI the gateway cannot subscribe (unknown, its backend offers
   no subscriptions, or the backend refused) is left out of
   ``resourceSubscriptions``; when none is honoured the field is omitted.
3. Only what was asked for and honoured goes on the stream ("MUST NOT send
   notification types the client has not explicitly requested"): the three
   list_changed kinds and ``notifications/resources/updated`` for an
   honoured URI. Never progress, never log messages.
4. Every message carries ``_meta["io.modelcontextprotocol/subscriptionId"]``
   = the listen request's id, the ack and the final result included.
5. ``taskIds`` (the tasks extension) asks for ``notifications/tasks``, the
   full task on each change of status, for each named task the caller owns;
   another's or an unknown id is left out of the ack, like an unknown URI.
6. A teardown by the server ends with the result
   ``{"resultType": "complete", "_meta": {subscriptionId}}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from gateway.errors import INVALID_PARAMS, LocalProtocolError
from gateway.protocol import jsonrpc, mcp

if TYPE_CHECKING:
    from gateway.protocol.jsonrpc import RequestId

LISTEN: Final = "subscriptions/listen"
SUBSCRIPTION_ID_KEY: Final = "io.modelcontextprotocol/subscriptionId"
ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"
RESOURCE_UPDATED: Final = "notifications/resources/updated"

# Filter field -> the list_changed notification it asks for.
LIST_CHANGED_FIELDS: Final = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}
_URIS_FIELD: Final = "resourceSubscriptions"
# The tasks extension's field and notification (ext-tasks, sep-2663).
_TASKS_FIELD: Final = "taskIds"
TASK_STATUS: Final = "notifications/tasks"


@dataclass(frozen=True, slots=True)
class ListenFilter:
    """What a listen request asked for (rule 1).

    Attributes:
        list_changed: the list_changed methods asked for.
        uris: the public resource URIs asked for, in order, without repeats.
        task_ids: the gateway tasks asked for (``taskIds``), likewise.
    """

    list_changed: frozenset[str] = frozenset()
    uris: tuple[str, ...] = ()
    task_ids: tuple[str, ...] = ()


@dataclass(slots=True)
class Subscription:
    """One listen stream's honoured filter, which tags what goes on it (rules 2-4).

    Attributes:
        subscription_id: the listen request's JSON-RPC id.
        list_changed: the list_changed methods honoured.
        uris: the public URIs honoured.
        task_ids: the tasks honoured (the caller's own, still known).
    """

    subscription_id: RequestId
    list_changed: frozenset[str] = frozenset()
    uris: frozenset[str] = field(default_factory=frozenset)
    _order: tuple[str, ...] = ()
    task_ids: tuple[str, ...] = ()

    def acknowledgement(self) -> bytes:
        """The first message on the stream: the honoured subset (rule 2)."""
        notifications: dict[str, Any] = {
            name: True
            for name, method in LIST_CHANGED_FIELDS.items()
            if method in self.list_changed
        }
        if self._order:
            notifications[_URIS_FIELD] = list(self._order)
        if self.task_ids:
            notifications[_TASKS_FIELD] = list(self.task_ids)
        body = {"_meta": self._meta(), "notifications": notifications}
        return jsonrpc.encode_notification(ACKNOWLEDGED, mcp.encode(body))

    def tag(self, message: bytes) -> bytes | None:
        """``message`` as this stream carries it, or None if it does not belong (rules 3-4)."""
        try:
            decoded = jsonrpc.decode(message)
        except LocalProtocolError:
            return None
        if not isinstance(decoded, jsonrpc.Notification):
            return None
        method = decoded.method
        if method not in self.list_changed and method not in (RESOURCE_UPDATED, TASK_STATUS):
            return None
        try:
            params = mcp.decode_params(decoded.params)
        except LocalProtocolError:
            return None
        if method == RESOURCE_UPDATED and params.get("uri") not in self.uris:
            return None
        if method == TASK_STATUS and params.get("taskId") not in self.task_ids:
            return None
        meta = params.get("_meta")
        params["_meta"] = {**(meta if isinstance(meta, dict) else {}), **self._meta()}
        return jsonrpc.encode_notification(method, mcp.encode(params))

    def complete(self) -> bytes:
        """The final result of a stream the server ends (rule 6)."""
        result = {"resultType": "complete", "_meta": self._meta()}
        return jsonrpc.encode_response(self.subscription_id, mcp.encode(result))

    def _meta(self) -> dict[str, Any]:
        return {SUBSCRIPTION_ID_KEY: self.subscription_id}


def parse_filter(params: dict[str, Any]) -> ListenFilter:
    """The filter of a listen request's params (rule 1).

    Raises:
        LocalProtocolError: a field of the wrong type (-32602).
    """
    raw = params.get("notifications", {})
    if not isinstance(raw, dict):
        raise LocalProtocolError("notifications must be an object", INVALID_PARAMS)
    wanted: set[str] = set()
    for name, method in LIST_CHANGED_FIELDS.items():
        value = raw.get(name, False)
        if not isinstance(value, bool):
            raise LocalProtocolError(f"notifications.{name} must be a boolean", INVALID_PARAMS)
        if value:
            wanted.add(method)
    uris = raw.get(_URIS_FIELD, [])
    if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
        raise LocalProtocolError(
            f"notifications.{_URIS_FIELD} must be a list of strings", INVALID_PARAMS
        )
    task_ids = raw.get(_TASKS_FIELD, [])
    if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
        raise LocalProtocolError(
            f"notifications.{_TASKS_FIELD} must be a list of strings", INVALID_PARAMS
        )
    return ListenFilter(
        frozenset(wanted), tuple(dict.fromkeys(uris)), tuple(dict.fromkeys(task_ids))
    )


def honour(
    subscription_id: RequestId,
    asked: ListenFilter,
    offered: frozenset[str],
    uris: list[str],
    task_ids: frozenset[str] = frozenset(),
) -> Subscription:
    """The subscription the gateway agrees to (rule 2).

    Args:
        subscription_id: the listen request's id.
        asked: what the request asked for.
        offered: the list_changed methods the gateway can send.
        uris: the asked URIs whose subscription the backends accepted.
        task_ids: the tasks the caller may watch (its own, still kept).
    """
    accepted = set(uris)
    kept = tuple(uri for uri in asked.uris if uri in accepted)
    tasks = tuple(task for task in asked.task_ids if task in task_ids)
    return Subscription(
        subscription_id, asked.list_changed & offered, frozenset(kept), _order=kept, task_ids=tasks
    )
