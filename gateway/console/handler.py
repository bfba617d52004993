"""The console's ASGI routes under ``admin.path`` (``docs/console.md``).

Rules:

1. Every page and action needs an admin credential: ``Authorization:
   Bearer`` with one of ``admin.tokens`` / ``auth.admin_tokens`` or the
   token of a principal a ``policy:`` rule grants ``role: admin``, or the
   signed login cookie ``/login`` sets. With no admin token configured at
   all (allowed on a loopback bind only: ``config.schema_admin``) the
   console is open to this machine, and the Host header must name it.
   No credential is 401 (a browser asking for HTML is sent to the login
   page); a bearer token that is not an admin's is 403.
2. Every action is a POST carrying the CSRF token of its credential
   (``csrf``); a POST whose ``Origin`` is not this host is refused too.
   Both are 403 with a message that says which.
3. No response carries a secret or a full session id (``views``).
4. Static files need no credential: they are the same for everyone.

One module past 450 lines because it is one idea: the console's route
table, each route with the credential and CSRF check that guards it, so
that no route can be read apart from its guard. Pages' data, forms and
live updates are modules of their own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qsl, quote

import structlog
import trio

from gateway.console import live, pins, store_page
from gateway.console import page_data as views
from gateway.console.caller import (
    ConsoleDenied,
    check_origin,
    identity,
    one_of,
    read_form,
    wants_html,
)
from gateway.console.calls import call_tool
from gateway.console.csrf import COOKIE_NAME, CSRF_FIELD
from gateway.console.forms import FormError, arguments
from gateway.console.logins import LoginBook
from gateway.console.render import Renderer
from gateway.frontend import http_util as h
from gateway.frontend.rate_limits import RateLimiter
from gateway.identity.authenticator import InsufficientScope, Unauthenticated
from gateway.identity.policy import is_admin
from gateway.store.api import StoreUnavailable

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from gateway.backends.pins import PinGuard
    from gateway.backends.pool import Pool
    from gateway.config import GatewayConfig
    from gateway.console.activity import Activity
    from gateway.console.csrf import Signer
    from gateway.frontend.clients import ClientRegistry
    from gateway.identity.authenticator import AuthHolder
    from gateway.identity.policy import Policy
    from gateway.router import Router
    from gateway.runtime.reload import ReloadOutcome
    from gateway.store.api import Store
    from gateway.telemetry.metrics import Metrics

logger = structlog.get_logger("gateway.console")

HTML: Final = b"text/html; charset=utf-8"
#: Login attempts per client address: a burst of 10, then one per 10 s.
LOGIN_RATE: Final = 0.1
LOGIN_BURST: Final = 10.0
_SECURITY_HEADERS: Final = [
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (
        b"content-security-policy",
        b"default-src 'self'; style-src 'self'; script-src 'self'; "
        b"img-src 'self' data:; frame-ancestors 'none'; form-action 'self'",
    ),
]


@dataclass
class ConsoleParts:
    """The running parts the console reads and acts on (wired by ``app``).

    Attributes:
        pool: the backends and the catalog.
        clients: the client sessions.
        router: the calls and the profiles.
        activity: the latency window and the recent errors.
        config: the config in force now (a reload replaces it).
        last_reload: what the last reload did.
        auth: the authenticator in force (a ``role: admin`` principal's token).
        policy: the access policy in force (its ``role: admin`` rules).
        reload: reloads the config file.
        can_reload: whether there is a file to reload (the button shows).
        stopping: set when the gateway starts to stop (live streams end).
        pins: the pin guard, for the pins page (``console.pins``).
        consents: how many principals have consented, by ``user_consent``
            backend (``ConsentTokens.counts``); None without such backends.
        metrics: the gateway's metrics, for the store page's latencies.
        revoke_consent: revokes one principal's consent at one backend (at
            the authorization server, then in the store): whether there was
            one, and what the server did (``AtServer`` name); None without
            such backends.
    """

    pool: Pool
    clients: ClientRegistry
    router: Router
    activity: Activity
    config: Callable[[], GatewayConfig]
    auth: AuthHolder
    policy: Callable[[], Policy | None]
    last_reload: Callable[[], ReloadOutcome | None]
    reload: Callable[[], Awaitable[object]]
    can_reload: Callable[[], bool]
    stopping: Callable[[], trio.Event]
    pins: Callable[[], PinGuard | None] = lambda: None
    consents: Callable[[], Awaitable[dict[str, int]]] | None = None
    metrics: Callable[[], Metrics | None] = lambda: None
    revoke_consent: Callable[[str, str], Awaitable[tuple[bool, str]]] | None = None


class ConsoleApp:
    """Serves the console's pages, actions and static files under ``base``.

    Args:
        base: the console's path (``admin.path``).
        parts: what it shows and acts on.
        signer: makes and checks login cookies and CSRF tokens (tests); by
            default its key comes from the store (``console.logins``).
        store: where logins and the signing key live, shared by replicas;
            None: a random key per process and no login records.
    """

    def __init__(
        self,
        base: str,
        parts: ConsoleParts,
        signer: Signer | None = None,
        store: Store | None = None,
    ) -> None:
        self.base = base.rstrip("/")
        self.parts = parts
        self.store = store
        self.book = LoginBook(store, signer)
        self.renderer = Renderer()
        # Login attempts per client address: a token cannot be guessed at speed.
        self.logins = RateLimiter(LOGIN_RATE, LOGIN_BURST, max_keys=10_000)

    def owns(self, path: str) -> bool:
        """Whether a request path is the console's."""
        return path == self.base or path.startswith(self.base + "/")

    async def __call__(self, scope: h.Scope, receive: h.Receive, send: h.Send) -> None:
        """Answer one console request (under ``rejection.answer`` like every path)."""
        try:
            await self._route(scope, receive, send)
        except ConsoleDenied as denied:
            await self._denied(scope, send, denied)

    async def _route(self, scope: h.Scope, receive: h.Receive, send: h.Send) -> None:
        rest = scope["path"][len(self.base) :].rstrip("/") or "/"
        method = scope["method"]
        if rest.startswith("/static/"):
            await self._static(send, rest[len("/static/") :])
            return
        if rest == "/login":
            await (
                self._login(scope, receive, send) if method == "POST" else self._login_page(send)
            )
            return
        signer = await self.book.signer()
        who = await identity(scope, self._admin_tokens(), self.book.identity, self._role_check())
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if method == "GET":
            page = _PAGES.get(rest)
            if page is None:
                raise ConsoleDenied(404, f"no such console page: {rest[:100]}")
            if rest == "/events":
                await live.stream(receive, send, self._figures, self.parts.stopping())
                return
            await page(self, send, who, query)
            return
        if method != "POST":
            raise ConsoleDenied(
                405, f"{method[:10]} is not allowed here; pages are GET, actions POST"
            )
        action = _ACTIONS.get(rest)
        if action is None:
            raise ConsoleDenied(404, f"no such console action: {rest[:100]}")
        check_origin(scope)
        form = await read_form(receive)
        if not signer.csrf_ok(who, form.get(CSRF_FIELD, "")):
            raise ConsoleDenied(
                403,
                "CSRF check failed: the form's csrf token is missing or not this "
                "login's; reload the page and try again",
            )
        await action(self, send, who, form)

    # -- credentials --------------------------------------------------------

    def _role_check(self) -> Callable[[bytes], Awaitable[bool]] | None:
        """The policy's ``role: admin`` check, when a rule of the policy in force grants it."""
        policy = self.parts.policy()
        if policy is None or not any(rule.admin for rule in policy.rules):
            return None
        auth = self.parts.auth

        async def check(token: bytes) -> bool:
            try:
                principal = await auth.current.authenticate(b"Bearer " + token)
            except (Unauthenticated, InsufficientScope):
                return False
            return is_admin(policy, principal)

        return check

    def _admin_tokens(self) -> list[bytes]:
        config = self.parts.config()
        return [t.encode() for t in [*config.admin.tokens, *config.auth.admin_tokens] if t]

    # -- login --------------------------------------------------------------

    async def _login_page(self, send: h.Send, problem: str = "", status: int = 200) -> None:
        body = self.renderer.page("login.html", base=self.base, problem=problem, nav=False)
        await self._html(send, status, body)

    async def _login(self, scope: h.Scope, receive: h.Receive, send: h.Send) -> None:
        check_origin(scope)
        form = await read_form(receive)
        client = scope.get("client") or ("", 0)
        wait = self.logins.check(str(client[0]), trio.current_time())
        if wait > 0:
            logger.warning("console.login", outcome="throttled")
            await self._login_page(send, f"Too many attempts: try again in {wait:.0f} s.", 429)
            return
        tokens, by_role = self._admin_tokens(), self._role_check()
        token = form.get("token", "").strip().encode()
        known = bool(token) and (
            one_of(token, tokens) or (by_role is not None and await by_role(token))
        )
        if (tokens or by_role is not None) and not known:
            logger.warning("console.login", outcome="refused")
            await self._login_page(send, "That is not an admin token.", 401)
            return
        ttl = self.parts.config().admin.session_ttl
        value = await self.book.open(ttl)
        secure = "; Secure" if self.parts.config().server.tls.cert_file else ""
        cookie = (
            f"{COOKIE_NAME}={value}; Path={self.base}; Max-Age={int(ttl)}; "
            f"HttpOnly; SameSite=Strict{secure}"
        )
        logger.info("console.login", outcome="ok")
        await self._redirect(send, self.base + "/", [(b"set-cookie", cookie.encode())])

    # -- pages ----------------------------------------------------------------

    def _common(self, identity: str, active: str) -> dict[str, Any]:
        return {
            "base": self.base,
            "csrf": self.book.known_signer.csrf_token(identity),
            "active": active,
            "nav": True,
        }

    def _figures(self) -> dict[str, Any]:
        pool = self.parts.pool
        return views.live_figures(pool.backends.values(), self.parts.activity, trio.current_time())

    async def _overview(self, send: h.Send, identity: str, query: dict[str, str]) -> None:
        now = trio.current_time()
        parts = self.parts
        rows = views.backend_rows(parts.pool.backends.values(), parts.activity, now)
        consents: dict[str, int] | None = None
        if parts.consents is not None:
            try:
                consents = await parts.consents()
            except StoreUnavailable:
                consents = None  # the page still shows; the column says unknown
        body = self.renderer.page(
            "overview.html",
            **self._common(identity, "overview"),
            backends=rows,
            consents=consents,
            consent_column=parts.consents is not None,
            consents_backends=sorted(consents or {}),
            # Fixed words chosen by a fixed key: no text of the URL's choosing.
            revoked=_REVOKED_NOTICES.get(query.get("revoked", ""), ""),
            groups=views.session_summary(parts.clients),
            cache=views.cache_rows(parts.router.cache),
            sessions=len(views.session_rows(parts.clients, now)),
            can_reload=parts.can_reload(),
        )
        await self._html(send, 200, body)

    async def _catalog(self, send: h.Send, identity: str, query: dict[str, str]) -> None:
        text = query.get("q", "")[:200]
        rows = views.catalog_rows(self.parts.router, self.parts.pool.snapshot, text)
        body = self.renderer.page(
            "catalog.html",
            **self._common(identity, "catalog"),
            rows=rows,
            query=text,
            profiles=self.parts.router.profiles.names,
        )
        await self._html(send, 200, body)

    async def _tool(self, send: h.Send, identity: str, query: dict[str, str], **extra: Any) -> None:
        name = query.get("name", "")
        page = views.tool_page(self.parts.pool.snapshot, name)
        if page is None:
            raise ConsoleDenied(404, f"no tool named {name[:200]!r} in the catalog")
        context = {"result": None, "problem": "", "values": {}} | extra
        body = self.renderer.page(
            "tool.html", **self._common(identity, "catalog"), tool=page, **context
        )
        await self._html(send, 200 if not context["problem"] else 400, body)

    async def _sessions(self, send: h.Send, identity: str, query: dict[str, str]) -> None:
        rows = views.session_rows(self.parts.clients, trio.current_time())
        body = self.renderer.page(
            "sessions.html",
            **self._common(identity, "sessions"),
            rows=rows,
            # Only a short id is reflected, in fixed words: no text of the URL's choosing.
            closed=short
            if re.fullmatch(r"[A-Za-z0-9_-]{8}", short := query.get("closed", ""))
            else "",
        )
        await self._html(send, 200, body)

    async def _errors(self, send: h.Send, identity: str, query: dict[str, str]) -> None:
        text, backend = query.get("q", "")[:200], query.get("backend", "")[:100]
        errors = self.parts.activity.errors
        body = self.renderer.page(
            "errors.html",
            **self._common(identity, "errors"),
            rows=views.error_rows(self.parts.activity, text, backend),
            query=text,
            backend=backend,
            backends=sorted(self.parts.pool.backends),
            kept=len(errors),
            total=errors.total,
        )
        await self._html(send, 200, body)

    async def _config(self, send: h.Send, identity: str, query: dict[str, str]) -> None:
        page = views.config_page(
            self.parts.config(), self.parts.last_reload(), self.parts.can_reload()
        )
        body = self.renderer.page("config.html", **self._common(identity, "config"), page=page)
        await self._html(send, 200, body)

    # -- actions --------------------------------------------------------------

    async def _call(self, send: h.Send, identity: str, form: dict[str, str]) -> None:
        name = form.get("name", "")
        page = views.tool_page(self.parts.pool.snapshot, name)
        if page is None:
            raise ConsoleDenied(404, f"no tool named {name[:200]!r} in the catalog")
        values = {f.name: form.get(f.input_name, "") for f in page.fields}
        try:
            args = arguments(page.fields, form)
        except FormError as exc:
            await self._tool(send, identity, {"name": name}, problem=str(exc), values=values)
            return
        result = await call_tool(self.parts.router, name, args)
        await self._tool(send, identity, {"name": name}, result=result, values=values)

    async def _close_session(self, send: h.Send, identity: str, form: dict[str, str]) -> None:
        short = form.get("session", "")
        found = views.find_session(self.parts.clients, short)
        if len(found) != 1:
            problem = "no open session" if not found else "more than one session"
            raise ConsoleDenied(409, f"{problem} starts with {short[:8]!r}")
        self.parts.clients.close(found[0])
        logger.info("console.session.closed", client_session=short)
        await self._redirect(send, f"{self.base}/sessions?closed={quote(short)}")

    async def _revoke_consent(self, send: h.Send, identity: str, form: dict[str, str]) -> None:
        revoke = self.parts.revoke_consent
        if revoke is None:
            raise ConsoleDenied(409, "no backend uses auth type user_consent")
        principal, backend = form.get("principal", "").strip(), form.get("backend", "")
        if not principal or not backend:
            raise ConsoleDenied(400, "a principal and a backend are required")
        try:
            deleted, at_server = await revoke(principal[:300], backend[:200])
        except StoreUnavailable:
            raise ConsoleDenied(503, "the state store did not answer; nothing revoked") from None
        logger.info(
            "console.consent.revoked",
            principal=principal[:300],
            backend=backend[:200],
            deleted=deleted,
            at_server=at_server,
        )
        await self._redirect(send, f"{self.base}/?revoked={at_server if deleted else 'NONE'}")

    async def _reload(self, send: h.Send, identity: str, form: dict[str, str]) -> None:
        if not self.parts.can_reload():
            raise ConsoleDenied(
                409, "no config file to reload (the gateway was started without one)"
            )
        logger.info("console.reload")
        await self.parts.reload()
        await self._redirect(send, f"{self.base}/config")

    async def _logout(self, send: h.Send, identity: str, form: dict[str, str]) -> None:
        await self.book.close(identity)  # refused on every replica from now on
        cookie = f"{COOKIE_NAME}=; Path={self.base}; Max-Age=0; HttpOnly; SameSite=Strict"
        await self._redirect(send, self.base + "/login", [(b"set-cookie", cookie.encode())])

    # -- responses --------------------------------------------------------------

    async def _static(self, send: h.Send, name: str) -> None:
        found = self.renderer.static.get(name)
        if found is None:
            raise ConsoleDenied(404, f"no such file: {name[:100]}")
        body, content_type = found
        headers = [(b"cache-control", b"max-age=300"), (b"x-content-type-options", b"nosniff")]
        await h.respond(send, 200, body, content_type=content_type, headers=headers)

    async def _html(self, send: h.Send, status: int, body: bytes) -> None:
        await h.respond(send, status, body, content_type=HTML, headers=_SECURITY_HEADERS)

    async def _redirect(
        self, send: h.Send, location: str, headers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        out = [(b"location", location.encode()), *_SECURITY_HEADERS, *(headers or [])]
        await h.respond(send, 303, b"", content_type=None, headers=out)

    async def _denied(self, scope: h.Scope, send: h.Send, denied: ConsoleDenied) -> None:
        if denied.status == 401 and scope["method"] == "GET" and wants_html(scope):
            await self._redirect(send, self.base + "/login")
            return
        body = self.renderer.page(
            "denied.html", base=self.base, status=denied.status, message=denied.message, nav=False
        )
        headers = list(_SECURITY_HEADERS)
        if denied.status == 401:
            headers.append((b"www-authenticate", b'Bearer realm="mcp-gateway console"'))
        await h.respond(send, denied.status, body, content_type=HTML, headers=headers)


#: The overview's notice after a consent revoke, by the redirect's ``revoked`` key.
_REVOKED_NOTICES: Final = {
    "REVOKED": "Consent revoked at the authorization server and deleted.",
    "NOT_OFFERED": "Consent deleted (the authorization server offers no revocation).",
    "FAILED": "Consent deleted here; revoking it at the authorization server failed (see the log).",
    "NOTHING": "Consent deleted.",
    "NONE": "No such consent: nothing was revoked.",
}

_PAGES: Final[dict[str, Any]] = {
    "/": ConsoleApp._overview,
    "/catalog": ConsoleApp._catalog,
    "/tool": ConsoleApp._tool,
    "/sessions": ConsoleApp._sessions,
    "/errors": ConsoleApp._errors,
    "/config": ConsoleApp._config,
    "/events": ConsoleApp._overview,  # answered by live.stream before this is used
    **pins.PAGES,
    **store_page.PAGES,
}
_ACTIONS: Final[dict[str, Any]] = {
    "/tool/call": ConsoleApp._call,
    "/sessions/close": ConsoleApp._close_session,
    "/consents/revoke": ConsoleApp._revoke_consent,
    "/reload": ConsoleApp._reload,
    "/logout": ConsoleApp._logout,
    **pins.ACTIONS,
}
