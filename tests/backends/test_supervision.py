"""Backend supervision, timeouts, list_changed storms and reloads, in virtual time.

Every backend here is a ``FakeMcpServer`` reached through ``FakeConnector``;
every test runs under ``autojump_clock`` and states *when* things happen, to
the exact virtual second (STYLE rule 9). Where a test constructs ``Backend``
itself it seeds the jitter with ``random.Random(0)``, so restart times are
reproducible too; ``Pool`` does not take an RNG, so pool-level tests compare
against the times the connector recorded instead.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final

import msgspec
import pytest
import trio
from prometheus_client import CollectorRegistry
from trio.testing import MockClock, wait_all_tasks_blocked

from gateway.backends.backend import REFRESH_DEBOUNCE, STABLE_UPTIME, Backend
from gateway.backends.pool import Pool, ReloadPlan, open_pool, plan_reload
from gateway.backends.state import BackendState
from gateway.catalog.naming import NamingRules
from gateway.catalog.snapshot import Kind, Snapshot
from gateway.config import BackendConfig, GatewayConfig, parse
from gateway.errors import BackendUnavailable, RequestTimeout
from gateway.protocol import jsonrpc
from gateway.runtime.app import ListChangedCoalescer, open_gateway, reload_config
from gateway.telemetry.metrics import Metrics
from tests.fakes import (
    Answer,
    AnswerAfter,
    CrashMidCall,
    FakeConnector,
    FakeMcpServer,
    Hang,
    ProgressForever,
)
from tests.harness import wait_for_states

RULES: Final = NamingRules("__", 64)
# Upper bound on any wait in *virtual* seconds: with autojump a wait for
# something that never happens ends here instead of hanging the suite.
VIRTUAL_WAIT_LIMIT: Final = 3600.0
# The draws of random.Random(0), the seed every directly built Backend uses.
SEED: Final = 0
# Default restart policy (0.5 s doubling to 60 s): the ceiling of attempt n.
CEILINGS: Final = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0, 60.0, 60.0)


def draws(count: int) -> list[float]:
    """The first ``count`` values the seeded backoff RNG hands out."""
    rng = random.Random(SEED)
    return [rng.random() for _ in range(count)]


def backend_entry(name: str, **extra: Any) -> dict[str, Any]:
    """A stdio backend entry for a fake; idle pings off unless the test turns them on."""
    return {
        "name": name,
        "transport": "stdio",
        "command": "fake",
        "health": {"ping_interval": 0},
    } | extra


def config_text(*entries: dict[str, Any], **sections: Any) -> str:
    """A config document (JSON is YAML) with these backends."""
    return json.dumps({**sections, "backends": list(entries)})


def make_config(*entries: dict[str, Any], **sections: Any) -> GatewayConfig:
    """A parsed config with these backends."""
    return parse(config_text(*entries, **sections), env={})


# Ping after 30 s quiet, give it 10 s to answer (issue 5's defaults, written out).
IDLE_PINGS = {"ping_interval": 30, "ping_timeout": 10}


def one_backend(name: str, **extra: Any) -> BackendConfig:
    """The parsed config of one fake backend."""
    return make_config(backend_entry(name, **extra)).backends[0]


def tool_call(name: str, **params: Any) -> msgspec.Raw:
    """The params of a tools/call for the backend-side tool ``name``."""
    return jsonrpc.to_raw({"name": name, "arguments": {}, **params})


def text_of(result: msgspec.Raw) -> str:
    """The text of a single-block tools/call result."""
    body = msgspec.json.decode(result)
    assert body["isError"] is False
    [block] = body["content"]
    return str(block["text"])


@dataclass
class Transitions:
    """Records each backend state change with its virtual time (an ``on_change`` callback)."""

    log: list[tuple[float, str, BackendState]] = field(default_factory=list)
    _last: dict[str, BackendState] = field(default_factory=dict)
    _changed: trio.Event = field(default_factory=trio.Event)

    def __call__(self, backend: Backend) -> None:
        if self._last.get(backend.name) is backend.state:
            return  # a listing refresh, not a state change
        self._last[backend.name] = backend.state
        self.log.append((trio.current_time(), backend.name, backend.state))
        self._changed.set()
        self._changed = trio.Event()

    def of(self, name: str) -> list[tuple[float, BackendState]]:
        """(time, state) of every change of one backend."""
        return [(t, state) for t, n, state in self.log if n == name]

    async def wait_for(self, name: str, state: BackendState, count: int = 1) -> float:
        """Wait until ``name`` has entered ``state`` ``count`` times; return the last time."""
        with trio.fail_after(VIRTUAL_WAIT_LIMIT):
            while True:
                times = [t for t, s in self.of(name) if s is state]
                if len(times) >= count:
                    return times[count - 1]
                await self._changed.wait()


@asynccontextmanager
async def running_backend(
    config: BackendConfig, connector: FakeConnector, transitions: Transitions
) -> AsyncIterator[Backend]:
    """One directly built, seeded Backend supervised for the body of the block."""
    backend = Backend(config, on_change=transitions, connect=connector, rng=random.Random(SEED))
    async with trio.open_nursery() as nursery:
        await nursery.start(backend.run)
        yield backend
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def running_alone(
    server: FakeMcpServer, **extra: Any
) -> AsyncIterator[tuple[Backend, FakeConnector, Transitions]]:
    """``server`` as the one backend, named after it, supervised for the body of the block."""
    connector = FakeConnector({server.name: server})
    transitions = Transitions()
    config = one_backend(server.name, **extra)
    async with running_backend(config, connector, transitions) as backend:
        yield backend, connector, transitions


@dataclass
class Outcome:
    """How one call ended, and when."""

    time: float = -1.0
    result: msgspec.Raw | None = None
    error: Exception | None = None


async def call_into(
    outcome: Outcome, call: Callable[[], Any], *, task_status: trio.TaskStatus[None]
) -> None:
    """Run one call to the end, recording its outcome; ``start`` returns once it is sent."""
    task_status.started()
    try:
        outcome.result = await call()
    except (BackendUnavailable, RequestTimeout) as exc:
        outcome.error = exc
    outcome.time = trio.current_time()


# -- startup ----------------------------------------------------------------


async def test_a_slow_initialize_does_not_delay_other_backends(
    autojump_clock: MockClock,
) -> None:
    """Spec (issue 5, robustness B4): startup is concurrent; a slow backend comes up when ready."""
    connector = FakeConnector(
        {"fast": FakeMcpServer("fast"), "slow": FakeMcpServer("slow", initialize_delay=20)}
    )
    config = make_config(backend_entry("fast"), backend_entry("slow"))
    transitions = Transitions()
    async with open_pool(config.backends, RULES, connector) as pool:
        pool.on_state_change(transitions)
        await transitions.wait_for("slow", BackendState.UP)
        assert transitions.log == [
            (0.0, "fast", BackendState.UP),
            (20.0, "slow", BackendState.UP),
        ]
        assert pool.snapshot.view(Kind.TOOLS).keys() == ("fast__echo", "slow__echo")


async def test_an_initialize_past_its_timeout_marks_the_backend_down_and_retries_with_backoff(
    autojump_clock: MockClock,
) -> None:
    """Spec (issue 5, robustness B4): initialize 40 s with a 30 s limit is DOWN at exactly 30 s."""
    connector = FakeConnector({"late": FakeMcpServer("late", initialize_delay=40)})
    config = one_backend("late", timeouts={"initialize": 30})
    transitions = Transitions()
    async with running_backend(config, connector, transitions) as backend:
        await connector.wait_for_attempts("late", 3)
        d0, d1 = draws(2)
        first_retry = 30.0 + d0 * CEILINGS[0]
        second_retry = first_retry + 30.0 + d1 * CEILINGS[1]
        assert connector.attempts["late"] == [0.0, first_retry, second_retry]
        assert transitions.of("late") == [
            (30.0, BackendState.DOWN),
            (first_retry, BackendState.STARTING),
            (first_retry + 30.0, BackendState.DOWN),
            (second_retry, BackendState.STARTING),
        ]
        assert backend.reason == "restarting"
        assert connector.servers["late"].messages("initialize")[0].time == 0.0


# -- restarts and backoff ------------------------------------------------------


async def test_a_backend_that_cannot_connect_is_retried_with_jittered_exponential_delays(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice (issue 5): full jitter, delay n in [0, min(0.5 * 2**n, max_delay)]."""
    connector = FakeConnector()
    connector.fail_connects("gone")
    transitions = Transitions()
    async with running_backend(one_backend("gone"), connector, transitions) as backend:
        await connector.wait_for_attempts("gone", 12)
        times = connector.attempts["gone"][:12]
        delays = [later - earlier for earlier, later in itertools.pairwise(times)]
        assert all(delay <= ceiling for delay, ceiling in zip(delays, CEILINGS, strict=False))
        # Reproducible with the seed: each attempt is the previous plus draw * ceiling.
        expected = [0.0]
        for draw, ceiling in zip(draws(11), CEILINGS, strict=False):
            expected.append(expected[-1] + draw * ceiling)
        assert times == expected
        assert backend.state is BackendState.DOWN
        assert backend.reason == "fake: cannot connect to 'gone'"
        assert [state for _, state in transitions.of("gone")][:2] == [
            BackendState.DOWN,
            BackendState.STARTING,
        ]


