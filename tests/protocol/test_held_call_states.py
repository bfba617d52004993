"""The held call's transition table, tested as data: events in, actions out (no clock, no trio)."""

from __future__ import annotations

import pytest

from gateway.protocol.stateless.held_call_states import (
    TRANSITIONS,
    HeldAction,
    HeldCallMachine,
    HeldEvent,
    HeldState,
    UnexpectedEvent,
)

A, E, S = HeldAction, HeldEvent, HeldState
# A round that asked once and answered input_required.
ASKED_ONCE = [(E.ASKED, (A.START_GATHER,)), (E.QUIET, (A.SEND_INPUT_REQUIRED, A.START_EXPIRY))]


def play(
    steps: list[tuple[HeldEvent, tuple[HeldAction, ...]]], start: HeldState = S.CALLING
) -> HeldCallMachine:
    """Feed each event and check the actions it gives (a playbook); the machine after."""
    machine = HeldCallMachine(state=start)
    for event, expected in steps:
        assert (event, machine.feed(event)) == (event, expected)
    return machine


def test_a_backend_request_is_gathered_then_asked_with_a_deadline() -> None:
    """spec: mrtr.mdx (rule 7): requests gathered into one input_required round."""
    machine = play(
        [
            (E.ASKED, (A.START_GATHER,)),
            (E.ASKED, (A.RESTART_GATHER,)),
            (E.QUIET, (A.SEND_INPUT_REQUIRED, A.START_EXPIRY)),
        ]
    )
    assert machine.state is S.AWAITING_RETRY and machine.round == 1


def test_a_retry_answering_everything_resumes_the_call_and_its_end_answers_the_round() -> None:
    """spec: mrtr.mdx (rules 5, 6): the retry carries the answers; the result ends the call."""
    machine = play(
        [(E.ASKED, (A.START_GATHER,)), (E.QUIET, (A.SEND_INPUT_REQUIRED, A.START_EXPIRY))]
    )
    assert machine.retried(still_open=False) == (A.STOP_EXPIRY,)
    assert machine.state is S.CALLING
    assert machine.feed(E.CALL_ENDED) == (A.REFUSE_ASKS, A.SEND_RESULT, A.RELEASE)
    assert machine.state is S.RELEASED


def test_a_retry_missing_answers_asks_again_for_the_rest() -> None:
    """spec: mrtr.mdx §Error Handling: a retry missing some answers gets another round."""
    machine = play(
        [(E.ASKED, (A.START_GATHER,)), (E.QUIET, (A.SEND_INPUT_REQUIRED, A.START_EXPIRY))]
    )
    assert machine.retried(still_open=True) == (A.STOP_EXPIRY, A.START_GATHER)
    assert machine.feed(E.QUIET) == (A.SEND_INPUT_REQUIRED, A.START_EXPIRY)
    assert machine.round == 2


def test_a_state_is_single_use_and_a_retry_during_a_round_is_refused() -> None:
    """gateway choice (rule 6): one retry per round; another is -32602."""
    machine = play(
        [(E.ASKED, (A.START_GATHER,)), (E.QUIET, (A.SEND_INPUT_REQUIRED, A.START_EXPIRY))]
    )
    assert machine.expects(E.RETRIED)
    machine.retried(still_open=False)
    assert not machine.expects(E.RETRIED)
    assert machine.feed(E.RETRIED) == (A.REJECT_RETRY,)
    assert machine.state is S.CALLING


def test_no_retry_before_the_deadline_cancels_the_call_and_times_out_its_requests() -> None:
    """gateway choice (rule 5): expiry answers the backend -32001 and leaves nothing."""
    play(
        [
            (E.ASKED, (A.START_GATHER,)),
            (E.QUIET, (A.SEND_INPUT_REQUIRED, A.START_EXPIRY)),
            (E.CALL_EXPIRED, (A.REFUSE_ASKS_EXPIRED, A.RELEASE)),
        ]
    )


def test_the_host_leaving_mid_round_cancels_the_call() -> None:
    """gateway choice: a host gone mid-round takes its call with it."""
    machine = play(
        [
            (E.ASKED, (A.START_GATHER,)),
            (E.HOST_LEFT, (A.CANCEL_CALL,)),
            (E.CALL_EXPIRED, (A.REFUSE_ASKS_EXPIRED, A.RELEASE)),
        ]
    )
    assert machine.state is S.RELEASED


def test_the_host_leaving_after_input_required_went_out_changes_nothing() -> None:
    """gateway choice: the round was answered; the call waits for the retry."""
    play(
        [
            (E.ASKED, (A.START_GATHER,)),
            (E.QUIET, (A.SEND_INPUT_REQUIRED, A.START_EXPIRY)),
            (E.HOST_LEFT, ()),
        ]
    )


def test_a_call_that_ends_between_rounds_keeps_its_result_for_the_retry() -> None:
    """gateway choice (rule 3): the retry collects the result; no retry: dropped at the deadline."""
    ended = play(
        [
            (E.ASKED, (A.START_GATHER,)),
            (E.QUIET, (A.SEND_INPUT_REQUIRED, A.START_EXPIRY)),
            (E.CALL_ENDED, (A.REFUSE_ASKS, A.KEEP_UNTIL_DEADLINE)),
        ]
    )
    assert ended.state is S.ENDED_UNCOLLECTED and not ended.expects(E.ASKED)
    assert ended.retried(still_open=False) == (A.SEND_RESULT, A.RELEASE)
    play([(E.EXPIRED, (A.RELEASE,))], start=S.ENDED_UNCOLLECTED)


def test_requests_between_rounds_wait_for_the_next_round() -> None:
    """spec: mrtr.mdx: a request the backend sends meanwhile is asked in the next round."""
    machine = play(
        [
            (E.ASKED, (A.START_GATHER,)),
            (E.QUIET, (A.SEND_INPUT_REQUIRED, A.START_EXPIRY)),
            (E.ASKED, ()),
        ]
    )
    assert machine.state is S.AWAITING_RETRY


def test_a_call_that_ended_takes_no_more_requests() -> None:
    """gateway choice (rule 5): after its end the call cannot take input."""
    for state in (S.ENDED_UNCOLLECTED, S.RELEASED):
        assert not HeldCallMachine(state=state).expects(E.ASKED)
        with pytest.raises(UnexpectedEvent):
            HeldCallMachine(state=state).feed(E.ASKED)


@pytest.mark.parametrize("state", list(HeldState))
def test_every_state_has_a_row_for_the_host_leaving(state: HeldState) -> None:
    """gateway choice: a round's cancellation is taken in any state (the driver feeds it blind)."""
    assert (state, E.HOST_LEFT) in TRANSITIONS


@pytest.mark.parametrize("state", [S.CALLING, S.GATHERING, S.AWAITING_RETRY, S.CANCELLING])
def test_every_state_with_a_running_call_has_rows_for_its_end(state: HeldState) -> None:
    """gateway choice: however the call ends, the table says what follows (no defect at the end)."""
    assert (state, E.CALL_ENDED) in TRANSITIONS
    assert (state, E.CALL_EXPIRED) in TRANSITIONS


def test_only_a_final_row_releases_the_entry() -> None:
    """gateway choice (rule 4): RELEASE leads to RELEASED, and every way to RELEASED releases."""
    for (state, _event), row in TRANSITIONS.items():
        releases = A.RELEASE in row.actions
        assert releases == (row.state is S.RELEASED and state is not S.RELEASED)
