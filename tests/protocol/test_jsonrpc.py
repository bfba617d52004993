"""Specification tests for ``gateway.protocol.jsonrpc`` (sans-IO, synchronous).

JSON-RPC 2.0 (https://www.jsonrpc.org/specification) plus the MCP rules the
envelope layer enforces: request ids are strings or integers, never null
(MCP basic/index "Requests"); ``params`` and ``result`` are forwarded byte for
byte (STYLE rule 5).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.errors import INVALID_REQUEST, PARSE_ERROR, LocalProtocolError
from gateway.protocol import jsonrpc
from gateway.protocol.jsonrpc import ErrorResponse, Notification, Request, Response

MESSAGE_TYPES = (Request, Notification, Response, ErrorResponse)


def decode_one(data: bytes | str) -> jsonrpc.Message:
    """Decode data that must be a single message (not a batch)."""
    msg = jsonrpc.decode(data)
    assert not isinstance(msg, list)
    return msg


def decode_rejected(data: bytes | str) -> LocalProtocolError:
    """Decode data that must be rejected; return the error."""
    with pytest.raises(LocalProtocolError) as info:
        jsonrpc.decode(data)
    return info.value


# --- classification ---------------------------------------------------------


def test_message_with_method_and_integer_id_is_a_request() -> None:
    """Spec: a request carries jsonrpc, id, method and optional params."""
    msg = decode_one(b'{"jsonrpc":"2.0","id":7,"method":"tools/list"}')
    assert msg == Request(7, "tools/list", None)


def test_message_with_method_and_string_id_is_a_request() -> None:
    """Spec: a request id may be a string."""
    msg = decode_one(b'{"jsonrpc":"2.0","id":"abc","method":"ping","params":{}}')
    assert isinstance(msg, Request)
    assert msg.id == "abc"
    assert msg.method == "ping"
    assert msg.params is not None
    assert bytes(msg.params) == b"{}"


@pytest.mark.parametrize("msg_id", [0, -1, 2**53, -(2**63), 2**64 - 1, ""])
def test_zero_negative_large_and_empty_string_ids_are_valid_request_ids(msg_id: Any) -> None:
    """Spec: any integer or string is a valid id, including 0 and the empty string."""
    data = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "m"}).encode()
    assert decode_one(data) == Request(msg_id, "m", None)


def test_message_with_method_and_no_id_is_a_notification() -> None:
    """Spec: a message without an id member is a notification, never answered."""
    msg = decode_one(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert msg == Notification("notifications/initialized", None)


def test_notification_keeps_its_params() -> None:
    """Spec: notifications may carry params, forwarded like a request's."""
    msg = decode_one(b'{"method":"notifications/progress","params":{"progress":1},"jsonrpc":"2.0"}')
    assert isinstance(msg, Notification)
    assert msg.params is not None
    assert bytes(msg.params) == b'{"progress":1}'


def test_message_with_result_is_a_response_with_raw_result() -> None:
    """Spec: a success response carries the id and a result, kept as raw bytes."""
    msg = decode_one(b'{"jsonrpc":"2.0","id":3,"result":{"tools":[] }}')
    assert isinstance(msg, Response)
    assert msg.id == 3
    assert bytes(msg.result) == b'{"tools":[] }'


def test_non_object_result_is_still_a_response() -> None:
    """Gateway choice: the envelope layer does not judge the shape of a result."""
    msg = decode_one(b'{"jsonrpc":"2.0","id":"r","result":3}')
    assert isinstance(msg, Response)
    assert bytes(msg.result) == b"3"


def test_message_with_error_is_an_error_response_with_code_message_and_data() -> None:
    """Spec: an error response carries code (integer), message (string) and optional data."""
    msg = decode_one(
        b'{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"nope","data":{"x":[1]}}}'
    )
    assert msg == ErrorResponse(4, -32601, "nope", {"x": [1]})


def test_error_response_without_data_has_data_none() -> None:
    """Spec: the error's data member is optional."""
    msg = decode_one(b'{"jsonrpc":"2.0","id":4,"error":{"code":1,"message":"m"}}')
    assert msg == ErrorResponse(4, 1, "m", None)


