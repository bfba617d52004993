"""The running gateway: composition (wiring only), reload plans and readiness.

Nothing here decides protocol or policy; it builds the parts, starts each
service with ``nursery.start`` and hands them to one another.
"""
