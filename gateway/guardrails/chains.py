"""The configured guardrail chains and the runner the router calls at its four points.

Rules:

1. **One chain per call**: the top-level filters, then the caller's
   profile's, then the target backend's, in that order; only those whose
   ``at`` names the point and whose ``tools`` globs match the item run.
2. **Nothing when off.** :meth:`Guardrails.from_config` is None when no
   filter is configured anywhere; the router then never builds a subject or
   decodes a payload for a filter. With filters configured, the steps of a
   (point, profile, backend) are built once and kept. A reload that
   changes any filter builds a new :class:`Guardrails` (or None) and the
   router puts it in force at every point (``Router.set_guardrails``).
3. **Typed outcomes.** :meth:`Guardrails.check` returns :class:`Allow`,
   :class:`Modify` or :class:`Deny` (``filters``); an external filter with
   ``fail: closed`` that could not decide raises :class:`PolicyUnavailable`.
   A built-in filter that raises is a :class:`Deny` with ``filter_error``
   (fail closed, ``filters`` rule 2); an external client that raises counts
   as its service being unavailable, handled by its ``fail``.
4. **Seen once, never the payload.** Each decision other than allow is one
   ``guardrails.decision`` log line (filter, decision, point, item,
   principal) and one count in ``mcp_gateway_filter_decisions_total``; the
   console hears of it through ``on_decision``.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

import msgspec
import structlog
import trio

from gateway.config.schema_filters import ExternalFilter, FilterConfig, SchemaFilter
from gateway.errors import PolicyUnavailable
from gateway.guardrails.filters import (
    Allow,
    Decision,
    Deny,
    Modify,
    Subject,
    Unavailable,
    builtin_decision,
    filter_name,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    import httpx

    from gateway.config.schema_gateway import GatewayConfig
    from gateway.guardrails.external import PolicyClient

__all__ = ["DecisionCounter", "Guardrails", "Step"]

logger = structlog.get_logger("gateway.guardrails")

#: Seconds the policy services' connection pools get to close at shutdown.
CLOSE_GRACE: Final = 2.0
_NO_STEPS: Final[tuple[Step, ...]] = ()


class DecisionCounter(Protocol):
    """Where decisions are counted (``Metrics.filter_decisions`` has this shape)."""

    def labels(self, *, filter: str, decision: str) -> Any:
        """The child counter of one filter and decision."""
        ...


@dataclass(frozen=True, slots=True)
class Step:
    """One filter of a chain, with its name and, for ``external``, its client."""

    name: str
    config: FilterConfig
    policy: PolicyClient | None = None

    def applies(self, item: str) -> bool:
        """Whether the filter's ``tools`` globs take ``item`` ("" takes every filter)."""
        globs = self.config.tools
        if not item or globs == ["*"]:
            return True
        return any(fnmatch.fnmatchcase(item, glob) for glob in globs)


def _named(configs: Sequence[FilterConfig], scope: str) -> list[tuple[str, FilterConfig]]:
    """Each filter with its name: configured, else ``TYPE#N`` under its scope."""
    return [
        (config.name or f"{scope}{filter_name(config, position)}", config)
        for position, config in enumerate(configs)
    ]


