"""The life of a held call as one table: state x event -> new state + actions (sans-IO).

A held call (``router/stateless/held_calls``, rules there) is a 2026-07-28
``tools/call``, ``prompts/get`` or ``resources/read`` whose handshake-era
backend asks the host something mid-call; the gateway answers the host's
request with ``input_required`` and keeps the backend's call open until the
retry brings the answers (``mrtr``). Every way such a call can move is a
row of :data:`TRANSITIONS`; :class:`HeldCallMachine` looks rows up and
says what to do, and the trio driver only does it (waits, timers, cancel
scopes, bytes). No clock and no I/O here: the driver turns time into events
(``QUIET`` after a quiet gather window, ``EXPIRED`` at a round's deadline).

Rules of the table:

1. A round is open while a host request waits for the answer (the first
   request, or a retry). In ``CALLING`` it waits for news; a backend request
   (``ASKED``) moves it to ``GATHERING``, where further requests keep the
   round open (``RESTART_GATHER``) until one window passes without one
   (``QUIET``): then ``SEND_INPUT_REQUIRED`` and ``START_EXPIRY``.
2. ``AWAITING_RETRY``: no round is open; backend requests accumulate. A
   retry for this round (``RETRIED``) stops the expiry and opens a round:
   ``GATHERING`` at once when requests are still unanswered, else
   ``CALLING``. A retry in any other state is refused (single use, rule 6).
3. The call ending (``CALL_ENDED``) during a round answers the round with
   the call's result and releases the entry; between rounds it keeps the
   result for the retry (``ENDED_UNCOLLECTED``) until the round's deadline.
4. The host leaving mid-round (``HOST_LEFT``) cancels the call
   (``CANCELLING``); a round's deadline is the call's own (``START_EXPIRY``
   sets it on the call's cancel scope), so both end the call as
   ``CALL_EXPIRED``, which refuses what the backend still waits for with a
   timeout. A result kept for the retry is dropped at that deadline
   (``EXPIRED``).
5. A backend request is taken only while the call can still hand it to a
   round (``expects(ASKED)``); after the call ended it is refused.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from gateway.errors import GatewayError


class HeldState(enum.Enum):
    """Where a held call is."""

    CALLING = "calling"  # a round is open; the backend has asked nothing open
    GATHERING = "gathering"  # a round is open; requests are gathered for it
    AWAITING_RETRY = "awaiting_retry"  # input_required went out; no round is open
    CANCELLING = "cancelling"  # the call is being cancelled (host gone, or expired)
    ENDED_UNCOLLECTED = "ended_uncollected"  # ended between rounds: the retry gets its result
    RELEASED = "released"  # nothing of the call is left


class HeldEvent(enum.Enum):
    """What can happen to a held call."""

    ASKED = "asked"  # the backend sent the host a request
    QUIET = "quiet"  # a gather window passed with no new request
    RETRIED = "retried"  # a retry for the current round arrived (its state verified)
    RETRIED_PARTLY = "retried_partly"  # ... and left some requests unanswered
    CALL_ENDED = "call_ended"  # the backend call returned, failed, or the gateway stopped
    CALL_EXPIRED = "call_expired"  # the call's own deadline passed, or it was cancelled
    EXPIRED = "expired"  # the round's deadline passed after the call had ended
    HOST_LEFT = "host_left"  # the open round's host request went away


class HeldAction(enum.Enum):
    """What the driver does on a transition."""

    START_GATHER = "start_gather"  # open a gather window
    RESTART_GATHER = "restart_gather"  # a new request: the window starts again
    SEND_INPUT_REQUIRED = "send_input_required"  # answer the round: input_required
    START_EXPIRY = "start_expiry"  # the call's deadline: now + lifetime
    STOP_EXPIRY = "stop_expiry"  # a retry came: no deadline while the call runs
    SEND_RESULT = "send_result"  # answer the round with the call's result
    REFUSE_ASKS = "refuse_asks"  # the backend's open requests: the call ended
    REFUSE_ASKS_EXPIRED = "refuse_asks_expired"  # ... the client did not retry in time
    CANCEL_CALL = "cancel_call"  # cancel the backend call
    KEEP_UNTIL_DEADLINE = "keep_until_deadline"  # the result waits for the retry
    RELEASE = "release"  # the entry leaves the table
    REJECT_RETRY = "reject_retry"  # -32602: not a state this call issued now


S, E, A = HeldState, HeldEvent, HeldAction


@dataclass(frozen=True)
class Transition:
    """One row's outcome: the state after and the actions, in order."""

    state: HeldState
    actions: tuple[HeldAction, ...] = ()


T = Transition

