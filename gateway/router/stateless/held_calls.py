"""Held calls: a legacy backend's own request during a modern call, bridged to MRTR.

A 2026-07-28 client cannot be sent a request; a handshake-era backend
still sends ``sampling/createMessage``, ``elicitation/create`` or
``roots/list`` in the middle of a call and waits for the answer. The
gateway answers the *modern* request with ``input_required`` and keeps the
backend's call open until the client's retry brings ``inputResponses``
(``S/basic/patterns/mrtr.mdx``). Rules:

1. Only ``tools/call``, ``prompts/get`` and ``resources/read`` are held
   (the methods that may answer ``input_required``). The backend call runs
   in the table's own nursery (``HeldCalls.run``), not the HTTP request's,
   so it outlives the round that answered ``input_required``.
2. The ``requestState`` is sealed by the gateway (``protocol/sealed``): it
   names the backend, the principal (``None`` until auth binds one), an
   expiry, the request's digest, and the pending key plus the round
   number. A tampered, expired or foreign state, or one for another
   request, is -32602 ``Invalid or expired requestState``.
3. The table is bounded: at most ``max_held`` calls wait for a retry at
   once, each at most ``lifetime`` seconds per round
   (``mrtr.held_call_lifetime``; unset, the backend's ``timeouts.input``).
   While a round waits, the backend call's request clock stands still
   (``backends/call_clock``). A call asking beyond the bound fails at once
   (host: -32603; backend: its request refused).
4. Held calls live in this replica's memory: a retry reaching a replica
   (or a restarted gateway) that does not hold the call is -32602 saying
   so. Stateless retries across replicas come with modern backends (issue
   14, step 5), whose own state rides in the sealed token.
5. Expiry: the backend's request is answered with -32001, the backend's
   call is cancelled (``notifications/cancelled``), the entry leaves the
   table. A call that runs out of ``timeouts.max_total`` during a round
   answers its open requests with -32001 as well. A retry after that is
   -32602. A retry missing some answers is asked again for the missing
   keys only (mrtr.mdx §Error Handling).
6. Each state is single use: a retry is accepted once per round.
7. Several requests the backend sends before the round answers are asked
   together: the round waits until none has arrived for ``GATHER_WINDOW``;
   at least one per round.
8. Progress and log messages of a held call go to the current round's
   stream, and are dropped between rounds.

Theory of operation: every transition of a held call is a row of
``protocol/stateless/held_call_states.TRANSITIONS``; :class:`HeldCall` turns
what happens into its events and performs the actions it returns.

Past 450 lines and still one idea: one held call's life (the backend call,
its rounds, the sealed state that names it, the table that bounds them) is
one protocol mechanism; its transitions are data in
``protocol/stateless/held_call_states`` and this module only performs them.
"""

from __future__ import annotations

import itertools
import math
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import trio

from gateway.errors import INTERNAL_ERROR, INVALID_PARAMS, REQUEST_TIMEOUT_CODE, LocalProtocolError
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.sealed import REQUEST_STATE, Sealer
from gateway.protocol.signing import keys_from_secret
from gateway.protocol.stateless.error_codes import (
    InvalidSealedToken,
    MissingClientCapability,
    ModernProtocolError,
)
from gateway.protocol.stateless.held_call_states import (
    HeldAction,
    HeldCallMachine,
    HeldEvent,
    HeldState,
)
from gateway.protocol.stateless.mrtr import (
    MRTR_METHODS,
    check_responses,
    from_legacy_request,
    input_required_result,
    legacy_result,
    missing_for,
)
from gateway.router.call_metrics import NO_METRICS
from gateway.router.context import REFUSAL_GRACE
from gateway.router.outcomes import internal_error
from gateway.router.stateless.input_required import restore

if TYPE_CHECKING:
    from collections.abc import Sequence

    import msgspec

    from gateway.config.schema_gateway import MrtrConfig
    from gateway.protocol.jsonrpc import Request, RequestId
    from gateway.router.call_metrics import RouterMetrics
    from gateway.router.context import ModernRequest
    from gateway.router.neighbours import Emit

DEFAULT_MAX_HELD: Final = 256
# ``timeouts.input``'s default: a round's bound when nothing else says.
DEFAULT_LIFETIME: Final = 600.0
# Requests a backend sends together (a task group asking three things) arrive
# a few milliseconds apart; one round asks them all.
GATHER_WINDOW: Final = 0.05
UNKNOWN_STATE: Final = (
    "Invalid or expired requestState: this gateway replica holds no call for it "
    "(it expired, was already answered, or another replica or a restarted gateway issued it)"
)
# What a sealed state's failed check (``InvalidSealedToken.reason``) is counted as.
STATE_REJECTIONS: Final = {
    "not a token": "tampered",
    "malformed": "tampered",
    "signature": "tampered",
    "expired": "expired",
    "principal": "foreign",
    "request": "mismatched",
}


