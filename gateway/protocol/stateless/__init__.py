"""The 2026-07-28 revision, sans-IO.

The envelope, discover, routing headers, MRTR, listen, tasks and cache
hints.
"""