#: Every transition of a held call (the rules above). A pair that is not
#: here cannot happen; feeding it is a defect (``UnexpectedEvent``).
TRANSITIONS: Final[dict[tuple[HeldState, HeldEvent], Transition]] = {
    # rule 1: a round is open
    (S.CALLING, E.ASKED): T(S.GATHERING, (A.START_GATHER,)),
    (S.CALLING, E.CALL_ENDED): T(S.RELEASED, (A.REFUSE_ASKS, A.SEND_RESULT, A.RELEASE)),
    (S.CALLING, E.HOST_LEFT): T(S.CANCELLING, (A.CANCEL_CALL,)),
    # A retry came as the deadline passed: the call was cancelled all the same.
    (S.CALLING, E.CALL_EXPIRED): T(S.RELEASED, (A.REFUSE_ASKS_EXPIRED, A.SEND_RESULT, A.RELEASE)),
    (S.CALLING, E.RETRIED): T(S.CALLING, (A.REJECT_RETRY,)),
    (S.CALLING, E.RETRIED_PARTLY): T(S.CALLING, (A.REJECT_RETRY,)),
    (S.GATHERING, E.ASKED): T(S.GATHERING, (A.RESTART_GATHER,)),
    (S.GATHERING, E.QUIET): T(S.AWAITING_RETRY, (A.SEND_INPUT_REQUIRED, A.START_EXPIRY)),
    (S.GATHERING, E.CALL_ENDED): T(S.RELEASED, (A.REFUSE_ASKS, A.SEND_RESULT, A.RELEASE)),
    (S.GATHERING, E.HOST_LEFT): T(S.CANCELLING, (A.CANCEL_CALL,)),
    (S.GATHERING, E.CALL_EXPIRED): T(S.RELEASED, (A.REFUSE_ASKS_EXPIRED, A.SEND_RESULT, A.RELEASE)),
    (S.GATHERING, E.RETRIED): T(S.GATHERING, (A.REJECT_RETRY,)),
    (S.GATHERING, E.RETRIED_PARTLY): T(S.GATHERING, (A.REJECT_RETRY,)),
    # rule 2: between rounds
    (S.AWAITING_RETRY, E.ASKED): T(S.AWAITING_RETRY),
    (S.AWAITING_RETRY, E.RETRIED): T(S.CALLING, (A.STOP_EXPIRY,)),
    (S.AWAITING_RETRY, E.RETRIED_PARTLY): T(S.GATHERING, (A.STOP_EXPIRY, A.START_GATHER)),
    (S.AWAITING_RETRY, E.HOST_LEFT): T(S.AWAITING_RETRY),  # the round was already answered
    # rule 3: the call ended between rounds
    (S.AWAITING_RETRY, E.CALL_ENDED): T(
        S.ENDED_UNCOLLECTED, (A.REFUSE_ASKS, A.KEEP_UNTIL_DEADLINE)
    ),
    (S.ENDED_UNCOLLECTED, E.RETRIED): T(S.RELEASED, (A.SEND_RESULT, A.RELEASE)),
    (S.ENDED_UNCOLLECTED, E.RETRIED_PARTLY): T(S.RELEASED, (A.SEND_RESULT, A.RELEASE)),
    (S.ENDED_UNCOLLECTED, E.EXPIRED): T(S.RELEASED, (A.RELEASE,)),
    (S.ENDED_UNCOLLECTED, E.HOST_LEFT): T(S.ENDED_UNCOLLECTED),
    # rule 4: the round's deadline (on the call's own cancel scope), the host gone
    (S.AWAITING_RETRY, E.CALL_EXPIRED): T(S.RELEASED, (A.REFUSE_ASKS_EXPIRED, A.RELEASE)),
    (S.CANCELLING, E.ASKED): T(S.CANCELLING),  # refused when the call's end comes
    (S.CANCELLING, E.CALL_EXPIRED): T(S.RELEASED, (A.REFUSE_ASKS_EXPIRED, A.RELEASE)),
    (S.CANCELLING, E.CALL_ENDED): T(S.RELEASED, (A.REFUSE_ASKS, A.RELEASE)),
    (S.CANCELLING, E.HOST_LEFT): T(S.CANCELLING),
    (S.CANCELLING, E.RETRIED): T(S.CANCELLING, (A.REJECT_RETRY,)),
    (S.CANCELLING, E.RETRIED_PARTLY): T(S.CANCELLING, (A.REJECT_RETRY,)),
    (S.RELEASED, E.HOST_LEFT): T(S.RELEASED),
    (S.RELEASED, E.RETRIED): T(S.RELEASED, (A.REJECT_RETRY,)),
    (S.RELEASED, E.RETRIED_PARTLY): T(S.RELEASED, (A.REJECT_RETRY,)),
}


class UnexpectedEvent(GatewayError):
    """A (state, event) pair the table has no row for: a defect in the driver."""


@dataclass
class HeldCallMachine:
    """One held call's state; ``feed`` moves it and returns the actions.

    Attributes:
        state: where the call is.
        round: the number of the last ``input_required`` round sent.
    """

    state: HeldState = HeldState.CALLING
    round: int = 0

    def expects(self, event: HeldEvent) -> bool:
        """Whether ``event`` is taken now (a row exists and does not refuse it)."""
        row = TRANSITIONS.get((self.state, event))
        return row is not None and HeldAction.REJECT_RETRY not in row.actions

    def retried(self, *, still_open: bool) -> tuple[HeldAction, ...]:
        """A retry for this round came; ``still_open``: requests it left unanswered (rule 2)."""
        return self.feed(HeldEvent.RETRIED_PARTLY if still_open else HeldEvent.RETRIED)

    def feed(self, event: HeldEvent) -> tuple[HeldAction, ...]:
        """Move by ``event``; the actions the driver performs, in order.

        Raises:
            UnexpectedEvent: the table has no row for the pair.
        """
        row = TRANSITIONS.get((self.state, event))
        if row is None:
            raise UnexpectedEvent(f"{event.value} in {self.state.value}")
        self.state = row.state
        if HeldAction.SEND_INPUT_REQUIRED in row.actions:
            self.round += 1
        return row.actions


__all__ = [
    "TRANSITIONS",
    "HeldAction",
    "HeldCallMachine",
    "HeldEvent",
    "HeldState",
    "Transition",
    "UnexpectedEvent",
]
