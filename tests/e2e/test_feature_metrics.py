"""The series of issue 18 item 4 move on real calls through a real gateway.

The backend is the conformance backend (official SDK 1.x; ``confirm_delete``
asks by elicitation, ``slow_compute`` may run as a task); hosts are the
official SDK client (handshake era) and raw ``httpx`` with the 2026-07-28
envelope. Each test reads the gateway's own registry after the calls, and
one scrapes ``/metrics`` as Prometheus would.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, Final

import httpx
import jwt
import msgspec
import trio

from gateway.config import parse
from gateway.protocol.sealed import REQUEST_STATE
from gateway.router.stateless.held_calls import sealer_for
from tests.e2e.test_tasks import CAPS_KEY, WITH_TASKS
from tests.e2e.test_tasks import post_modern as _modern
from tests.frontend.test_modern_http import sse_messages
from tests.harness import gateway_config, open_client, sdk_backend, start_gateway

if TYPE_CHECKING:
    from tests.harness import Running

WAIT: Final = 15.0  # real processes on 2 shared cores
SEARCH_PROFILE: Final = {"name": "find", "mode": "search", "backends": {"include": ["c"]}}
STATE_SECRET: Final = "feature-metrics-state-secret"
JWT_SECRET: Final = "feature-metrics-jwt-secret-0123456789abcdef"
AUDIENCE: Final = "https://gateway.example/mcp"
ALICE: Final = "alice-secret-token-0123456789"
BOB: Final = "bob-secret-token-0123456789"
ELICITS: Final = {CAPS_KEY: {"elicitation": {"form": {}}}}


def _value(running: Running, name: str, **labels: str) -> float:
    """A sample of the gateway's registry; 0 when the series does not exist yet."""
    value = running.gateway.metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def _start(
    nursery: trio.Nursery,
    profiles: list[dict[str, Any]] | None = None,
    policy: list[dict[str, Any]] | None = None,
    **sections: Any,
) -> Running:
    config = gateway_config([sdk_backend("conformance_backend", "c")], **sections)
    lists = {"profiles": profiles, "policy": policy}
    if profiles is not None or policy is not None:  # lists: gateway_config merges mappings
        document = json.loads(msgspec.json.encode(config))
        document.update({k: v for k, v in lists.items() if v is not None})
        config = parse(json.dumps(document), env={})
    return await start_gateway(nursery, config)


def _body(response: httpx.Response) -> dict[str, Any]:
    if response.headers["content-type"].startswith("text/event-stream"):
        return sse_messages(response)[-1]
    body: dict[str, Any] = response.json()
    return body


async def test_eras_profiles_and_the_backend_leg_are_counted_for_a_legacy_and_a_modern_host(
    nursery: trio.Nursery,
) -> None:
    """Issue 18 item 4: sessions by era/revision/profile, open sessions per profile,
    requests by era on the client leg and on the backend leg, search-mode searches."""
    running = await _start(nursery, profiles=[SEARCH_PROFILE])
    legacy = {"era": "legacy", "revision": "2025-11-25"}
    sent_before = _value(
        running, "mcp_gateway_backend_requests_by_era_total", backend="c", era="legacy"
    )
    async with open_client(running.url + "/find") as find:
        assert _value(running, "mcp_gateway_profile_sessions_open", profile="find") == 1
        hit = await find.call_tool("gateway__search_tools", {"query": "delete a file"})
        miss = await find.call_tool("gateway__search_tools", {"query": "zzqqxxyy"})
        bad = await find.call_tool("gateway__search_tools", {"query": ""})
        async with open_client(running.url) as default:
            await default.list_tools()
            assert _value(running, "mcp_gateway_profile_sessions_open", profile="default") == 1
    assert not hit.isError and not miss.isError and bad.isError
    assert _value(running, "mcp_gateway_profile_sessions_open", profile="find") == 0
    assert _value(running, "mcp_gateway_profile_sessions_open", profile="default") == 0
    for profile in ("find", "default"):
        total = "mcp_gateway_client_sessions_by_era_total"
        assert _value(running, total, profile=profile, **legacy) == 1, profile
    searches = "mcp_gateway_tool_search_calls_total"
    for result in ("hit", "miss", "invalid"):
        assert _value(running, searches, profile="find", result=result) == 1, result
    assert _value(running, "mcp_gateway_tool_search_hits_total", profile="find") >= 1

    answer = _body(
        await _modern(
            running, "tools/call", {"name": "c__slow_compute", "arguments": {"seconds": 0}}
        )
    )
    assert answer["result"]["resultType"] == "complete", answer
    by_era = "mcp_gateway_client_requests_by_era_total"
    assert _value(running, by_era, era="modern", revision="2026-07-28") == 1
    # The legacy hosts' requests: 5 tools/call and tools/list, plus what the SDK adds.
    assert _value(running, by_era, **legacy) >= 4
    # The backend leg: the handshake-era backend's session and what was sent on it.
    assert _value(running, "mcp_gateway_backend_era", backend="c", era="legacy") == 1
    assert _value(running, "mcp_gateway_backend_era", backend="c", era="modern") == 0
    sessions = "mcp_gateway_backend_sessions_by_era_total"
    assert _value(running, sessions, backend="c", era="legacy") == 1
    assert _value(running, sessions, backend="c", era="modern") == 0
    sent = _value(running, "mcp_gateway_backend_requests_by_era_total", backend="c", era="legacy")
    assert sent >= sent_before + 1  # the modern host's call went to the backend


