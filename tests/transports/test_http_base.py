"""The pure helpers the HTTP transports share (synchronous)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.config import HttpBackend
from gateway.transports.http_base import (
    Outgoing,
    base_headers,
    failure_response,
    is_header_token,
    reconnect_delay,
    split_json_body,
)


def test_outgoing_names_requests_initialize_and_initialized() -> None:
    """What the transport must know of a message: the ids to answer, whether it is
    initialize (session id, version) or notifications/initialized (GET stream)."""
    assert Outgoing.of(b'{"jsonrpc":"2.0","id":1,"method":"initialize"}') == Outgoing((1,), 1)
    notification = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    assert Outgoing.of(notification) == Outgoing(initialized=True)
    batch = b'[{"jsonrpc":"2.0","id":"a","method":"x"},{"jsonrpc":"2.0","id":2,"result":{}}]'
    assert Outgoing.of(batch) == Outgoing(("a",))
    assert Outgoing.of(b"not json") == Outgoing()


def test_json_body_is_one_message_or_the_members_of_an_array() -> None:
    """Spec: application/json carries one message (2025-03-26: or a batch array)."""
    assert split_json_body(b' {"a": 1} ') == [b'{"a": 1}']
    assert split_json_body(b'[{"a":1}, {"b":2}]') == [b'{"a":1}', b'{"b":2}']
    assert split_json_body(b"") == []
    with pytest.raises(msgspec.DecodeError):
        split_json_body(b"<html>")


def test_failure_response_is_an_internal_error_for_the_request() -> None:
    """Robustness D13: what a waiting caller receives instead of hanging."""
    body = msgspec.json.decode(failure_response(7, "HTTP 502 Bad Gateway (text/html)", 502))
    assert body == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {
            "code": -32603,
            "message": "backend request failed: HTTP 502 Bad Gateway (text/html)",
            "data": {"httpStatus": 502},
        },
    }


@given(retry=st.none() | st.integers(0, 10**12))
def test_reconnect_delay_is_always_within_floor_and_cap(retry: int | None) -> None:
    """Robustness D15: whatever `retry:` says, the wait stays within [floor, cap]."""
    assert 0.1 <= reconnect_delay(retry, 1.0, 0.1, 30.0) <= 30.0


def test_reconnect_delay_honours_retry_in_between() -> None:
    """Spec (SSE): retry is the reconnection time in milliseconds."""
    assert reconnect_delay(2500, 1.0, 0.1, 30.0) == 2.5
    assert reconnect_delay(None, 1.0, 0.1, 30.0) == 1.0


@pytest.mark.parametrize(
    ("value", "ok"),
    [("abc-123", True), ("", False), ("a b", False), ("a\r\nX: y", False), ("é", False)],
)
def test_header_token_is_visible_ascii_only(value: str, ok: bool) -> None:
    """Spec: a session id is visible ASCII; anything else could inject headers."""
    assert is_header_token(value) is ok


def test_configured_headers_replace_ours_case_insensitively() -> None:
    """Gateway choice: a configured User-Agent replaces ours instead of doubling it."""
    cfg = HttpBackend(name="x", url="http://h/mcp", headers={"USER-AGENT": "custom"})
    assert base_headers(cfg).get_list("user-agent") == ["custom"]
