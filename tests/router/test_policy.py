"""The access policy through the router, as a table: principal x method x item -> outcome.

Every request that names an item goes through the caller's effective view,
so a hidden item gets exactly the answer an item that does not exist gets:
same code, same message shape, no hint. The policy here is the one
docs/security.md describes in prose:

- the static token ``ci`` opens ``default`` and sees only ``files__*`` tools
  and no prompts;
- a JWT whose ``groups`` hold ``platform`` opens every profile and sees all;
- for everyone, nothing named ``*delete*`` exists (deny wins).
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec
import pytest
import trio
from structlog.testing import capture_logs

from gateway.catalog.cursor import CursorCodec
from gateway.catalog.snapshot import BackendListing, Kind
from gateway.config import PolicyRule
from gateway.identity.policy import Policy
from gateway.identity.principal import Principal
from gateway.protocol import jsonrpc
from gateway.protocol.versions import LATEST_VERSION, resource_not_found_code
from gateway.router import Router
from gateway.router.access import AccessControl, list_changes
from tests.router.fakes import FakeBackend, FakeClient, FakePool, ask, started

RULES: Final = [
    {
        "name": "ci",
        "tokens": ["ci"],
        "profiles": ["default"],
        "tools": {"allow": ["files__*"]},
        "prompts": {"allow": []},
    },
    {"name": "platform", "claims": {"groups": ["platform"]}, "profiles": ["*"]},
    {"name": "no-deletes", "everyone": True, "tools": {"deny": ["*delete*"]}},
]

CI: Final = Principal("static", "ci")
OPS: Final = Principal("static", "ops")
PLATFORM: Final = Principal(
    "jwt", "alice", "https://idp.example", claims={"groups": ["platform", "dev"]}
)
DEV: Final = Principal("jwt", "bob", "https://idp.example", claims={"groups": ["dev"]})
ANONYMOUS: Final = None

NOT_FOUND: Final = resource_not_found_code(LATEST_VERSION)
OK: Final = "ok"

# (principal, method, item) -> OK or the exact JSON-RPC error code.
TABLE: Final = [
    (CI, "tools/call", "files__read_file", OK),
    (CI, "tools/call", "github__create_issue", -32602),
    (CI, "tools/call", "files__delete_file", -32602),
    (CI, "prompts/get", "github__triage", -32602),
    (CI, "resources/read", "files+mem://notes.txt", OK),
    (CI, "resources/subscribe", "files+mem://notes.txt", OK),
    (CI, "completion/complete", "github__triage", -32602),
    (PLATFORM, "tools/call", "files__read_file", OK),
    (PLATFORM, "tools/call", "github__create_issue", OK),
    (PLATFORM, "tools/call", "github__delete_repo", -32602),
    (PLATFORM, "tools/call", "files__delete_file", -32602),
    (PLATFORM, "prompts/get", "github__triage", OK),
    (PLATFORM, "completion/complete", "github__triage", OK),
    (PLATFORM, "resources/read", "files+mem://notes.txt", OK),
    (DEV, "tools/call", "files__read_file", -32602),
    (DEV, "prompts/get", "github__triage", -32602),
    (DEV, "resources/read", "files+mem://notes.txt", NOT_FOUND),
    (DEV, "resources/subscribe", "files+mem://notes.txt", NOT_FOUND),
    (OPS, "tools/call", "files__read_file", -32602),
    (ANONYMOUS, "tools/call", "files__read_file", -32602),
    (ANONYMOUS, "resources/read", "files+mem://notes.txt", NOT_FOUND),
]


def policy(rules: list[dict[str, Any]] = RULES) -> Policy:
    """The compiled policy of ``rules`` (as the config file would give them)."""
    compiled = Policy.from_config(msgspec.convert(rules, list[PolicyRule]))
    assert compiled is not None
    return compiled


def make_pool() -> FakePool:
    """Two backends: github (tools, a prompt) and files (tools, a resource)."""
    pool = FakePool()
    caps = {"tools": {}, "prompts": {}, "resources": {"subscribe": True}, "completions": {}}
    pool.add(
        FakeBackend("github", capabilities=caps),
        tools=({"name": "create_issue"}, {"name": "delete_repo"}),
    )
    pool.add(
        FakeBackend("files", capabilities=caps),
        tools=({"name": "read_file"}, {"name": "delete_file"}),
        resources=({"uri": "mem://notes.txt", "name": "notes"},),
    )
    pool.catalog.publish(
        BackendListing(
            backend="github",
            prefix="github",
            tools=({"name": "create_issue"}, {"name": "delete_repo"}),
            prompts=({"name": "triage"},),
        )
    )
    return pool


async def make_router(pool: FakePool, nursery: trio.Nursery, page_size: int = 0) -> Router:
    """A router under :data:`RULES`."""
    return await started(
        nursery, Router(pool, CursorCodec("test"), page_size, access=AccessControl(policy()))
    )


def client(principal: Principal | None, name: str = "c") -> FakeClient:
    """A session opened by ``principal`` on the main endpoint."""
    return FakeClient(
        name, principal=None if principal is None else principal.key, caller=principal
    )


def params_for(method: str, item: str) -> dict[str, Any]:
    """The params of a request naming ``item``."""
    if method == "tools/call":
        return {"name": item, "arguments": {}}
    if method == "prompts/get":
        return {"name": item}
    if method == "completion/complete":
        return {
            "ref": {"type": "ref/prompt", "name": item},
            "argument": {"name": "a", "value": ""},
        }
    return {"uri": item}


@pytest.mark.parametrize(("principal", "method", "item", "expected"), TABLE)
async def test_the_policy_table(
    nursery: trio.Nursery,
    principal: Principal | None,
    method: str,
    item: str,
    expected: int | str,
) -> None:
    """Gateway choice (issue 16 item 3).

    Each row: allowed reaches the backend; denied is the unknown-item error, exactly.
    """
    pool = make_pool()
    router = await make_router(pool, nursery)
    response = await ask(router, client(principal), method, **params_for(method, item))
    backend = pool.backends[re.split(r"__|\+", item)[0]]
    if expected == OK:
        assert "error" not in response, response
        assert backend.sent, "an allowed request reaches its backend"
        return
    assert response["error"]["code"] == expected
    assert not backend.sent, "a hidden item reaches no backend"
    # Exactly the answer for an item that does not exist at all.
    unknown = item.replace("files", "nowhere").replace("github", "nowhere")
    other = await ask(
        await started(nursery, Router(pool, CursorCodec("test"), 0)),
        client(None, "d"),
        method,
        **params_for(method, unknown),
    )
    assert other["error"]["code"] == response["error"]["code"]
    assert other["error"]["message"].replace(unknown, "ITEM") == response["error"][
        "message"
    ].replace(item, "ITEM")
    assert other["error"].get("data", {}) == {
        k: (unknown if v == item else v) for k, v in response["error"].get("data", {}).items()
    }


@pytest.mark.parametrize(
    ("principal", "tools", "prompts", "resources"),
    [
        (CI, ["files__read_file"], [], ["files+mem://notes.txt"]),
        (
            PLATFORM,
            ["files__read_file", "github__create_issue"],
            ["github__triage"],
            ["files+mem://notes.txt"],
        ),
        (DEV, [], [], []),
        (ANONYMOUS, [], [], []),
    ],
)
async def test_lists_show_exactly_what_the_policy_grants(
    nursery: trio.Nursery,
    principal: Principal | None,
    tools: list[str],
    prompts: list[str],
    resources: list[str],
) -> None:
    """Gateway choice (issue 16 item 3): The same decision serves lists and calls alike."""
    router = await make_router(make_pool(), nursery)
    peer = client(principal)
    listed = await ask(router, peer, "tools/list")
    assert [t["name"] for t in listed["result"]["tools"]] == tools
    listed = await ask(router, peer, "prompts/list")
    assert [p["name"] for p in listed["result"]["prompts"]] == prompts
    listed = await ask(router, peer, "resources/list")
    assert [r["uri"] for r in listed["result"]["resources"]] == resources


async def test_without_a_policy_everyone_sees_everything(nursery: trio.Nursery) -> None:
    """Gateway choice (issue 16 item 3): No ``policy:`` key: today's behaviour, whoever asks."""
    router = await started(nursery, Router(make_pool(), CursorCodec("test"), 0))
    listed = await ask(router, client(DEV), "tools/list")
    assert len(listed["result"]["tools"]) == 4


