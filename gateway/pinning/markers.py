"""Text that addresses the model, and addresses in text (sans-IO).

A definition's description is read by a model as instructions. These rules
find what a person vetting a change wants to see first: phrases that tell
the model to ignore its instructions or to keep something from the user,
characters a person cannot see, long encoded blobs, paths to secrets, and
every URL or address. Shared by the drift classifier and the guardrails'
result filter; each finding is a typed :class:`Marker`, never a message
to match.

These are markers, not a verdict: a new URL in a description is often
benign. Pinning uses them to classify a change so a person can decide.
"""

from __future__ import annotations

import enum
import re
import unicodedata
from typing import Final

import msgspec

__all__ = ["Marker", "MarkerKind", "addresses", "model_markers"]


class MarkerKind(enum.Enum):
    """What kind of text addresses the model."""

    #: "ignore previous instructions", "do not tell the user", a fake system tag.
    INSTRUCTION = "instruction"
    #: Format characters a person does not see (zero-width, bidi, tag characters).
    HIDDEN_UNICODE = "hidden_unicode"
    #: A long base64 run: an instruction or a payload a person cannot read.
    ENCODED_BLOB = "encoded_blob"
    #: A path to credentials (``~/.ssh``, ``.aws/credentials``, ``id_rsa``, ``.env``).
    SECRET_PATH = "secret_path"


class Marker(msgspec.Struct, frozen=True):
    """One finding: its kind and a short excerpt (at most 80 characters)."""

    kind: MarkerKind
    excerpt: str


_INSTRUCTIONS: Final = re.compile(
    r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+)?(?:the\s+|your\s+)?"
    r"(?:previous|prior|above|earlier|preceding|other|system)\s+"
    r"(?:instructions?|prompts?|messages?|rules|directions|context)"
    r"|\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|mention|reveal|show|alert|notify)"
    r"(?:\s+\w+){0,3}?\s+(?:the\s+)?user"
    r"|\bwithout\s+(?:telling|informing|notifying|alerting)\s+(?:the\s+)?user"
    r"|\bnew\s+instructions?\b"
    r"|\bsystem\s+prompt\b"
    r"|\byou\s+are\s+now\b"
    r"|<\s*/?\s*(?:system|important|instructions?|admin)\s*>"
    r"|\[/?INST\]",
    re.IGNORECASE,
)
_SECRET_PATHS: Final = re.compile(
    r"~/\.ssh\b|\bid_(?:rsa|ed25519|ecdsa|dsa)\b|\.aws/credentials\b|/etc/(?:passwd|shadow)\b"
    r"|(?<![\w.])\.env\b|\.netrc\b|\.npmrc\b|\.pypirc\b|\.docker/config\.json",
    re.IGNORECASE,
)
#: 40+ characters of the base64 alphabets with at least one digit and both
#: cases: long identifiers and hex digests do not count.
_BLOB: Final = re.compile(r"[A-Za-z0-9+/_-]{40,}={0,2}")
_URL: Final = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'<>)\]}`]+")
_EMAIL: Final = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_IPV4: Final = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b")
_DOMAIN: Final = re.compile(
    r"\b(?:[a-zA-Z0-9-]+\.)+(?:com|net|org|io|dev|ai|app|co|xyz|me|sh|info|biz|site|"
    r"online|cloud|ru|cn|tk|top|gg|ly|to|so)\b"
)


def _excerpt(text: str, start: int, end: int) -> str:
    return text[max(0, start - 10) : min(len(text), end + 10)][:80]


def model_markers(text: str) -> list[Marker]:
    """Every marker of text addressing the model in ``text``, in order of kind.

    Args:
        text: a description, a title, a tool result's text.

    Returns:
        The markers found; empty for plain text.
    """
    found = [
        Marker(MarkerKind.INSTRUCTION, _excerpt(text, m.start(), m.end()))
        for m in _INSTRUCTIONS.finditer(text)
    ]
    hidden = [c for c in text if unicodedata.category(c) == "Cf"]
    if hidden:
        names = ", ".join(sorted({f"U+{ord(c):04X}" for c in hidden})[:5])
        found.append(Marker(MarkerKind.HIDDEN_UNICODE, names))
    for m in _BLOB.finditer(text):
        run = m.group()
        if (
            any(c.isdigit() for c in run)
            and any(c.islower() for c in run)
            and any(c.isupper() for c in run)
        ):
            found.append(Marker(MarkerKind.ENCODED_BLOB, run[:40] + "…"))
    found += [
        Marker(MarkerKind.SECRET_PATH, _excerpt(text, m.start(), m.end()))
        for m in _SECRET_PATHS.finditer(text)
    ]
    return found


def addresses(text: str) -> set[str]:
    """Every URL, e-mail address, IPv4 address and bare domain in ``text``.

    Args:
        text: any text.

    Returns:
        The addresses, lower-cased (a bare domain inside a URL counts once,
        as the URL).
    """
    found: set[str] = set()
    rest = text
    for pattern in (_URL, _EMAIL, _IPV4, _DOMAIN):
        for m in pattern.finditer(rest):
            found.add(m.group().lower().rstrip(".,;:"))
        rest = pattern.sub(" ", rest)
    return found
