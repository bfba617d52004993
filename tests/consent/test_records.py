"""The consent flow's records: single use, expiry, bound to the person (consent/records.py)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.consent.records import (
    ConsentLink,
    LoginRefused,
    PendingLogin,
    Refusal,
    StoredTokens,
    decode_link,
    decode_login,
    open_tokens,
    parse_token_key,
    seal_tokens,
    token_key,
)
from gateway.consent.vault import Vault, VaultError, generate_key

VAULT = Vault.from_text(generate_key())
TOKENS = StoredTokens(
    access_token="at-alice", refresh_token="rt", expires_at=100.0, refresh_at=90.0
)


def test_tokens_sealed_for_one_person_do_not_open_as_anothers() -> None:
    """Rule 3: the principal and backend are the sealed record's associated data."""
    blob = seal_tokens(VAULT, "alice", "tracker", TOKENS)
    assert b"at-alice" not in blob
    assert open_tokens(VAULT, "alice", "tracker", blob) == TOKENS
    with pytest.raises(VaultError):
        open_tokens(VAULT, "bob", "tracker", blob)
    with pytest.raises(VaultError):
        open_tokens(VAULT, "alice", "mail", blob)


def test_a_missing_link_or_login_is_unknown_and_a_late_one_expired() -> None:
    """Rule 2: taken once (a second take finds nothing), refused past its expiry."""
    link = ConsentLink(principal="p", backend="b", elicitation_id="e", expires_at=10.0)
    assert decode_link(msgspec.json.encode(link), 9.0) == link
    with pytest.raises(LoginRefused) as used:
        decode_link(None, 9.0)
    assert used.value.reason is Refusal.UNKNOWN
    with pytest.raises(LoginRefused) as late:
        decode_link(msgspec.json.encode(link), 10.0)
    assert late.value.reason is Refusal.EXPIRED
    login = PendingLogin(
        principal="p", backend="b", elicitation_id="e", verifier="v", redirect_uri="u", expires_at=5
    )
    assert decode_login(msgspec.json.encode(login), 1.0) == login
    with pytest.raises(LoginRefused) as bad:
        decode_login(b"{not json", 1.0)
    assert bad.value.reason is Refusal.MALFORMED


def test_the_repr_of_tokens_shows_no_token() -> None:
    """Rule 5: a log line of the record carries no token."""
    assert "at-alice" not in repr(TOKENS) and "rt" not in repr(TOKENS).replace("refresh", "")


@given(principal=st.text(max_size=30), backend=st.text(max_size=30))
def test_token_keys_round_trip_whatever_the_names_hold(principal: str, backend: str) -> None:
    """Rule 4: a principal key with colons cannot name another person's record."""
    assert parse_token_key(token_key(principal, backend)) == (principal, backend)
    assert token_key(principal + ":x", backend) != token_key(principal, "x:" + backend)
