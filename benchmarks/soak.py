"""Bounded soak (issue 8): many sessions calling, cancelling and leaving at
random across several backends, while backends are killed and the config is
reloaded. Stops by itself.

Every call carries a unique token that the echo backend sends back, so a
response delivered to the wrong request or session is caught. A response is
*lost* when a request that was not cancelled gets no JSON-RPC answer at all.
The last line is ``lost=N misdelivered=M``; both must be 0.

Run: ``.venv/bin/python -m benchmarks.soak --seconds 60 --sessions 40``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import trio

from benchmarks.common import BENCH_SERVER, HEADERS, ROOT, free_port

CANCEL_RATE = float(os.environ.get("SOAK_CANCEL_RATE", "0.1"))


# Half the sessions are abandoned without DELETE, as hosts do; they are held
# until the idle timeout. The soak sets it short so that steady-state memory
# shows within the run (the default, 1 h, would show as growth).
IDLE_TIMEOUT = float(os.environ.get("SOAK_IDLE_TIMEOUT", "60"))


def _config(port: int, backends: list[str]) -> dict[str, Any]:
    return {
        "server": {
            "host": "127.0.0.1",
            "port": port,
            "max_sessions": 100000,
            "session_idle_timeout": IDLE_TIMEOUT,
        },
        "logging": {"level": "warning", "format": "json"},
        "shutdown": {"drain_timeout": 5},
        "backends": [
            {
                "name": name,
                "transport": "stdio",
                "command": BENCH_SERVER[0],
                "args": BENCH_SERVER[1:],
                "env": {"BENCH_TOOLS": "1"},
                "stop_grace": 0.5,
                "restart": {"initial_delay": 0.2, "max_delay": 2},
            }
            for name in backends
        ],
    }


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        text = (task / "children").read_text().split()
        found.extend(int(x) for x in text)
    return found


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _fds(pid: int) -> str:
    kinds: Counter[str] = Counter()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        kinds[target.split(":")[0] if ":" in target else "file"] += 1
    return f"{sum(kinds.values())} ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))})"


def _lag_summary(metrics_text: str) -> str:
    """The lag histogram's count and the smallest bucket holding every sample."""
    buckets: list[tuple[float, float]] = []
    count = 0.0
    for line in metrics_text.splitlines():
        if line.startswith("mcp_gateway_event_loop_lag_seconds_bucket"):
            le = line.split('le="')[1].split('"')[0]
            buckets.append((float(le), float(line.rsplit(" ", 1)[1])))
        elif line.startswith("mcp_gateway_event_loop_lag_seconds_count"):
            count = float(line.rsplit(" ", 1)[1])
    if not count:
        return "no samples"
    worst = next((le for le, n in buckets if n >= count), float("inf"))
    under_10ms = next((n for le, n in buckets if le == 0.01), 0.0)
    share = under_10ms / count
    return f"{count:.0f} samples, all within {worst * 1000:g} ms, {share:.0%} within 10 ms"


class Tally:
    """What happened, counted."""

    def __init__(self) -> None:
        self.sent = 0
        self.answered = 0
        self.cancelled = 0
        self.lost = 0
        self.misdelivered = 0
        self.errors: Counter[str] = Counter()


async def _post_quietly(
    http: httpx.AsyncClient, url: str, headers: dict[str, str], body: str
) -> None:
    await trio.sleep(random.uniform(0, 0.005))  # cancel races the call, on purpose
    with contextlib.suppress(httpx.HTTPError):
        await http.post(url, headers=headers, content=body)


async def _session(
    http: httpx.AsyncClient, url: str, names: list[str], stop: float, tally: Tally, seed: int
) -> None:
    rng = random.Random(seed)
    serial = 0
    while trio.current_time() < stop:
        try:
            init = await http.post(
                url,
                headers=HEADERS,
                content=json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": 0,
                        "method": "initialize",
                        "params": {
                            "protocolVersion": "2025-11-25",
                            "capabilities": {},
                            "clientInfo": {"name": "soak", "version": "1"},
                        },
                    }
                ),
            )
        except httpx.HTTPError as exc:
            # No session yet, so nothing can be lost: count it and go on.
            tally.errors[f"initialize {type(exc).__name__}"] += 1
            continue
        if init.status_code != 200:
            tally.errors[f"initialize {init.status_code}"] += 1
            await trio.sleep(0.1)
            continue
        headers = {**HEADERS, "mcp-session-id": init.headers["mcp-session-id"]}
        for _ in range(rng.randint(5, 40)):
            if trio.current_time() >= stop:
                break
            serial += 1
            token = f"{seed}-{serial}-{rng.random()}"
            backend = rng.choice(names)
            body = {
                "jsonrpc": "2.0",
                "id": serial,
                "method": "tools/call",
                "params": {"name": f"{backend}__echo", "arguments": {"text": token}},
            }
            cancel = rng.random() < CANCEL_RATE
            tally.sent += 1
            async with trio.open_nursery() as nursery:
                if cancel:
                    note = {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": {"requestId": serial},
                    }
                    nursery.start_soon(_post_quietly, http, url, headers, json.dumps(note))
                try:
                    response = await http.post(url, headers=headers, content=json.dumps(body))
                except httpx.HTTPError as exc:
                    tally.lost += 1
                    tally.errors[f"http {type(exc).__name__}"] += 1
                    continue
            text = response.text.strip()
            if not text or response.headers.get("content-type", "").startswith("text/event-stream"):
                message = None
                for line in text.splitlines():
                    if line.startswith("data: "):
                        message = json.loads(line[6:])
                if message is None:
                    if cancel:
                        tally.cancelled += 1
                    else:
                        tally.lost += 1
                    continue
            else:
                message = response.json()
            if message.get("id") != serial:
                tally.misdelivered += 1
                continue
            if "error" in message:
                tally.errors[
                    str(message["error"].get("data", {}).get("reason", message["error"]["code"]))
                ] += 1
                tally.answered += 1
                continue
            got = message["result"]["content"][0]["text"]
            if got != token:
                tally.misdelivered += 1
            tally.answered += 1
        if rng.random() < 0.5:
            try:
                await http.delete(url, headers=headers)
            except httpx.HTTPError as exc:
                tally.errors[f"delete {type(exc).__name__}"] += 1


