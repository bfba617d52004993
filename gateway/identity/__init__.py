"""Who is calling: principals, bearer-token checks, JWKS keys and resource metadata.

The frontend asks this package one question per request (who is this, and
may they in?) and gets a :class:`~gateway.identity.principal.Principal` or a
typed refusal. Verification is sync and sans-IO (keys in, claims out); only
:mod:`gateway.identity.jwks` does I/O, to fetch an identity provider's keys.
"""
