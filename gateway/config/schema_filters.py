"""The configuration schema: guardrail filters (``filters:``), a tagged union on ``type``.

A filter runs at one or more points (``at``): ``requests`` (a call on its
way to a backend), ``results`` (its result on the way back), ``lists``
(tool definitions on their way to a host) and ``backend_requests`` (a
backend's sampling or elicitation on its way to a host). ``tools`` globs
(public names) say which items it applies to. The key is ``at``, not
``on``: YAML reads a bare ``on`` as the boolean true.
"""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal

import msgspec
from msgspec import Meta

from gateway.config.schema import Base, Invalid

__all__ = [
    "POINTS",
    "ArgumentsFilter",
    "ExternalFilter",
    "FilterConfig",
    "FilterPoint",
    "MarkersFilter",
    "SchemaFilter",
    "SecretsFilter",
    "SizeFilter",
]

FilterPoint = Literal["requests", "results", "lists", "backend_requests"]
POINTS: Final = ("requests", "results", "lists", "backend_requests")


class FilterBase(Base, tag_field="type", frozen=True, kw_only=True):
    """What every filter has.

    Attributes:
        name: how decisions, logs and metrics name it; default its type and
            position (``secrets#0``).
        at: the points it runs at (each type has its default).
        tools: globs on public item names it applies to.
    """

    name: str = ""
    at: list[FilterPoint] = msgspec.field(default_factory=list)
    tools: list[str] = msgspec.field(default_factory=lambda: ["*"])

    def points(self) -> tuple[str, ...]:
        """The points it runs at: ``at``, else the type's default."""
        return tuple(self.at) or self.default_points()

    def default_points(self) -> tuple[str, ...]:
        """Where the type runs when ``at`` is not given."""
        return POINTS


class SecretsFilter(FilterBase, tag="secrets", frozen=True, kw_only=True):
    """Secrets found by detect-secrets' detectors, widened to the whole secret.

    Attributes:
        action: ``redact`` replaces each secret with ``[redacted: KIND]``;
            ``deny`` refuses the request or the result.
    """

    action: Literal["redact", "deny"] = "redact"

    def default_points(self) -> tuple[str, ...]:
        """Results and backend requests: what leaves towards a host or a model."""
        return ("results", "backend_requests")


class SizeFilter(FilterBase, tag="size", frozen=True, kw_only=True):
    """Bytes of a request's arguments or a result's content.

    Attributes:
        max_bytes: a request over it is refused; a result over it is
            truncated, with a marker saying so.
    """

    max_bytes: Annotated[int, Meta(ge=1)]

    def default_points(self) -> tuple[str, ...]:
        """Requests and results."""
        return ("requests", "results")


class ArgumentsFilter(FilterBase, tag="arguments", frozen=True, kw_only=True):
    """Regular expressions matched against every string value of the arguments, recursively.

    Attributes:
        deny: a request with a value any of these matches (``re.search``)
            is refused.
    """

    deny: list[str] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        problems = []
        for i, pattern in enumerate(self.deny):
            try:
                re.compile(pattern)
            except re.error as exc:
                problems.append((f"deny[{i}]", f"not a regular expression: {exc}"))
        if problems:
            raise Invalid(*problems)

    def default_points(self) -> tuple[str, ...]:
        """Requests only: arguments exist nowhere else."""
        return ("requests",)


class SchemaFilter(FilterBase, tag="schema", frozen=True, kw_only=True):
    """The arguments checked against the tool's own ``inputSchema`` before the backend sees them."""

    def default_points(self) -> tuple[str, ...]:
        """Requests only."""
        return ("requests",)


class MarkersFilter(FilterBase, tag="markers", frozen=True, kw_only=True):
    """Text addressing the model in results (injected instructions, hidden characters).

    Attributes:
        action: ``deny`` refuses the result; ``redact`` removes the marked
            text (hidden characters, the instruction's sentence).
    """

    action: Literal["redact", "deny"] = "deny"

    def default_points(self) -> tuple[str, ...]:
        """Results: what a web-fetch tool brings back."""
        return ("results",)


class ExternalFilter(FilterBase, tag="external", frozen=True, kw_only=True):
    """A policy service over HTTP (the protocol in docs/security.md).

    Attributes:
        url: where the decision is asked for (POST, JSON).
        timeout: seconds the service may take.
        fail: ``open`` lets the payload pass when the service is down, slow
            or answers garbage; ``closed`` refuses it.
        headers: sent with every request (a bearer credential).
        cert_file: client certificate for mutual TLS.
        key_file: its key.
    """

    url: str
    timeout: Annotated[float, Meta(gt=0, le=60)] = 2.0
    fail: Literal["open", "closed"] = "closed"
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    cert_file: str = ""
    key_file: str = ""

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise Invalid(("url", "must be an http:// or https:// URL"))
        if bool(self.cert_file) != bool(self.key_file):
            raise Invalid(("cert_file", "cert_file and key_file go together"))


FilterConfig = (
    SecretsFilter | SizeFilter | ArgumentsFilter | SchemaFilter | MarkersFilter | ExternalFilter
)
