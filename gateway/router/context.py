"""What one request is while the router handles it: the shared request contexts.

The types every router module passes along and none of them owns, kept
apart so the modules that use them need not import each other: ``Call``
(one host request) and ``Target`` (the backend that serves a public item),
``ModernRequest`` (one 2026-07-28 request, the router's ``ClientPeer`` for
it) and ``TaskRequest`` (the modern request a gateway task's call runs as,
which can wait for the client's input). The held call a modern request may
be part of is seen here only through ``HeldCallView``; ``stateless.held_calls``
has the class. The rules a ``ModernRequest`` keeps are numbered as in
``stateless.requests``, those of a ``TaskRequest`` as in
``protocol.stateless.tasks``.

This module imports no other module of the router at run time (only
``neighbours``' protocols, for type checking), so every router module may
import it and no cycle runs through it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

import trio

from gateway.catalog.profiles import DEFAULT_PROFILE
from gateway.errors import METHOD_NOT_FOUND, LocalProtocolError
from gateway.protocol import mcp
from gateway.protocol.stateless.error_codes import MissingClientCapability, ModernProtocolError
from gateway.protocol.stateless.mrtr import (
    check_responses,
    from_legacy_request,
    legacy_result,
    missing_for,
)
from gateway.protocol.stateless.task_states import TaskAction

if TYPE_CHECKING:
    from collections.abc import Callable

    import msgspec

    from gateway.backends.call_clock import CallClock
    from gateway.backends.state import BackendView
    from gateway.catalog.snapshot import Kind, Snapshot
    from gateway.identity.principal import Principal
    from gateway.protocol.stateless.envelope import Envelope
    from gateway.protocol.stateless.tasks import Task
    from gateway.router.neighbours import ClientPeer, Emit


@dataclass(eq=False, slots=True)
class Call:
    """One host request while the router handles it."""

    client: ClientPeer
    snapshot: Snapshot
    emit: Emit | None = None
    backend: str = ""
    # The tag of the effective view ``snapshot`` is ("" when no policy
    # narrows it): cursors are made for, and checked against, this view.
    view_tag: str = ""
    # An access policy is in force: what a request sees depends on who
    # asks, so no cache may share it (``cacheScope: private``).
    per_principal: bool = False
    # The request clock of the call's forward to its backend, stopped while
    # the backend waits on the host for input (``backends/call_clock``).
    clock: CallClock | None = None
    # What the caller's profile and policy admit of the items a backend
    # lists to its principal alone (``router.access.PersonalView``); None:
    # a call made without a request's view (a background call).
    personal: PersonalItems | None = None

    @property
    def sees_everything(self) -> bool:
        """Whether neither a profile nor an access policy narrows what the caller sees."""
        return not self.view_tag and self.client.profile == DEFAULT_PROFILE

    def admits_personal(self, kind: Kind, public: str, backend: str, *, listed: bool) -> bool:
        """Whether an item a backend lists to the caller's principal alone exists for it.

        ``listed``: the question is whether it is listed (else: called).
        Without a ``personal`` view, only a caller that sees everything.
        """
        personal = self.personal
        if personal is None:
            return self.sees_everything
        return (personal.lists if listed else personal.admits)(kind, public, backend)


class PersonalItems(Protocol):
    """What a caller's profile and policy admit of items listed per principal
    (``router.access.PersonalView`` has it)."""

    def admits(self, kind: Kind, public: str, backend: str) -> bool:
        """Whether the caller may call (get) the item."""
        ...

    def lists(self, kind: Kind, public: str, backend: str) -> bool:
        """Whether the item is listed to the caller."""
        ...


@dataclass(frozen=True, slots=True)
class Target:
    """The backend that serves a public item, and the item's name there."""

    backend: BackendView
    original: str


_ids: Final = itertools.count(1)
_LOG_METHOD: Final = b'"method":"notifications/message"'
# How long a call whose backend asked for an undeclared capability may go on
# after the refusal before it is cancelled (ModernRequest.fail).
REFUSAL_GRACE: Final = 2.0


def _no_emit(message: bytes) -> bool:
    return False


