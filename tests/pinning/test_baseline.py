"""Signed baselines: export from one gateway, import into another (baseline rules)."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from gateway.pinning.baseline import (
    BackendIdentity,
    Baseline,
    BaselineError,
    BaselineItem,
    decode_baseline,
    encode_baseline,
    load_signing_key,
)
from gateway.pinning.definitions import digest

TOOL = {"name": "add", "description": "Adds.", "inputSchema": {"type": "object"}}
KEY = Ed25519PrivateKey.generate()
DOCUMENT = Baseline(
    backends=[BackendIdentity(name="toolbox", server_name="toolbox", command="python")],
    items=[
        BaselineItem(
            backend="toolbox", kind="tool", name="add", digest=digest(TOOL), definition=TOOL
        )
    ],
)


def test_a_baseline_round_trips_and_verifies() -> None:
    """Rule 3: what one gateway signs another verifies, with the digests intact."""
    data = encode_baseline(DOCUMENT, KEY)
    assert decode_baseline(data, KEY).items == DOCUMENT.items


def test_reformatting_the_file_keeps_the_signature_valid() -> None:
    """Rule 3: the signature covers the canonical form, not the bytes."""
    data = encode_baseline(DOCUMENT, KEY)
    compact = json.dumps(json.loads(data), separators=(",", ":"), sort_keys=True).encode()
    assert decode_baseline(compact, KEY).items == DOCUMENT.items


def test_only_the_public_key_verifies_too() -> None:
    """Rule 3: a deployment can hold just the public half."""
    public_pem = KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    verifier = load_signing_key(public_pem)
    assert decode_baseline(encode_baseline(DOCUMENT, KEY), verifier).items == DOCUMENT.items


def test_a_baseline_signed_by_another_key_is_refused() -> None:
    """Rule 4."""
    data = encode_baseline(DOCUMENT, Ed25519PrivateKey.generate())
    with pytest.raises(BaselineError, match="does not verify"):
        decode_baseline(data, KEY)


def test_an_unsigned_baseline_is_refused() -> None:
    """Rule 4."""
    data = json.dumps({"version": 1, "backends": [], "items": []}).encode()
    with pytest.raises(BaselineError, match="not signed"):
        decode_baseline(data, KEY)


def test_a_key_file_that_is_not_ed25519_is_refused() -> None:
    """Rule 3: the scheme is Ed25519 only."""
    with pytest.raises(BaselineError):
        load_signing_key(b"-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n")


@given(st.data())
def test_any_edited_value_breaks_the_signature(data: st.DataObject) -> None:
    """Rule 4: a changed description (say, a rug pull written into the file) is refused."""
    document = json.loads(encode_baseline(DOCUMENT, KEY))
    text = data.draw(st.text(min_size=1, max_size=20).filter(lambda t: t != "Adds."))
    document["items"][0]["definition"]["description"] = text
    with pytest.raises(BaselineError):
        decode_baseline(json.dumps(document).encode(), KEY)
