# mcp-gateway as a container.
#
#   docker build -t mcp-gateway .
#   docker run --rm -p 8000:8000 --stop-timeout 30 mcp-gateway
#
# Serves http://0.0.0.0:8000/mcp with the config at /etc/mcp-gateway/gateway.yaml
# (by default the shipped config/gateway.yaml: the two demo backends of the
# `demo` extra, package mcp_gateway_demo). Mount
# your own file over it. Bound to 0.0.0.0 the gateway checks the Host header
# only when `server.allowed_hosts` is set (set it to the names clients use, e.g.
# "mcp.example.com"), and the Origin header always: a browser-based host must
# have its origin listed in `server.allowed_origins`.

# ---- build: a virtualenv with the package, its runtime dependencies and the demo extra
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /src
# The build needs only these (pyproject.toml names README.md as the readme).
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY mcp_gateway_demo ./mcp_gateway_demo
# The demo extra: the shipped config's backends run on the official MCP SDK.
# The otel extra: `tracing: {enabled: true}` works in the image (off, it is
# never imported).
RUN pip install ".[demo,otel]"

# ---- runtime: the virtualenv, the default config, a non-root user
FROM python:3.11-slim

# A fixed numeric uid/gid (10001), so Kubernetes' runAsNonRoot can verify it.
RUN groupadd --system --gid 10001 mcp-gateway \
    && useradd --system --uid 10001 --gid mcp-gateway --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin mcp-gateway

COPY --from=build /opt/venv /opt/venv
COPY config/gateway.yaml /etc/mcp-gateway/gateway.yaml

# Logs are JSON lines on stderr (no TTY); nothing is written to the image at
# run time, so a read-only root filesystem works.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1

USER 10001:10001
WORKDIR /tmp
EXPOSE 8000

# slim has no curl: ask /healthz with the interpreter that is already there.
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]

# Exec form: the gateway is PID 1 and receives SIGTERM itself (it drains calls
# in flight for up to shutdown.drain_timeout, 15 s by default, then exits 0; so
# give `docker stop` more than its default 10 s: --stop-timeout 30 / -t 30).
# SIGHUP reloads the config: `docker kill -s HUP CONTAINER`.
STOPSIGNAL SIGTERM
ENTRYPOINT ["trio-mcp-gateway"]
CMD ["serve", "-c", "/etc/mcp-gateway/gateway.yaml", "--host", "0.0.0.0"]
