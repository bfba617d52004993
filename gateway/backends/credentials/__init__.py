"""Credentials the gateway presents to backends.

OAuth grants (sans-IO), fetched tokens and the request auth.
"""
