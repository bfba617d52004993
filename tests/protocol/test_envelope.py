"""Specification tests for ``gateway.protocol.stateless.envelope`` (sans-IO).

2026-07-28 ``basic/index.mdx`` §_meta: every request carries its protocol
version and capabilities; checks run envelope, headers, version, as the
Python SDK runs them.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    http_status_for,
)
from gateway.protocol.stateless.envelope import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    LOG_LEVEL_KEY,
    LOG_LEVELS,
    PROTOCOL_VERSION_KEY,
    Envelope,
    is_modern,
    missing_capabilities,
    parse_envelope,
)
from gateway.protocol.stateless.error_codes import (
    EnvelopeInvalid,
    HeaderMismatch,
    MissingClientCapability,
    ModernProtocolError,
    UnsupportedVersion,
)

V = "2026-07-28"


def params(**meta: Any) -> dict[str, Any]:
    base: dict[str, Any] = {PROTOCOL_VERSION_KEY: V, CLIENT_CAPABILITIES_KEY: {}}
    base.update(meta)
    return {"_meta": {k: v for k, v in base.items() if v is not _DROP}}


_DROP: Any = object()
HEADERS = {"mcp-protocol-version": V, "mcp-method": "tools/list"}


def test_the_version_key_decides_the_era() -> None:
    """Spec (versioning.mdx): a request with modern ``_meta`` is modern, else legacy."""
    assert is_modern(params())
    assert is_modern({"_meta": {PROTOCOL_VERSION_KEY: "1900-01-01"}})
    assert not is_modern({"protocolVersion": V, "capabilities": {}})
    assert not is_modern({"_meta": {"progressToken": 1}})
    assert not is_modern(None)
    assert not is_modern({"_meta": "x"})


def test_a_full_envelope_is_typed_and_frozen() -> None:
    """Spec: version, capabilities, clientInfo, logLevel, progressToken, trace context."""
    env = parse_envelope(
        "tools/list",
        params(
            **{
                CLIENT_CAPABILITIES_KEY: {"sampling": {}},
                CLIENT_INFO_KEY: {"name": "c", "version": "1"},
                LOG_LEVEL_KEY: "warning",
                "progressToken": "p1",
                "traceparent": "00-abc-def-01",
                "baggage": 7,
            }
        ),
        HEADERS,
    )
    assert env == Envelope(
        protocol_version=V,
        client_capabilities={"sampling": {}},
        client_info={"name": "c", "version": "1"},
        log_level="warning",
        progress_token="p1",
        trace={"traceparent": "00-abc-def-01"},
    )
    with pytest.raises(AttributeError):
        env.log_level = "debug"  # type: ignore[misc]  # proving it is frozen


def test_minimal_envelope_on_stdio_has_no_log_level() -> None:
    """Spec: clientInfo is optional (schema.ts); no logLevel means no log messages."""
    env = parse_envelope("tools/list", params())
    assert env.client_info is None
    assert env.log_level is None
    assert not env.wants_log("emergency")


@pytest.mark.parametrize("absent", [PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY])
def test_a_missing_required_key_is_minus_32602_400(absent: str) -> None:
    """Spec (basic/index.mdx): a request missing a required field is -32602, 400."""
    with pytest.raises(EnvelopeInvalid) as info:
        parse_envelope("tools/list", params(**{absent: _DROP}), HEADERS)
    assert (info.value.code, http_status_for(info.value.code)) == (INVALID_PARAMS, 400)
    assert absent in info.value.message


@pytest.mark.parametrize("bad", [None, [], {"_meta": None}, {"_meta": []}, {}])
def test_no_meta_object_is_minus_32602(bad: Any) -> None:
    """Spec: ``params._meta`` is required on every request."""
    with pytest.raises(EnvelopeInvalid):
        parse_envelope("server/discover", bad)


def test_the_envelope_is_checked_before_the_headers() -> None:
    """SDK order: a missing key is -32602 even when the headers disagree too."""
    with pytest.raises(EnvelopeInvalid):
        parse_envelope("tools/list", params(**{CLIENT_CAPABILITIES_KEY: _DROP}), {})


def test_headers_are_checked_before_the_version() -> None:
    """SDK order: header ≠ body is -32020 even for an unsupported version."""
    p = params(**{PROTOCOL_VERSION_KEY: "1900-01-01"})
    with pytest.raises(HeaderMismatch) as info:
        parse_envelope("tools/list", p, HEADERS)
    assert (info.value.code, http_status_for(info.value.code)) == (HEADER_MISMATCH, 400)


def test_an_unsupported_version_is_minus_32022_with_the_supported_list() -> None:
    """Spec (versioning.mdx): -32022, data.supported and data.requested, 400."""
    p = params(**{PROTOCOL_VERSION_KEY: "1900-01-01"})
    with pytest.raises(UnsupportedVersion) as info:
        parse_envelope("tools/list", p)
    err = info.value
    assert (err.code, http_status_for(err.code)) == (UNSUPPORTED_PROTOCOL_VERSION, 400)
    assert err.data == {"supported": [V], "requested": "1900-01-01"}


@pytest.mark.parametrize(
    "meta",
    [
        {PROTOCOL_VERSION_KEY: 20260728},
        {CLIENT_CAPABILITIES_KEY: []},
        {CLIENT_INFO_KEY: "me"},
        {LOG_LEVEL_KEY: "verbose"},
        {LOG_LEVEL_KEY: "WARNING"},
        {"progressToken": True},
        {"progressToken": {"t": 1}},
    ],
)
def test_ill_typed_keys_are_minus_32602(meta: dict[str, Any]) -> None:
    """Spec: a bad logLevel is -32602 (logging.mdx); other shapes per schema.ts."""
    with pytest.raises(EnvelopeInvalid):
        parse_envelope("tools/list", params(**meta))


def test_log_level_is_a_threshold() -> None:
    """Spec (logging.mdx): messages at or above the requested level only."""
    env = parse_envelope("tools/list", params(**{LOG_LEVEL_KEY: "warning"}))
    assert [lvl for lvl in LOG_LEVELS if env.wants_log(lvl)] == list(LOG_LEVELS[3:])
    assert not env.wants_log("chatty")


def test_undeclared_capabilities_are_minus_32021_naming_them() -> None:
    """Spec (basic/index.mdx): -32021 with data.requiredCapabilities, 400."""
    env = parse_envelope("tools/call", params(**{CLIENT_CAPABILITIES_KEY: {"elicitation": {}}}))
    env.require({"elicitation": {"form": {}}})  # {} means form mode
    with pytest.raises(MissingClientCapability) as info:
        env.require({"elicitation": {"url": {}}, "sampling": {}})
    err = info.value
    assert (err.code, http_status_for(err.code)) == (MISSING_REQUIRED_CLIENT_CAPABILITY, 400)
    assert err.data == {"requiredCapabilities": {"elicitation": {"url": {}}, "sampling": {}}}


caps: st.SearchStrategy[dict[str, dict[str, dict[str, Any]]]] = st.dictionaries(
    st.sampled_from(["roots", "sampling", "elicitation", "x"]),
    st.dictionaries(st.sampled_from(["tools", "context", "form", "url"]), st.just({}), max_size=2),
)


@given(caps, caps)
def test_declared_capabilities_are_never_missing(declared: Any, extra: Any) -> None:
    """Property: what was declared is never reported missing; the gap is in ``required``."""
    assert missing_capabilities(declared, declared) == {}
    gap = missing_capabilities(declared, extra)
    assert set(gap) <= set(extra)


@given(st.dictionaries(st.text(max_size=8), st.none() | st.integers() | st.text(), max_size=4))
def test_any_meta_yields_an_envelope_or_a_modern_error(junk: dict[str, Any]) -> None:
    """Property: never an exception of another type, whatever ``_meta`` holds."""
    status = 200
    try:
        parse_envelope("tools/list", {"_meta": junk}, HEADERS)
    except ModernProtocolError as exc:
        status = http_status_for(exc.code)
    assert status in (200, 400)
