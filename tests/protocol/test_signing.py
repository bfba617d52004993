"""Specification tests for ``gateway.protocol.signing`` (one codec for every signed token).

Gateway choice: cursors, sealed ``requestState`` and the console's cookie and
CSRF token are purpose-bound HMAC tokens under a key ring; everything not
minted by us for this purpose, party and moment is refused with a typed error.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.protocol.signing import (
    TAG_BYTES,
    BadSignature,
    InvalidToken,
    Keyring,
    TokenExpired,
    TokenMalformed,
    WeakKey,
    key_from_secret,
    keys_from_secret,
)

K1 = b"1" * 32
K2 = b"2" * 32
RING = Keyring([K1])
PURPOSES = st.sampled_from(["cursor", "requestState", "console-login", "console-csrf", ""])
PARTIES = st.none() | st.text(max_size=20)
BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


@settings(max_examples=300, deadline=None)
@given(
    purpose=PURPOSES,
    body=st.binary(max_size=200),
    party=PARTIES,
    expires_at=st.none() | st.floats(-1e9, 1e9),
)
def test_any_token_round_trips_to_its_body(
    purpose: str, body: bytes, party: str | None, expires_at: float | None
) -> None:
    """Property: verify(sign(body)) == body for every purpose, party and live expiry."""
    token = RING.sign(purpose, body, bound_to=party, expires_at=expires_at)
    now = None if expires_at is None else expires_at - 1
    assert RING.verify(purpose, token, bound_to=party, now=now) == body
    assert token.isascii()
    assert set(token) <= set(BASE64URL + ".")


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=64), data=st.data())
def test_any_byte_flip_is_refused(body: bytes, data: st.DataObject) -> None:
    """Property: changing any byte of a token's decoded parts, or any character, never verifies."""
    token = RING.sign("cursor", body, expires_at=100.0)
    pos = data.draw(st.integers(0, len(token) - 1))
    char = data.draw(st.characters(codec="ascii"))
    forged = token[:pos] + char + token[pos + 1 :]
    if forged != token:
        with pytest.raises(InvalidToken):
            RING.verify("cursor", forged, now=0.0)


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=64), cut=st.integers(1, 200))
def test_any_truncation_or_extension_is_refused(body: bytes, cut: int) -> None:
    """Property: a proper prefix or a longer token never verifies."""
    token = RING.sign("cursor", body)
    with pytest.raises(InvalidToken):
        RING.verify("cursor", token[: max(0, len(token) - cut)])
    with pytest.raises(InvalidToken):
        RING.verify("cursor", token + "A" * (cut % 5 + 1))


@settings(max_examples=200, deadline=None)
@given(one=PURPOSES, other=PURPOSES, body=st.binary(max_size=64))
def test_a_token_of_one_purpose_is_refused_for_another(one: str, other: str, body: bytes) -> None:
    """Property: the purpose is in the MAC; a cursor never verifies as a requestState."""
    if one == other:
        return
    with pytest.raises(BadSignature):
        RING.verify(other, RING.sign(one, body))


@settings(max_examples=200, deadline=None)
@given(one=PARTIES, other=PARTIES, body=st.binary(max_size=64))
def test_a_token_bound_to_one_party_is_refused_for_another(
    one: str | None, other: str | None, body: bytes
) -> None:
    """Property: ``bound_to`` is in the MAC; None (unbound) and "" are different parties."""
    if one == other:
        return
    with pytest.raises(BadSignature):
        RING.verify("cursor", RING.sign("cursor", body, bound_to=one), bound_to=other)


@settings(max_examples=100, deadline=None)
@given(body=st.binary(max_size=64), old=st.binary(min_size=16), new=st.binary(min_size=16))
def test_the_old_key_verifies_after_rotation(body: bytes, old: bytes, new: bytes) -> None:
    """Property: sign with the first key, verify with any; dropping the old key ends it."""
    if old == new:
        return
    token = Keyring([old]).sign("requestState", body)
    rotated = Keyring([new, old])
    assert rotated.verify("requestState", token) == body
    assert Keyring([new]).verify("requestState", rotated.sign("requestState", body)) == body
    with pytest.raises(BadSignature):
        Keyring([new]).verify("requestState", token)


def test_a_token_is_dead_from_its_expiry_on() -> None:
    """Gateway choice: alive while ``now < expires_at``; without a clock, refused."""
    token = RING.sign("console-login", b"n", expires_at=100.0)
    assert RING.verify("console-login", token, now=99.999) == b"n"
    for now in (100.0, 1e12, None):
        with pytest.raises(TokenExpired):
            RING.verify("console-login", token, now=now)


def test_a_token_without_expiry_never_expires() -> None:
    """Gateway choice: a cursor lives as long as its key."""
    assert RING.verify("cursor", RING.sign("cursor", b"x"), now=1e300) == b"x"


@pytest.mark.parametrize(
    "junk", ["", ".", "a", "a.", ".a", "a.b.c", "é.abc", "AA.AA", "AA.====", "AB." + "A" * 32]
)
def test_junk_is_malformed(junk: str) -> None:
    """Gateway choice: what is not two canonical base64url parts is ``TokenMalformed``."""
    with pytest.raises(TokenMalformed):
        RING.verify("cursor", junk)


def test_a_non_canonical_spelling_is_refused() -> None:
    """Gateway choice: one spelling per token (a padding bit set is another spelling)."""
    token = RING.sign("cursor", b"a")  # 2 bytes: 3 characters, the last with 2 padding bits
    body, tag = token.split(".")
    twin = body[:-1] + BASE64URL[BASE64URL.index(body[-1]) ^ 1]
    with pytest.raises(TokenMalformed):
        RING.verify("cursor", f"{twin}.{tag}")
    assert len(tag) * 6 == TAG_BYTES * 8  # every tag character counts


def test_short_or_missing_keys_are_refused() -> None:
    """Gateway choice: a 16-byte minimum keeps the HMAC meaningful; WeakKey is a ValueError."""
    for keys in ([], [b"short"], [K1, b""]):
        with pytest.raises(WeakKey):
            Keyring(keys)
    assert issubclass(WeakKey, ValueError)


def test_a_configured_secret_gives_one_key_and_an_empty_one_a_random_key() -> None:
    """Gateway choice: replicas sharing a secret share a key; no secret, no sharing."""
    assert key_from_secret("s") == key_from_secret(b"s")
    assert len(key_from_secret("s")) == 32
    assert key_from_secret("") != key_from_secret("")


def test_a_list_of_secrets_is_a_ring_newest_first() -> None:
    """Gateway choice: a list signs with its first secret; one string is a ring of one."""
    assert keys_from_secret(["new", "old"]) == [key_from_secret("new"), key_from_secret("old")]
    assert keys_from_secret("one") == [key_from_secret("one")]
    assert len(keys_from_secret([])) == 1  # as an empty string: a random key
