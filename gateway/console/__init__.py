"""The operator console at ``/admin`` (``docs/console.md``).

Server-rendered pages over the running gateway: backends, catalog, client
sessions, recent errors, the effective config. Off unless ``admin.enabled``.

Bottom up: the sans-IO pieces (``window`` latency per backend, ``recent``
failed requests, ``activity`` feeding both from the router, ``csrf`` signed
cookies and tokens, ``redact`` the config's secrets, ``forms`` a tool's
schema as form fields), ``views`` (what each page shows, read off the
running parts), ``render`` (Jinja2 templates and static files), ``live``
(the SSE figures), ``credentials`` (who is asking) and ``handler`` (the
ASGI routes).
"""