class Guardrails:
    """The chains of one configuration (module rules).

    Args:
        top: the top-level ``filters``.
        profiles: each profile's ``filters``, by profile name.
        counter: the decisions counter (``mcp_gateway_filter_decisions_total``).
        on_decision: told of every decision other than allow (the console).
        transport: an httpx transport for the policy services (tests).
    """

    def __init__(
        self,
        top: Sequence[FilterConfig],
        profiles: Mapping[str, Sequence[FilterConfig]],
        *,
        counter: DecisionCounter | None = None,
        on_decision: Callable[[str, str, Subject, str], None] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._transport = transport
        self._clients: list[PolicyClient] = []
        self._top = [self._step(name, config) for name, config in _named(top, "")]
        self._profiles = {
            profile: [self._step(name, c) for name, c in _named(configs, f"profile:{profile}/")]
            for profile, configs in profiles.items()
        }
        # backend name -> (its filters list as configured, its steps)
        self._backends: dict[str, tuple[Sequence[FilterConfig], list[Step]]] = {}
        self._chains: dict[tuple[str, str, str], tuple[object, tuple[Step, ...]]] = {}
        self._counter = counter
        self.on_decision = on_decision

    @classmethod
    def from_config(
        cls, config: GatewayConfig, counter: DecisionCounter | None = None
    ) -> Guardrails | None:
        """The chains of ``config``; None when it configures no filter anywhere (rule 2)."""
        profiles = {p.name: p.filters for p in config.profiles if p.filters}
        if not (config.filters or profiles or any(b.filters for b in config.backends)):
            return None
        return cls(config.filters, profiles, counter=counter)

    def _step(self, name: str, config: FilterConfig) -> Step:
        if not isinstance(config, ExternalFilter):
            return Step(name, config)
        # Here, not at the top: httpx loads only when an external filter is configured.
        from gateway.guardrails.external import PolicyClient

        client = PolicyClient(config, name, transport=self._transport)
        self._clients.append(client)
        return Step(name, config, client)

    def _backend_steps(self, backend: str, filters: Sequence[FilterConfig]) -> list[Step]:
        known = self._backends.get(backend)
        if known is not None and known[0] is filters:
            return known[1]
        steps = [self._step(name, c) for name, c in _named(filters, f"backend:{backend}/")]
        self._backends[backend] = (filters, steps)
        return steps

    def steps(
        self, point: str, profile: str, backend: str, backend_filters: Sequence[FilterConfig]
    ) -> tuple[Step, ...]:
        """The chain at ``point`` for a call through ``profile`` to ``backend`` (rule 1).

        Built once per (point, profile, backend) and kept; empty when no
        filter runs there, which the caller takes as "nothing to do".
        """
        key = (point, profile, backend)
        cached = self._chains.get(key)
        if cached is not None and cached[0] is backend_filters:
            return cached[1]
        chain = [*self._top, *self._profiles.get(profile, ())]
        if backend:
            chain += self._backend_steps(backend, backend_filters)
        steps = tuple(step for step in chain if point in step.config.points()) or _NO_STEPS
        self._chains[key] = (backend_filters, steps)
        return steps

    @staticmethod
    def needs_schema(steps: Sequence[Step]) -> bool:
        """Whether a ``schema`` filter is among ``steps`` (the tool's schema must be found)."""
        return any(isinstance(step.config, SchemaFilter) for step in steps)

    async def check(self, steps: Sequence[Step], subject: Subject) -> Decision:
        """Run ``steps`` over ``subject`` (rules 1, 3, 4).

        Returns:
            Allow, the last Modify (its payload is what travels on), or the
            first Deny.

        Raises:
            PolicyUnavailable: a fail-closed external filter could not decide.
        """
        current = subject
        changed: Modify | None = None
        for step in steps:
            if not step.applies(subject.item):
                continue
            decision = await self._decide(step, current)
            if isinstance(decision, Unavailable):
                self._seen(step.name, "unavailable", subject, decision.detail)
                raise PolicyUnavailable(step.name, decision.detail)
            if isinstance(decision, Deny):
                self._seen(step.name, "deny", subject, decision.reason)
                return decision
            if isinstance(decision, Modify):
                self._seen(step.name, "modify", subject, decision.reason)
                changed = decision
                current = msgspec.structs.replace(current, payload=decision.payload)
        return changed or Allow()

    async def _decide(self, step: Step, subject: Subject) -> Decision | Unavailable:
        if step.policy is None:
            try:
                decision = builtin_decision(step.config, step.name, subject)
            except Exception as exc:
                return Deny(step.name, f"filter_error: {type(exc).__name__}")
            return Allow() if decision is None else decision
        try:
            return await step.policy.decide(subject)
        except Exception as exc:
            # A defect in the client is the service being unusable (rule 3).
            if step.policy.config.fail == "open":
                logger.warning(
                    "guardrails.policy_error", filter=step.name, error=type(exc).__name__
                )
                return Allow()
            return Unavailable(step.name, f"error: {type(exc).__name__}")

    def _seen(self, name: str, decision: str, subject: Subject, reason: str) -> None:
        logger.info(
            "guardrails.decision",
            filter=name,
            decision=decision,
            point=subject.point,
            item=subject.item[:128],
            principal=subject.principal or None,
            reason=reason[:256],
        )
        if self._counter is not None:
            self._counter.labels(filter=name, decision=decision).inc()
        if self.on_decision is not None:
            self.on_decision(name, decision, subject, reason)

    async def aclose(self) -> None:
        """Close the policy services' connection pools (bounded, shielded)."""
        with trio.CancelScope(shield=True, deadline=trio.current_time() + CLOSE_GRACE):
            for client in self._clients:
                await client.aclose()
