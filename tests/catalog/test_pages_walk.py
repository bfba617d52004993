"""The pagination promise, as a hypothesis state machine (issue 3).

Random backends with random lists, random page sizes; between any two page
requests, items and whole backends are added, removed and renamed. On every
walk: every item present for the whole walk is returned exactly once, in
order, and no item is returned twice.
"""

from __future__ import annotations

import msgspec
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from gateway.catalog.catalog import Catalog
from gateway.catalog.cursor import CursorCodec
from gateway.catalog.naming import NamingRules
from gateway.catalog.pages import plan_page, render_page
from gateway.catalog.snapshot import BackendListing, Kind

BACKEND_NAMES = [f"b{i}" for i in range(6)]
TOOL_NAMES = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)
_decoder = msgspec.json.Decoder()


class PaginationWalk(RuleBasedStateMachine):
    """One host walking tools/list while the catalog changes under it."""

    def __init__(self) -> None:
        super().__init__()
        self.catalog = Catalog(NamingRules())
        self.codec = CursorCodec(b"test-secret")
        self.tools: dict[str, set[str]] = {}
        self.page_size = 1
        self.walking = False
        self.cursor: str | None = None
        self.seen: list[str] = []
        self.present_throughout: set[str] = set()

    def _publish(self, backend: str) -> None:
        tools = tuple({"name": name, "x-extra": [1, 2]} for name in sorted(self.tools[backend]))
        self.catalog.publish(BackendListing(backend=backend, prefix=backend, tools=tools))

    def _public_now(self) -> set[str]:
        return set(self.catalog.snapshot.view(Kind.TOOLS).keys())

    @initialize(
        lists=st.dictionaries(
            st.sampled_from(BACKEND_NAMES), st.sets(TOOL_NAMES, max_size=12), max_size=4
        ),
        page_size=st.integers(min_value=0, max_value=7),
    )
    def setup(self, lists: dict[str, set[str]], page_size: int) -> None:
        self.page_size = page_size
        for backend, names in lists.items():
            self.tools[backend] = set(names)
            self._publish(backend)

    @rule()
    def start_walk(self) -> None:
        self.walking = True
        self.cursor = None
        self.seen = []
        self.present_throughout = self._public_now()

    @precondition(lambda self: self.walking)
    @rule()
    def next_page(self) -> None:
        position = None if self.cursor is None else self.codec.decode(self.cursor, "tools")
        plan = plan_page("tools", self.catalog.snapshot.view(Kind.TOOLS), position, self.page_size)
        next_cursor = None if plan.next is None else self.codec.encode(plan.next)
        body = _decoder.decode(render_page("tools", [e.encoded for e in plan.entries], next_cursor))
        names = [tool["name"] for tool in body["tools"]]
        assert all(tool["x-extra"] == [1, 2] for tool in body["tools"])
        if self.page_size:
            assert len(names) <= self.page_size
        self.seen.extend(names)
        self.cursor = body.get("nextCursor")
        if self.cursor is None:
            self.walking = False
            self._check_complete_walk()

    def _check_complete_walk(self) -> None:
        assert len(self.seen) == len(set(self.seen)), f"repeated items: {self.seen}"
        assert self.seen == sorted(self.seen), f"out of order: {self.seen}"
        missing = self.present_throughout - set(self.seen)
        assert not missing, f"skipped items present for the whole walk: {missing}"

    @rule(backend=st.sampled_from(BACKEND_NAMES), name=TOOL_NAMES)
    def add_tool(self, backend: str, name: str) -> None:
        self.tools.setdefault(backend, set()).add(name)
        self._publish(backend)

    @rule(backend=st.sampled_from(BACKEND_NAMES), data=st.data())
    def remove_tool(self, backend: str, data: st.DataObject) -> None:
        if not self.tools.get(backend):
            return
        name = data.draw(st.sampled_from(sorted(self.tools[backend])))
        self.tools[backend].discard(name)
        self._publish(backend)
        self.present_throughout.discard(f"{backend}__{name}")

    @rule(backend=st.sampled_from(BACKEND_NAMES), data=st.data(), new=TOOL_NAMES)
    def rename_tool(self, backend: str, data: st.DataObject, new: str) -> None:
        if not self.tools.get(backend):
            return
        old = data.draw(st.sampled_from(sorted(self.tools[backend])))
        self.tools[backend].discard(old)
        self.tools[backend].add(new)
        self._publish(backend)
        if old != new:
            self.present_throughout.discard(f"{backend}__{old}")

    @rule(backend=st.sampled_from(BACKEND_NAMES))
    def backend_goes_down(self, backend: str) -> None:
        self.catalog.withdraw(backend)
        self.present_throughout -= {
            n for n in self.present_throughout if n.startswith(backend + "__")
        }
        self.tools.pop(backend, None)

    @rule(backend=st.sampled_from(BACKEND_NAMES), names=st.sets(TOOL_NAMES, max_size=8))
    def backend_comes_up(self, backend: str, names: set[str]) -> None:
        gone = self.tools.get(backend, set()) - names
        self.present_throughout -= {f"{backend}__{name}" for name in gone}
        self.tools[backend] = set(names)
        self._publish(backend)

    @invariant()
    def present_items_are_still_in_the_catalog(self) -> None:
        assert self.present_throughout <= self._public_now()


PaginationWalk.TestCase.settings = settings(max_examples=500, stateful_step_count=40, deadline=None)
test_every_walk_returns_each_lasting_item_once_in_order = PaginationWalk.TestCase
