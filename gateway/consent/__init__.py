"""Consent per person: the gateway as an OAuth client for each (principal, backend).

Sans-IO so far: ``oauth`` (discovery documents, PKCE, the authorization
URL, dynamic registration) and ``vault`` (tokens sealed with AES-GCM under a
key ring, bound to their record).
"""
