"""Who is asking the console, and what they posted (the request side of ``handler``).

The credential check (an admin bearer token, the signed login cookie, or
loopback when no admin token exists), the Origin check on POSTs, and the
bounded form reader. Each refusal is one :class:`ConsoleDenied` carrying its
status and the message the page shows.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qsl, urlsplit

from gateway.console.csrf import COOKIE_NAME, bearer_identity
from gateway.errors import GatewayError
from gateway.frontend import http_util as h
from gateway.frontend.http_util import BodyTooLarge

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


MAX_FORM_BYTES: Final = 256 * 1024
_LOOPBACK_HOSTS: Final = ("127.0.0.1", "localhost", "[::1]", "::1")


class ConsoleDenied(GatewayError):
    """A console request refused: its status and the message the page shows.

    Args:
        status: 401, 403, 404, 405, 409 or 413.
        message: what went wrong, for the operator.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


async def identity(
    scope: h.Scope,
    tokens: list[bytes],
    login_of: Callable[[str], Awaitable[str | None]],
    by_role: Callable[[bytes], Awaitable[bool]] | None = None,
) -> str:
    """The credential's identity for its CSRF token, or a refusal (``handler`` rule 1).

    Args:
        scope: the request.
        tokens: the admin tokens (``admin.tokens`` and ``auth.admin_tokens``).
        login_of: the nonce of a login cookie that holds, else None
            (``LoginBook.identity``: its signature and its record).
        by_role: whether a bearer token that is no admin token is a
            principal the policy grants ``role: admin``; None when no rule
            grants it. With neither tokens nor roles the console is open on
            loopback.

    Raises:
        ConsoleDenied: 401 without a credential, 403 with one that is not an
            admin's, 503 when a cookie cannot be checked (the store is down).
    """
    if not tokens and by_role is None:
        host = (h.header(scope, b"host") or b"").decode("latin-1")
        if _host_name(host) not in _LOOPBACK_HOSTS:
            raise ConsoleDenied(403, "the console without admin tokens answers on loopback only")
        return "loopback"
    authorization = h.header(scope, b"authorization")
    if authorization is not None:
        scheme, _, value = authorization.partition(b" ")
        token = value.strip()
        if scheme.lower() != b"bearer" or not token:
            raise ConsoleDenied(401, "Authorization must be 'Bearer <admin token>'")
        if not (one_of(token, tokens) or (by_role is not None and await by_role(token))):
            raise ConsoleDenied(403, "this token is not an admin token")
        return bearer_identity(token)
    cookie = _cookie(scope, COOKIE_NAME)
    if cookie is not None:
        nonce = await login_of(cookie)
        if nonce is not None:
            return nonce
    raise ConsoleDenied(401, "log in with an admin token")


def check_origin(scope: h.Scope) -> None:
    """Refuse a POST whose ``Origin`` names another host (rule 2 of ``handler``)."""
    origin = h.header(scope, b"origin")
    if origin is None:
        return
    host = (h.header(scope, b"host") or b"").decode("latin-1").lower()
    if urlsplit(origin.decode("latin-1")).netloc.lower() != host:
        raise ConsoleDenied(403, "cross-origin POST refused: Origin is not this console's host")


def one_of(token: bytes, known: list[bytes]) -> bool:
    """Whether ``token`` is one of ``known``, every one compared in constant time."""
    matched = False
    for candidate in known:
        matched |= hmac.compare_digest(candidate, token)
    return matched


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _cookie(scope: h.Scope, name: str) -> str | None:
    raw = h.header(scope, b"cookie")
    if raw is None:
        return None
    for part in raw.decode("latin-1").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


async def read_form(receive: h.Receive) -> dict[str, str]:
    """A posted urlencoded form, bounded; a refusal for what is not one."""
    try:
        body = await h.read_body(receive, MAX_FORM_BYTES)
    except BodyTooLarge:
        raise ConsoleDenied(413, f"the form is over {MAX_FORM_BYTES // 1024} KiB") from None
    try:
        text = body.decode()
    except UnicodeDecodeError:
        raise ConsoleDenied(400, "the form is not UTF-8") from None
    try:
        return dict(parse_qsl(text, keep_blank_values=True, max_num_fields=1000))
    except ValueError:
        raise ConsoleDenied(400, "the form has too many fields") from None


def wants_html(scope: h.Scope) -> bool:
    """A browser's navigation names ``text/html`` (curl's ``*/*`` does not count)."""
    return "text/html" in h.media_types(h.header(scope, b"accept"))
