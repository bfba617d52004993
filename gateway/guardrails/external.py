"""The external policy service: a filter that asks a team's own service over HTTP.

Rules:

1. **The protocol** (docs/security.md, ``policy-service.schema.json``):
   the gateway POSTs ``{"version": 1, "point", "item", "principal",
   "profile", "backend", "payload"}`` as JSON; the service answers HTTP 200
   with ``{"decision": "allow" | "deny" | "modify", "message": "...",
   "payload": ...}`` (``payload`` with ``modify`` only, and then required).
2. **Anything else is a failure**, handled by the filter's ``fail``: a
   refused connection, no answer within ``timeout``, another status, a body
   that is not that shape. ``fail: open`` lets the payload pass (logged);
   ``fail: closed`` refuses it as :class:`Unavailable` (the host sees
   -32603 with ``data.reason: "policy_unavailable"``), never a hang.
3. **Cached as the service says.** A decision whose response carries
   ``Cache-Control: max-age=N`` (without ``no-store``) is kept for N
   seconds, keyed by the SHA-256 of the request body (which names the
   principal, so one person's answer is never another's), in a bounded
   LRU; the same question within N seconds is not asked again.
4. The payload leaves the gateway only towards the configured URL, with
   the configured headers (a bearer credential) and client certificate.
"""

from __future__ import annotations

import hashlib
import re
import ssl
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final, Literal

import httpx
import msgspec
import structlog
import trio

from gateway.guardrails.filters import Allow, Decision, Deny, Modify, Subject, Unavailable

if TYPE_CHECKING:
    from gateway.config.schema_filters import ExternalFilter

__all__ = ["CACHE_ENTRIES", "PolicyAnswer", "PolicyClient", "Unavailable"]

#: Decisions a client keeps (rule 3); the oldest go first.
CACHE_ENTRIES: Final = 10_000
_MAX_AGE: Final = re.compile(r"(?:^|,)\s*max-age\s*=\s*(\d+)", re.IGNORECASE)
_ENCODER: Final = msgspec.json.Encoder()
logger = structlog.get_logger("gateway.guardrails")


class PolicyAnswer(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    """The service's answer (rule 1)."""

    decision: Literal["allow", "deny", "modify"]
    message: str = ""
    payload: Any = msgspec.UNSET


def _max_age(header: str | None) -> int:
    if not header or "no-store" in header.lower():
        return 0
    match = _MAX_AGE.search(header)
    return int(match.group(1)) if match else 0


class PolicyClient:
    """One external filter's connection to its service (module rules).

    Args:
        config: the filter's config.
        name: the name its decisions carry.
        transport: an httpx transport to use instead of the network (tests).
    """

    def __init__(
        self,
        config: ExternalFilter,
        name: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self.name = name
        verify: ssl.SSLContext | bool = True
        if config.cert_file:
            context = ssl.create_default_context()
            context.load_cert_chain(config.cert_file, config.key_file)
            verify = context
        self._client = httpx.AsyncClient(
            headers=config.headers,
            timeout=config.timeout,
            verify=verify,
            transport=transport,
            follow_redirects=False,
        )
        self._cache: OrderedDict[bytes, tuple[float, Decision]] = OrderedDict()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    def _failed(self, detail: str) -> Decision | Unavailable:
        logger.warning(
            "guardrails.policy_failed", filter=self.name, detail=detail, fail=self.config.fail
        )
        if self.config.fail == "open":
            return Allow()
        return Unavailable(self.name, detail)

    async def decide(self, subject: Subject) -> Decision | Unavailable:
        """Ask the service about ``subject`` (rules 1-3).

        Args:
            subject: what the chain looks at.

        Returns:
            The service's decision, a cached one, or the ``fail`` setting's
            answer when the service could not decide.
        """
        body = _ENCODER.encode(
            {
                "version": 1,
                "point": subject.point,
                "item": subject.item,
                "principal": subject.principal,
                "profile": subject.profile,
                "backend": subject.backend,
                "payload": subject.payload,
            }
        )
        key = hashlib.sha256(body).digest()
        now = trio.current_time()
        cached = self._cache.get(key)
        if cached is not None:
            if cached[0] > now:
                self._cache.move_to_end(key)
                return cached[1]
            del self._cache[key]
        try:
            # The cancel scope is the bound (style rule 3); httpx's own timeout
            # is the same figure, for the parts it measures itself.
            with trio.fail_after(self.config.timeout):
                response = await self._client.post(
                    self.config.url,
                    content=body,
                    headers={"content-type": "application/json"},
                )
        except trio.TooSlowError:
            return self._failed("timed out")
        except httpx.HTTPError as exc:
            return self._failed(type(exc).__name__)
        if response.status_code != 200:
            return self._failed(f"HTTP {response.status_code}")
        try:
            answer = msgspec.json.decode(response.content, type=PolicyAnswer)
        except msgspec.DecodeError:
            return self._failed("answer is not a decision")
        decision = self._decision(answer)
        if decision is None:
            return self._failed("modify without a payload object")
        age = _max_age(response.headers.get("cache-control"))
        if age > 0:
            self._cache[key] = (now + age, decision)
            while len(self._cache) > CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return decision

    def _decision(self, answer: PolicyAnswer) -> Decision | None:
        if answer.decision == "allow":
            return Allow()
        if answer.decision == "deny":
            return Deny(self.name, answer.message or "refused by the policy service")
        if not isinstance(answer.payload, dict):
            return None
        return Modify(answer.payload, self.name, answer.message or "changed by the policy service")
