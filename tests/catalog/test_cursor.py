"""Specification tests for ``gateway.catalog.cursor`` (signed opaque cursors).

Spec (MCP pagination): cursors are opaque strings; an invalid cursor is
answered with -32602 Invalid params. Property (STYLE rule 10): a cursor
decodes or yields -32602, and never crashes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.catalog.cursor import MAX_CURSOR_CHARS, CursorCodec, CursorPayload
from gateway.errors import INVALID_PARAMS, LocalProtocolError

CODEC = CursorCodec("s3cret")
POSITION = CursorPayload(kind="tools", after="github__create_issue")
BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def rejected(cursor: object, kind: str = "tools", codec: CursorCodec = CODEC) -> str:
    """Decode a cursor that must be rejected; return the error message."""
    with pytest.raises(LocalProtocolError) as info:
        codec.decode(cursor, kind)
    assert info.value.code == INVALID_PARAMS
    assert info.value.message.startswith("invalid cursor: ")
    return info.value.message


def test_cursor_round_trips_to_the_same_position() -> None:
    """Spec: a cursor the gateway issued continues the walk where the page ended."""
    assert CODEC.decode(CODEC.encode(POSITION), "tools") == POSITION


def test_passthrough_position_round_trips() -> None:
    """Gateway choice: a passthrough backend's own cursor travels inside ours."""
    position = CursorPayload(kind="resources", backend="files", backend_cursor="opaque/+=?")
    assert CODEC.decode(CODEC.encode(position), "resources") == position


def test_cursor_is_url_safe_ascii_with_a_signature() -> None:
    """Gateway choice: base64url body "." 32-char tag (192 bits), safe in JSON and URLs."""
    cursor = CODEC.encode(POSITION)
    body, tag = cursor.split(".")
    assert cursor.isascii()
    assert len(tag) == 32
    assert set(body + tag) <= set(BASE64URL)


def test_encoding_is_deterministic() -> None:
    """Gateway choice: the same position with the same secret gives the same cursor."""
    assert CODEC.encode(POSITION) == CursorCodec("s3cret").encode(POSITION)


def test_two_codecs_with_the_same_secret_accept_each_others_cursors() -> None:
    """Gateway choice: replicas sharing a secret can continue each other's walks."""
    one, two = CursorCodec("shared"), CursorCodec(b"shared")
    assert two.decode(one.encode(POSITION), "tools") == POSITION
    assert one.decode(two.encode(POSITION), "tools") == POSITION


def test_cursor_from_a_different_secret_is_rejected() -> None:
    """Spec: a cursor we did not issue is invalid params."""
    message = rejected(CursorCodec("other").encode(POSITION))
    assert "signature does not match" in message


def test_codecs_with_random_secrets_do_not_accept_each_others_cursors() -> None:
    """Gateway choice: an empty secret means a per-process random key."""
    assert "signature" in rejected(CursorCodec().encode(POSITION), codec=CursorCodec())


def test_tampered_body_is_rejected() -> None:
    """Spec: a client may not edit the position inside a cursor."""
    forged = CursorCodec("attacker").encode(CursorPayload(kind="tools", after="zzz"))
    _, tag = CODEC.encode(POSITION).split(".")
    assert "signature does not match" in rejected(forged.split(".")[0] + "." + tag)


def test_flipped_character_in_the_body_is_rejected() -> None:
    """Spec: any change to the body breaks the signature or the encoding."""
    cursor = CODEC.encode(POSITION)
    flipped = ("B" if cursor[3] == "A" else "A").join((cursor[:3], cursor[4:]))
    rejected(flipped)


def test_tampered_tag_is_rejected() -> None:
    """Spec: a changed signature is invalid params."""
    cursor = CODEC.encode(POSITION)
    last = "A" if cursor[-1] != "A" else "B"
    assert "signature does not match" in rejected(cursor[:-1] + last)


@pytest.mark.parametrize("cut", [1, 5, 22, 23])
def test_truncated_cursor_is_rejected(cut: int) -> None:
    """Spec: a cursor cut short is invalid params."""
    rejected(CODEC.encode(POSITION)[:-cut])


def test_truncated_body_is_rejected() -> None:
    """Spec: a cursor with part of its body missing is invalid params."""
    body, tag = CODEC.encode(POSITION).split(".")
    for cut in (1, 2, 3, 4):
        rejected(body[:-cut] + "." + tag)


