"""The 2026-07-28 revision towards hosts.

One request per POST (or stdio line), ``subscriptions/listen`` streams.
"""
