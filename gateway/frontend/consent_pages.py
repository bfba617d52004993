"""The person's browser at the gateway: ``/oauth/start/<link>`` and the OAuth callback.

Rules:

1. **GET only (a HEAD would use up a link), no session.** A link's start redirects (302) to the
   authorization server with PKCE, ``state`` and ``resource``
   (``ConsentTokens.start``); the callback (``consent.callback_path``)
   completes the login its ``state`` names (``ConsentTokens.finish``).
   Who the person is comes from the records, never from the request.
   With ``consent.bind_login`` the start redirects to the gateway's OpenID
   provider first, and that login's callback redirects on to the backend's
   server once it proved the person is the link's principal.
2. **Refusals are pages, never a 500.** An unknown, used, tampered or
   expired link or state, or a server's ``error``, is 400 with a short
   page saying what happened and to start again from the host; an
   authorization server that cannot be found or used is 502; a store that
   does not answer is 503; a login as another person than the link's, or
   a link of a static-token caller under ``bind_login``, is 403. No page
   echoes a parameter.
3. Every page is ``no-store`` and forbids framing, and none carries a token.
4. **The gateway's client ID metadata documents** are served at
   ``/oauth/client/<backend>`` (JSON, GET only) for each ``user_consent``
   backend configured without a ``client_id``: the authorization server
   fetches the document its client id names (``consent.registration``).
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qs, unquote

import structlog

from gateway.consent.oauth import ConsentSetupError
from gateway.consent.records import LoginRefused, Refusal
from gateway.consent.registration import CLIENT_DOCUMENT_PATH
from gateway.frontend import http_util as h
from gateway.store.api import StoreUnavailable

if TYPE_CHECKING:
    from gateway.backends.credentials.consent_tokens import ConsentTokens

logger = structlog.get_logger("gateway.frontend.consent_pages")

START_PATH: Final = "/oauth/start/"
HTML: Final = b"text/html; charset=utf-8"
#: The longest query string read from a callback.
MAX_QUERY: Final = 8192
_HEADERS: Final = (
    (b"cache-control", b"no-store"),
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'"),
    (b"referrer-policy", b"no-referrer"),
)


#: Refusals of who the person is (``consent.bind_login``): 403, not 400.
_FORBIDDEN: Final = frozenset({Refusal.NOT_THE_CALLER, Refusal.CANNOT_BIND})


def _page(title: str, text: str) -> bytes:
    return (
        "<!doctype html><html><head><meta charset=utf-8><title>"
        + html.escape(title)
        + "</title></head><body><h1>"
        + html.escape(title)
        + "</h1><p>"
        + html.escape(text)
        + "</p></body></html>"
    ).encode()


class ConsentPages:
    """The two paths of the consent flow (module rules), mounted on the gateway's app.

    Args:
        tokens: the consent flow.
        callback_path: ``consent.callback_path``.
    """

    def __init__(self, tokens: ConsentTokens, callback_path: str) -> None:
        self._tokens = tokens
        self._callback = callback_path.rstrip("/") or "/"

    def owns(self, path: str) -> bool:
        """Whether a request path is the start of a link, the callback or a client document."""
        return (
            path.startswith(START_PATH)
            or path.startswith(CLIENT_DOCUMENT_PATH)
            or path == self._callback
        )

    async def __call__(self, scope: h.Scope, receive: h.Receive, send: h.Send) -> None:
        """Answer one browser request (rules 1-3)."""
        # GET only: a HEAD (a link preview) must not use up a single-use link.
        if scope["method"] != "GET":
            await self._answer(send, 405, "Not allowed", "Open the link from your client.")
            return
        path = scope["path"].rstrip("/") or "/"
        if path.startswith(CLIENT_DOCUMENT_PATH):
            document = self._tokens.client_document(unquote(path[len(CLIENT_DOCUMENT_PATH) :]))
            if document is None:
                await self._answer(send, 404, "Not found", "No such client.")
            else:
                await h.respond(send, 200, document, content_type=b"application/json")
            return
        try:
            if path.startswith(START_PATH):
                location = await self._tokens.start(path[len(START_PATH) :])
                await h.respond(
                    send, 302, b"", headers=((b"location", location.encode()), *_HEADERS)
                )
                return
            query = parse_qs(
                bytes(scope.get("query_string", b""))[:MAX_QUERY].decode("utf-8", "replace")
            )
            login = await self._tokens.finish(
                _first(query, "state"), _first(query, "code"), _first(query, "error")
            )
            if isinstance(login, str):  # logged in as the caller: on to the backend's server
                await h.respond(send, 302, b"", headers=((b"location", login.encode()), *_HEADERS))
                return
        except LoginRefused as exc:
            logger.info("consent.refused", reason=exc.reason.name, path=path[:40])
            await self._answer(
                send,
                403 if exc.reason in _FORBIDDEN else 400,
                "Sign-in not completed",
                f"This sign-in link is {exc.reason.value}. Start again from your client.",
            )
            return
        except ConsentSetupError as exc:
            logger.warning("consent.setup_failed", error=str(exc))
            await self._answer(
                send, 502, "Sign-in unavailable", "The tool server's sign-in cannot be reached."
            )
            return
        except StoreUnavailable:
            await self._answer(send, 503, "Try again", "The gateway cannot record sign-ins now.")
            return
        await self._answer(
            send,
            200,
            "Signed in",
            f"The gateway may now use your account at {login.backend}. "
            "You can close this window and go back to your client.",
        )

    async def _answer(self, send: h.Send, status: int, title: str, text: str) -> None:
        await h.respond(send, status, _page(title, text), content_type=HTML, headers=_HEADERS)


def _first(query: dict[str, list[str]], name: str) -> str:
    values = query.get(name)
    return values[0] if values else ""
