"""The effective config with every secret replaced (sans-IO).

One rule, applied to the config as plain data (``msgspec.to_builtins``):

- a value whose key is in :data:`SECRET_KEYS` is replaced by
  :data:`REDACTED`: a string becomes the marker, a list each of its
  items, a mapping each of its values (the keys stay: an operator may see
  *which* environment variables or headers are set, not their values);
- a URL's password (``scheme://user:password@host``) is replaced too,
  wherever a URL appears, since a backend URL may carry one;
- an empty value stays empty (``""`` says "not set", which is no secret and
  helps the reader).

``SECRET_KEYS`` is every field of the schema that holds a credential: the
test in ``tests/console/test_redact.py`` fills each one with a canary and
checks that none survives, so a new secret field that is not listed here
fails it.
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

REDACTED: Final = "•••redacted•••"

#: Config keys whose values are credentials (rule 1).
SECRET_KEYS: Final = frozenset(
    {
        # auth:
        "bearer_tokens",
        "tokens",  # auth.tokens (name → token) and admin.tokens
        "admin_tokens",
        "secret",  # auth.jwt.secret
        # pagination, mrtr
        "cursor_secret",
        "state_secret",
        # backends[].auth (and its catalog twin)
        "token",
        "client_secret",
        # backends[]: a stdio child's environment and an HTTP backend's headers;
        # tracing.headers (an OTLP collector's API key)
        "env",
        "headers",
        # store: the shared server's password (its URL's password is
        # redacted as every URL's is)
        "password",
    }
)

_URL_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^/@:\s]*:)[^/@\s]+(?=@)")


def redacted(config: msgspec.Struct) -> dict[str, Any]:
    """The config as plain data with every secret replaced."""
    data = msgspec.to_builtins(config)
    assert isinstance(data, dict)
    cleaned = _walk(data, secret=False)
    assert isinstance(cleaned, dict)
    return cleaned


def _walk(value: Any, *, secret: bool) -> Any:
    if isinstance(value, dict):
        return {
            key: _walk(item, secret=secret or key in SECRET_KEYS) for key, item in value.items()
        }
    if isinstance(value, list):
        return [_walk(item, secret=secret) for item in value]
    if isinstance(value, str):
        if secret:
            return REDACTED if value else ""
        return _URL_PASSWORD.sub(rf"\g<head>{REDACTED}", value)
    return REDACTED if secret and value is not None else value
