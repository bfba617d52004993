"""Answers kept by the backends' cache hints (or an operator's opt-in), bounded in bytes.

``responses`` is the sans-IO cache itself: keys, scope, freshness,
invalidation and its counters.
"""