async def test_a_backend_that_dies_two_seconds_after_each_start_keeps_backing_off(
    autojump_clock: MockClock,
) -> None:
    """Spec (robustness B7): a flapping backend is spawned at most 8 times in 60 s.

    With Random(0) the draws are 0.844, 0.758, 0.421, 0.259, 0.511, 0.405,
    0.784, 0.303 and the ceilings 0.5, 1, 2, 4, 8, 16, 32, 60 s, so spawn
    k+1 = spawn k + 2 s up + draw k * ceiling k: 0, 2.42, 5.18, 8.02, 11.06,
    17.15, 25.63, 52.71, then 72.91. Eight spawns before 60 s; a backoff that
    started over at every restart would spawn about 26 times.
    """
    connector = FakeConnector({"flappy": FakeMcpServer("flappy", die_after=2)})
    transitions = Transitions()
    async with running_backend(one_backend("flappy"), connector, transitions) as backend:
        await trio.sleep(60)
        spawns = connector.attempts["flappy"]
        expected = [0.0]
        for draw, ceiling in zip(draws(7), CEILINGS, strict=False):
            expected.append(expected[-1] + 2.0 + draw * ceiling)
        assert spawns == expected
        assert len(spawns) == 8
        assert backend.restarts == 8  # the eighth session died too, at 54.71 s
        assert connector.servers["flappy"].connects == 8


