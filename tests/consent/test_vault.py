"""The token vault: sealed, bound to its record, rotated (gateway/consent/vault.py)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.consent.vault import Vault, VaultError, generate_key, record_binding

ALICE = record_binding("alice", "tracker")


def vault(*lines: str) -> Vault:
    """A vault from key file lines."""
    return Vault.from_text("\n".join(lines))


def test_a_sealed_token_opens_for_its_record_only() -> None:
    """Rule 2: a token copied onto another person's record does not open."""
    keys = vault(generate_key())
    blob = keys.seal(b"refresh-token-of-alice", ALICE)
    assert keys.open(blob, ALICE) == b"refresh-token-of-alice"
    with pytest.raises(VaultError, match="another record"):
        keys.open(blob, record_binding("bob", "tracker"))
    with pytest.raises(VaultError):
        keys.open(blob, record_binding("alice", "mail"))


def test_the_plaintext_is_not_in_the_blob_and_each_seal_differs() -> None:
    """Rule 1: a fresh nonce per seal."""
    keys = vault(generate_key())
    first, second = keys.seal(b"token", ALICE), keys.seal(b"token", ALICE)
    assert first != second and b"token" not in first


def test_rotation_opens_old_blobs_and_seals_with_the_newest() -> None:
    """Rule 3: the first key seals, every key opens; old blobs ask to be resealed."""
    old, new = generate_key(), generate_key()
    before = vault(old)
    blob = before.seal(b"t", ALICE)
    after = vault("# rotated 2026-12", new, old)
    assert after.open(blob, ALICE) == b"t"
    assert after.needs_reseal(blob)
    assert not after.needs_reseal(after.seal(b"t", ALICE))
    with pytest.raises(VaultError, match="not in the vault key file"):
        vault(new).open(blob, ALICE)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "at least one key"),
        ("not base64!", "line 1: not base64"),
        (base64.b64encode(b"short").decode(), "line 1: 5 bytes, not 32"),
    ],
)
def test_a_bad_key_file_is_refused_by_line(text: str, message: str) -> None:
    """Rule 4: the line, never the key."""
    with pytest.raises(VaultError, match=message):
        Vault.from_text(text)


@given(st.binary(max_size=64), st.integers(min_value=0))
def test_any_altered_byte_is_refused(plaintext: bytes, position: int) -> None:
    """Rule 1: the tag authenticates every byte."""
    keys = Vault([b"k" * 32])
    blob = bytearray(keys.seal(plaintext, ALICE))
    blob[position % len(blob)] ^= 0x01
    with pytest.raises(VaultError):
        keys.open(bytes(blob), ALICE)