def test_error_response_with_null_id_is_accepted() -> None:
    """Spec: an error for a request whose id could not be read has id null."""
    msg = decode_one(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}')
    assert msg == ErrorResponse(None, -32700, "bad", None)


# --- params and results forwarded byte for byte -----------------------------

ODD_PARAMS = (
    b'{ "name" :"echo",\n\t"arguments" : {"deep": [1, 2.50, 1e3, -0, {"unknownField": null,'
    b' "\\u00e9t\\u00e9": "\\ud83d\\ude00"}]} ,  "_meta" : {"progressToken": "tok", '
    b'"x-future": {"a": [[], {}]}}   }'
)


def test_request_params_are_forwarded_byte_for_byte() -> None:
    """Spec: params stay Raw; unknown nested fields, escapes and whitespace survive (STYLE 5)."""
    data = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":  ' + ODD_PARAMS + b"\n}"
    msg = decode_one(data)
    assert isinstance(msg, Request)
    assert msg.params is not None
    assert bytes(msg.params) == ODD_PARAMS


def test_notification_params_are_forwarded_byte_for_byte() -> None:
    """Spec: notification params are forwarded untouched too (STYLE 5)."""
    data = b'{"params":' + ODD_PARAMS + b',"jsonrpc":"2.0","method":"notifications/message"}'
    msg = decode_one(data)
    assert isinstance(msg, Notification)
    assert msg.params is not None
    assert bytes(msg.params) == ODD_PARAMS


def test_positional_params_array_is_forwarded_byte_for_byte() -> None:
    """Spec: JSON-RPC params may be an array (by-position); it is forwarded as is."""
    msg = decode_one(b'{"jsonrpc":"2.0","id":1,"method":"m","params":[1, "two" ,{}]}')
    assert isinstance(msg, Request)
    assert msg.params is not None
    assert bytes(msg.params) == b'[1, "two" ,{}]'


def test_response_result_is_forwarded_byte_for_byte() -> None:
    """Spec: a result is Raw, so fields of newer revisions survive (STYLE 5)."""
    msg = decode_one(b'{"jsonrpc":"2.0","id":1,"result":' + ODD_PARAMS + b"}")
    assert isinstance(msg, Response)
    assert bytes(msg.result) == ODD_PARAMS


def test_params_that_are_not_json_numbers_msgspec_can_hold_are_still_forwarded() -> None:
    """Gateway choice: params are not decoded, so numbers beyond float range pass through."""
    params = b'{"x":1e999,"y":123456789012345678901234567890}'
    msg = decode_one(b'{"jsonrpc":"2.0","id":1,"method":"m","params":' + params + b"}")
    assert isinstance(msg, Request)
    assert msg.params is not None
    assert bytes(msg.params) == params


# --- parse errors (-32700) --------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"not json", id="text"),
        pytest.param(b"{", id="truncated-object"),
        pytest.param(b'{"jsonrpc":"2.0","method":"m"', id="unterminated"),
        pytest.param(b'{"jsonrpc":"2.0","method":"m"} x', id="trailing-garbage"),
        pytest.param(b"", id="empty"),
        pytest.param(b"  \n ", id="whitespace-only"),
        pytest.param(b"\xff\xfe", id="invalid-utf8-bytes"),
        pytest.param(b'{"jsonrpc":"2.0","method":"\xc3("}', id="invalid-utf8-in-string"),
        pytest.param(b'{"jsonrpc":"2.0","method":"\xed\xa0\x80"}', id="utf8-encoded-surrogate"),
        pytest.param(b'"\\ud800"', id="lone-high-surrogate-escape"),
        pytest.param(
            b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"s":"\\udc00"}}',
            id="lone-low-surrogate-escape-in-params",
        ),
        pytest.param(b"NaN", id="nan"),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":NaN}}', id="nan-param"),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"result":Infinity}', id="infinity"),
        pytest.param(b"{'jsonrpc':'2.0'}", id="single-quotes"),
        pytest.param(b'{"jsonrpc":"2.0","method":"m",}', id="trailing-comma"),
    ],
)
def test_input_that_is_not_json_is_a_parse_error(data: bytes) -> None:
    """Spec: invalid JSON is answered with -32700 Parse error."""
    assert decode_rejected(data).code == PARSE_ERROR


