"""Specification tests for ``gateway.protocol.sealed`` (sans-IO).

2026-07-28 ``basic/patterns/mrtr.mdx``: requestState is attacker-controlled;
it must be integrity-protected, bound to principal, expiry and request, and
rejected (-32602, as the SDK answers) on any failure.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.errors import INVALID_PARAMS, http_status_for
from gateway.protocol.sealed import REQUEST_STATE, Sealer, request_digest
from gateway.protocol.stateless.error_codes import InvalidSealedToken

K1 = b"k" * 32
K2 = b"q" * 32
PARAMS: dict[str, Any] = {"name": "weather", "arguments": {"city": "Paris"}, "_meta": {"a": 1}}


def seal(sealer: Sealer, **over: Any) -> str:
    args: dict[str, Any] = {
        "purpose": REQUEST_STATE,
        "backend": "b1",
        "principal": "alice",
        "now": 100.0,
        "ttl": 60.0,
        "method": "tools/call",
        "params": PARAMS,
        "state": b"backend-state",
    }
    args.update(over)
    return sealer.seal(**args)


def unseal(sealer: Sealer, token: object, **over: Any) -> Any:
    args: dict[str, Any] = {
        "purpose": REQUEST_STATE,
        "principal": "alice",
        "now": 120.0,
        "method": "tools/call",
        "params": PARAMS,
    }
    args.update(over)
    return sealer.unseal(token, **args)


def test_a_sealed_token_unseals_to_its_backend_and_state() -> None:
    """Gateway choice: the token names the backend and carries its state byte-exact."""
    s = Sealer([K1])
    out = unseal(s, seal(s))
    assert (out.backend, out.state, out.principal) == ("b1", b"backend-state", "alice")


def test_the_retry_may_change_meta_input_responses_and_request_state() -> None:
    """Spec: the retry carries the original params plus inputResponses and requestState."""
    s = Sealer([K1])
    token = seal(s)
    retry = {**PARAMS, "_meta": {"b": 2}, "inputResponses": {"k": {}}, "requestState": token}
    assert unseal(s, token, params=retry).backend == "b1"
    assert request_digest({"a": 1, "b": 2}) == request_digest({"b": 2, "a": 1})


@pytest.mark.parametrize(
    "over",
    [
        {"now": 160.0},
        {"now": 1e9},
        {"principal": "mallory"},
        {"principal": None},
        {"method": "prompts/get"},
        {"params": {**PARAMS, "arguments": {"city": "Lyon"}}},
        {"purpose": "cursor"},
    ],
)
def test_expired_other_principal_other_request_or_purpose_never_verify(over: Any) -> None:
    """Spec: principal, short expiry and request identity are bound; failure is -32602."""
    s = Sealer([K1])
    with pytest.raises(InvalidSealedToken) as info:
        unseal(s, seal(s), **over)
    assert info.value.code == INVALID_PARAMS
    assert http_status_for(info.value.code) == 400
    assert info.value.message == f"Invalid or expired {over.get('purpose', REQUEST_STATE)}"


def test_keys_rotate_seal_with_first_verify_with_any() -> None:
    """Gateway choice: a ring of keys, so replicas roll secrets without a flag day."""
    old, ring, new_only = Sealer([K1]), Sealer([K2, K1]), Sealer([K2])
    assert unseal(ring, seal(old)).backend == "b1"
    assert unseal(new_only, seal(ring)).backend == "b1"
    with pytest.raises(InvalidSealedToken):
        unseal(new_only, seal(old))


@pytest.mark.parametrize("junk", [None, 7, "", "abc", "é", "a" * 300000, "====", "AAAA.BBBB"])
def test_junk_is_rejected_with_the_one_error(junk: object) -> None:
    """Spec: anything not minted by us is rejected, never crashes."""
    with pytest.raises(InvalidSealedToken):
        unseal(Sealer([K1]), junk)


def test_short_keys_are_refused() -> None:
    """Gateway choice: a 16-byte minimum keeps the HMAC meaningful."""
    with pytest.raises(ValueError, match="key"):
        Sealer([])
    with pytest.raises(ValueError, match="key"):
        Sealer([b"short"])


SEALER = Sealer([K1])
TOKEN = seal(SEALER)


@given(st.integers(min_value=0, max_value=len(TOKEN) - 1), st.characters(codec="ascii"))
def test_any_single_character_change_never_verifies(pos: int, char: str) -> None:
    """Property: a changed character is a different token, and it never verifies."""
    forged = TOKEN[:pos] + char + TOKEN[pos + 1 :]
    if forged == TOKEN:
        return
    with pytest.raises(InvalidSealedToken):
        unseal(SEALER, forged)


@given(st.integers(min_value=0, max_value=len(TOKEN) - 1))
def test_any_truncation_never_verifies(cut: int) -> None:
    """Property: every proper prefix is rejected."""
    with pytest.raises(InvalidSealedToken):
        unseal(SEALER, TOKEN[:cut])


@given(
    st.text(
        alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=", min_size=1
    )
)
def test_any_extension_never_verifies(tail: str) -> None:
    """Property: appending anything, base64url alphabet included, is rejected."""
    with pytest.raises(InvalidSealedToken):
        unseal(SEALER, TOKEN + tail)


@given(st.binary(max_size=64), st.text(max_size=10) | st.none(), st.floats(0, 1e6))
def test_any_state_round_trips_and_expires_exactly(
    state: bytes, who: str | None, ttl: float
) -> None:
    """Property: state survives byte-exact; at ``now == expires_at`` it is dead."""
    s = Sealer([K1])
    token = seal(s, state=state, principal=who, now=0.0, ttl=ttl)
    if ttl > 0:
        assert unseal(s, token, principal=who, now=0.0).state == state
    with pytest.raises(InvalidSealedToken):
        unseal(s, token, principal=who, now=ttl)
