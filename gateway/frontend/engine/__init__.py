"""The HTTP engines that carry the ASGI app.

The gateway's own HTTP/1.1 engine (the default, ``server.engine: h11``)
and the selection of hypercorn.
"""