def test_one_hundred_thousand_nested_brackets_is_a_parse_error_not_a_crash() -> None:
    """Gateway choice: nesting deeper than the decoder allows is -32700, never RecursionError."""
    assert decode_rejected(b"[" * 100_000).code == PARSE_ERROR
    assert decode_rejected(b"[" * 100_000 + b"]" * 100_000).code == PARSE_ERROR


def test_deeply_nested_params_are_a_parse_error_not_a_crash() -> None:
    """Gateway choice: deep nesting inside a message (or a batch member) is -32700 too."""
    deep = b"[" * 100_000 + b"]" * 100_000
    one = b'{"jsonrpc":"2.0","id":1,"method":"m","params":' + deep + b"}"
    assert decode_rejected(one).code == PARSE_ERROR
    assert decode_rejected(b"[" + one + b"]").code == PARSE_ERROR


def test_text_input_with_a_lone_surrogate_is_a_parse_error() -> None:
    """Spec: decode accepts str; text that is not valid Unicode is -32700, never another error."""
    assert decode_rejected('{"jsonrpc":"2.0","method":"\ud800"}').code == PARSE_ERROR


def test_text_input_is_decoded_like_its_utf8_bytes() -> None:
    """Gateway choice: decode accepts str as well as bytes."""
    assert decode_one('{"jsonrpc":"2.0","id":1,"method":"é"}') == Request(1, "é", None)


# --- invalid requests (-32600) ----------------------------------------------


@pytest.mark.parametrize("data", [b"42", b"null", b'"x"', b"true", b"1.5", b"-0"])
def test_json_scalar_is_an_invalid_request(data: bytes) -> None:
    """Spec: valid JSON that is neither an object nor an array is -32600 Invalid Request."""
    exc = decode_rejected(data)
    assert exc.code == INVALID_REQUEST


def test_empty_batch_is_an_invalid_request() -> None:
    """Spec: an empty array is a single -32600 Invalid Request, not an empty batch."""
    exc = decode_rejected(b"[]")
    assert exc.code == INVALID_REQUEST
    assert "empty batch" in exc.message


@pytest.mark.parametrize(
    ("data", "echoed_id"),
    [
        pytest.param(b'{"jsonrpc":"1.0","id":7,"method":"m"}', 7, id="version-1.0"),
        pytest.param(b'{"id":"abc","method":"m"}', "abc", id="version-missing"),
        pytest.param(b'{"jsonrpc":2.0,"id":8,"method":"m"}', 8, id="version-number"),
        pytest.param(b'{"jsonrpc":null,"id":9,"method":"m"}', 9, id="version-null"),
        pytest.param(b'{"jsonrpc":"1.0","id":true,"method":"m"}', None, id="unreadable-id"),
        pytest.param(b'{"jsonrpc":"1.0","method":"m"}', None, id="no-id"),
    ],
)
def test_wrong_or_missing_jsonrpc_version_is_an_invalid_request_echoing_the_id(
    data: bytes, echoed_id: Any
) -> None:
    """Spec: "jsonrpc" MUST be exactly "2.0"; the error carries the id when it was readable."""
    exc = decode_rejected(data)
    assert exc.code == INVALID_REQUEST
    assert exc.data == {"id": echoed_id}
    assert '"jsonrpc" must be "2.0"' in exc.message


def test_request_with_null_id_is_an_invalid_request() -> None:
    """Spec: a request id MUST NOT be null; id null is not a notification either (MCP)."""
    exc = decode_rejected(b'{"jsonrpc":"2.0","id":null,"method":"m"}')
    assert exc.code == INVALID_REQUEST
    assert exc.data == {"id": None}
    assert "null" in exc.message


