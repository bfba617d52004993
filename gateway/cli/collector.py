"""The cyclic garbage collector's policy for a gateway process that runs for months.

CPython's default triggers a young collection every 700 net container
allocations. A gateway holds a large heap that lives as long as the
process or the session (10,000 sessions with their GET streams), and a
list_changed wakes every stream at once: each stream keeps a few objects
alive from the broadcast until its task runs (its wake-up, the parked
wait's abort callback), so with the default trigger one fan-out to 10,000
streams ran dozens of young collections that each walked those survivors
again, and pushed them on into the older generations, whose collections
walk the whole heap. A higher trigger lets one fan-out's survivors die by
reference counting before any collection sees them. What it costs: cyclic
garbage waits longer to be freed, at most ``YOUNG_THRESHOLD`` containers
(a few MiB). Nothing else changes: every cycle is still collected.

Measured (docs/performance.md, "Scale"): the fan-out to 10,000 streams at
about a third of the time with the default trigger, in alternating runs on
the same machine. Freezing the start-up heap (``gc.freeze``) was measured
too and not kept: alone it made the same fan-out slower, not faster.

One place sets it, for the ``serve`` command only (``process.run``): the
test suite and embedders that call ``app.serve`` keep their own policy.
"""

from __future__ import annotations

import gc
from typing import Final

# Container allocations (net of frees) between young collections; CPython's
# default is 700. Larger than one fan-out's survivors (a few per stream at
# 10,000 streams), so a broadcast runs at most one young collection.
YOUNG_THRESHOLD: Final = 50_000


def tune() -> None:
    """Raise the young generation's trigger; the older generations keep their ratios."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
