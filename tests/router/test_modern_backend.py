"""``router/modern_backend``: a modern backend's input_required, in virtual time.

A scripted legacy host and a scripted backend ``send``; the real peers are in
``tests/e2e/test_modern_backend.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import msgspec
import pytest
import trio
from trio.testing import MockClock

from gateway.errors import LocalProtocolError
from gateway.protocol import mcp
from gateway.protocol.sealed import REQUEST_STATE, Sealed
from gateway.protocol.stateless.envelope import Envelope
from gateway.protocol.stateless.error_codes import InvalidSealedToken, ModernProtocolError
from gateway.protocol.stateless.mrtr import MalformedInputRequired
from gateway.router.context import ModernRequest
from gateway.router.stateless import input_required as modern_backend
from gateway.router.stateless.held_calls import sealer_for
from gateway.router.stateless.input_required import MAX_ROUNDS, STATE_ONLY_BACKOFF, drive

ELICIT: Final = {"method": "elicitation/create", "params": {"message": "name?"}}
ROOTS: Final = {"method": "roots/list", "params": {}}


@dataclass
class Host:
    """A legacy host that answers every server-to-client request it gets."""

    capabilities: dict[str, Any]
    session_id: str = "host"
    protocol_version: str = "2025-11-25"
    asked: list[tuple[str, float]] = field(default_factory=list)

    def notify_nowait(self, message: bytes) -> None:
        """Unused here."""

    async def request(self, method: str, params: msgspec.Raw | None, emit: Any) -> msgspec.Raw:
        """Answer like a host that accepts everything."""
        self.asked.append((method, trio.current_time()))
        if method == "roots/list":
            return mcp.encode({"roots": [{"uri": "file:///r"}]})
        return mcp.encode({"action": "accept", "content": {"name": "Ada"}})


@dataclass
class Backend:
    """A backend whose answers to retries are scripted."""

    answers: list[dict[str, Any]]
    retries: list[dict[str, Any]] = field(default_factory=list)

    async def send(self, params: dict[str, Any]) -> msgspec.Raw:
        """The next scripted answer; the retry's params are kept."""
        self.retries.append(params)
        return mcp.encode(self.answers.pop(0))


def asking(*entries: dict[str, Any], state: str | None = "s") -> dict[str, Any]:
    """An input_required result asking ``entries`` under keys a, b, ..."""
    out: dict[str, Any] = {"resultType": "input_required"}
    if entries:
        out["inputRequests"] = {chr(97 + i): e for i, e in enumerate(entries)}
    if state is not None:
        out["requestState"] = state
    return out


DONE: Final = {"resultType": "complete", "content": [{"type": "text", "text": "ok"}]}


async def run_drive(host: Host, backend: Backend, first: dict[str, Any]) -> dict[str, Any]:
    """Drive ``first`` to the end; the final result body."""
    result = await drive(
        host,
        None,
        backend="b",
        method="tools/call",
        params={"name": "t", "arguments": {}},
        body=first,
        send=backend.send,
    )
    body = mcp.decode_object(result)
    assert body is not None
    return body


async def test_the_answers_become_input_responses_and_the_state_is_echoed_exactly(
    autojump_clock: MockClock,
) -> None:
    """Issue 14 step 4: one server-to-client request per entry, then one retry."""
    host = Host({"elicitation": {}, "roots": {}})
    backend = Backend([DONE])
    body = await run_drive(host, backend, asking(ELICIT, ROOTS, state="é\x00x"))
    assert body == DONE
    assert [m for m, _ in host.asked] == ["elicitation/create", "roots/list"]
    [retry] = backend.retries
    assert retry["requestState"] == "é\x00x"
    assert retry["inputResponses"] == {
        "a": {"action": "accept", "content": {"name": "Ada"}},
        "b": {"roots": [{"uri": "file:///r"}]},
    }
    assert (retry["name"], retry["arguments"]) == ("t", {})


