"""The HTTP engines that carry the ASGI app.

The h11 engine (the default) and the selection of hypercorn.
"""
