"""The console's pins page and the admin API ``pins`` speaks to (``docs/security.md``, "Pinning").

Rules:

1. **The page** (``GET pins``) lists each change waiting for approval: its
   backend, public name, classes and findings, and the pinned and the new
   definition side by side; each item and each backend has approve and
   reject buttons.
2. **Decisions are actions** (``POST pins/decide``): like every console
   action they carry the credential's CSRF token and pass the Origin check
   (``handler`` rule 2). The form names ``action`` (``approve`` or
   ``reject``) and one of ``names`` (public names, one per line),
   ``backend`` or ``all``. Each decision is logged with who (the console
   identity) and when, by :class:`~gateway.backends.pins.PinGuard`.
3. **The admin API** is the same routes for a program: ``GET pins.json``
   gives the pending changes and the caller's CSRF token, and a decision
   or an import whose form has ``reply=json`` is answered in JSON instead
   of a redirect. ``GET pins/export`` is the signed baseline;
   ``POST pins/import`` takes one in the form field ``baseline``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final, Protocol

import trio

from gateway.console.caller import ConsoleDenied
from gateway.frontend import http_util as h

if TYPE_CHECKING:
    from collections.abc import Callable

    from gateway.backends.pins import PinGuard
    from gateway.backends.pool import Pool
    from gateway.config import GatewayConfig
    from gateway.console.logins import LoginBook
    from gateway.console.render import Renderer
    from gateway.pinning.baseline import BackendIdentity
    from gateway.pinning.ledger import PinRecord


class _Parts(Protocol):
    pool: Pool
    config: Callable[[], GatewayConfig]
    pins: Callable[[], PinGuard | None]


class ConsoleApp(Protocol):
    """What these routes use of ``console.handler.ConsoleApp`` (a protocol: no import cycle)."""

    base: str
    book: LoginBook
    renderer: Renderer

    @property
    def parts(self) -> _Parts:
        """The running parts."""
        ...

    def _common(self, identity: str, active: str) -> dict[str, Any]: ...

    async def _html(self, send: h.Send, status: int, body: bytes) -> None: ...

    async def _redirect(self, send: h.Send, location: str) -> None: ...


__all__ = ["ACTIONS", "PAGES", "identities"]

_ACTIONS_NAMED: Final = ("approve", "reject")


def _guard(app: ConsoleApp) -> PinGuard:
    guard = app.parts.pins()
    if guard is None or guard.book is None:
        raise ConsoleDenied(409, "pinning is not running on this gateway")
    return guard


def identities(app: ConsoleApp) -> dict[str, BackendIdentity]:
    """Each configured backend's portable identity (``gateway.pinning.baseline`` rule 2)."""
    # Here and below, not at the top: baselines load cryptography (Ed25519),
    # which a gateway whose console never exports one does not need.
    from gateway.pinning.baseline import BackendIdentity

    out: dict[str, BackendIdentity] = {}
    for name, backend in app.parts.pool.backends.items():
        config: Any = backend.config
        command = getattr(config, "command", "") or ""
        out[name] = BackendIdentity(
            name=name,
            server_name=backend.info.name if backend.info is not None else "",
            url=getattr(config, "url", "") or "",
            command=command.replace("\\", "/").rsplit("/", 1)[-1],
        )
    return out


def _pretty(definition: dict[str, Any] | None) -> str:
    return "" if definition is None else json.dumps(definition, indent=2, sort_keys=True)


async def pins_page(app: ConsoleApp, send: h.Send, who: str, query: dict[str, str]) -> None:
    """Rule 1: the pending changes, side by side."""
    guard = app.parts.pins()
    pending = [] if guard is None else guard.pending()
    rows = [
        {**p, "pinned_text": _pretty(p["pinned"]), "pending_text": _pretty(p["pending"])}
        for p in pending
    ]
    body = app.renderer.page(
        "pins.html",
        **app._common(who, "pins"),
        rows=rows,
        backends=sorted({p["backend"] for p in pending}),
        running=guard is not None and guard.loaded,
        done=query.get("done", "")[:200],
    )
    await app._html(send, 200, body)