@pytest.mark.parametrize(
    "cursor",
    ["", ".", "abc", "abc.", ".abc", "!!!.!!!", "a.b.c", "=.=", "eyJ.x", "é.abc", " ", "null"],
)
def test_garbage_is_rejected(cursor: str) -> None:
    """Spec: a string that is not one of our cursors is invalid params."""
    rejected(cursor)


@pytest.mark.parametrize("suffix", ["é", "\u2028", "😀", "\x00"])
def test_non_ascii_signature_is_rejected_as_invalid_params(suffix: str) -> None:
    """Spec: a cursor decodes or yields -32602, never another exception."""
    body, _ = CODEC.encode(POSITION).split(".")
    rejected(body + "." + suffix)


@pytest.mark.parametrize(
    ("cursor", "type_name"),
    [(1, "int"), (None, "NoneType"), (["x"], "list"), ({"a": 1}, "dict"), (b"x.y", "bytes")],
)
def test_non_string_cursor_is_rejected_with_its_type(cursor: Any, type_name: str) -> None:
    """Spec: cursors are strings; anything else is invalid params naming what came."""
    assert rejected(cursor) == f"invalid cursor: expected a string, got {type_name}"


def test_overlong_cursor_is_rejected_before_any_work() -> None:
    """Gateway choice: cursors longer than MAX_CURSOR_CHARS are refused outright."""
    assert rejected("a" * (MAX_CURSOR_CHARS + 1)) == "invalid cursor: too long"


def test_cursor_for_another_kind_of_list_is_rejected() -> None:
    """Gateway choice: a tools cursor cannot continue a prompts walk."""
    assert rejected(CODEC.encode(POSITION), kind="prompts") == (
        "invalid cursor: issued for tools, not prompts"
    )


@pytest.mark.parametrize("length", [3000, 4000, 10_000])
def test_every_cursor_the_codec_issues_is_accepted_back(length: int) -> None:
    """Spec: a nextCursor the gateway sent must continue the walk (long URIs, backend cursors)."""
    for position in (
        CursorPayload(kind="resources", after="fs+data:text/plain," + "x" * length),
        CursorPayload(kind="resources", backend="b", backend_cursor="c" * length),
    ):
        assert CODEC.decode(CODEC.encode(position), "resources") == position


def assert_decodes_or_is_invalid_params(cursor: str) -> None:
    """decode returns a CursorPayload or raises LocalProtocolError(-32602); nothing else."""
    outcome: CursorPayload | LocalProtocolError
    try:
        outcome = CODEC.decode(cursor, "tools")
    except LocalProtocolError as exc:
        outcome = exc
    if isinstance(outcome, LocalProtocolError):
        assert outcome.code == INVALID_PARAMS
    else:
        assert isinstance(outcome, CursorPayload)


# Two dot-separated parts reach the signature check far more often than random text does.
dotted = st.builds(lambda body, tag: f"{body}.{tag}", st.text(BASE64URL, min_size=1), st.text())


@settings(max_examples=500, deadline=None)
@given(st.text() | dotted)
def test_any_text_decodes_or_is_invalid_params(cursor: str) -> None:
    """Spec: any text given to decode returns a position or raises -32602, nothing else."""
    assert_decodes_or_is_invalid_params(cursor)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=BASE64URL + ".=+/", max_size=80))
def test_cursor_shaped_text_decodes_or_is_invalid_params(cursor: str) -> None:
    """Spec: text that looks like a cursor still decodes or yields -32602, never crashes."""
    assert_decodes_or_is_invalid_params(cursor)


# Keys and backend cursors come from msgspec-decoded JSON: no lone surrogates.
JSON_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=200)


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from(["tools", "prompts", "resources", "resourceTemplates"]),
    after=JSON_TEXT,
    backend=JSON_TEXT,
    backend_cursor=st.none() | JSON_TEXT,
    secret=st.text(min_size=1, max_size=20),
)
def test_any_position_round_trips(
    kind: str, after: str, backend: str, backend_cursor: str | None, secret: str
) -> None:
    """Spec: decode(encode(position)) == position for every position and secret."""
    codec = CursorCodec(secret.encode("utf-8", "surrogatepass"))
    position = CursorPayload(kind=kind, after=after, backend=backend, backend_cursor=backend_cursor)
    assert codec.decode(codec.encode(position), kind) == position


