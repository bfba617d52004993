"""The engine seam: which HTTP server carries the ASGI app (``server.engine``).

``h11`` is the gateway's own HTTP/1.1 server (``http1_server.py``; the
value keeps the name of the parser it was built on, llhttp parses now),
the default: it costs a fraction of hypercorn's CPU per call
(docs/performance.md). ``hypercorn`` stays for deployments that want
HTTP/2, and as the cross-check the tests run every HTTP path on. Both get
the same limits, and both shut down the same way: when ``stopping`` is set
they stop accepting at once and give requests in flight the drain timeout.
No request handler knows which engine carries it.
"""

from __future__ import annotations

import ssl
from functools import partial
from typing import TYPE_CHECKING, Final, cast

import trio

from gateway.frontend.engine.http1_server import Limits, serve_http1

if TYPE_CHECKING:
    import hypercorn.config
    from hypercorn.typing import ASGIFramework

    from gateway.config.schema import ServerConfig, TlsConfig
    from gateway.frontend.engine.http1_server import App

# Idle HTTP connections are closed after this. Three things set it:
# - longer than clients' own idle expiry (httpx, and so the official SDKs,
#   use 5 s): a server that closes first races the client's next request on
#   that connection and the request dies with a reset (seen in a 45-minute
#   soak with 5 s here);
# - short, because hypercorn's trio worker only lets go of a connection the
#   host hung up when this runs out (measured: they sit in CLOSE-WAIT);
# - at most 10 s, because it is also what cuts off headers trickled in
#   (robustness A26).
KEEP_ALIVE_TIMEOUT: Final = 8.0
# A burst of hosts reconnecting at once must queue in the kernel and be
# answered (503 past max_sessions), not reset (robustness B15).
LISTEN_BACKLOG: Final = 1024
# Header blocks past this size are refused (431 on our engine; hypercorn closes).
MAX_HEADER_BYTES: Final = 64 * 1024


def ssl_context(tls: TlsConfig) -> ssl.SSLContext | None:
    """The server-side TLS context for ``server.tls``, or None for plain HTTP."""
    if not tls.enabled:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls.cert_file, tls.key_file)
    context.set_alpn_protocols(["http/1.1"])
    return context


def hypercorn_config(server: ServerConfig, drain_timeout: float) -> hypercorn.config.Config:
    """hypercorn's settings for the same limits the HTTP/1.1 engine keeps."""
    import hypercorn.config  # only when asked for: about 35 ms of start-up otherwise

    hc = hypercorn.config.Config()
    host, port = server.host, server.port
    hc.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    hc.accesslog = None
    # Off: the app answers and logs every exception itself (rejection.answer).
    hc.errorlog = None
    hc.keep_alive_timeout = KEEP_ALIVE_TIMEOUT
    # Once shutdown is triggered, connections in flight get as long as the
    # drain gives calls; the drain's own deadline then cancels the rest.
    hc.graceful_timeout = drain_timeout
    # h11 refuses header blocks past this size. No read_timeout: hypercorn
    # applies it to every read, which would cut GET streams and long tool
    # calls whose host sends nothing while it waits.
    hc.h11_max_incomplete_size = MAX_HEADER_BYTES
    # No Server header: it tells a scanner what to try and nobody else
    # anything. (Date stays: RFC 9110 requires it of an origin server.)
    hc.include_server_header = False
    hc.backlog = LISTEN_BACKLOG
    if server.tls.enabled:
        hc.certfile = server.tls.cert_file
        hc.keyfile = server.tls.key_file
    return hc


def http1_limits(drain_timeout: float) -> Limits:
    """The HTTP/1.1 engine's limits: the same figures hypercorn is given."""
    return Limits(
        max_header_bytes=MAX_HEADER_BYTES,
        header_timeout=KEEP_ALIVE_TIMEOUT,
        idle_timeout=KEEP_ALIVE_TIMEOUT,
        drain_timeout=drain_timeout,
        backlog=LISTEN_BACKLOG,
    )


async def serve_http(
    app: App,
    server: ServerConfig,
    drain_timeout: float,
    stopping: trio.Event,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` on the configured engine until cancelled.

    ``task_status.started`` receives the bound URLs once listening. When
    ``stopping`` is set, the engine closes its listeners at once (a new
    connection is refused, not kept waiting) and lets requests in flight
    finish for up to ``drain_timeout``.
    """
    if server.engine == "hypercorn":
        import hypercorn.trio  # see hypercorn_config

        # The cast: the app takes plain mappings, hypercorn types its scopes as TypedDicts.
        serve = partial(
            hypercorn.trio.serve,
            cast("ASGIFramework", app),
            hypercorn_config(server, drain_timeout),
            shutdown_trigger=stopping.wait,
        )
    else:
        serve = partial(
            serve_http1,
            app,
            server.host,
            server.port,
            http1_limits(drain_timeout),
            stopping=stopping,
            ssl_context=ssl_context(server.tls),
        )
    await serve(task_status=task_status)
