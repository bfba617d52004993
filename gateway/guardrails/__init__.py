"""Guardrails: one filter chain at four points (requests, results, lists, backend requests).

``filters`` holds the typed decisions, the built-in filters and the chain
(sans-IO); ``secrets`` finds secrets with detect-secrets' detectors and
widens each to the whole secret.
"""