@pytest.mark.parametrize(
    "raw_id",
    [
        pytest.param(b'{"a":1}', id="object"),
        pytest.param(b"[1]", id="array"),
        pytest.param(b"true", id="true"),
        pytest.param(b"false", id="false"),
        pytest.param(b"1.5", id="float"),
        pytest.param(b"1.0", id="integral-float"),
        pytest.param(b"1e400", id="float-overflow"),
        pytest.param(b"-9223372036854775809", id="below-int64"),
        pytest.param(b"18446744073709551616", id="above-uint64"),
    ],
)
def test_request_id_that_is_not_a_string_or_integer_is_an_invalid_request(raw_id: bytes) -> None:
    """Spec: ids are strings or integers; bool ids are rejected too (MCP; STYLE 5); an
    integer beyond 64 bits is refused (gateway choice: no peer could hold it)."""
    exc = decode_rejected(b'{"jsonrpc":"2.0","id":' + raw_id + b',"method":"m"}')
    assert exc.code == INVALID_REQUEST
    assert exc.data == {"id": None}


@pytest.mark.parametrize(
    ("data", "why"),
    [
        pytest.param(b'{"jsonrpc":"2.0","id":1,"method":5}', '"method" must be a string'),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"method":null}', '"method" must be a string'),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"m","params":3}', '"params"'),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"m","params":"s"}', '"params"'),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"m","params":null}', '"params"'),
        pytest.param(b'{"jsonrpc":"2.0","id":1}', "neither"),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"error":"boom"}', '"error" must be an object'),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"error":{"message":"m"}}', '"code"'),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"m"}}', '"code"'),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"error":{"code":true,"message":"m"}}', '"code"'),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":2}}', '"message"'),
    ],
)
def test_malformed_members_are_invalid_requests_that_echo_the_id(data: bytes, why: str) -> None:
    """Spec: a well-formed JSON object that is not a valid message is -32600, id echoed."""
    exc = decode_rejected(data)
    assert exc.code == INVALID_REQUEST
    assert exc.data == {"id": 1}
    assert why in exc.message


@pytest.mark.parametrize("raw_id", [b"null", b"true", b"1.5"])
def test_response_without_a_valid_id_is_an_invalid_request(raw_id: bytes) -> None:
    """Spec: a success response must name the request it answers."""
    exc = decode_rejected(b'{"jsonrpc":"2.0","id":' + raw_id + b',"result":{}}')
    assert exc.code == INVALID_REQUEST


def test_response_with_no_id_member_is_an_invalid_request() -> None:
    """Spec: a success response without an id cannot be correlated."""
    assert decode_rejected(b'{"jsonrpc":"2.0","result":{}}').code == INVALID_REQUEST


# --- batches ----------------------------------------------------------------


def test_batch_decodes_to_members_with_per_member_errors() -> None:
    """Spec: each batch member is judged on its own; bad members become their own errors."""
    data = (
        b'[{"jsonrpc":"2.0","id":1,"method":"a","params":{"k": 1}},'
        b' {"jsonrpc":"2.0","method":"b"},'
        b" 42,"
        b' {"jsonrpc":"1.0","id":3,"method":"c"},'
        b' {"jsonrpc":"2.0","id":4,"result":{}},'
        b' {"jsonrpc":"2.0","id":true,"method":"d"},'
        b" [1]]"
    )
    members = jsonrpc.decode(data)
    assert isinstance(members, list)
    assert len(members) == 7
    first, second, third, fourth, fifth, sixth, seventh = members
    assert isinstance(first, Request)
    assert first.id == 1
    assert first.params is not None
    assert bytes(first.params) == b'{"k": 1}'
    assert second == Notification("b", None)
    assert isinstance(third, LocalProtocolError)
    assert third.code == INVALID_REQUEST
    assert isinstance(fourth, LocalProtocolError)
    assert fourth.code == INVALID_REQUEST
    assert fourth.data == {"id": 3}
    assert isinstance(fifth, Response)
    assert isinstance(sixth, LocalProtocolError)
    assert sixth.code == INVALID_REQUEST
    assert isinstance(seventh, LocalProtocolError)
    assert seventh.code == INVALID_REQUEST


def test_batch_of_one_is_still_a_list() -> None:
    """Spec: an array of one message is a batch, answered as a batch."""
    members = jsonrpc.decode(b'[{"jsonrpc":"2.0","method":"n"}]')
    assert members == [Notification("n", None)]


