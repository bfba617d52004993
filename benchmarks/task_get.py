"""The owner's tasks/get, in process: time and trio task steps a round, with and without the store.

A task this replica runs is answered from memory whether or not its
record is kept in the state store; this measures that the record costs
the local ``tasks/get`` nothing: one ``TaskRunner`` on the embedded store
(the default), one without, the same rounds. Run it on another tree with
``PYTHONPATH=<tree>`` for a baseline (the store half is skipped where the
runner cannot keep records).

Usage::

    PYTHONPATH=$PWD .venv/bin/python -m benchmarks.task_get [--rounds 20000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import trio

from gateway.protocol import jsonrpc, mcp
from gateway.protocol.stateless.envelope import Envelope
from gateway.router.context import ModernRequest
from gateway.router.stateless.gateway_tasks import TaskRunner

CAPS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


class _Steps(trio.abc.Instrument):
    """Counts task steps (each one a pass of the scheduler through a task)."""

    def __init__(self) -> None:
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        """One more step."""
        self.steps += 1


async def _round_trips(rounds: int, with_store: bool) -> dict[str, float]:
    async def work(message: Any, *_: object) -> bytes:
        return jsonrpc.encode_response(1, mcp.encode({"content": []}))

    runner = TaskRunner(lambda request, message, params: work(message))
    request = ModernRequest(
        envelope=Envelope(protocol_version="2026-07-28", client_capabilities=CAPS),
        emit=lambda m: True,
    )
    view: Any = object()
    runner._offered[id(view)] = (view, True)  # the view offers tasks
    steps = _Steps()
    async with trio.open_nursery() as nursery:
        if with_store:
            from gateway.router.stateless.task_records import TaskRecords
            from gateway.store.embedded import EmbeddedStore

            records = TaskRecords(EmbeddedStore())
            runner.attach(records)
            await nursery.start(records.run)
        await nursery.start(runner.run)
        created = runner.adopt(request, "t", lambda background: work(None))
        await trio.sleep(0.01)  # the task ends; its record is written
        message = jsonrpc.Request(1, "tasks/get", None)
        params = {"taskId": created["taskId"]}
        trio.lowlevel.add_instrument(steps)
        started = time.perf_counter()
        for _ in range(rounds):
            await runner.serve(request, message, params, view)
        elapsed = time.perf_counter() - started
        trio.lowlevel.remove_instrument(steps)
        nursery.cancel_scope.cancel()
    return {"us_per_get": elapsed / rounds * 1e6, "steps_per_get": steps.steps / rounds}


def main() -> None:
    """Print µs and task steps a local tasks/get, without and with the store's records."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    kinds = [False, True] if hasattr(TaskRunner, "attach") else [False]
    for with_store in kinds:
        runs = [trio.run(_round_trips, args.rounds, with_store) for _ in range(args.repeat)]
        us = statistics.median(r["us_per_get"] for r in runs)
        steps = statistics.median(r["steps_per_get"] for r in runs)
        label = "embedded store records" if with_store else "no store"
        print(f"{label:24} {us:7.2f} µs a tasks/get (median of {args.repeat}), {steps:.2f} steps")


if __name__ == "__main__":
    main()
