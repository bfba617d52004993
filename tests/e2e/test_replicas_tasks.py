"""Tasks on three replicas behind HAProxy, with a SIGKILL and a store restart (issue 26).

The replica run of tests/e2e/test_replicas_store.py (three ``python -m
gateway serve`` on one ``redis-server`` with ``appendonly``, HAProxy round
robin, no stickiness) with tasks: two principals create, at once, 2026-07-28
task calls (the host declares the tasks extension) of

- ``c__slow_compute``, a ``taskSupport: optional`` tool of a handshake-era
  backend (tests/servers/conformance_backend.py, one stdio child per
  replica): a task the gateway runs, its record in the store;
- ``t__countdown``, a tool of a 2026-07-28 backend with tasks of its own
  (tests/servers/modern_tasks.py over HTTP, one process all replicas
  reach): a native task, its route in the store.

Tasks are polled through HAProxy (any replica). One replica, running long
gateway tasks and having created native ones, is SIGKILLed mid-run with
``store.task_owner_timeout`` at 3 s; the redis-server is then stopped (the
replica running a task answers for it from memory, another says the store
is unavailable) and started again. At the end every task is terminal and reads the same from
each live replica asked directly; the killed replica's running gateway
tasks are ``failed`` saying its replica stopped; every result is what the
tool computes; the other principal's ids are unknown on every replica.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import signal
from collections import Counter
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
import trio

from gateway.errors import http_status_for
from gateway.protocol.stateless.task_record import OWNER_LOST
from tests.e2e.test_replicas_store import (
    Replica,
    _answer,
    _behind_haproxy,
    _store_state,
)
from tests.e2e.test_tasks import WITH_TASKS
from tests.frontend.test_modern_http import modern, modern_headers
from tests.harness import NEEDS_SDK2, SDK2_PYTHON
from tests.redis_server import RedisServer, free_port
from tests.servers.paths import python_server_command
from tests.subprocess_servers import run_server

MODERN_TASKS: Final = Path(__file__).resolve().parents[2] / "tests" / "servers" / "modern_tasks.py"
TOKENS: Final = {
    "alice": "token-of-alice-for-tasks-0123456789",
    "bob": "token-of-bob-for-tasks-0123456789",
}
OWNER_TIMEOUT: Final = 3.0
# Tasks each principal creates through HAProxy in each phase, of each kind.
PER_PHASE: Final = 3
# A long task on the replica that is killed outlives the run; one on a survivor ends in it.
DOOMED_SECONDS: Final = 120
SURVIVING_SECONDS: Final = 4
WAIT: Final = 60.0  # real processes on 2 shared cores
TERMINAL: Final = {"completed", "failed", "cancelled"}

pytestmark = [
    *NEEDS_SDK2,
    pytest.mark.skipif(
        shutil.which("haproxy") is None or shutil.which("redis-server") is None,
        reason="haproxy or redis-server is missing: `make haproxy redis` (make test installs both)",
    ),
]


def _config(port: int, store_url: str, modern_url: str) -> str:
    return json.dumps(
        {
            "server": {"host": "127.0.0.1", "port": port},
            "logging": {"level": "warning", "format": "json"},
            "auth": {"tokens": TOKENS},
            "store": {"url": store_url, "key_prefix": "three-tasks:", "timeout": 2,
                      "task_owner_timeout": OWNER_TIMEOUT},
            "pagination": {"cursor_secret": "three-replicas-cursor-secret"},
            "mrtr": {"state_secret": "three-replicas-state-secret"},
            "shutdown": {"drain_timeout": 2},
            "backends": [
                {"name": "c", "transport": "stdio", "stop_grace": 0.3, "required": True,
                 "command": python_server_command("conformance_backend")[0],
                 "args": python_server_command("conformance_backend")[1:]},
                {"name": "t", "transport": "http", "url": modern_url, "required": True},
            ],
        }
    )  # fmt: skip


class Task:
    """One task a principal created: its id, kind and the result the tool computes."""

    def __init__(self, principal: str, kind: str, task_id: str, expected: str) -> None:
        self.principal = principal
        self.kind = kind  # "gateway" or "native"
        self.task_id = task_id
        self.expected = expected
        self.doomed = False  # a running gateway task on the replica that is killed


async def _ask(
    http: httpx.AsyncClient, url: str, principal: str, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    message = modern(1, method, params, **WITH_TASKS)
    headers = {**modern_headers(message), "authorization": f"Bearer {TOKENS[principal]}"}
    task_id = params.get("taskId")
    if isinstance(task_id, str):
        headers["Mcp-Name"] = task_id  # a tasks/* request names its task
    response = await http.post(url + "/mcp", json=message, headers=headers)
    answer = _answer(response)
    # A JSON-RPC error goes with its own HTTP status (an unknown task id: 400).
    code = answer["error"]["code"] if "error" in answer else None
    assert response.status_code == (http_status_for(code) if code else 200), response.text
    return answer


class Run:
    """The tasks of the run and the numbers that make their results checkable."""

    def __init__(self) -> None:
        self.tasks: list[Task] = []
        self._numbers = itertools.count(1)

    async def create(
        self, http: httpx.AsyncClient, url: str, principal: str, kind: str, seconds: float = 0.2
    ) -> Task:
        """One task call through ``url``; the task it created."""
        tag = f"{principal}-{kind}-{next(self._numbers)}"
        if kind == "gateway":
            call = {"name": "c__slow_compute", "arguments": {"seconds": seconds, "label": tag}}
            expected = f"computed {tag} after {seconds:g} s"
        else:
            call = {"name": "t__countdown", "arguments": {"polls": 2, "tag": tag}}
            expected = f" for {tag}"
        answer = await _ask(http, url, principal, "tools/call", call)
        assert "result" in answer, (url, tag, answer)
        created = answer["result"]
        assert created["resultType"] == "task", created
        task = Task(principal, kind, created["taskId"], expected)
        self.tasks.append(task)
        return task

    async def batch(self, http: httpx.AsyncClient, url: str) -> list[Task]:
        """PER_PHASE tasks of each kind for each principal, all at once."""
        made: list[Task] = []

        async def one(principal: str, kind: str) -> None:
            made.append(await self.create(http, url, principal, kind))

        async with trio.open_nursery() as nursery:
            for principal in TOKENS:
                for kind in ("gateway", "native"):
                    for _ in range(PER_PHASE):
                        nursery.start_soon(one, principal, kind)
        return made


async def _get(http: httpx.AsyncClient, url: str, task: Task, principal: str = "") -> Any:
    asked = principal or task.principal
    return await _ask(http, url, asked, "tasks/get", {"taskId": task.task_id})


async def _until(
    http: httpx.AsyncClient, url: str, task: Task, statuses: set[str]
) -> dict[str, Any]:
    with trio.fail_after(WAIT):
        while True:
            answer = await _get(http, url, task)
            assert "result" in answer, answer
            got: dict[str, Any] = answer["result"]
            if got["status"] in statuses:
                return got
            await trio.sleep(0.1)


def _check(task: Task, ended: dict[str, Any]) -> None:
    """The ending the task must have: its tool's result, or failed for its lost replica."""
    assert ended["taskId"] == task.task_id
    if task.doomed:
        assert ended["status"] == "failed", ended
        assert ended["statusMessage"] == OWNER_LOST
        assert ended["error"] == {"code": -32603, "message": OWNER_LOST}
        return
    assert ended["status"] == "completed", ended
    text = ended["result"]["content"][0]["text"]
    if task.kind == "gateway":
        assert text == task.expected, (text, task.expected)
    else:
        assert text.startswith("done: backend-task-") and text.endswith(task.expected), text


