"""What the gateway tells its operators: logs, metrics, traces and the overview.

The bottom of the house beside ``protocol``: every other room may record
into it, and it imports none of them.
"""