class HeldCallView(Protocol):
    """What a modern request sees of the held call it is part of (``HeldCall`` has it)."""

    method: str
    params: dict[str, Any]

    @property
    def awaiting_retry(self) -> bool:
        """Whether the held call waits for the host's retry (an ``input_required`` is out)."""
        ...

    async def ask(self, backend: str, method: str, params: msgspec.Raw | None) -> msgspec.Raw:
        """Bridge a backend's own request to the host as ``input_required``."""
        ...

    def when_done(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the held call ended (at once if it has)."""
        ...


@dataclass(eq=False)
class ModernRequest:
    """One modern request while it is routed (the router's ``ClientPeer``).

    Attributes:
        envelope: the request's validated ``_meta``.
        emit: the request's response stream.
        session_id: an id unique to this request, for the router's tables
            only; never sent to the host or a backend.
        principal: the key of the principal the request was authenticated
            as (None: auth off).
    """

    envelope: Envelope
    emit: Emit = _no_emit
    session_id: str = field(default_factory=lambda: f"modern-{next(_ids)}")
    profile: str = DEFAULT_PROFILE
    failure: ModernProtocolError | None = None
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    held: HeldCallView | None = None
    # A verified retry of a modern backend's input_required: that backend's
    # name and its own requestState (None when it sent none).
    backend_state: tuple[str, str | None] | None = None
    principal: str | None = None
    caller: Principal | None = None
    # The gateway declares the tasks extension to the backend on this
    # request: a task call routed to a backend that runs its own tasks
    # (``router/stateless/native_tasks``).
    task_extension: bool = False

    @property
    def protocol_version(self) -> str:
        """The revision the request names."""
        return self.envelope.protocol_version

    @property
    def capabilities(self) -> dict[str, Any]:
        """The capabilities this request declared, and only this request."""
        return self.envelope.client_capabilities

    @property
    def waiting(self) -> bool:
        """Whether the request's call is held, waiting for the client's retry."""
        return self.held is not None and self.held.awaiting_retry

    def fail(self, failure: ModernProtocolError, grace: float = 0.0) -> None:
        """End the request with ``failure`` instead of its result (rule 4).

        With a ``grace``, the call is cancelled only if it is still running
        that many seconds later: a backend whose own request was just refused
        usually ends its call at once, and an SDK 1.x server can crash when
        the refusal and a cancellation reach it together.
        """
        if self.failure is None:
            self.failure = failure
        if grace > 0:
            self.scope.deadline = min(self.scope.deadline, trio.current_time() + grace)
        else:
            self.scope.cancel()

    def lacks(self, feature: str) -> None:
        """A backend asked for ``feature``, which this request did not declare (rule 4).

        ``feature`` is a capability (``sampling``) or one of its modes
        (``elicitation.url``); the -32021 names it as ``ClientCapabilities``
        shape in ``requiredCapabilities``.
        """
        name, _, mode = feature.partition(".")
        required: dict[str, Any] = {name: {mode: {}} if mode else {}}
        self.fail(MissingClientCapability(required), grace=REFUSAL_GRACE)

    def notify_nowait(self, message: bytes) -> None:
        """Only log messages reach a modern request unasked (rule 3); others drop."""
        if _LOG_METHOD in message:
            self.emit(message)

    async def ask(self, backend: str, method: str, params: msgspec.Raw | None) -> msgspec.Raw:
        """A backend's own request: bridged when the call is held, else refused (rule 4).

        Raises:
            LocalProtocolError: the backend is answered with it.
        """
        if self.held is not None:
            return await self.held.ask(backend, method, params)
        return await self.request(method, params, None)

    async def request(
        self, method: str, params: msgspec.Raw | None, emit: Emit | None
    ) -> msgspec.Raw:
        """Refuse a backend's own request (rule 4).

        Raises:
            LocalProtocolError: always; the backend is answered with it.
        """
        raise LocalProtocolError(
            f"{method}: the calling client speaks 2026-07-28, which has no "
            "server-to-client requests; only tools/call, prompts/get and "
            "resources/read can carry input_required",
            METHOD_NOT_FOUND,
        )


@dataclass(eq=False, slots=True)
class _Waiting:
    """One backend request a task waits on."""

    answered: trio.Event = field(default_factory=trio.Event)
    response: dict[str, Any] | None = None


@dataclass(eq=False)
class TaskRequest(ModernRequest):
    """The modern request a task's call runs as: it can wait for the client's input.

    ``ModernRequest.ask`` refuses a backend's own request outside MRTR; here
    the request becomes an entry of the task's ``inputRequests`` and the
    backend waits for the ``tasks/update`` that answers it (rule 4).
    """

    task: Task | None = None
    changed: Callable[[Task], None] = lambda _task: None
    # Writes the task's record to the state store (``router/stateless/task_records``).
    save: Callable[[Task], None] = lambda _task: None
    pending_inputs: dict[str, _Waiting] = field(default_factory=dict)
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    # Every key the task has asked under: unique over its life (sep-2663).
    used_keys: set[str] = field(default_factory=set)

    async def ask(self, backend: str, method: str, params: msgspec.Raw | None) -> msgspec.Raw:
        """Park the task ``input_required`` until the client answers.

        Raises:
            LocalProtocolError: not an input request, or one needing a
                capability the creating request did not declare; the
                backend is answered with it and the task goes on.
        """
        task = self.task
        assert task is not None
        message = {"id": next(self.ids), "method": method, "params": mcp.decode_params(params)}
        try:
            key, entry = from_legacy_request(message, taken=self.used_keys)
        except ValueError as exc:
            raise LocalProtocolError(str(exc), METHOD_NOT_FOUND) from None
        self.used_keys.add(key)
        gap = missing_for({key: entry}, self.capabilities)
        if gap:
            refused = f"{method}: the client did not declare {gap}"
            raise LocalProtocolError(refused, METHOD_NOT_FOUND)
        waiting = self.pending_inputs[key] = _Waiting()
        self.perform(task.waits_for(key, entry))
        try:
            await waiting.answered.wait()
        finally:
            del self.pending_inputs[key]
            self.perform(task.answered(key))
        assert waiting.response is not None
        return mcp.encode(legacy_result(waiting.response))

    def perform(
        self, actions: tuple[TaskAction, ...], params: dict[str, Any] | None = None
    ) -> None:
        """Do what the task's table said (``protocol/stateless/task_states``).

        Raises:
            ModernProtocolError: -32602 for ``inputResponses`` that are not objects.
        """
        task = self.task
        assert task is not None
        for action in actions:
            if action is TaskAction.SAVE:
                self.save(task)
            elif action is TaskAction.NOTIFY:
                self.changed(task)
            elif action is TaskAction.CANCEL_CALL:
                self.scope.cancel()
            elif action is TaskAction.DELIVER:
                self.update(params or {})

    def update(self, params: dict[str, Any]) -> None:
        """Hand ``tasks/update``'s answers to the backend requests waiting for them.

        Raises:
            ModernProtocolError: -32602 for ``inputResponses`` that are not objects.
        """
        pending = {k: w for k, w in self.pending_inputs.items() if not w.answered.is_set()}
        for key, response in check_responses(params, pending).responses.items():
            pending[key].response = response
            pending[key].answered.set()


__all__ = [
    "REFUSAL_GRACE",
    "Call",
    "HeldCallView",
    "ModernRequest",
    "PersonalItems",
    "Target",
    "TaskRequest",
]