async def _all_ended(http: httpx.AsyncClient, url: str, tasks: list[Task]) -> None:
    async with trio.open_nursery() as nursery:
        for task in tasks:

            async def one(task: Task = task) -> None:
                _check(task, await _until(http, url, task, TERMINAL))

            nursery.start_soon(one)


async def test_tasks_end_the_same_on_every_replica_through_a_kill_and_a_store_restart(
    tmp_path: Path,
) -> None:
    """Issue 26: every task terminal and alike everywhere, right results, lost ones failed."""
    redis = RedisServer(tmp_path)
    redis.start()
    replicas = [Replica(index, tmp_path) for index in range(3)]
    victim, survivors = replicas[1], [replicas[0], replicas[2]]
    run = Run()
    figures: dict[str, Any] = {}
    modern_port = free_port()
    async with contextlib.AsyncExitStack() as stack, httpx.AsyncClient(timeout=WAIT) as http:
        stack.callback(redis.stop)
        modern_server = stack.enter_context(
            run_server(
                [str(SDK2_PYTHON), str(MODERN_TASKS), "http", str(modern_port)],
                modern_port,
                env={"MODERN_TASKS_RECORD": str(tmp_path / "record.jsonl")},
            )
        )
        modern_url = modern_server.url("/mcp")
        front = await _behind_haproxy(
            stack, http, replicas, tmp_path, lambda r: _config(r.port, redis.url, modern_url)
        )
        started = trio.current_time()

        # 1. Tasks of both kinds from both principals at once, polled through HAProxy.
        await _all_ended(http, front, await run.batch(http, front))

        # 2. Long gateway tasks on every replica; native ones created by the victim.
        doomed: list[Task] = []
        surviving: list[Task] = []
        for principal in TOKENS:
            for replica in replicas:
                seconds = DOOMED_SECONDS if replica is victim else SURVIVING_SECONDS
                task = await run.create(http, replica.url, principal, "gateway", seconds)
                (doomed if replica is victim else surviving).append(task)
            # Polled only after the kill: its route is in the store.
            surviving.append(await run.create(http, victim.url, principal, "native"))
        for task in doomed:
            task.doomed = True
            assert (await _until(http, survivors[0].url, task, {"working"}))["status"]

        # 3. SIGKILL the victim while more tasks are made and polled through HAProxy.
        assert victim.process is not None
        victim.process.send_signal(signal.SIGKILL)
        await victim.process.wait()
        killed = trio.current_time()
        orphaned: list[float] = []

        async def watch(task: Task) -> None:
            _check(task, await _until(http, front, task, TERMINAL))
            orphaned.append(trio.current_time() - killed)

        async with trio.open_nursery() as nursery:
            for task in doomed:
                nursery.start_soon(watch, task)
            await trio.sleep(0.6)  # past HAProxy's health check of the dead one
            await _all_ended(http, front, await run.batch(http, front))
        figures["orphan_failed_after_s"] = round(max(orphaned), 2)
        assert max(orphaned) <= OWNER_TIMEOUT + 15  # the timeout, with room for 2 busy cores
        await _all_ended(http, front, surviving)

        # 4. Stop the redis-server and start it again; then more tasks.
        redis.stop()
        # While it is down: the replica running a task answers from memory; another
        # cannot read its record and says why.
        owned = surviving[0]  # created on survivors[0], completed above
        ended = (await _get(http, survivors[0].url, owned))["result"]
        _check(owned, ended)
        elsewhere = (await _get(http, survivors[1].url, owned))["error"]
        assert elsewhere["code"] == -32603, elsewhere
        assert elsewhere["data"] == {"reason": "store_unavailable"}, elsewhere
        redis.start()
        with trio.fail_after(WAIT):
            for replica in survivors:
                while (await _store_state(http, replica)) != "ok":  # noqa: ASYNC110 - another process
                    await trio.sleep(0.05)
        await _all_ended(http, front, await run.batch(http, front))

        # 5. Every task ended, alike on each live replica asked directly; none leaks.
        for task in run.tasks:
            seen = [(await _get(http, replica.url, task))["result"] for replica in survivors]
            assert seen[0] == seen[1], (task.task_id, seen)
            _check(task, seen[0])
            other = next(p for p in TOKENS if p != task.principal)
            for replica in survivors:
                refused = await _get(http, replica.url, task, other)
                assert refused["error"] == {
                    "code": -32602,
                    "message": f"unknown taskId: {task.task_id}",
                }, refused
        figures["seconds"] = round(trio.current_time() - started, 1)
    statuses = Counter(
        f"{task.kind}-{'failed' if task.doomed else 'completed'}" for task in run.tasks
    )
    figures["tasks"] = dict(statuses)
    print(f"\ntasks on three replicas: {json.dumps(figures)}")