async def test_a_backend_that_stayed_up_for_the_stable_uptime_restarts_fast_again(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice (issue 5): after STABLE_UPTIME up, the backoff starts over at 0.5 s."""
    server = FakeMcpServer("steady")
    connector = FakeConnector({"steady": server})
    connector.fail_connects("steady", times=4)
    transitions = Transitions()
    async with running_backend(one_backend("steady"), connector, transitions):
        up_at = await transitions.wait_for("steady", BackendState.UP)
        r = draws(5)
        assert up_at == r[0] * 0.5 + r[1] * 1.0 + r[2] * 2.0 + r[3] * 4.0
        await trio.sleep(STABLE_UPTIME)
        crashed_at = trio.current_time()
        server.crash()
        await connector.wait_for_attempts("steady", 6)
        # Attempt 4 would have a ceiling of 8 s; a stable run resets it to 0.5 s.
        assert connector.attempts["steady"][5] == crashed_at + r[4] * CEILINGS[0]
        assert await transitions.wait_for("steady", BackendState.UP, count=2) == (
            crashed_at + r[4] * CEILINGS[0]
        )


# -- calls while the connection dies -------------------------------------------


async def test_calls_in_flight_fail_with_backend_unavailable_the_moment_the_connection_dies(
    autojump_clock: MockClock,
) -> None:
    """Spec (issue 5, robustness B1): in-flight calls fail at once; other backends carry on.

    One of alpha's tools drops the whole connection 5 s into its call; the
    three calls hanging beside it fail at that same virtual instant.
    """
    alpha = FakeMcpServer("alpha", tools={"stuck": Hang(), "boom": CrashMidCall(after=5)})
    beta = FakeMcpServer("beta", tools={"slow": AnswerAfter(10, "beta done")})
    connector = FakeConnector({"alpha": alpha, "beta": beta})
    config = make_config(
        backend_entry("alpha", restart={"initial_delay": 10, "max_delay": 60}),
        backend_entry("beta"),
    )
    async with open_pool(config.backends, RULES, connector) as pool, trio.open_nursery() as calls:
        transitions = Transitions()
        pool.on_state_change(transitions)
        await wait_for_states_in(pool, alpha=BackendState.UP, beta=BackendState.UP)
        a, b = pool.get("alpha"), pool.get("beta")
        assert a is not None and b is not None
        doomed = [Outcome() for _ in range(4)]
        for outcome, tool in zip(doomed, ["stuck", "stuck", "stuck", "boom"], strict=True):
            await calls.start(call_into, outcome, partial(a.request, "tools/call", tool_call(tool)))
        other = Outcome()
        await calls.start(call_into, other, partial(b.request, "tools/call", tool_call("slow")))
        await transitions.wait_for("alpha", BackendState.DOWN)
        await wait_all_tasks_blocked()
        for outcome in doomed:
            assert outcome.time == 5.0
            assert isinstance(outcome.error, BackendUnavailable)
            assert outcome.error.backend == "alpha"
        assert transitions.of("alpha") == [(0.0, BackendState.UP), (5.0, BackendState.DOWN)]
        assert not alpha.connected
        await trio.sleep(6)
        assert other.time == 10.0 and other.result is not None
        assert text_of(other.result) == "beta done"
        assert transitions.of("beta") == [(0.0, BackendState.UP)]


async def test_a_call_to_a_backend_that_is_down_fails_without_waiting(
    autojump_clock: MockClock,
) -> None:
    """Spec (issue 5, robustness A31): a DOWN backend refuses calls with no time passing."""
    server = FakeMcpServer("alpha")
    async with running_alone(server, restart={"initial_delay": 10, "max_delay": 60}) as (
        backend,
        _,
        transitions,
    ):
        await transitions.wait_for("alpha", BackendState.UP)
        await trio.sleep(3)
        server.crash()
        await transitions.wait_for("alpha", BackendState.DOWN)
        before = trio.current_time()
        assert before == 3.0
        with pytest.raises(BackendUnavailable) as caught:
            await backend.request("tools/call", tool_call("echo"))
        assert trio.current_time() == before
        assert caught.value.backend == "alpha"


async def test_items_leave_the_catalog_while_a_backend_is_down_and_return_when_it_is_back(
    autojump_clock: MockClock,
) -> None:
    """Spec (issue 5): a listing is withdrawn when the session ends, published when back."""
    server = FakeMcpServer("alpha", tools={"echo": Answer(), "add": Answer()})
    connector = FakeConnector({"alpha": server})
    config = make_config(backend_entry("alpha"))
    seen: list[tuple[float, tuple[str, ...], frozenset[Kind]]] = []

    def listener(snapshot: Snapshot, kinds: frozenset[Kind]) -> None:
        seen.append((trio.current_time(), snapshot.view(Kind.TOOLS).keys(), kinds))

    async with open_pool(config.backends, RULES, connector) as pool:
        transitions = Transitions()
        pool.on_catalog_change(listener)
        pool.on_state_change(transitions)
        await transitions.wait_for("alpha", BackendState.UP)
        await trio.sleep(7)
        server.crash()
        back = await transitions.wait_for("alpha", BackendState.UP, count=2)
        assert back == connector.attempts["alpha"][1]
        tools = frozenset({Kind.TOOLS})
        assert seen == [
            (0.0, ("alpha__add", "alpha__echo"), tools),
            (7.0, (), tools),
            (back, ("alpha__add", "alpha__echo"), tools),
        ]


# -- timeouts ------------------------------------------------------------------


async def test_a_hanging_call_times_out_at_the_request_timeout_and_the_backend_is_told(
    autojump_clock: MockClock,
) -> None:
    """Spec (robustness B2): RequestTimeout at exactly timeouts.request; cancelled sent for it."""
    server = FakeMcpServer("alpha", tools={"stuck": Hang()})
    async with running_alone(server, timeouts={"request": 12}) as (backend, _, transitions):
        await transitions.wait_for("alpha", BackendState.UP)
        with pytest.raises(RequestTimeout) as caught:
            await backend.request("tools/call", tool_call("stuck"))
        assert trio.current_time() == 12.0
        assert caught.value.backend == "alpha"
        assert caught.value.seconds == 12.0
        await wait_all_tasks_blocked()
        [call] = server.messages("tools/call")
        [cancel] = server.messages("notifications/cancelled")
        assert call.time == 0.0
        assert cancel.time == 12.0
        assert cancel.params["requestId"] == call.id
        assert backend.state is BackendState.UP  # a slow call is not a dead backend


@pytest.mark.parametrize(("reset_on_progress", "expected_timeout"), [(True, 60.0), (False, 10.0)])
async def test_progress_extends_a_call_only_up_to_max_total(
    autojump_clock: MockClock, reset_on_progress: bool, expected_timeout: float
) -> None:
    """Spec (robustness B3): progress every 5 s resets request=10 up to max_total=60, if enabled."""
    server = FakeMcpServer("alpha", tools={"busy": ProgressForever(every=5)})
    connector = FakeConnector({"alpha": server})
    transitions = Transitions()
    config = one_backend(
        "alpha",
        timeouts={"request": 10, "max_total": 60, "reset_on_progress": reset_on_progress},
    )
    progress: list[tuple[float, Any]] = []
    token = "tok-7"
    async with running_backend(config, connector, transitions) as backend:
        await transitions.wait_for("alpha", BackendState.UP)
        with pytest.raises(RequestTimeout):
            await backend.request(
                "tools/call",
                tool_call("busy", _meta={"progressToken": token}),
                progress_token=token,
                on_progress=lambda body: progress.append((trio.current_time(), body["progress"])),
            )
        assert trio.current_time() == expected_timeout
        await wait_all_tasks_blocked()
        [call] = server.messages("tools/call")
        [cancel] = server.messages("notifications/cancelled")
        assert (cancel.time, cancel.params["requestId"]) == (expected_timeout, call.id)
        if reset_on_progress:
            assert progress == [(5.0 * n, n) for n in range(1, 12)]


# -- idle pings ------------------------------------------------------------------


async def test_a_backend_that_stops_answering_pings_is_restarted_forty_seconds_after_it_went_quiet(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice (issue 5): ping after 30 s quiet, 10 s to answer, then restart."""
    server = FakeMcpServer("alpha")
    async with running_alone(server, health=IDLE_PINGS) as (_, connector, transitions):
        await transitions.wait_for("alpha", BackendState.UP)
        await trio.sleep(45)  # the ping at 30 s is answered; the backend is last heard then
        server.answer_pings = False
        down_at = await transitions.wait_for("alpha", BackendState.DOWN)
        assert down_at == 30.0 + 40.0
        assert [r.time for r in server.messages("ping")] == [30.0, 60.0]
        await connector.wait_for_attempts("alpha", 2)
        await wait_all_tasks_blocked()
        [d0] = draws(1)
        assert connector.attempts["alpha"] == [0.0, 70.0 + d0 * CEILINGS[0]]
        assert server.connects == 2


async def test_a_backend_that_answers_pings_stays_up_with_a_ping_every_interval(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice (issue 5): an idle, healthy backend is pinged every 30 s, never restarted."""
    server = FakeMcpServer("alpha")
    async with running_alone(server, health=IDLE_PINGS) as (backend, _, transitions):
        await trio.sleep(1000)
        assert [r.time for r in server.messages("ping")] == [30.0 * n for n in range(1, 34)]
        assert server.connects == 1
        assert backend.state is BackendState.UP
        assert transitions.log == [(0.0, "alpha", BackendState.UP)]


# -- list_changed storms ---------------------------------------------------------


async def test_a_storm_of_list_changed_notifications_causes_a_bounded_number_of_relists(
    autojump_clock: MockClock,
) -> None:
    """Spec (robustness D16): 1000 list_changed in 1 s → ≤ 6 tools/list; the latest listing wins."""
    server = FakeMcpServer("alpha")
    async with running_alone(server) as (backend, _, transitions):
        await transitions.wait_for("alpha", BackendState.UP)
        assert server.tools_list_calls == 1
        for n in range(1000):
            if n == 500:
                server.tools["late"] = Answer("late")
            server.push_list_changed()
            await trio.sleep(0.001)
        last_push = trio.current_time()
        await trio.sleep(1)
        relists = [r.time for r in server.messages("tools/list")][1:]
        assert 1 <= len(relists) <= 6
        # The first relist is immediate; later ones are at least the debounce
        # apart (to float precision: virtual times are sums of floats).
        gaps = [b - a for a, b in itertools.pairwise(relists)]
        assert all(gap >= REFRESH_DEBOUNCE - 1e-9 for gap in gaps)
        assert relists[-1] >= last_push - 0.001
        assert backend.listing is not None
        assert [tool["name"] for tool in backend.listing.tools] == ["echo", "late"]


@dataclass
class FakeClients:
    """Stands in for the ClientRegistry: records what the coalescer broadcasts."""

    sessions: int = 3
    sent: list[tuple[float, str]] = field(default_factory=list)
    profiles: list[str | None] = field(default_factory=list)

    def broadcast(self, message: bytes, profile: str | None = None, accept: object = None) -> int:
        self.sent.append((trio.current_time(), json.loads(message)["method"]))
        self.profiles.append(profile)
        return self.sessions


async def test_the_coalescer_sends_at_most_one_list_changed_per_window(
    autojump_clock: MockClock,
) -> None:
    """Spec (issue 5, robustness D16): 1000 changes over 1 s reach hosts as ≤ 6 broadcasts."""
    clients = FakeClients()
    registry = CollectorRegistry()
    coalescer = ListChangedCoalescer(clients, Metrics(registry), 0.2)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(coalescer.run)
        for _ in range(1000):
            coalescer.add(frozenset({Kind.TOOLS}))
            await trio.sleep(0.001)
        last_add = trio.current_time() - 0.001
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    boundaries = [0.0]
    while boundaries[-1] < 2:
        boundaries.append(boundaries[-1] + 0.2)
    times = [t for t, _ in clients.sent]
    assert 1 <= len(times) <= 6
    assert all(t in boundaries for t in times)
    assert times[0] == 0.0
    assert times[-1] >= last_add
    assert {method for _, method in clients.sent} == {"notifications/tools/list_changed"}
    fanned_out = registry.get_sample_value(
        "mcp_gateway_notifications_fanned_out_total",
        {"kind": "notifications/tools/list_changed"},
    )
    assert fanned_out == 3 * len(times)


async def test_drained_returns_once_what_was_noted_in_a_closed_window_is_sent(
    autojump_clock: MockClock,
) -> None:
    """A change noted while the window is closed is sent when it reopens; drained waits for it."""
    clients = FakeClients()
    coalescer = ListChangedCoalescer(clients, Metrics(CollectorRegistry()), 0.2)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(coalescer.run)
        await coalescer.drained()  # nothing noted: returns at once
        coalescer.add(frozenset({Kind.TOOLS}))
        await trio.sleep(0.05)  # the first pass sent it; the window is now closed
        coalescer.add(frozenset({Kind.PROMPTS}))
        noted_at = trio.current_time()
        await coalescer.drained()
        assert trio.current_time() - noted_at == pytest.approx(0.15)
        assert [m for _, m in clients.sent] == [
            "notifications/tools/list_changed",
            "notifications/prompts/list_changed",
        ]
        nursery.cancel_scope.cancel()


async def test_the_coalescer_sends_one_notice_per_kind_changed_in_a_window(
    autojump_clock: MockClock,
) -> None:
    """Spec (issue 5): tools and prompts changed in one window give one broadcast of each."""
    clients = FakeClients()
    coalescer = ListChangedCoalescer(clients, Metrics(CollectorRegistry()), 0.2)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(coalescer.run)
        coalescer.add(frozenset({Kind.TOOLS}))
        coalescer.add(frozenset({Kind.PROMPTS}))
        await trio.sleep(0.05)
        coalescer.add(frozenset({Kind.TOOLS}))
        coalescer.add(frozenset({Kind.PROMPTS}))
        await trio.sleep(0.05)
        coalescer.add(frozenset({Kind.TOOLS, Kind.PROMPTS}))
        coalescer.add(frozenset({Kind.RESOURCES, Kind.TEMPLATES}))
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert clients.sent == [
        (0.0, "notifications/prompts/list_changed"),
        (0.0, "notifications/tools/list_changed"),
        (0.2, "notifications/prompts/list_changed"),
        (0.2, "notifications/resources/list_changed"),
        (0.2, "notifications/tools/list_changed"),
    ]


async def test_the_coalescer_tells_each_profile_only_of_its_own_changes(
    autojump_clock: MockClock,
) -> None:
    """Issue 15: list_changed reaches a profile's clients only when that profile's view changed."""
    clients = FakeClients()
    coalescer = ListChangedCoalescer(clients, Metrics(CollectorRegistry()), 0.2)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(coalescer.run)
        coalescer.add(frozenset({Kind.TOOLS}), "coding")
        coalescer.add(frozenset({Kind.TOOLS, Kind.PROMPTS}), "default")
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert list(zip(clients.profiles, (m for _, m in clients.sent), strict=True)) == [
        ("coding", "notifications/tools/list_changed"),
        ("default", "notifications/prompts/list_changed"),
        ("default", "notifications/tools/list_changed"),
    ]


# -- reload ----------------------------------------------------------------------


def test_plan_reload_sorts_backends_into_added_removed_changed_and_unchanged() -> None:
    """Gateway choice (issue 5): configs compare by value; names are sorted."""
    current = {
        b.name: b
        for b in make_config(
            backend_entry("keep"), backend_entry("gone"), backend_entry("change")
        ).backends
    }
    wanted = {
        b.name: b
        for b in make_config(
            backend_entry("keep"),
            backend_entry("change", timeouts={"request": 30}),
            backend_entry("new"),
            backend_entry("also-new"),
        ).backends
    }
    assert plan_reload(current, wanted) == ReloadPlan(
        added=("also-new", "new"), removed=("gone",), changed=("change",), unchanged=("keep",)
    )
    assert plan_reload(current, current) == ReloadPlan(
        added=(), removed=(), changed=(), unchanged=("change", "gone", "keep")
    )


async def test_a_reload_keeps_unchanged_backends_and_drains_removed_ones(
    autojump_clock: MockClock,
) -> None:
    """Spec (robustness B10): add, remove and change backends while calls are in flight."""
    servers = {
        "keep": FakeMcpServer("keep", tools={"slow5": AnswerAfter(5, "kept")}),
        "gone": FakeMcpServer("gone", tools={"slow3": AnswerAfter(3, "drained")}),
        "change": FakeMcpServer("change"),
        "new": FakeMcpServer("new"),
    }
    connector = FakeConnector(servers)
    before = make_config(backend_entry("keep"), backend_entry("gone"), backend_entry("change"))
    after = make_config(
        backend_entry("keep"),
        backend_entry("change", timeouts={"request": 30}),
        backend_entry("new"),
    )
    async with open_pool(before.backends, RULES, connector) as pool, trio.open_nursery() as tasks:
        transitions = Transitions()
        pool.on_state_change(transitions)
        await wait_for_states_in(
            pool, keep=BackendState.UP, gone=BackendState.UP, change=BackendState.UP
        )
        keep, gone = pool.get("keep"), pool.get("gone")
        assert keep is not None and gone is not None
        kept, drained = Outcome(), Outcome()
        await tasks.start(call_into, kept, lambda: keep.request("tools/call", tool_call("slow5")))
        await tasks.start(
            call_into, drained, lambda: gone.request("tools/call", tool_call("slow3"))
        )
        await trio.sleep(1)

        plans: list[tuple[float, ReloadPlan]] = []

        async def reload() -> None:
            plan = await pool.reload(after.backends, drain_timeout=10)
            plans.append((trio.current_time(), plan))

        tasks.start_soon(reload)
        await trio.sleep(1)
        late = Outcome()
        await tasks.start(call_into, late, lambda: gone.request("tools/call", tool_call("slow3")))
        await wait_all_tasks_blocked()
        assert late.time == 2.0
        assert isinstance(late.error, BackendUnavailable) and late.error.backend == "gone"

        await wait_for_states_in(pool, change=BackendState.UP, new=BackendState.UP)
        await trio.sleep(5)
        assert drained.time == 3.0 and drained.result is not None
        assert text_of(drained.result) == "drained"
        assert transitions.of("gone")[-1] == (3.0, BackendState.STOPPED)
        assert kept.time == 5.0 and kept.result is not None
        assert text_of(kept.result) == "kept"
        assert plans == [
            (
                3.0,
                ReloadPlan(
                    added=("new",), removed=("gone",), changed=("change",), unchanged=("keep",)
                ),
            )
        ]
        assert pool.get("keep") is keep
        assert pool.get("gone") is None
        assert servers["keep"].connects == 1
        assert servers["change"].connects == 2
        assert servers["new"].connects == 1
        assert pool.snapshot.view(Kind.TOOLS).keys() == ("change__echo", "keep__slow5", "new__echo")


async def test_reload_config_rejects_an_invalid_file_and_applies_a_valid_one(
    autojump_clock: MockClock, tmp_path: Path
) -> None:
    """Spec (robustness B10): a bad file is counted and ignored; a good one is applied."""
    connector = FakeConnector({"alpha": FakeMcpServer("alpha"), "beta": FakeMcpServer("beta")})
    alpha_only = config_text(backend_entry("alpha"))
    path = tmp_path / "gateway.yaml"
    path.write_text(alpha_only)
    registry = CollectorRegistry()
    config = parse(alpha_only, env={})
    async with open_gateway(config, registry=registry, connect=connector) as gateway:
        await wait_for_states(gateway, {"alpha": BackendState.UP})
        alpha = gateway.pool.get("alpha")

        path.write_text("backends: [\n  {name: alpha, transport: stdio\n")
        assert await reload_config(gateway, str(path)) is False
        assert (
            registry.get_sample_value("mcp_gateway_config_reloads_total", {"outcome": "rejected"})
            == 1.0
        )
        assert gateway.config is config
        assert gateway.pool.get("alpha") is alpha
        assert list(gateway.pool.backends) == ["alpha"]
        assert connector.servers["alpha"].connects == 1

        path.write_text(config_text(backend_entry("alpha"), backend_entry("beta")))
        assert await reload_config(gateway, str(path)) is True
        assert (
            registry.get_sample_value("mcp_gateway_config_reloads_total", {"outcome": "applied"})
            == 1.0
        )
        await wait_for_states(gateway, {"alpha": BackendState.UP, "beta": BackendState.UP})
        assert gateway.pool.get("alpha") is alpha
        assert connector.servers["alpha"].connects == 1
        assert gateway.pool.snapshot.view(Kind.TOOLS).keys() == ("alpha__echo", "beta__echo")


async def wait_for_states_in(pool: Pool, **wanted: BackendState) -> None:
    """Wait (bounded, in virtual time) until each named backend is in its state."""
    with trio.fail_after(VIRTUAL_WAIT_LIMIT):
        while True:
            changed = pool.state_changed
            if all(
                (b := pool.get(name)) is not None and b.state is state
                for name, state in wanted.items()
            ):
                return
            await changed.wait()


async def test_the_first_list_changed_after_a_quiet_spell_is_refreshed_at_once(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice (issue 10, fan-out latency): no debounce delay for a lone change."""
    server = FakeMcpServer("alpha")
    async with running_alone(server) as (_, _, transitions):
        await transitions.wait_for("alpha", BackendState.UP)
        await trio.sleep(10)
        pushed = trio.current_time()
        server.push_list_changed()
        await trio.sleep(1)
        relists = [r.time for r in server.messages("tools/list")][1:]
        assert relists == [pushed]
