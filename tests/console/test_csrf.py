"""Login cookies and CSRF tokens: signed, expiring, compared in constant time."""

from __future__ import annotations

from gateway.console.csrf import Signer, bearer_identity


def test_cookie_round_trip_and_expiry() -> None:
    signer = Signer(b"k" * 32)
    value = signer.login_cookie(now=1000.0, ttl=60.0)
    nonce = signer.cookie_identity(value, now=1030.0)
    assert nonce is not None
    assert nonce != signer.cookie_identity(signer.login_cookie(now=1000.0, ttl=60.0), 1030.0)
    assert signer.cookie_identity(value, now=1060.0) is None  # expired


def test_a_tampered_or_foreign_cookie_is_refused() -> None:
    signer = Signer(b"k" * 32)
    value = signer.login_cookie(now=0.0, ttl=3600.0)
    body, mac = value.split(".")
    longer = signer.login_cookie(now=0.0, ttl=7200.0).split(".")[0]
    assert signer.cookie_identity(f"{longer}.{mac}", 1.0) is None  # expiry moved
    assert signer.cookie_identity(f"{body[:-2]}AA.{mac}", 1.0) is None  # nonce changed
    assert Signer(b"j" * 32).cookie_identity(value, 1.0) is None
    assert signer.cookie_identity(signer.csrf_token("x"), 1.0) is None  # another purpose
    for junk in ("", "...", "abc", "1.2", f"x{body}.{mac}", f"{value}.", "é" + value):
        assert signer.cookie_identity(junk, 1.0) is None


def test_csrf_token_belongs_to_one_identity() -> None:
    signer = Signer(b"k" * 32)
    token = signer.csrf_token("nonce-a")
    assert signer.csrf_ok("nonce-a", token)
    assert not signer.csrf_ok("nonce-b", token)
    assert not signer.csrf_ok("nonce-a", "")
    assert not signer.csrf_ok("nonce-a", token[:-1] + ("0" if token[-1] != "0" else "1"))
    # A cookie's CSRF token is not its cookie: a page reading one learns nothing of the other.
    assert token not in signer.login_cookie(0.0, 10.0)


def test_random_keys_differ() -> None:
    assert Signer().csrf_token("x") != Signer().csrf_token("x")


def test_bearer_identity_does_not_contain_the_token() -> None:
    identity = bearer_identity(b"very-secret-admin-token")
    assert "very-secret" not in identity
    assert identity == bearer_identity(b"very-secret-admin-token")
