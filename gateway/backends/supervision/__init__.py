"""Keeping one backend alive: the supervisor task, restart backoff and liveness probes."""
