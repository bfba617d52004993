"""What the access policy costs: the decision per request, and one effective view.

    .venv/bin/python -m benchmarks.policy

A catalog of 10,000 tools (10 backends x 1,000) and a policy of two rules
(a group's allow globs, a deny for everyone). Prints the best-of-5 mean of
``Policy.decide(...).on(profile)`` (done on every request), the best-of-5
time to build one effective view of the 10,000 tools (done once per
distinct access per catalog change), and how many views and how much
memory 1,000 callers with the same groups take. Figures are wall time on
this machine; run it on an idle one.
"""

from __future__ import annotations

import timeit
import tracemalloc

import msgspec

from gateway.catalog.catalog import Catalog
from gateway.catalog.effective import EffectiveViews, narrow
from gateway.catalog.naming import NamingRules
from gateway.catalog.profiles import ProfileViews
from gateway.catalog.snapshot import BackendListing, Kind
from gateway.config import PolicyRule
from gateway.identity.policy import Policy
from gateway.identity.principal import Principal

RULES = [
    {
        "claims": {"groups": ["dev"]},
        "profiles": ["default"],
        "tools": {"allow": ["b1__*", "b2__tool_1*"]},
    },
    {"everyone": True, "tools": {"deny": ["*_99*"]}},
]


def main() -> None:
    """Print the figures."""
    catalog = Catalog(NamingRules())
    for b in range(10):
        tools = tuple(
            {"name": f"tool_{i}", "description": "x" * 200, "inputSchema": {"type": "object"}}
            for i in range(1000)
        )
        catalog.publish(BackendListing(backend=f"b{b}", prefix=f"b{b}", tools=tools))
    base = ProfileViews().view("default", catalog.snapshot)
    policy = Policy.from_config(msgspec.convert(RULES, list[PolicyRule]))
    assert policy is not None
    alice = Principal("jwt", "alice", "https://idp", claims={"groups": ["dev", "ops"]})
    rounds = 10_000
    best = min(timeit.repeat(lambda: policy.decide(alice).on("default"), number=rounds, repeat=5))
    print(f"decide + on(profile), per request: {best / rounds * 1e6:.1f} us")
    access = policy.decide(alice).on("default")
    view = narrow(base, access.admitter())
    best = min(timeit.repeat(lambda: narrow(base, access.admitter()), number=1, repeat=5))
    shown = len(view.view(Kind.TOOLS))
    print(f"one effective view of 10,000 tools ({shown} shown): {best * 1e3:.1f} ms")
    views = EffectiveViews()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for n in range(1000):
        member = Principal("jwt", f"user{n}", "https://idp", claims={"groups": ["dev"]})
        share = policy.decide(member).on("default")
        views.view("default", base, share, share.admitter())
    after = tracemalloc.take_snapshot()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    print(f"1,000 callers of one group: {len(views)} view(s), {grown / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