async def test_a_state_only_round_waits_the_backoff_and_sends_no_request_to_the_host(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice: nothing to ask is retried after STATE_ONLY_BACKOFF, not at once."""
    host = Host({})
    backend = Backend([asking(state="s2"), DONE])
    start = trio.current_time()
    await run_drive(host, backend, asking(state="s1"))
    assert trio.current_time() - start == 2 * STATE_ONLY_BACKOFF
    assert host.asked == []
    assert [r["requestState"] for r in backend.retries] == ["s1", "s2"]
    assert [r["inputResponses"] for r in backend.retries] == [{}, {}]


async def test_a_round_without_a_state_sends_none(autojump_clock: MockClock) -> None:
    """S/basic/patterns/mrtr.mdx: requestState is echoed only when there was one."""
    backend = Backend([DONE])
    await run_drive(Host({"elicitation": {}}), backend, asking(ELICIT, state=None))
    assert "requestState" not in backend.retries[0]


async def test_the_rounds_are_bounded(autojump_clock: MockClock) -> None:
    """Issue 14 step 4: at most MAX_ROUNDS retries, then -32603."""
    backend = Backend([asking(ELICIT)] * MAX_ROUNDS)
    with pytest.raises(LocalProtocolError) as info:
        await run_drive(Host({"elicitation": {}}), backend, asking(ELICIT))
    assert info.value.code == -32603
    assert f"after {MAX_ROUNDS} rounds" in info.value.message
    assert len(backend.retries) == MAX_ROUNDS


@pytest.mark.parametrize(
    ("declared", "entry", "named"),
    [
        ({}, ELICIT, "elicitation.form"),
        (
            {"elicitation": {}},
            {"method": "elicitation/create", "params": {"mode": "url"}},
            "elicitation.url",
        ),
        ({"elicitation": {}}, {"method": "sampling/createMessage", "params": {}}, "sampling"),
        ({"sampling": {}}, ROOTS, "roots"),
    ],
)
async def test_a_capability_the_host_did_not_declare_fails_the_call_naming_it(
    autojump_clock: MockClock, declared: dict[str, Any], entry: dict[str, Any], named: str
) -> None:
    """Issue 14 step 4: never ask a legacy host for what it did not declare."""
    host = Host(declared)
    with pytest.raises(LocalProtocolError) as info:
        await run_drive(host, Backend([]), asking(entry))
    assert info.value.code == -32603
    assert f"needs the capability {named};" in info.value.message
    assert host.asked == []


async def test_a_malformed_input_required_is_the_backends_fault(autojump_clock: MockClock) -> None:
    """S/basic/patterns/mrtr.mdx: entries carry no id; -32603 to the host."""
    bad = {"resultType": "input_required", "inputRequests": {"a": {**ELICIT, "id": 1}}}
    with pytest.raises(MalformedInputRequired):
        await run_drive(Host({"elicitation": {}}), Backend([]), bad)


def _request(params: dict[str, Any]) -> ModernRequest:
    envelope = Envelope(protocol_version="2026-07-28", client_capabilities={"elicitation": {}})
    request = ModernRequest(envelope)
    request.held = type("Held", (), {"method": "tools/call", "params": params})()  # type: ignore[assignment] # only method and params are read
    return request


async def test_a_sealed_state_carries_the_backends_bytes_and_names_the_backend(
    autojump_clock: MockClock,
) -> None:
    """Issue 14 step 4: the host's state is the gateway's; unsealed, it is the backend's."""
    sealer = sealer_for("secret")
    params = {"name": "b__t", "arguments": {"x": 1}}
    out = modern_backend.seal_for_host(
        sealer,
        now=trio.current_time(),
        lifetime=60,
        backend="b",
        request=_request(params),
        method="tools/call",
        body={**asking(ELICIT, state="own-ü"), "ttlMs": 0, "cacheScope": "private"},
    )
    assert out["inputRequests"] == {"a": ELICIT}
    assert "ttlMs" not in out and "cacheScope" not in out
    sealed = sealer.unseal(
        out["requestState"],
        purpose=REQUEST_STATE,
        principal=None,
        now=trio.current_time(),
        method="tools/call",
        params=params,
    )
    assert sealed.backend == "b"
    assert modern_backend.restore(sealed.state) == (True, "own-ü")


async def test_a_backends_state_is_sealed_for_the_principal_that_got_it() -> None:
    """Issue 16 item 5 with step 4: another credential's retry does not verify (-32602)."""
    sealer = sealer_for("secret")
    params = {"name": "b__t", "arguments": {"x": 1}}
    request = _request(params)
    request.principal = "token:alice"
    out = modern_backend.seal_for_host(
        sealer,
        now=1000.0,
        lifetime=60,
        backend="b",
        request=request,
        method="tools/call",
        body=asking(ELICIT, state="own"),
    )

    def unseal(principal: str | None) -> Sealed:
        return sealer.unseal(
            out["requestState"],
            purpose=REQUEST_STATE,
            principal=principal,
            now=1001.0,
            method="tools/call",
            params=params,
        )

    assert modern_backend.restore(unseal("token:alice").state) == (True, "own")
    for other in (None, "token:bob"):
        with pytest.raises(InvalidSealedToken):
            unseal(other)


async def test_a_restored_state_goes_only_to_the_backend_it_was_sealed_for() -> None:
    """Gateway choice: a state sealed for one backend is -32602 at another."""
    request = _request({})
    request.backend_state = ("b", "own")
    params: dict[str, Any] = {"requestState": "gateway-token"}
    modern_backend.for_backend(request, "b", params)
    assert params["requestState"] == "own"
    with pytest.raises(ModernProtocolError) as info:
        modern_backend.for_backend(request, "c", {"requestState": "gateway-token"})
    assert info.value.code == -32602
    request.backend_state = ("b", None)
    params = {"requestState": "gateway-token"}
    modern_backend.for_backend(request, "b", params)
    assert "requestState" not in params


async def test_a_host_that_does_not_answer_within_timeouts_input_fails_the_call_with_32001(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice (E15): each question has the backend's ``timeouts.input``."""

    class Silent(Host):
        async def request(self, method: str, params: msgspec.Raw | None, emit: Any) -> msgspec.Raw:
            await trio.sleep_forever()
            raise AssertionError

    backend = Backend([DONE])
    started = trio.current_time()
    with pytest.raises(LocalProtocolError) as caught:
        await drive(
            Silent({"elicitation": {}}),
            None,
            backend="b",
            method="tools/call",
            params={"name": "t", "arguments": {}},
            body=asking(ELICIT),
            send=backend.send,
            input_timeout=90,
        )
    assert caught.value.code == -32001
    assert trio.current_time() - started == 90
    assert backend.retries == []
