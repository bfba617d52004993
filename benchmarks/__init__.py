"""Benchmarks: scripts that print figures as ratios to a same-run baseline."""