async def pins_json(app: ConsoleApp, send: h.Send, who: str, query: dict[str, str]) -> None:
    """Rule 3: the pending changes and the caller's CSRF token, in JSON."""
    guard = _guard(app)
    signer = await app.book.signer()  # shared by replicas (console.logins)
    await h.respond_json(send, 200, {"pending": guard.pending(), "csrf": signer.csrf_token(who)})


async def pins_export(app: ConsoleApp, send: h.Send, who: str, query: dict[str, str]) -> None:
    """Rule 3: every approved pin as a signed baseline."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from gateway.pinning.baseline import BaselineError, encode_baseline, load_signing_key

    guard = _guard(app)
    key_file = app.parts.config().pins.signing_key_file
    if not key_file:
        raise ConsoleDenied(409, "pinning.signing_key_file is not set: nothing to sign with")
    try:
        key = load_signing_key(await _read(key_file))
    except BaselineError as exc:
        raise ConsoleDenied(500, str(exc)) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ConsoleDenied(409, "pinning.signing_key_file holds a public key: it cannot sign")
    await guard.flush()
    body = encode_baseline(guard.export(identities(app)), key)
    await h.respond(send, 200, body)


async def _read(path: str) -> bytes:
    try:
        return await trio.Path(path).read_bytes()
    except OSError as exc:
        raise ConsoleDenied(500, f"cannot read {path}: {exc.strerror}") from None


def _chosen(guard: PinGuard, form: dict[str, str]) -> list[PinRecord]:
    book = guard.book
    assert book is not None
    if form.get("all"):
        return book.pending()
    if form.get("backend"):
        return book.pending(form["backend"])
    names = [n.strip() for n in form.get("names", "").splitlines() if n.strip()]
    if not names:
        raise ConsoleDenied(400, "name the changes: names, backend or all")
    chosen: list[PinRecord] = []
    for name in names:
        record = guard.find(name)
        if record is None or record.pending is None:
            raise ConsoleDenied(404, f"no change waits for {name[:200]!r}")
        chosen.append(record)
    return chosen


async def pins_decide(app: ConsoleApp, send: h.Send, who: str, form: dict[str, str]) -> None:
    """Rule 2: approve or reject the named changes."""
    guard = _guard(app)
    action = form.get("action", "")
    if action not in _ACTIONS_NAMED:
        raise ConsoleDenied(400, "action must be approve or reject")
    decided = await guard.decide(
        _chosen(guard, form), approved=action == "approve", by=f"console:{who}"
    )
    if form.get("reply") == "json":
        await h.respond_json(send, 200, {"decided": decided})
        return
    await app._redirect(send, f"{app.base}/pins?done={action.rstrip('e')}ed+{len(decided)}")


async def pins_import(app: ConsoleApp, send: h.Send, who: str, form: dict[str, str]) -> None:
    """Rule 3: a signed baseline's definitions become approved pins."""
    from gateway.pinning.baseline import BaselineError, decode_baseline, load_signing_key

    guard = _guard(app)
    key_file = app.parts.config().pins.signing_key_file
    if not key_file:
        raise ConsoleDenied(409, "pinning.signing_key_file is not set: nothing to verify with")
    try:
        document = decode_baseline(
            form.get("baseline", "").encode(), load_signing_key(await _read(key_file))
        )
    except BaselineError as exc:
        raise ConsoleDenied(400, str(exc)) from None
    changed = await guard.import_baseline(document)
    if form.get("reply") == "json":
        await h.respond_json(send, 200, {"imported": len(document.items), "changed": changed})
        return
    await app._redirect(send, f"{app.base}/pins?done=imported+{changed}")


PAGES: Final[dict[str, Any]] = {
    "/pins": pins_page,
    "/pins.json": pins_json,
    "/pins/export": pins_export,
}
ACTIONS: Final[dict[str, Any]] = {
    "/pins/decide": pins_decide,
    "/pins/import": pins_import,
}