async def _chaos(pid: int, config_path: Path, port: int, stop: float, seed: int) -> Counter[str]:
    rng = random.Random(seed)
    done: Counter[str] = Counter()
    all_names = ["b1", "b2", "b3", "b4"]
    while trio.current_time() < stop:
        await trio.sleep(rng.uniform(1.0, 3.0))
        if rng.random() < 0.6:
            children = _children(pid)
            if children:
                os.kill(rng.choice(children), signal.SIGKILL)
                done["backend killed"] += 1
        else:
            names = ["b1", "b2", *rng.sample(all_names[2:], rng.randint(0, 2))]
            config_path.write_text(json.dumps(_config(port, names)))
            os.kill(pid, signal.SIGHUP)
            done["config reloaded"] += 1
    config_path.write_text(json.dumps(_config(port, all_names)))
    os.kill(pid, signal.SIGHUP)
    return done


async def _main(seconds: float, sessions: int, seed: int) -> int:
    port = free_port()
    names = ["b1", "b2", "b3", "b4"]
    with tempfile.TemporaryDirectory() as tmp:
        config_path = Path(tmp) / "gateway.yaml"
        config_path.write_text(json.dumps(_config(port, names)))
        proc = subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve", "-c", str(config_path)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}/mcp"
        try:
            async with httpx.AsyncClient(
                timeout=30, limits=httpx.Limits(max_connections=sessions * 2)
            ) as http:
                with trio.fail_after(60):
                    while True:
                        try:
                            if (
                                await http.get(f"http://127.0.0.1:{port}/readyz")
                            ).status_code == 200:
                                break
                        except httpx.TransportError:
                            pass
                        await trio.sleep(0.05)
                await trio.sleep(1.0)
                start = {
                    "rss_kib": _rss_kib(proc.pid),
                    "fds": _fds(proc.pid),
                    "children": len(_children(proc.pid)),
                }
                tally = Tally()
                stop = trio.current_time() + seconds
                chaos: Counter[str] = Counter()

                async def run_chaos() -> None:
                    chaos.update(await _chaos(proc.pid, config_path, port, stop, seed))

                scrapes: list[float] = []

                async def scrape() -> None:
                    # Robustness B20: metrics scraped every second never block.
                    async with httpx.AsyncClient(timeout=10) as scraper:
                        while trio.current_time() < stop:
                            started = trio.current_time()
                            try:
                                await scraper.get(f"http://127.0.0.1:{port}/metrics")
                            except httpx.HTTPError:
                                scrapes.append(float("inf"))  # counted as the worst
                            else:
                                scrapes.append(trio.current_time() - started)
                            await trio.sleep(1.0)

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(run_chaos)
                    nursery.start_soon(scrape)
                    for index in range(sessions):
                        nursery.start_soon(
                            _session, http, url, ["b1", "b2"], stop, tally, seed * 1000 + index
                        )
                await trio.sleep(3.0)  # let restarts and reloads settle
            # Measured after the load generator closed its connections and the
            # gateway's keep-alive timeout (5 s) ran out: what is left open now
            # is the gateway's own.
            await trio.sleep(6.0)
            async with httpx.AsyncClient() as last_scrape:
                metrics_text = (await last_scrape.get(f"http://127.0.0.1:{port}/metrics")).text
            end = {
                "rss_kib": _rss_kib(proc.pid),
                "fds": _fds(proc.pid),
                "children": len(_children(proc.pid)),
            }
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=30)
    print(f"soak: {seconds:g} s, {sessions} sessions, seed {seed}, idle timeout {IDLE_TIMEOUT:g} s")
    print(
        f"requests sent {tally.sent}, answered {tally.answered}, "
        f"cancelled without answer {tally.cancelled}"
    )
    print(f"chaos: {dict(chaos)}")
    print(f"errors by kind: {dict(tally.errors)}")
    print(f"RSS start {start['rss_kib']} KiB, end {end['rss_kib']} KiB")
    print(
        f"open fds start {start['fds']}, end {end['fds']}; "
        f"children start {start['children']}, end {end['children']}"
    )
    scrapes.sort()
    if scrapes:
        p99 = scrapes[min(len(scrapes) - 1, int(len(scrapes) * 0.99))]
        print(
            f"/metrics scrapes {len(scrapes)}: p50 {scrapes[len(scrapes) // 2] * 1000:.1f} ms, "
            f"p99 {p99 * 1000:.1f} ms, max {scrapes[-1] * 1000:.1f} ms"
        )
    print(f"event loop lag: {_lag_summary(metrics_text)}")
    print(f"gateway exit code {code}")
    print(f"lost={tally.lost} misdelivered={tally.misdelivered}")
    return 0 if tally.lost == 0 and tally.misdelivered == 0 and code == 0 else 1


def main() -> None:
    """Parse flags and run the soak."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    raise SystemExit(trio.run(_main, args.seconds, args.sessions, args.seed))


if __name__ == "__main__":
    main()
