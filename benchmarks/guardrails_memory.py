"""Issue 29 benchmark: the memory a guardrail chain takes to inspect one large result.

Results are inspected in memory (docs/security.md, "Guardrails"): the
result's bytes are decoded once, each filter reads the decoded strings, and
a filter that changes something copies only what it changed; the answer is
encoded again only when something changed. This measures the peak of what
that path allocates (``tracemalloc``, over the bytes the backend sent, which
the caller already holds) for results of 1 and 10 MiB of prose in one text
block, through ``secrets`` (redact), ``size`` and ``markers``:

- **clean**: nothing to change (the common case): decode + the filters'
  reading only (``size`` measures the encoding a bounded slice at a time),
  so close to one copy;
- **one secret**: an AWS key pair near the end, redacted: decode, the one
  changed string (built in place, a bounded slice at a time), then, with
  the decoded original let go, the new encoding (msgspec's buffer grows to
  about 1.5 times the result while it writes).

The figure is the peak ÷ the result's size; the target is under 3 (never
three copies of a result alive at once). A ratio, not a time: it does not
depend on how fast the machine is.

Run: ``.venv/bin/python -m benchmarks.guardrails_memory``.
"""

from __future__ import annotations

import tracemalloc
from typing import Any, Final

import msgspec

from gateway.config.schema_filters import FilterConfig
from gateway.guardrails.filters import Decision, Modify, Subject, run_chain
from gateway.protocol import mcp

MIB: Final = 1024 * 1024
TARGET: Final = 3.0
_PROSE: Final = (
    "The quarterly report lists revenue by region, the open orders and the "
    "shipping dates agreed with each customer; nothing in it is a credential. "
)
_SECRET: Final = (
    " aws_access_key_id = AKIAIOSFODNN7EXAMPLE"
    " aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY "
)
_FILTERS: Final[tuple[dict[str, Any], ...]] = (
    {"type": "secrets", "action": "redact"},
    {"type": "size", "max_bytes": 64 * MIB},
    {"type": "markers", "action": "redact"},
)


def _result(size: int, secret: bool) -> bytes:
    """A tools/call result of about ``size`` bytes of prose, with a secret near its end."""
    text = (_PROSE * (size // len(_PROSE) + 1))[:size]
    if secret:
        text = text[: size - 4096] + _SECRET + text[size - 4096 + len(_SECRET) :]
    return msgspec.json.encode({"content": [{"type": "text", "text": text}]})


def _decide(raw: bytes, filters: list[FilterConfig]) -> Decision:
    """The chain's decision; the decoded original goes with this frame (as in the router)."""
    body = mcp.decode_object(msgspec.Raw(raw))
    assert body is not None
    decision, _each = run_chain(filters, Subject(point="results", item="web__fetch", payload=body))
    return decision


def _inspect(raw: bytes, filters: list[FilterConfig]) -> msgspec.Raw | bytes:
    """What the router's result point does (``router.filtering.filter_result``)."""
    decision = _decide(raw, filters)
    if isinstance(decision, Modify):
        return mcp.encode(decision.payload)
    return raw


def measure(size: int, secret: bool) -> tuple[float, bool]:
    """Peak bytes allocated while inspecting one result ÷ its size; whether it changed."""
    filters = msgspec.convert(list(_FILTERS), list[FilterConfig])
    raw = _result(size, secret)
    _inspect(_result(4096, secret), filters)  # compile the patterns before measuring
    tracemalloc.start()
    try:
        out = _inspect(raw, filters)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / len(raw), out is not raw


def main() -> None:
    """Print one row per size and case, with the verdict against the target."""
    print(f"{'result':>8} {'case':>10} {'peak/size':>10} {'changed':>8}  verdict (< {TARGET}x)")
    for size in (MIB, 10 * MIB):
        for secret in (False, True):
            ratio, changed = measure(size, secret)
            verdict = "pass" if ratio < TARGET else "miss"
            case = "one secret" if secret else "clean"
            print(f"{size // MIB:>6}Mi {case:>10} {ratio:>10.2f} {changed!s:>8}  {verdict}")


if __name__ == "__main__":
    main()
