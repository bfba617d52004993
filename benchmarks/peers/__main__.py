"""``python -m benchmarks.peers``: install the benchmark's peers and py-spy (pinned).

Each goes into a venv of its own under ``benchmarks/.peers/``; an install
that fails (no registry reachable) is reported and the others still run, so
``make bench`` measures the gateway whatever happens here.
"""

from __future__ import annotations

import subprocess
import sys

from benchmarks.peers import PINS, install, installed


def main() -> int:
    """Install every pinned peer and tool; 1 if any failed."""
    failed = []
    for name, pins in PINS.items():
        if installed(name):
            print(f"peers: {name} ({', '.join(pins)}) already installed")
            continue
        print(f"peers: installing {name} ({', '.join(pins)})", flush=True)
        try:
            install(name)
        except subprocess.CalledProcessError as exc:
            print(f"peers: {name} failed to install: {exc}", file=sys.stderr)
            failed.append(name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
