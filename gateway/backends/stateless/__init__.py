"""The 2026-07-28 revision towards backends.

The listen stream the gateway opens and the ttl-driven refresh.
"""
