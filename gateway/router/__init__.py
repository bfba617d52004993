"""Where each message goes, in both directions, by direction of travel.

- ``dispatch``: the ``Router``, its method table and the one answer and log
  line per host request;
- ``calls``: target lookup through the catalog and the forwarded methods;
- ``lists``: list pages, cached and passthrough;
- ``levels`` and ``subscriptions``: what clients asked for, kept in step at
  the backends;
- ``to_clients``: notifications and backends' own requests, back to clients;
- ``initialize``: what the gateway says about itself;
- ``views`` and ``metrics``: the narrow protocols the router sees of its
  neighbours (``PoolView``, ``ClientPeer``, ``RouterMetrics``); of one
  backend it sees ``gateway.backends.state`` only (``BackendView``).

Each module states its own rules.
"""

from __future__ import annotations

from gateway.router.call_metrics import NO_METRICS, NoMetrics, RouterMetrics
from gateway.router.context import Call
from gateway.router.dispatch import Router
from gateway.router.initialize import SERVER_NAME
from gateway.router.neighbours import ClientPeer, Emit, PoolView

__all__ = [
    "Router",
    "Call",
    "ClientPeer",
    "Emit",
    "PoolView",
    "RouterMetrics",
    "NoMetrics",
    "NO_METRICS",
    "SERVER_NAME",
]
