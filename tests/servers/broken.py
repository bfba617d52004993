"""Test peer "broken": a backend that fails to start.

It writes one line to stderr and exits with status 1 before reading anything,
so the gateway sees a child process die during (or before) initialize.

Run it as ``python tests/servers/broken.py``.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    print("broken: refusing to start (this backend always fails)", file=sys.stderr, flush=True)
    sys.exit(1)
