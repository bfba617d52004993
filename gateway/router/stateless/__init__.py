"""The 2026-07-28 revision in the router.

Requests without a session, held calls, input rounds and tasks.
"""