def test_batch_that_is_not_json_is_one_parse_error() -> None:
    """Spec: a batch with invalid JSON is a single -32700, not per-member errors."""
    assert decode_rejected(b'[{"jsonrpc":"2.0","method":"n"}, {]').code == PARSE_ERROR


# --- encoding ---------------------------------------------------------------


def test_encode_request_round_trips_and_writes_params_verbatim() -> None:
    """Spec: encoded params are the very bytes that were decoded (STYLE 5)."""
    data = jsonrpc.encode_request(5, "tools/call", msgspec.Raw(ODD_PARAMS))
    assert ODD_PARAMS in data
    msg = decode_one(data)
    assert isinstance(msg, Request)
    assert (msg.id, msg.method) == (5, "tools/call")
    assert msg.params is not None
    assert bytes(msg.params) == ODD_PARAMS


def test_encode_request_without_params_omits_the_member() -> None:
    """Gateway choice: absent params are omitted, not sent as null."""
    data = jsonrpc.encode_request("x", "ping")
    assert json.loads(data) == {"jsonrpc": "2.0", "id": "x", "method": "ping"}
    assert decode_one(data) == Request("x", "ping", None)


def test_encode_notification_round_trips() -> None:
    """Spec: a notification is encoded without an id."""
    data = jsonrpc.encode_notification("notifications/cancelled", msgspec.Raw(b'{"requestId":1}'))
    assert json.loads(data) == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 1},
    }
    msg = decode_one(data)
    assert isinstance(msg, Notification)
    assert msg.params is not None
    assert bytes(msg.params) == b'{"requestId":1}'
    assert json.loads(jsonrpc.encode_notification("n")) == {"jsonrpc": "2.0", "method": "n"}


def test_encode_response_round_trips_and_writes_result_verbatim() -> None:
    """Spec: a result is written verbatim (STYLE 5)."""
    data = jsonrpc.encode_response("r", msgspec.Raw(ODD_PARAMS))
    msg = decode_one(data)
    assert isinstance(msg, Response)
    assert msg.id == "r"
    assert bytes(msg.result) == ODD_PARAMS


def test_encode_response_with_empty_object_constant() -> None:
    """Gateway choice: EMPTY_OBJECT is the result of ping, setLevel and subscribe."""
    assert json.loads(jsonrpc.encode_response(1, jsonrpc.EMPTY_OBJECT)) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {},
    }


def test_encode_error_round_trips_with_and_without_data() -> None:
    """Spec: error data is optional; absent data is omitted."""
    with_data = jsonrpc.encode_error(2, -32602, "bad", {"why": ["x"]})
    assert decode_one(with_data) == ErrorResponse(2, -32602, "bad", {"why": ["x"]})
    without = jsonrpc.encode_error(None, -32700, "parse")
    assert json.loads(without) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "parse"},
    }


def _circular_list() -> list[Any]:
    value: list[Any] = []
    value.append(value)
    return value


def _circular_dict() -> dict[str, Any]:
    value: dict[str, Any] = {}
    value["self"] = value
    return value


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(object(), id="object"),
        pytest.param({(1, 2): 3}, id="tuple-key"),
        pytest.param({"s": "\ud800"}, id="lone-surrogate"),
        pytest.param(float("nan"), id="nan"),
        pytest.param({"inf": float("inf")}, id="inf"),
        pytest.param(10**400, id="huge-int"),
        pytest.param(b"\x00\xff", id="bytes"),
        pytest.param({1, 2}, id="set"),
        pytest.param(ValueError("boom"), id="exception"),
        pytest.param(_circular_list(), id="circular-list"),
        pytest.param(_circular_dict(), id="circular-dict"),
    ],
)
def test_encode_error_never_raises_whatever_the_data(data: Any) -> None:
    """Gateway choice: answering an error can never itself fail; bad data becomes its repr."""
    encoded = jsonrpc.encode_error(9, -32603, "internal", data)
    msg = decode_one(encoded)
    assert isinstance(msg, ErrorResponse)
    assert (msg.id, msg.code, msg.message) == (9, -32603, "internal")