async def test_mrtr_rounds_retries_and_refused_request_states_are_counted(
    nursery: trio.Nursery,
) -> None:
    """Issue 18 item 4: input_required rounds (the bridge), retries, and refused
    requestState by reason: tampered (bad signature) and expired (a state the same
    secret sealed, past its lifetime)."""
    running = await _start(nursery, mrtr={"state_secret": STATE_SECRET})
    call = {"name": "c__confirm_delete", "arguments": {"filename": "x.txt"}}
    first = _body(await _modern(running, "tools/call", call, **ELICITS))
    assert "result" in first, first
    first = first["result"]
    assert first["resultType"] == "input_required", first
    assert _value(running, "mcp_gateway_mrtr_input_required_total", origin="bridge") == 1
    (key,) = first["inputRequests"]
    answer = {"action": "accept", "content": {"confirm": True}}
    retry = {**call, "requestState": first["requestState"], "inputResponses": {key: answer}}
    done = _body(await _modern(running, "tools/call", retry, **ELICITS))
    assert done["result"]["resultType"] == "complete", done
    assert _value(running, "mcp_gateway_mrtr_retries_total") == 1
    rejections = "mcp_gateway_mrtr_rejections_total"
    assert _value(running, rejections, reason="tampered") == 0

    tampered = _body(
        await _modern(running, "tools/call", {**retry, "requestState": "AAAA" * 20}, **ELICITS)
    )
    assert tampered["error"]["code"] == -32602
    expired_state = sealer_for(STATE_SECRET).seal(
        purpose=REQUEST_STATE,
        backend="",
        principal=None,
        now=time.time() - 3600,
        ttl=1,
        method="tools/call",
        params=call,
        state=b"held-0:1",
    )
    expired = _body(
        await _modern(running, "tools/call", {**retry, "requestState": expired_state}, **ELICITS)
    )
    assert expired["error"]["code"] == -32602
    replayed = _body(await _modern(running, "tools/call", retry, **ELICITS))  # answered already
    assert replayed["error"]["code"] == -32602
    assert _value(running, "mcp_gateway_mrtr_retries_total") == 4
    assert _value(running, rejections, reason="tampered") == 1
    assert _value(running, rejections, reason="expired") == 1
    assert _value(running, rejections, reason="unknown") == 1


async def test_a_state_replayed_by_another_principal_is_counted_foreign(
    nursery: trio.Nursery,
) -> None:
    """Issue 18 item 4: alice's requestState presented by bob is refused (-32602) and
    counted as foreign, not as tampered; bob's request itself was allowed."""
    tokens = {"alice": ALICE, "bob": BOB}
    running = await _start(nursery, auth={"tokens": tokens})
    call = {"name": "c__confirm_delete", "arguments": {"filename": "y.txt"}}
    first = _body(await _modern(running, "tools/call", call, token=ALICE, **ELICITS))
    assert first["result"]["resultType"] == "input_required", first
    (key,) = first["result"]["inputRequests"]
    answer = {"action": "accept", "content": {"confirm": True}}
    state = first["result"]["requestState"]
    retry = {**call, "requestState": state, "inputResponses": {key: answer}}
    stolen = _body(await _modern(running, "tools/call", retry, token=BOB, **ELICITS))
    assert stolen["error"]["code"] == -32602
    rejections = "mcp_gateway_mrtr_rejections_total"
    assert _value(running, rejections, reason="foreign") == 1
    assert _value(running, rejections, reason="tampered") == 0
    decisions = "mcp_gateway_auth_decisions_total"
    assert _value(running, decisions, decision="allowed", reason="static") == 2


