"""JSON-RPC 2.0 envelopes: bytes in, typed messages out, and back.

Only the envelope is decoded. ``params``, ``result`` and ``error`` stay
``msgspec.Raw``: the gateway forwards them byte for byte and decodes one only
when it has to rewrite it (see ``protocol.mcp``). A Struct would silently drop
any field a newer protocol revision adds; Raw cannot.

``classify`` is the one place that decides what a decoded object is, and the
one place that turns malformed input into a ``LocalProtocolError`` carrying
the right JSON-RPC code, plus the id when one could be read (so the error can
be addressed to the request that caused it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import msgspec

from gateway.errors import (
    INVALID_REQUEST,
    PARSE_ERROR,
    LocalProtocolError,
)

RequestId: TypeAlias = int | str
JSONRPC_VERSION: Final = "2.0"

# Raw JSON for an empty object: the result of ping, setLevel, subscribe.
EMPTY_OBJECT: Final = msgspec.Raw(b"{}")


# An empty Raw marks a member that was not present at all (``"id": null`` is
# present, and decodes to Raw(b"null")).
_ABSENT: Final = msgspec.Raw(b"")


class _Envelope(msgspec.Struct):
    """What every JSON-RPC message may carry at the top level.

    Fields are untyped (``Raw``) so that a bad ``id`` or ``method`` is
    reported by ``classify`` with a precise message rather than by msgspec.
    """

    jsonrpc: msgspec.Raw = _ABSENT
    id: msgspec.Raw = _ABSENT
    method: msgspec.Raw = _ABSENT
    params: msgspec.Raw = _ABSENT
    result: msgspec.Raw = _ABSENT
    error: msgspec.Raw = _ABSENT


_envelope_decoder: Final = msgspec.json.Decoder(_Envelope)
_any_decoder: Final = msgspec.json.Decoder()
_batch_decoder: Final = msgspec.json.Decoder(list[msgspec.Raw])
_id_decoder: Final = msgspec.json.Decoder(
    int | str | None | float | bool | list[Any] | dict[str, Any]
)
_str_decoder: Final = msgspec.json.Decoder(str)
_error_decoder: Final = msgspec.json.Decoder(dict[str, Any])
_encoder: Final = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class Request:
    """A call that expects an answer."""

    id: RequestId
    method: str
    params: msgspec.Raw | None = None


@dataclass(frozen=True, slots=True)
class Notification:
    """A one-way message; never answered."""

    method: str
    params: msgspec.Raw | None = None


@dataclass(frozen=True, slots=True)
class Response:
    """A successful answer to ``id``."""

    id: RequestId
    result: msgspec.Raw


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    """A failed answer; ``id`` is None when the request could not be read."""

    id: RequestId | None
    code: int
    message: str
    data: Any = None


Message: TypeAlias = Request | Notification | Response | ErrorResponse


#: The integer ids the gateway accepts: int64 and uint64, as msgspec reads them.
_ID_MIN: Final = -(2**63)
_ID_MAX: Final = 2**64 - 1


def _read_id(raw: msgspec.Raw) -> RequestId | None:
    """Decode and validate an id: integers and strings only.

    MCP forbids null ids on requests; JSON-RPC discourages fractional ones and
    a boolean is never an id (msgspec would happily read ``true`` as int 1).
    """
    value = _id_decoder.decode(raw)
    kind = value.__class__  # exact types: a bool is not an int here
    if kind is str:
        text: str = value
        return text
    if kind is not int:
        raise LocalProtocolError(
            f"invalid request id {bytes(raw)[:40]!r}: must be a string or an integer",
            INVALID_REQUEST,
        )
    if not _ID_MIN <= value <= _ID_MAX:
        # JSON allows any integer; a peer (and msgspec's typed decoding)
        # holds 64 bits, so a larger id could not be answered faithfully.
        raise LocalProtocolError(
            f"invalid request id {bytes(raw)[:40]!r}: an integer id must fit in 64 bits",
            INVALID_REQUEST,
        )
    number: int = value
    return number


def _readable_id(raw: msgspec.Raw | None) -> RequestId | None:
    """The id to address an error to, or None when the id itself is bad."""
    if raw is None:
        return None
    try:
        return _read_id(raw)
    except (LocalProtocolError, msgspec.DecodeError):
        return None


def decode(
    data: bytes | bytearray | memoryview | str,
) -> Message | list[Message | LocalProtocolError]:
    """Decode one JSON-RPC message, or a batch (a JSON array).

    Raises:
        LocalProtocolError: ``-32700`` when the bytes are not JSON;
            ``-32600`` when they are JSON but not a message (scalar, empty
            batch); the error's ``data`` holds the readable id, if any.

    A batch yields a list whose members are messages or, for members that
    are malformed, the ``LocalProtocolError`` to answer them with: JSON-RPC
    answers each bad member of a batch on its own.
    """
    if isinstance(data, str):
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError:
            raise LocalProtocolError(
                "parse error: text is not valid Unicode", PARSE_ERROR
            ) from None
    elif not bytes(data).isascii():
        # msgspec checks UTF-8 only in what it decodes; Raw fields are skipped
        # unchecked, and invalid bytes would be forwarded as they came
        # (robustness D4, A28). ASCII, the common case, needs no second look.
        try:
            bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LocalProtocolError(
                f"parse error: invalid UTF-8 at byte {exc.start}", PARSE_ERROR
            ) from None
    try:
        return classify(_envelope_decoder.decode(data))
    except msgspec.ValidationError:
        pass  # not an object: an array (batch) or a scalar; look closer
    except (msgspec.DecodeError, RecursionError) as exc:
        raise LocalProtocolError(f"parse error: {exc}", PARSE_ERROR) from None
    try:
        items = _batch_decoder.decode(data)
    except msgspec.ValidationError:
        raise LocalProtocolError(
            "invalid request: expected a JSON object or a batch array", INVALID_REQUEST
        ) from None
    except (msgspec.DecodeError, RecursionError) as exc:
        raise LocalProtocolError(f"parse error: {exc}", PARSE_ERROR) from None
    if not items:
        raise LocalProtocolError("invalid request: empty batch", INVALID_REQUEST)
    members: list[Message | LocalProtocolError] = []
    for item in items:
        try:
            members.append(classify(_envelope_decoder.decode(item)))
        except msgspec.ValidationError:
            members.append(
                LocalProtocolError(
                    "invalid request: batch member is not an object", INVALID_REQUEST
                )
            )
        except LocalProtocolError as exc:
            members.append(exc)
    return members


def classify(env: _Envelope) -> Message:
    """Turn a decoded envelope into exactly one kind of message.

    Raises:
        LocalProtocolError: ``-32600`` with ``data={"id": …}`` when the id
            could be read, so the caller can echo it.
    """
    # An absent member is an empty Raw, which is false (``_present`` inlined).
    raw_id = env.id or None
    raw_version = env.jsonrpc or None
    raw_method = env.method or None
    params = env.params or None
    result = env.result or None
    error = env.error or None
    msg_id = _readable_id(raw_id)

    def invalid(why: str) -> LocalProtocolError:
        return LocalProtocolError(f"invalid request: {why}", INVALID_REQUEST, data={"id": msg_id})

    try:
        version = None if raw_version is None else _any_decoder.decode(raw_version)
    except msgspec.DecodeError:  # pragma: no cover - the envelope decoder checked the JSON
        version = None
    if version != JSONRPC_VERSION:
        raise invalid('"jsonrpc" must be "2.0"')
    if raw_method is not None:
        try:
            method = _str_decoder.decode(raw_method)
        except msgspec.ValidationError:
            raise invalid('"method" must be a string') from None
        if params is not None and bytes(params)[:1] not in (b"{", b"["):
            raise invalid('"params" must be an object')
        if raw_id is None:
            return Notification(method, params)
        if bytes(raw_id) == b"null":
            raise invalid("request id must not be null")
        if msg_id is None:
            raise invalid("request id must be a string or an integer")
        return Request(msg_id, method, params)
    if result is not None:
        if msg_id is None:
            raise invalid("response without a valid id")
        return Response(msg_id, result)
    if error is not None:
        try:
            err = _error_decoder.decode(error)
        except msgspec.ValidationError:
            raise invalid('"error" must be an object') from None
        code = err.get("code")
        message = err.get("message")
        if isinstance(code, bool) or not isinstance(code, int) or not isinstance(message, str):
            raise invalid('"error" needs an integer "code" and a string "message"')
        return ErrorResponse(msg_id, code, message, err.get("data"))
    raise invalid('neither "method", "result" nor "error" present')


class _RequestOut(msgspec.Struct, omit_defaults=True):
    jsonrpc: str
    id: RequestId
    method: str
    params: msgspec.Raw | None = None


class _NotificationOut(msgspec.Struct, omit_defaults=True):
    jsonrpc: str
    method: str
    params: msgspec.Raw | None = None


class _ErrorObject(msgspec.Struct, omit_defaults=True):
    code: int
    message: str
    data: Any = None


class _ErrorOut(msgspec.Struct):
    jsonrpc: str
    id: RequestId | None
    error: _ErrorObject


def encode_request(msg_id: RequestId, method: str, params: msgspec.Raw | None = None) -> bytes:
    """Serialize a request; ``params`` is written verbatim."""
    return _encoder.encode(_RequestOut(JSONRPC_VERSION, msg_id, method, params))


def encode_notification(method: str, params: msgspec.Raw | None = None) -> bytes:
    """Serialize a notification; ``params`` is written verbatim."""
    return _encoder.encode(_NotificationOut(JSONRPC_VERSION, method, params))


def encode_response(msg_id: RequestId, result: msgspec.Raw) -> bytes:
    """Serialize a success response; ``result`` is written verbatim.

    Joined by hand: the encoder's growing buffer held 1.5x a large result at
    its peak; a join allocates the final size once.
    """
    return b"".join(
        (b'{"jsonrpc":"2.0","id":', _encoder.encode(msg_id), b',"result":', result, b"}")
    )


def encode_error(msg_id: RequestId | None, code: int, message: str, data: Any = None) -> bytes:
    """Serialize an error response.

    ``data`` may hold anything JSON can carry; whatever the encoder cannot
    handle (a stray object from a peer's error) is replaced by its ``repr``
    so that answering an error can never itself fail.
    """
    try:
        return _encoder.encode(
            _ErrorOut(JSONRPC_VERSION, msg_id, _ErrorObject(code, message, data))
        )
    except (TypeError, ValueError, OverflowError, RecursionError, UnicodeEncodeError):
        safe_message = message.encode("utf-8", "replace").decode("utf-8")
        safe_data = None if data is None else repr(data)[:200].encode("utf-8", "replace").decode()
        return _encoder.encode(
            _ErrorOut(JSONRPC_VERSION, msg_id, _ErrorObject(code, safe_message, safe_data))
        )


def encode(msg: Message) -> bytes:
    """Serialize any message."""
    if isinstance(msg, Request):
        return encode_request(msg.id, msg.method, msg.params)
    if isinstance(msg, Notification):
        return encode_notification(msg.method, msg.params)
    if isinstance(msg, Response):
        return encode_response(msg.id, msg.result)
    return encode_error(msg.id, msg.code, msg.message, msg.data)


def to_raw(value: Any) -> msgspec.Raw:
    """Encode a plain value as Raw JSON (for payloads the gateway builds)."""
    return msgspec.Raw(_encoder.encode(value))


def from_raw(raw: msgspec.Raw | None) -> Any:
    """Decode Raw JSON to plain Python values (None stays None)."""
    if raw is None:
        return None
    return _any_decoder.decode(raw)