@pytest.mark.parametrize(
    "msg",
    [
        Request(1, "a", msgspec.Raw(b'{"x": [1, 2]}')),
        Request("id", "b", None),
        Notification("c", msgspec.Raw(b"[]")),
        Notification("d", None),
        Response(2, msgspec.Raw(b'{"ok":true}')),
        ErrorResponse(3, -1, "e", {"d": 1}),
        ErrorResponse(None, -32700, "f", None),
    ],
    ids=lambda m: type(m).__name__,
)
def test_encode_dispatches_on_message_type_and_round_trips(msg: jsonrpc.Message) -> None:
    """Gateway choice: encode(decode(x)) reproduces the same message."""
    assert jsonrpc.encode(decode_one(jsonrpc.encode(msg))) == jsonrpc.encode(msg)
    again = decode_one(jsonrpc.encode(msg))
    assert type(again) is type(msg)


def test_to_raw_and_from_raw_are_inverse() -> None:
    """Gateway choice: helpers for payloads the gateway builds itself."""
    value = {"a": [1, "two", None, {"b": True}]}
    assert jsonrpc.from_raw(jsonrpc.to_raw(value)) == value
    assert jsonrpc.from_raw(None) is None


# --- properties -------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)

# Envelope-shaped objects reach classify() far more often than random values do.
envelopes = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0"]) | json_values,
        "id": st.integers() | st.text(max_size=5) | json_values,
        "method": st.text(max_size=10) | json_values,
        "params": st.dictionaries(st.text(max_size=5), json_values, max_size=3) | json_values,
        "result": json_values,
        "error": st.fixed_dictionaries(
            {"code": st.integers() | json_values, "message": st.text(max_size=5) | json_values},
            optional={"data": json_values},
        )
        | json_values,
    },
)


def assert_decodes_or_is_rejected_cleanly(data: bytes) -> None:
    """decode returns messages, or raises LocalProtocolError(-32700 | -32600); nothing else."""
    out: jsonrpc.Message | list[jsonrpc.Message | LocalProtocolError] | LocalProtocolError
    try:
        out = jsonrpc.decode(data)
    except LocalProtocolError as exc:
        out = exc
    if isinstance(out, LocalProtocolError):
        assert out.code in {PARSE_ERROR, INVALID_REQUEST}
    elif isinstance(out, list):
        assert out
        for member in out:
            if isinstance(member, LocalProtocolError):
                assert member.code == INVALID_REQUEST
            else:
                assert isinstance(member, MESSAGE_TYPES)
    else:
        assert isinstance(out, MESSAGE_TYPES)


@settings(max_examples=500, deadline=None)
@given(st.binary())
def test_arbitrary_bytes_decode_or_raise_a_protocol_error(data: bytes) -> None:
    """Spec: for any bytes, decode yields messages or a -32700/-32600 error, never a crash."""
    assert_decodes_or_is_rejected_cleanly(data)


@settings(max_examples=500, deadline=None)
@given(json_values | envelopes | st.lists(envelopes | json_values, max_size=4))
def test_arbitrary_json_values_decode_or_raise_a_protocol_error(value: Any) -> None:
    """Spec: for any JSON value (NaN and lone surrogates included), decode never crashes."""
    assert_decodes_or_is_rejected_cleanly(json.dumps(value).encode("ascii"))


ids = st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(
    st.characters(exclude_categories=("Cs",))
)
methods = st.text(st.characters(exclude_categories=("Cs",)))
raw_params = st.dictionaries(
    st.text(st.characters(exclude_categories=("Cs",)), max_size=5),
    st.integers() | st.text(st.characters(exclude_categories=("Cs",))) | st.booleans(),
    max_size=4,
).map(lambda d: msgspec.Raw(msgspec.json.encode(d)))


@settings(max_examples=200, deadline=None)
@given(ids, methods, st.none() | raw_params)
def test_encoded_requests_decode_to_the_same_request(
    msg_id: int | str, method: str, params: msgspec.Raw | None
) -> None:
    """Spec: decode(encode_request(id, method, params)) gives back the same id, method, params."""
    msg = decode_one(jsonrpc.encode_request(msg_id, method, params))
    assert isinstance(msg, Request)
    assert (msg.id, msg.method) == (msg_id, method)
    if params is None:
        assert msg.params is None
    else:
        assert msg.params is not None
        assert bytes(msg.params) == bytes(params)
