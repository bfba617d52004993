"""``consent.bind_login``'s ID token check, table-driven (gateway/consent/login_binding.py)."""

from __future__ import annotations

import base64
import json
from typing import Any, Final

import pytest

from gateway.consent.login_binding import identity_of, principal_key
from gateway.consent.records import LoginRefused, Refusal
from gateway.identity.principal import Principal

ISSUER: Final = "https://idp.test"
NOW: Final = 1_800_000_000.0
GOOD: Final = {"iss": ISSUER, "sub": "alice", "aud": "gw", "exp": NOW + 60, "nonce": "n"}


def _answer(claims: dict[str, Any] | None, *, id_token: str | None = None) -> bytes:
    if id_token is None and claims is not None:
        part = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
        id_token = f"e30.{part}.sig"
    return json.dumps(
        {"access_token": "a", **({"id_token": id_token} if id_token else {})}
    ).encode()


def _check(body: bytes) -> str:
    return identity_of(body, issuer=ISSUER, client_id="gw", nonce="n", now=NOW)


def test_an_id_token_for_this_login_proves_its_principal_key() -> None:
    """gateway choice: the key is the one the authenticator gives that JWT caller."""
    assert _check(_answer(GOOD)) == Principal(kind="jwt", subject="alice", issuer=ISSUER).key
    assert principal_key(ISSUER, "alice") == f"jwt:{ISSUER}|alice"
    several = {**GOOD, "aud": ["other", "gw"], "azp": "gw"}
    assert _check(_answer(several)) == f"jwt:{ISSUER}|alice"


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b"not json", "the token response is not JSON"),
        (_answer(None), "the login returned no ID token"),
        (_answer(None, id_token="only.two"), "the ID token is not a JWT"),
        (_answer(None, id_token="a.!!!.c"), "the ID token is unreadable"),
        (_answer({**GOOD, "iss": "https://evil.test"}), "the ID token is from another issuer"),
        (_answer({**GOOD, "aud": "other"}), "the ID token is for another client"),
        (_answer({**GOOD, "aud": ["other", "gw"]}), "the ID token is for another client"),
        (_answer({**GOOD, "exp": NOW - 61}), "the ID token has expired"),
        (_answer({**GOOD, "nonce": "m"}), "the ID token is for another login"),
        (_answer({k: v for k, v in GOOD.items() if k != "nonce"}), "for another login"),
        (_answer({**GOOD, "sub": ""}), "the ID token names no subject"),
    ],
)
def test_an_id_token_that_is_not_this_logins_is_refused_naming_why(
    body: bytes, detail: str
) -> None:
    """spec: OpenID Connect Core 3.1.3.7 (iss, aud, azp, exp, nonce); gateway choice: one
    typed refusal, never the token's values in its message."""
    with pytest.raises(LoginRefused) as caught:
        _check(body)
    assert caught.value.reason is Refusal.EXCHANGE_FAILED
    assert detail in str(caught.value)
    assert "evil" not in str(caught.value)