def signed(body: bytes, secret: bytes = b"s3cret", principal: str | None = None) -> str:
    """A cursor in the documented wire form, signed with ``secret``, whatever the body."""

    def field(text: str) -> bytes:
        return len(text.encode()).to_bytes(4, "big") + text.encode()

    binding = b"\x00" if principal is None else b"\x01" + field(principal)
    head_and_body = b"\x00" + body  # no expiry
    key = hashlib.sha256(secret).digest()
    tag = hmac.new(key, field("cursor") + binding + head_and_body, hashlib.sha256).digest()
    return f"{b64(head_and_body)}.{b64(tag[:24])}"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def test_signing_by_hand_matches_the_codec() -> None:
    """Spec (``protocol.signing``'s docstring): the wire form is what it documents."""
    body = b'{"kind":"tools","after":"github__create_issue"}'
    assert CODEC.decode(signed(body), "tools") == POSITION
    mine = signed(body, principal="token:alice")
    assert CODEC.decode(mine, "tools", principal="token:alice") == POSITION


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | JSON_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(JSON_TEXT, inner, max_size=4),
    max_leaves=8,
)
PAYLOAD_LIKE = st.fixed_dictionaries(
    {"kind": st.sampled_from(["tools", "prompts"]) | JSON_VALUES},
    optional={
        "after": JSON_TEXT | JSON_VALUES,
        "backend": JSON_VALUES,
        "backend_cursor": JSON_VALUES,
        "extra": JSON_VALUES,
    },
)


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=120)
    | st.builds(lambda value: json.dumps(value).encode(), JSON_VALUES | PAYLOAD_LIKE)
)
def test_a_correctly_signed_body_that_is_not_a_position_is_invalid_params(body: bytes) -> None:
    """Gateway choice: a body signed with our own key (a leaked secret, a replica on another
    version) still decodes to a position or yields -32602, never another exception."""
    outcome: CursorPayload | LocalProtocolError
    try:
        outcome = CODEC.decode(signed(body), "tools")
    except LocalProtocolError as exc:
        outcome = exc
    if isinstance(outcome, LocalProtocolError):
        assert outcome.code == INVALID_PARAMS
        assert outcome.message.startswith("invalid cursor: ")
    else:
        assert outcome.kind == "tools"


async def test_a_rotated_secret_keeps_verifying_old_cursors_for_the_grace_period(
    autojump_clock: Any,
) -> None:
    """Issue 16 item 7: a reload rotating cursor_secret keeps walks in progress working
    for pagination.previous_secret_grace seconds, and no longer."""
    codec = CursorCodec("first-secret", clock=trio.current_time)
    old = codec.encode(CursorPayload(kind="tools", after="a"))
    codec.rotate("second-secret", grace=300)
    new = codec.encode(CursorPayload(kind="tools", after="b"))
    assert new != CursorCodec("first-secret").encode(CursorPayload(kind="tools", after="b"))
    await trio.sleep(299)
    assert codec.decode(old, "tools").after == "a"
    await trio.sleep(2)
    with pytest.raises(LocalProtocolError, match="signature"):
        codec.decode(old, "tools")
    assert codec.decode(new, "tools").after == "b"
    assert CursorCodec("second-secret").decode(new, "tools").after == "b"


def test_a_cursor_made_for_one_principal_does_not_verify_for_another() -> None:
    """A45: Issue 16 item 5: cursors are bound to the principal they were served to."""
    codec = CursorCodec("secret")
    mine = codec.encode(CursorPayload(kind="tools", after="x"), "token:alice")
    assert codec.decode(mine, "tools", principal="token:alice").after == "x"
    for other in ("token:bob", "jwt:https://idp|alice", None):
        with pytest.raises(LocalProtocolError, match="signature"):
            codec.decode(mine, "tools", principal=other)
    unbound = codec.encode(CursorPayload(kind="tools", after="x"))
    with pytest.raises(LocalProtocolError, match="signature"):
        codec.decode(unbound, "tools", principal="token:alice")


def test_a_list_of_secrets_signs_with_the_first_and_verifies_with_every_one() -> None:
    """Gateway choice: pagination.cursor_secret may be a list, newest first, for rotation."""
    ring = CursorCodec(["new", "old"])
    assert ring.decode(CursorCodec("old").encode(POSITION), "tools") == POSITION
    assert CursorCodec("new").decode(ring.encode(POSITION), "tools") == POSITION
    with pytest.raises(LocalProtocolError, match="signature"):
        CursorCodec("old").decode(ring.encode(POSITION), "tools")
