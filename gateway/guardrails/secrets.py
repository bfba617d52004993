"""Secrets in text: detect-secrets' detectors, each finding widened to the whole secret (sans-IO).

Rules:

1. **The detectors are detect-secrets'** (Yelp's, maintained, 25+
   detectors for cloud keys, tokens and private keys). The gateway uses
   each detector's own patterns (``denylist``) and skips the library's
   line scanner, which is built for source files (5 ms a line here, and
   entropy and keyword guesses that flag plain prose); the entropy
   detectors and the public-IP detector are left out for the same reason.
2. **Widened to the whole secret.** A detector flags a marker; the secret
   is more: a private key's PEM block runs from its ``BEGIN`` line to its
   ``END`` line; an AWS access key id travels with a 40-character secret
   key, redacted with it when it stands within a few lines; a token match
   runs on to the token's last character; a pattern whose
   capture group holds the secret (``aws_secret_access_key = "..."``)
   redacts the group, keeping the name a person reads.
3. **Spans, not copies.** :func:`find_secrets` returns sorted, merged
   ``(start, end, kind)`` spans; :func:`redact` builds one new string,
   appending the text between spans a bounded slice at a time, so a large
   text costs its redacted copy and one slice, never a list of slices and
   their join beside it (the 10 MiB figures in docs/performance.md).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any, Final

import msgspec

__all__ = ["SecretSpan", "find_secrets", "redact", "splice"]

#: Detectors left out (rule 1): guesses, not findings, on prose.
_SKIPPED: Final = frozenset(
    {"Base64HighEntropyString", "HexHighEntropyString", "KeywordDetector", "IPPublicDetector"}
)
_PEM_END: Final = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|---- END SSH2[^\n]*----")
_PEM_BEGIN: Final = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|---- BEGIN SSH2")
_AWS_ID: Final = re.compile(r"(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}")
#: An AWS secret access key: 40 of base64's characters, standing alone.
_AWS_SECRET: Final = re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
#: The characters a token is made of, for widening a match to the whole token.
_TOKEN_CHAR: Final = re.compile(r"[A-Za-z0-9_\-]")
#: How far from an access key id its secret may stand (rule 2).
_PAIR_REACH: Final = 400


class SecretSpan(msgspec.Struct, frozen=True, order=True):
    """Where a secret is in a text, and what kind it is."""

    start: int
    end: int
    kind: str


@cache
def _detectors() -> tuple[tuple[str, tuple[re.Pattern[str], ...]], ...]:
    # detect-secrets loads every plugin it has (half a second of a start on
    # a 2-core machine): only a guardrail that looks for secrets pays for it.
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    found = []
    detectors: dict[str, Any] = dict(get_mapping_from_secret_type_to_class())
    for kind, detector in sorted(detectors.items()):
        if detector.__name__ in _SKIPPED:
            continue
        patterns = tuple(getattr(detector(), "denylist", ()) or ())
        if patterns:
            found.append((kind, patterns))
    return tuple(found)


#: A capture group this long is the secret itself (rule 2); a shorter one is
#: a detector's marker (``ghp`` of a GitHub token) and the match is the secret.
_SECRET_GROUP: Final = 16


def _widen(text: str, kind: str, match: re.Match[str]) -> tuple[int, int]:
    start, end = match.span()
    if match.re.groups and match.group(1) and len(match.group(1)) >= _SECRET_GROUP:
        return match.span(1)
    if kind != "Private Key":
        # A token does not end mid-word: a pattern that fixes a length
        # (a GitHub token's 36) must not leave the rest of a longer one.
        while end < len(text) and _TOKEN_CHAR.match(text, end):
            end += 1
        while start > 0 and _TOKEN_CHAR.match(text, start - 1):
            start -= 1
        return start, end
    if kind == "Private Key":
        begin = text.rfind("-----", 0, start)
        line_start = text.rfind("\n", 0, start) + 1
        start = min(start, max(line_start, begin if begin >= 0 else start))
        closing = _PEM_END.search(text, end)
        next_begin = _PEM_BEGIN.search(text, end)
        if closing and (next_begin is None or closing.start() < next_begin.start()):
            end = closing.end()
        else:
            end = len(text)  # no END: everything after BEGIN is key material
    return start, end


def find_secrets(text: str) -> list[SecretSpan]:
    """Every secret in ``text`` (module rules), sorted, overlapping spans merged.

    Args:
        text: any text (a tool result's block, an argument's value).

    Returns:
        The spans; empty when none.
    """
    spans: list[SecretSpan] = []
    for kind, patterns in _detectors():
        for pattern in patterns:
            for match in pattern.finditer(text):
                start, end = _widen(text, kind, match)
                spans.append(SecretSpan(start, end, kind))
    for match in _AWS_ID.finditer(text):
        lo, hi = max(0, match.start() - _PAIR_REACH), match.end() + _PAIR_REACH
        spans.extend(
            SecretSpan(secret.start(), secret.end(), "AWS Secret Access Key")
            for secret in _AWS_SECRET.finditer(text, lo, hi)
        )
    return _merged(sorted(spans))


def _merged(spans: list[SecretSpan]) -> list[SecretSpan]:
    out: list[SecretSpan] = []
    for span in spans:
        if out and span.start <= out[-1].end:
            last = out[-1]
            if span.end > last.end:
                out[-1] = SecretSpan(last.start, span.end, last.kind)
        else:
            out.append(span)
    return out


#: The most of a text :func:`splice` copies at once: a sixteenth of it, at
#: least 64 KiB (a handful of appends, each a bounded transient copy).
_SLICE_MIN: Final = 64 * 1024
_SLICES: Final = 16


def splice(text: str, replacements: list[tuple[int, int, str]]) -> str:
    """``text`` with each ``(start, end, new)`` (sorted, apart) put in place of its span.

    The new string grows in place (CPython resizes a string only this
    function holds instead of copying it) and the text between spans is
    appended a bounded slice at a time: the peak is the new string and one
    slice, never every slice and their join (rule 3).

    Args:
        text: the original text (left as it is).
        replacements: sorted, non-overlapping spans with their new text.

    Returns:
        The new text; ``text`` itself when there is nothing to replace.
    """
    if not replacements:
        return text
    step = max(_SLICE_MIN, len(text) // _SLICES)
    out = ""
    cursor = 0
    for start, end, new in [*replacements, (len(text), len(text), "")]:
        # A ``for`` over the slices, not a ``while``: CPython 3.11 grows
        # ``out`` in place in this shape (tests/guardrails/test_secrets.py
        # measures it).
        for at in range(cursor, start, step):
            out += text[at : min(start, at + step)]
        out += new
        cursor = max(cursor, end)
    return out


def redact(text: str, spans: list[SecretSpan]) -> str:
    """``text`` with each span replaced by ``[redacted: KIND]`` (rule 3).

    Args:
        text: the text the spans were found in.
        spans: what :func:`find_secrets` returned for it.

    Returns:
        The redacted text (``text`` itself when there are no spans).
    """
    return splice(text, [(span.start, span.end, f"[redacted: {span.kind}]") for span in spans])