async def test_access_policy_refusals_are_counted_by_what_was_refused(
    nursery: trio.Nursery,
) -> None:
    """Issue 18 item 4: a principal no rule grants the profile is refused (403, reason
    profile); a call of a tool the policy hides from the caller is refused (item)."""
    policy = [
        {
            "name": "alice",
            "tokens": ["alice"],
            "profiles": ["default"],
            "tools": {"allow": ["c__slow_compute"]},
        }
    ]
    running = await _start(nursery, policy=policy, auth={"tokens": {"alice": ALICE, "bob": BOB}})
    refused = await _modern(running, "server/discover", {}, token=BOB)
    assert refused.status_code == 403
    hidden = {"name": "c__confirm_delete", "arguments": {"filename": "z"}}
    answer = _body(await _modern(running, "tools/call", hidden, token=ALICE, **ELICITS))
    assert "error" in answer, answer
    allowed = {"name": "c__slow_compute", "arguments": {"seconds": 0}}
    assert "result" in _body(await _modern(running, "tools/call", allowed, token=ALICE))
    denials = "mcp_gateway_policy_denials_total"
    assert _value(running, denials, reason="profile") == 1
    assert _value(running, denials, reason="item") == 1
    assert _value(running, denials, reason="search_target") == 0


async def test_auth_decisions_token_failures_and_tasks_are_counted(
    nursery: trio.Nursery,
) -> None:
    """Issue 18 item 4: allowed/denied by reason at the front door, token validation
    failures by reason (only when a token was sent), and a task created and completed."""
    auth = {"tokens": {"alice": ALICE}, "jwt": {"secret": JWT_SECRET, "audience": AUDIENCE}}
    running = await _start(nursery, auth=auth)
    expired_jwt = jwt.encode(
        {"sub": "bob", "aud": AUDIENCE, "exp": int(time.time()) - 3600},
        JWT_SECRET,
        algorithm="HS256",
    )
    discover: dict[str, Any] = {}
    assert (await _modern(running, "server/discover", discover)).status_code == 401
    assert (await _modern(running, "server/discover", discover, token="nope")).status_code == 401
    refused = await _modern(running, "server/discover", discover, token=expired_jwt)
    assert refused.status_code == 401
    call = {"name": "c__slow_compute", "arguments": {"seconds": 0.1, "label": "m"}}
    created = _body(await _modern(running, "tools/call", call, token=ALICE, **WITH_TASKS))
    assert "result" in created, created
    task_id = created["result"]["taskId"]
    with trio.fail_after(WAIT):
        while True:
            got = _body(
                await _modern(running, "tasks/get", {"taskId": task_id}, token=ALICE, **WITH_TASKS)
            )["result"]
            if got["status"] == "completed":
                break
            await trio.sleep(0.05)

    decisions = "mcp_gateway_auth_decisions_total"
    assert _value(running, decisions, decision="denied", reason="missing") == 1
    assert _value(running, decisions, decision="denied", reason="unknown_token") == 1
    assert _value(running, decisions, decision="denied", reason="expired") == 1
    assert _value(running, decisions, decision="allowed", reason="static") >= 2
    failures = "mcp_gateway_token_validation_failures_total"
    assert _value(running, failures, reason="missing") == 0  # no token: not a validation
    assert _value(running, failures, reason="unknown_token") == 1
    assert _value(running, failures, reason="expired") == 1
    assert _value(running, "mcp_gateway_tasks_created_total") == 1
    assert _value(running, "mcp_gateway_tasks_ended_total", status="completed") == 1
    assert _value(running, "mcp_gateway_tasks_ended_total", status="failed") == 0
    assert _value(running, "mcp_gateway_tasks_running") == 0
