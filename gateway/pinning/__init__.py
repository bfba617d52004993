"""Pinning what backends declare: canonical digests, drift classes, text that addresses the model.

Sans-IO: ``definitions`` (what a pin covers and its RFC 8785 digest),
``drift`` (what changed, classified for a person), ``markers`` (text that
addresses the model, shared with the guardrails).
"""