async def test_an_empty_policy_denies_everything(nursery: trio.Nursery) -> None:
    """Gateway choice (issue 16 item 3): ``policy: []``: default deny."""
    router = await started(
        nursery, Router(make_pool(), CursorCodec("test"), 0, access=AccessControl(policy([])))
    )
    listed = await ask(router, client(PLATFORM), "tools/list")
    assert listed["result"]["tools"] == []
    assert not router.access.opens(PLATFORM, "default", "HTTP POST")


async def test_a_cursor_from_one_effective_view_is_invalid_on_another(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice (issue 16 item 3).

    Cursors are per effective view: -32602 when presented by a caller who sees another.
    """
    router = await make_router(make_pool(), nursery, page_size=1)
    alice = client(PLATFORM)
    first = await ask(router, alice, "tools/list")
    cursor = first["result"]["nextCursor"]
    # The same principal key, but a token whose groups now give another view.
    narrowed = FakeClient(
        "c2", principal=PLATFORM.key, caller=Principal("jwt", "alice", "https://idp.example")
    )
    refused = await ask(router, narrowed, "tools/list", cursor=cursor)
    assert refused["error"]["code"] == -32602
    again = await ask(router, client(PLATFORM, "c3"), "tools/list", cursor=cursor)
    assert [t["name"] for t in again["result"]["tools"]] == ["github__create_issue"]


async def test_callers_with_the_same_access_share_one_view(nursery: trio.Nursery) -> None:
    """Gateway choice (issue 16 item 3).

    Memory grows with distinct accesses, not callers: 1,000 members of one group, one view.
    """
    router = await make_router(make_pool(), nursery)
    for n in range(1000):
        member = Principal(
            "jwt", f"user{n}", "https://idp.example", claims={"groups": ["platform"]}
        )
        await ask(router, client(member, f"s{n}"), "tools/list")
    assert len(router.access.views) == 1
    await ask(router, client(CI), "tools/list")
    assert len(router.access.views) == 2


async def test_a_denied_call_is_audited_without_a_token(nursery: trio.Nursery) -> None:
    """Gateway choice (issue 16 item 3).

    ``policy.denied``: principal key, method, item, profile; nothing secret.
    """
    router = await make_router(make_pool(), nursery)
    with capture_logs() as logs:
        await ask(router, client(CI), "tools/call", name="github__create_issue", arguments={})
        await ask(router, client(CI), "tools/call", name="nowhere__thing", arguments={})
    denied = [e for e in logs if e["event"] == "policy.denied"]
    assert denied == [
        {
            "event": "policy.denied",
            "log_level": "warning",
            "principal": "token:ci",
            "method": "tools/call",
            "profile": "default",
            "item": "github__create_issue",
        }
    ]


async def test_a_list_hiding_10k_items_logs_one_line_with_the_count(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice (issue 16 item 3).

    A list of 10,000 hidden items is one audit line, not 10,000.
    """
    pool = FakePool()
    pool.add(FakeBackend("big"), tools=tuple({"name": f"t{n}"} for n in range(10_000)))
    router = await make_router(pool, nursery)
    with capture_logs() as logs:
        listed = await ask(router, client(CI), "tools/list")
    assert listed["result"]["tools"] == []
    denied = [e for e in logs if e["event"] == "policy.denied"]
    assert len(denied) == 1
    assert denied[0]["hidden"] == 10_000
    assert denied[0]["method"] == "tools/list"


async def test_policy_audit_calls_logs_every_call_with_its_outcome(nursery: trio.Nursery) -> None:
    """Gateway choice (issue 16 item 3).

    ``policy_audit: calls``: one ``policy.call`` line per call, allowed or not.
    """
    router = await started(
        nursery,
        Router(
            make_pool(),
            CursorCodec("test"),
            0,
            access=AccessControl(policy(), audit_calls=True),
        ),
    )
    with capture_logs() as logs:
        await ask(router, client(CI), "tools/call", name="files__read_file", arguments={})
        await ask(router, client(CI), "tools/call", name="github__create_issue", arguments={})
        await ask(router, client(CI), "tools/list")
    calls = [(e["principal"], e["item"], e["outcome"]) for e in logs if e["event"] == "policy.call"]
    assert calls == [
        ("token:ci", "files__read_file", "ok"),
        ("token:ci", "github__create_issue", "error -32602"),
    ]


async def test_a_new_policy_applies_to_open_sessions_at_once(nursery: trio.Nursery) -> None:
    """Gateway choice (issue 16 item 3).

    Reload: the next request of an open session is decided under the new policy.
    """
    router = await make_router(make_pool(), nursery)
    session = client(CI)
    assert len((await ask(router, session, "tools/list"))["result"]["tools"]) == 1
    changes = router.access.apply(
        policy([{"tokens": ["ci"], "profiles": ["default"]}]),
        audit_calls=False,
        peers=[session],
        base_of=router.view,
    )
    assert [(p, s, sorted(k.value for k in kinds)) for p, s, kinds in changes] == [
        ("default", "c", ["prompts", "tools"])
    ]
    listed = await ask(router, session, "tools/list")
    assert len(listed["result"]["tools"]) == 4
    router.access.apply(policy([]), audit_calls=False)
    assert (await ask(router, session, "tools/list"))["result"]["tools"] == []


async def test_a_catalog_change_reaches_only_the_views_it_changed(nursery: trio.Nursery) -> None:
    """Gateway choice (issue 16 item 3).

    list_changed per effective view: a new github tool changes platform's view, not ci's.
    """
    pool = make_pool()
    router = await make_router(pool, nursery)
    ci, alice = client(CI, "ci"), client(PLATFORM, "alice")
    old = pool.snapshot
    pool.catalog.publish(
        BackendListing(
            backend="github",
            prefix="github",
            tools=({"name": "create_issue"}, {"name": "delete_repo"}, {"name": "merge"}),
            prompts=({"name": "triage"},),
        )
    )
    changed = router.profiles.refresh(old, pool.snapshot)
    told = list_changes(router.access, router.profiles, [ci, alice], old, pool.snapshot, changed)
    assert told == [("default", router.access.on(alice).tag, frozenset({Kind.TOOLS}))]
    # A tool only platform may not see changes nobody's view.
    old = pool.snapshot
    pool.catalog.publish(
        BackendListing(
            backend="github",
            prefix="github",
            tools=(
                {"name": "create_issue"},
                {"name": "delete_repo"},
                {"name": "delete_org"},
                {"name": "merge"},
            ),
            prompts=({"name": "triage"},),
        )
    )
    changed = router.profiles.refresh(old, pool.snapshot)
    assert changed  # the profile's own view did change
    assert (
        list_changes(router.access, router.profiles, [ci, alice], old, pool.snapshot, changed) == []
    )


async def test_without_a_policy_a_change_goes_to_every_client_of_the_profile(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice (issue 16 item 3).

    No policy: list_changes is the profile's change, untagged (everyone hears it).
    """
    pool = make_pool()
    router = await started(nursery, Router(pool, CursorCodec("test"), 0))
    old = pool.snapshot
    pool.catalog.withdraw("files")
    changed = router.profiles.refresh(old, pool.snapshot)
    told = list_changes(router.access, router.profiles, [], old, pool.snapshot, changed)
    assert [(p, t) for p, t, _ in told] == [("default", None)]


async def test_a_listen_stream_subscribes_only_to_what_its_principal_sees(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice (issue 16 item 3).

    subscriptions/listen: a hidden URI is refused like an unknown one.
    """
    router = await make_router(make_pool(), nursery)
    held = await router.listen(client(DEV, "l1"), ["files+mem://notes.txt"])
    assert held == []
    held = await router.listen(client(CI, "l2"), ["files+mem://notes.txt"])
    assert held == ["files+mem://notes.txt"]


async def test_a_hidden_tool_has_no_schema_for_modern_header_checks(nursery: trio.Nursery) -> None:
    """Gateway choice (issue 16 item 3).

    Mcp-Param-* headers are checked against the caller's view: a hidden tool has no schema,
    like an unknown one, so no header error can hint that it exists."""
    pool = FakePool()
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    pool.add(FakeBackend("github"), tools=({"name": "create_issue", "inputSchema": schema},))
    router = await make_router(pool, nursery)
    assert router.public_tool_schema("github__create_issue", "default", PLATFORM) == schema
    assert router.public_tool_schema("github__create_issue", "default", CI) is None
    assert router.public_tool_schema("github__create_issue", "default", None) is None


async def test_a_subscription_hidden_by_a_new_policy_delivers_nothing_more(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice (issue 16 item 3).

    resources/updated reaches a subscriber only while its effective view holds the URI.
    """
    pool = make_pool()
    router = await make_router(pool, nursery)
    session = client(CI)
    router.client_opened(session)
    assert "result" in await ask(
        router, session, "resources/subscribe", uri="files+mem://notes.txt"
    )
    updated = jsonrpc.to_raw({"uri": "mem://notes.txt"})
    files = pool.backends["files"]
    router.backend_notification(files, "notifications/resources/updated", updated, None)
    assert [n["params"]["uri"] for n in session.notifications] == ["files+mem://notes.txt"]
    router.access.apply(policy([]), audit_calls=False)
    router.backend_notification(files, "notifications/resources/updated", updated, None)
    assert len(session.notifications) == 1