class UnknownRequestState(ModernProtocolError):
    """A verified ``requestState`` names no call held here now (-32602, rule 6)."""

    def __init__(self) -> None:
        super().__init__(UNKNOWN_STATE, INVALID_PARAMS)


Run = Callable[["ModernRequest", "Request", dict[str, Any]], Awaitable[bytes]]


@dataclass(eq=False)
class _Ask:
    """One backend request waiting for the host's answer."""

    key: str
    entry: dict[str, Any]
    answered: trio.Event = field(default_factory=trio.Event)
    response: dict[str, Any] | None = None
    error: LocalProtocolError | None = None

    def answer(self, response: dict[str, Any]) -> None:
        self.response = response
        self.answered.set()

    def refuse(self, error: LocalProtocolError) -> None:
        if not self.answered.is_set():
            self.error = error
            self.answered.set()


class HeldCall:
    """One modern call whose backend may ask the host for input (rules 1-8).

    The trio driver of a :class:`HeldCallMachine` (``protocol/stateless/
    held_call_states``, where every transition is): it turns what happens
    (a backend request, a quiet gather window, a retry, the call's end, the
    host leaving) into events and performs the actions the table returns.
    """

    def __init__(
        self, table: HeldCalls, request: ModernRequest, message: Request, params: dict[str, Any]
    ) -> None:
        self.pending_key = secrets.token_urlsafe(16)
        self.request = request
        self.method = message.method
        self.params = params
        self.backend: str | None = None
        self.machine = HeldCallMachine()
        self._table = table
        self._ids = itertools.count(1)
        self._asks: dict[str, _Ask] = {}
        # Set whenever the machine moved: the open round looks again.
        self._news = trio.Event()
        # What the open round answers (set by SEND_RESULT / SEND_INPUT_REQUIRED).
        self._answer: HeldAction | None = None
        self._released = trio.Event()
        self._reply = b""
        self._timed_out_reply = False
        self._emit: Emit | None = request.emit
        self.expiry = trio.CancelScope()
        # What runs once the call ended (``when_done``); None: it has ended.
        self._on_done: list[Callable[[], None]] | None = []
        request.emit = self.relay
        request.held = self

    @property
    def round(self) -> int:
        """The number of the last ``input_required`` round sent."""
        return self.machine.round

    @property
    def awaiting_retry(self) -> bool:
        """Whether ``input_required`` went out and the retry has not come yet."""
        return self.machine.state in (HeldState.AWAITING_RETRY, HeldState.ENDED_UNCOLLECTED)

    def relay(self, message: bytes) -> bool:
        """Rule 8: a message of the call goes to the current round's stream."""
        return self._emit(message) if self._emit is not None else False

    def _feed(self, actions: tuple[HeldAction, ...]) -> None:
        """Perform what the table said, in order; the open round looks again."""
        for action in actions:
            if action is HeldAction.SEND_RESULT or action is HeldAction.SEND_INPUT_REQUIRED:
                self._answer = action
            elif action is HeldAction.START_EXPIRY:
                lifetime = self._table.lifetime_for(self.backend or "")
                self.expiry.deadline = trio.current_time() + lifetime
            elif action is HeldAction.STOP_EXPIRY:
                self.expiry.deadline = math.inf
            elif action is HeldAction.CANCEL_CALL:
                self.expiry.cancel()
            elif action is HeldAction.REFUSE_ASKS or action is HeldAction.REFUSE_ASKS_EXPIRED:
                expired = action is HeldAction.REFUSE_ASKS_EXPIRED
                error = self._ended(expired, expired or self._timed_out_reply)
                for ask in self._asks.values():
                    ask.refuse(error)
            elif action is HeldAction.RELEASE:
                self._table.release(self)
                self._released.set()
            elif action is HeldAction.REJECT_RETRY:
                raise UnknownRequestState
            # START_GATHER, RESTART_GATHER, KEEP_UNTIL_DEADLINE: the waits
            # below read the state; nothing to do at once.
        self._news.set()

    async def run(self, run: Run, message: Request) -> None:
        """The backend call, in the table's nursery (rule 1)."""
        try:
            with self.expiry:
                try:
                    self._reply = await run(self.request, message, self.params)
                except Exception as exc:
                    # Never into the router's nursery: that would end the process.
                    err = internal_error(
                        exc, self._table.metrics, message.method, self.request.session_id
                    )
                    self._reply = jsonrpc.encode_error(message.id, err.code, err.message)
        finally:
            # What a question still open is answered with reads the reply
            # (a timed-out call answers -32001): known before the table runs.
            self._timed_out_reply = _timed_out(self._reply)
            ended = HeldEvent.CALL_EXPIRED if self.expiry.cancelled_caught else HeldEvent.CALL_ENDED
            self._feed(self.machine.feed(ended))
            try:
                if self.machine.state is HeldState.ENDED_UNCOLLECTED:
                    # Cancellable on purpose: a cancel (shutdown, the host
                    # gone) ends the wait for the retry; the entry is
                    # released either way.
                    with trio.move_on_at(self.expiry.deadline):
                        await self._released.wait()  # noqa: ASYNC102
            finally:
                if self.machine.state is HeldState.ENDED_UNCOLLECTED:
                    self._feed(self.machine.feed(HeldEvent.EXPIRED))
                callbacks, self._on_done = self._on_done or [], None
                for callback in callbacks:
                    callback()

    def when_done(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the call ended (at once if it has): what the
        first round's caller left in place for the later rounds is undone then."""
        if self._on_done is None:
            callback()
        else:
            self._on_done.append(callback)

    def _ended(self, expired: bool, timed_out: bool) -> LocalProtocolError:
        """What a question still open when the call ended is answered with (rule 5)."""
        if expired:
            return LocalProtocolError(
                "the modern client did not retry within "
                f"{self._table.lifetime_for(self.backend or ''):g} s with the input asked for",
                REQUEST_TIMEOUT_CODE,
            )
        if timed_out:
            return LocalProtocolError(
                "the call ran out of time (timeouts.max_total) before the client answered",
                REQUEST_TIMEOUT_CODE,
            )
        return LocalProtocolError("the call ended before the client answered", INTERNAL_ERROR)

    async def ask(self, backend: str, method: str, params: msgspec.Raw | None) -> msgspec.Raw:
        """A backend's own request, answered by the host's next retry.

        Raises:
            LocalProtocolError: the client cannot or did not answer; the
                backend is answered with it.
        """
        message = {"id": next(self._ids), "method": method, "params": mcp.decode_params(params)}
        key, entry = from_legacy_request(message, taken=self._asks)
        gap = missing_for({key: entry}, self.request.capabilities)
        if gap:
            self.request.fail(MissingClientCapability(gap), grace=REFUSAL_GRACE)
            raise LocalProtocolError(f"{method}: the client did not declare {gap}", -32601)
        if not self.machine.expects(HeldEvent.ASKED) or (
            self.backend is not None and backend != self.backend
        ):
            raise LocalProtocolError(f"{method}: the call cannot take input now", INTERNAL_ERROR)
        if not self._table.admit(self):
            self.request.fail(
                ModernProtocolError(
                    f"too many calls wait for client input ({self._table.max_held})",
                    INTERNAL_ERROR,
                )
            )
            raise LocalProtocolError(f"{method}: too many held calls", INTERNAL_ERROR)
        self.backend = backend
        ask = _Ask(key, entry)
        self._asks[key] = ask
        self._feed(self.machine.feed(HeldEvent.ASKED))
        try:
            await ask.answered.wait()
        finally:
            del self._asks[key]
        if ask.error is not None or ask.response is None:
            raise ask.error or LocalProtocolError("no answer", INTERNAL_ERROR)
        return mcp.encode(legacy_result(ask.response))

    def accept(self, params: dict[str, Any], round_no: int, backend: str) -> None:
        """Rules 5 and 6: hand a retry's answers to the waiting backend requests.

        Raises:
            ModernProtocolError: -32602 for a state this call did not issue
                now, or malformed ``inputResponses``.
        """
        if (
            not self.machine.expects(HeldEvent.RETRIED)
            or round_no != self.round
            or backend != self.backend
        ):
            raise UnknownRequestState
        open_asks = {k: a for k, a in self._asks.items() if not a.answered.is_set()}
        check = check_responses(params, open_asks)
        still_open = any(key not in check.responses for key in open_asks)
        self._feed(self.machine.retried(still_open=still_open))
        for key, response in check.responses.items():
            open_asks[key].answer(response)

    async def serve_round(self, msg_id: RequestId, emit: Emit) -> bytes:
        """Answer one round: the call's result, or ``input_required`` (rule 7)."""
        self._emit = emit
        try:
            while self._answer is None:
                self._news = trio.Event()
                if self.machine.state is HeldState.GATHERING:
                    # Rule 7: wait while more requests keep arriving, GATHER_WINDOW apart.
                    with trio.move_on_after(GATHER_WINDOW) as window:
                        await self._news.wait()
                    if window.cancelled_caught:
                        self._feed(self.machine.feed(HeldEvent.QUIET))
                else:
                    await self._news.wait()
            answer, self._answer = self._answer, None
            if answer is HeldAction.SEND_RESULT:
                return _with_id(self._reply, msg_id)
            return self._input_required(msg_id)
        except trio.Cancelled:
            # The host left mid-round: the call is cancelled (unless it was answered).
            self._feed(self.machine.feed(HeldEvent.HOST_LEFT))
            raise
        finally:
            self._emit = None

    def _input_required(self, msg_id: RequestId) -> bytes:
        asks = {k: a for k, a in self._asks.items() if not a.answered.is_set()}
        self._table.metrics.count_input_required("bridge")
        state = self._table.sealer.seal(
            purpose=REQUEST_STATE,
            backend=self.backend or "",
            principal=self.request.principal,
            now=self._table.wall_clock(),
            ttl=self._table.lifetime_for(self.backend or ""),
            method=self.method,
            params=self.params,
            state=f"{self.pending_key}:{self.round}".encode(),
        )
        result = input_required_result({k: a.entry for k, a in asks.items()}, state)
        return jsonrpc.encode_response(msg_id, mcp.encode(result))


def _timed_out(reply: bytes) -> bool:
    """Whether the call's answer is a timeout (``max_total`` ran out during a round)."""
    if not reply:
        return False
    message = jsonrpc.decode(reply)
    return isinstance(message, jsonrpc.ErrorResponse) and message.code == REQUEST_TIMEOUT_CODE


def _with_id(reply: bytes, msg_id: RequestId) -> bytes:
    """The held call's answer under the retry's own id."""
    message = jsonrpc.decode(reply)
    if isinstance(message, jsonrpc.Response):
        return jsonrpc.encode_response(msg_id, message.result)
    if isinstance(message, jsonrpc.ErrorResponse):
        return jsonrpc.encode_error(msg_id, message.code, message.message, message.data)
    return reply  # pragma: no cover - the router always answers a response


class HeldCalls:
    """The bounded table of held calls (rules 3 and 4), a service with its own nursery.

    ``run`` (started with ``nursery.start``) owns the nursery the held calls'
    backend calls run in, so they outlive their first round, and where a
    retired ``requestState`` key waits out its grace.

    Args:
        sealer: seals and checks ``requestState``.
        max_held: calls that may wait for a retry at once.
        lifetime: seconds a round's ``requestState`` and held call live;
            None: the backend's own ``timeouts.input`` (``input_bound``).
        input_bound: a backend's ``timeouts.input``, by name.
        wall_clock: the clock a sealed ``requestState``'s expiry is read on.
            Wall time, not trio's clock: trio's clock starts at a random
            offset in every process, and a modern backend's state is opened by
            whichever replica the retry reaches (tests pass their virtual clock).
        metrics: rounds, retries and refused states.
    """

    def __init__(
        self,
        sealer: Sealer,
        *,
        max_held: int = DEFAULT_MAX_HELD,
        lifetime: float | None = None,
        input_bound: Callable[[str], float] = lambda backend: DEFAULT_LIFETIME,
        wall_clock: Callable[[], float] = time.time,
        metrics: RouterMetrics = NO_METRICS,
    ) -> None:
        self.wall_clock = wall_clock
        self.input_bound = input_bound
        self.sealer = sealer
        self.max_held = max_held
        self.lifetime = lifetime
        self._nursery: trio.Nursery | None = None
        self._held: dict[str, HeldCall] = {}
        # Rounds, retries and refused states.
        self.metrics: RouterMetrics = metrics

    @classmethod
    def from_config(
        cls,
        config: MrtrConfig,
        metrics: RouterMetrics = NO_METRICS,
        input_bound: Callable[[str], float] = lambda backend: DEFAULT_LIFETIME,
    ) -> HeldCalls:
        """The table an ``mrtr`` section describes; ``input_bound`` reads ``timeouts.input``."""
        return cls(
            sealer_for(config.state_secret),
            max_held=config.max_held_calls,
            lifetime=config.held_call_lifetime,
            input_bound=input_bound,
            metrics=metrics,
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run held calls until cancelled; cancelling it cancels every call it holds."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                task_status.started()
                await trio.sleep_forever()
            finally:
                self._nursery = None

    def _start(self, held: HeldCall, run: Run, message: Request) -> None:
        if self._nursery is None:
            raise RuntimeError("HeldCalls.run is not running")
        self._nursery.start_soon(held.run, run, message)

    def apply(
        self, config: MrtrConfig, *, rotate: bool, longest_input: float = DEFAULT_LIFETIME
    ) -> None:
        """A reload's ``mrtr`` section: new bounds now; ``rotate``: its secret is new.

        The new key seals at once; the previous one verifies until the
        longest hold is over (``held_call_lifetime``, else the longest
        backend ``timeouts.input``), then is dropped.
        """
        if rotate:
            keys = keys_from_secret(config.state_secret)
            self.sealer = Sealer([*keys, *self.sealer.keys])
            if self._nursery is None:
                raise RuntimeError("HeldCalls.run is not running")
            grace = config.held_call_lifetime
            self._nursery.start_soon(self._retire, keys, longest_input if grace is None else grace)
        self.max_held = config.max_held_calls
        self.lifetime = config.held_call_lifetime

    async def _retire(self, keys: list[bytes], grace: float) -> None:
        """Drop the previous keys once no state sealed with them can be live."""
        await trio.sleep(grace)
        if self.sealer.keys[0] == keys[0]:
            self.sealer = Sealer(keys)

    def lifetime_for(self, backend: str) -> float:
        """Seconds a round of a call to ``backend`` waits for the retry (rule 3)."""
        return self.lifetime if self.lifetime is not None else self.input_bound(backend)

    def __len__(self) -> int:
        """How many calls the table holds now."""
        return len(self._held)

    def admit(self, call: HeldCall) -> bool:
        """Enter ``call`` in the table, if it is there already or there is room."""
        if call.pending_key in self._held:
            return True
        if len(self._held) >= self.max_held:
            return False
        self._held[call.pending_key] = call
        return True

    def release(self, call: HeldCall) -> None:
        """``call`` ended: nothing of it is left."""
        self._held.pop(call.pending_key, None)

    async def serve(
        self, request: ModernRequest, message: Request, params: dict[str, Any], run: Run
    ) -> bytes:
        """Answer one round of a holdable modern request.

        Raises:
            ModernProtocolError: -32602 for a retry whose state does not
                verify or names no call held here (rules 2, 4, 6).
        """
        state = params.get("requestState")
        if state is None:
            first_stream = request.emit
            held = HeldCall(self, request, message, params)
            self._start(held, run, message)
            return await held.serve_round(message.id, first_stream)
        self.metrics.count_retry()
        try:
            return await self._retry(request, message, params, run, state)
        except InvalidSealedToken as exc:
            self.metrics.count_state_rejection(STATE_REJECTIONS.get(exc.reason, "tampered"))
            raise
        except UnknownRequestState:
            self.metrics.count_state_rejection("unknown")
            raise

    async def _retry(
        self,
        request: ModernRequest,
        message: Request,
        params: dict[str, Any],
        run: Run,
        state: object,
    ) -> bytes:
        """A round that carries ``requestState``: verified, then served (rules 2, 4, 6)."""
        sealed = self.sealer.unseal(
            state,
            purpose=REQUEST_STATE,
            principal=request.principal,
            now=self.wall_clock(),
            method=message.method,
            params=params,
        )
        is_backends, own = restore(sealed.state)
        if is_backends:
            # A modern backend's state (router/modern_backend): nothing is
            # held here; the retry runs afresh with the backend's state.
            request.backend_state = (sealed.backend, own)
            held = HeldCall(self, request, message, params)
            self._start(held, run, message)
            return await held.serve_round(message.id, request.emit)
        pending_key, _, round_text = sealed.state.decode("ascii", "replace").partition(":")
        held_call = self._held.get(pending_key)
        if held_call is None or not round_text.isdigit():
            raise UnknownRequestState
        held_call.accept(params, int(round_text), sealed.backend)
        return await held_call.serve_round(message.id, request.emit)


def sealer_for(secret: str | Sequence[str]) -> Sealer:
    """The ``requestState`` sealer for a configured secret (or list); empty: a random key.

    The secret is hashed to a full-length key, so any configured string
    works and replicas sharing it verify each other's states; a list seals
    with the first and verifies with all (``signing.keys_from_secret``).
    """
    return Sealer(keys_from_secret(secret))


def holdable(method: str, params: object) -> bool:
    """Rule 1: whether a modern request may be held."""
    return method in MRTR_METHODS and isinstance(params, dict)
