"""Skills (SEP-2640) through the gateway: two TypeScript SDK v2 skills backends, both host eras.

The backends are ``tests/node/skills_server.mjs`` (the official SDK's
``SkillsExtension``, one skill per page); one is reached on 2026-07-28, the
other on the handshake era. A host lists every page, gets each skill, reads
every file its entry names and checks the bytes against the entry's sha256
digest and size, as SEP-2640 requires of a host.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import mcp.types as types
import pytest
import trio

from gateway.config import GatewayConfig, parse
from gateway.protocol.skills import EXTENSION
from tests.e2e.test_modern_backend import modern_call
from tests.frontend.test_listen_http import listen
from tests.frontend.test_modern_http import modern, send
from tests.frontend.test_streamable_http import http_client
from tests.harness import Running, gateway_config, open_client, start_gateway, stdio_backend
from tests.interaction.test_beside_a_call import RawClient, open_raw
from tests.servers.paths import NODE_DIR

SERVER: Final = NODE_DIR / "skills_server.mjs"
SDK: Final = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "server" / "package.json"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not SDK.is_file(),
    reason="the TypeScript SDK v2 is not installed (npm ci --prefix tests/node)",
)

Ask = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


def skills_backend(name: str, skill_set: str, **extra: Any) -> dict[str, Any]:
    """A skills backend entry: the SDK v2 skills server serving ``skill_set``."""
    return stdio_backend(name, ["node", str(SERVER), skill_set], **extra)


def two_backends(
    profiles: list[dict[str, Any]] | None = None, policy: list[dict[str, Any]] | None = None
) -> GatewayConfig:
    """``a`` (2026-07-28) and ``b`` (handshake era) serving different skill sets."""
    backends = [skills_backend("a", "a"), skills_backend("b", "b", protocol="legacy")]
    if profiles is None and policy is None:
        return gateway_config(backends)
    document: dict[str, Any] = {"server": {"host": "127.0.0.1", "port": 0}, "backends": backends}
    if profiles is not None:
        document["profiles"] = profiles
    if policy is not None:
        document["policy"] = policy
    return parse(json.dumps(document), env={})


def _bytes_of(content: dict[str, Any]) -> bytes:
    if "blob" in content:
        return base64.b64decode(content["blob"])
    text: str = content["text"]
    return text.encode("utf-8")


async def walk_skills(ask: Ask) -> list[dict[str, Any]]:
    """Every ``skills/list`` page, following ``nextCursor``."""
    skills: list[dict[str, Any]] = []
    params: dict[str, Any] = {}
    for _ in range(20):
        page = await ask("skills/list", params)
        assert isinstance(page["ttlMs"], int) and page["cacheScope"] in ("public", "private")
        skills.extend(page["skills"])
        if "nextCursor" not in page:
            return skills
        params = {"cursor": page["nextCursor"]}
    raise AssertionError("skills/list did not end")


async def verify(ask: Ask, entry: dict[str, Any]) -> None:
    """Read every file of an entry and check its size and sha256 digest."""
    for file in entry["resources"]:
        read = await ask("resources/read", {"uri": file["uri"]})
        (content,) = read["contents"]
        assert content["uri"] == file["uri"]
        data = _bytes_of(content)
        assert len(data) == file["size"], file["uri"]
        assert "sha256:" + hashlib.sha256(data).hexdigest() == file["digest"], file["uri"]


PUBLIC_SKILLS: Final = [
    "a+skill://acme/billing/refunds/SKILL.md",
    "a+skill://git-workflow/SKILL.md",
    "b+skill://git-workflow/SKILL.md",
    "b+skill://pdf-processing/SKILL.md",
]


async def _exercise(ask: Ask) -> None:
    skills = await walk_skills(ask)
    assert [s["uri"] for s in skills] == PUBLIC_SKILLS
    for entry in skills:
        # The skill path is kept, so its last segment is still the frontmatter's name.
        assert entry["uri"].split("/")[-2] == entry["frontmatter"]["name"]
        root = entry["uri"][: -len("SKILL.md")]
        assert all(f["uri"].startswith(root) for f in entry["resources"])
        got = await ask("skills/get", {"uri": entry["uri"]})
        assert got["skill"] == entry
        await verify(ask, got["skill"])
    listing = await ask("resources/directory/read", {"uri": "a+skill://acme/billing/refunds"})
    children = listing["resources"]
    while "nextCursor" in listing:
        listing = await ask(
            "resources/directory/read",
            {"uri": "a+skill://acme/billing/refunds", "cursor": listing["nextCursor"]},
        )
        children += listing["resources"]
    assert sorted(c["uri"] for c in children) == [
        "a+skill://acme/billing/refunds/SKILL.md",
        "a+skill://acme/billing/refunds/templates",
    ]


async def test_a_modern_host_lists_gets_and_verifies_the_skills_of_two_backends(
    nursery: trio.Nursery,
) -> None:
    """Spec (SEP-2640): entries, digests and sizes hold for the bytes read through the gateway;
    gateway choice: skill URIs take the resource prefix of their backend."""
    running = await start_gateway(nursery, two_backends())
    ids = iter(range(100, 10_000))

    async def ask(method: str, params: dict[str, Any]) -> dict[str, Any]:
        answer = await modern_call(running, next(ids), method, params)
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result

    discovered = await ask("server/discover", {})
    assert discovered["capabilities"]["extensions"][EXTENSION] == {"directoryRead": True}
    await _exercise(ask)
    nursery.cancel_scope.cancel()


async def test_a_handshake_era_host_lists_gets_and_verifies_the_same_skills(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice: a 2025-11-25 host finds the extension in its initialize result (as the
    TypeScript SDK puts it) and sees the same skills, with cache hints on every page."""
    running = await start_gateway(nursery, two_backends())
    await _legacy_exercise(running)
    nursery.cancel_scope.cancel()


async def _legacy_exercise(running: Running) -> None:
    ids = iter(range(100, 10_000))
    async with open_raw(running.url) as raw:

        async def ask(method: str, params: dict[str, Any]) -> dict[str, Any]:
            (answer,) = await raw.request(next(ids), method, params)
            assert "result" in answer, answer
            result: dict[str, Any] = answer["result"]
            return result

        fresh = RawClient(raw.http, raw.url)  # another session, to read its initialize result
        init = await fresh.request(1, "initialize", _initialize())
        assert init[0]["result"]["capabilities"]["extensions"][EXTENSION] == {"directoryRead": True}
        await _exercise(ask)


def _initialize() -> dict[str, Any]:
    return {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "skills-host", "version": "1"},
    }


async def test_an_unknown_skill_or_directory_is_invalid_params(nursery: trio.Nursery) -> None:
    """Spec (SEP-2640): skills/get and resources/directory/read of a URI no backend serves
    are -32602, whether the owning backend says so or no backend owns the prefix."""
    running = await start_gateway(nursery, two_backends())
    cases = [
        ("skills/get", "a+skill://nothing/SKILL.md"),
        ("skills/get", "zz+skill://git-workflow/SKILL.md"),
        ("resources/directory/read", "a+skill://nothing"),
        ("resources/directory/read", "zz+skill://git-workflow"),
    ]
    async with http_client(running) as client:
        for msg_id, (method, uri) in enumerate(cases, start=10):
            response = await send(client, modern(msg_id, method, {"uri": uri}))
            assert response.json()["error"]["code"] == -32602, (method, uri, response.text)
    nursery.cancel_scope.cancel()


# The same exclusion written in a profile and in the access policy.
EXCLUSIONS: Final[dict[str, tuple[dict[str, list[dict[str, Any]]], str]]] = {
    "profile": ({"profiles": [{"name": "p", "skills": {"exclude": ["a__refunds"]}}]}, "/p"),
    "policy": (
        {"policy": [{"everyone": True, "profiles": ["*"], "skills": {"deny": ["a__refunds"]}}]},
        "",
    ),
}


@pytest.mark.parametrize("where", sorted(EXCLUSIONS))
async def test_a_skill_a_profile_or_the_policy_excludes_is_unknown_every_way(
    nursery: trio.Nursery, where: str
) -> None:
    """Gateway choice: ``skills:`` globs match ``prefix__name``; the excluded skill is not
    listed, its skills/get is -32602, its directory -32602, its files not found."""
    config, path = EXCLUSIONS[where]
    running = await start_gateway(nursery, two_backends(**config))
    ids = iter(range(100, 10_000))
    async with open_raw(running.url + path) as raw:

        async def ask(method: str, params: dict[str, Any]) -> dict[str, Any]:
            (answer,) = await raw.request(next(ids), method, params)
            return answer

        async def result(method: str, params: dict[str, Any]) -> dict[str, Any]:
            answer = await ask(method, params)
            assert "result" in answer, answer
            found: dict[str, Any] = answer["result"]
            return found

        skills = await walk_skills(result)
        assert [s["uri"] for s in skills] == [u for u in PUBLIC_SKILLS if "refunds" not in u]
        for entry in skills:
            await verify(result, entry)
        hidden = "a+skill://acme/billing/refunds"
        assert (await ask("skills/get", {"uri": hidden + "/SKILL.md"}))["error"]["code"] == -32602
        directory = await ask("resources/directory/read", {"uri": hidden})
        assert directory["error"]["code"] == -32602
        for uri in (hidden + "/SKILL.md", hidden + "/templates/email.md"):
            assert "error" in await ask("resources/read", {"uri": uri})
        listed = await result("resources/list", {})
        assert not [r for r in listed["resources"] if r["uri"].startswith(hidden)]
    nursery.cancel_scope.cancel()


CONFORMANCE: Final = (
    SERVER.parents[1]
    / "conformance_modern"
    / "node_modules"
    / "@modelcontextprotocol"
    / "conformance"
    / "dist"
    / "index.js"
)
CONFORMANCE_NODE: Final = SERVER.parents[1] / "conformance" / "node_modules" / ".bin" / "node"
SEP_2640_SCENARIOS: Final = (
    "sep-2640-skills-enumeration",
    "sep-2640-skills-manifest",
    "sep-2640-skills-directory",
)


@pytest.mark.skipif(
    not (CONFORMANCE.is_file() and CONFORMANCE_NODE.is_file()),
    reason="conformance 0.2.0-alpha.12 not installed (make conformance-deps)",
)
@pytest.mark.parametrize("prefix", ["", "sk"])
async def test_the_sep_2640_server_scenarios_pass_through_the_gateway(
    nursery: trio.Nursery, tmp_path: Path, prefix: str
) -> None:
    """Spec (SEP-2640), judged by conformance 0.2.0-alpha.12: every check of the three server
    scenarios passes through the gateway, the backend unprefixed or prefixed (``sk+skill://``
    is only a warning: servers SHOULD use ``skill://``)."""
    running = await start_gateway(
        nursery, gateway_config([skills_backend("a", "a", prefix=prefix)])
    )
    for scenario in SEP_2640_SCENARIOS:
        out = tmp_path / scenario
        argv = [str(CONFORMANCE_NODE), str(CONFORMANCE), "server", "--url", running.url]
        argv += ["--scenario", scenario, "--force", "-o", str(out)]
        with trio.fail_after(60):
            await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
        (found,) = out.glob("*/checks.json")
        checks = json.loads(found.read_text())
        assert checks, scenario
        failed = [c["id"] for c in checks if c["status"] not in ("SUCCESS", "WARNING", "INFO")]
        assert not failed, (scenario, failed)
        warned = {c["id"] for c in checks if c["status"] == "WARNING"}
        assert warned <= ({"sep-2640-skill-uri-scheme"} if prefix else set()), warned
    nursery.cancel_scope.cancel()


@pytest.mark.parametrize("backend_era", ["modern", "legacy"])
async def test_a_changed_skill_list_reaches_hosts_of_both_eras(
    nursery: trio.Nursery, backend_era: str
) -> None:
    """Spec (SEP-2640: skills are resources): a backend's resources/list_changed re-lists its
    skills; a listening 2026-07-28 host and a 2025-11-25 session each hear
    ``notifications/resources/list_changed`` and then list the new skill."""
    extra = {"protocol": "legacy"} if backend_era == "legacy" else {}
    running = await start_gateway(nursery, gateway_config([skills_backend("a", "a", **extra)]))
    heard_legacy = trio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ResourceListChangedNotification
        ):
            heard_legacy.set()

    async with (
        http_client(running) as client,
        listen(client, "L1", {"resourcesListChanged": True}) as stream,
        open_client(running.url, message_handler=on_message) as session,
    ):
        await stream.next()  # the acknowledgement
        added = await session.call_tool("a__add_skill", {})
        assert not added.isError, added
        with trio.fail_after(10):
            heard = await stream.next()
            await heard_legacy.wait()
        assert heard["method"] == "notifications/resources/list_changed"
    answer = await modern_call(running, 5, "skills/list", {})
    uris = [s["uri"] for s in answer["result"]["skills"]]
    while "nextCursor" in answer["result"]:
        cursor = answer["result"]["nextCursor"]
        answer = await modern_call(running, 6, "skills/list", {"cursor": cursor})
        uris += [s["uri"] for s in answer["result"]["skills"]]
    assert "a+skill://added/SKILL.md" in uris
    nursery.cancel_scope.cancel()


async def _skill_uris(running: Running) -> list[str]:
    """Every public skill URI a 2026-07-28 host lists, all pages."""
    answer = await modern_call(running, 7, "skills/list", {})
    uris = [s["uri"] for s in answer["result"]["skills"]]
    while "nextCursor" in answer["result"]:
        cursor = answer["result"]["nextCursor"]
        answer = await modern_call(running, 8, "skills/list", {"cursor": cursor})
        uris += [s["uri"] for s in answer["result"]["skills"]]
    return uris


async def test_a_new_skill_held_by_pinning_is_unknown_until_approved(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice (``pinning: hold``, ``hold_new``): a skill the backend adds is neither
    listed nor answered by skills/get (-32602) until a person approves it; then it is both."""
    document = {
        "server": {"host": "127.0.0.1", "port": 0},
        "notifications": {"debounce": 0.05},
        "pinning": {"mode": "hold", "hold_new": True},
        "backends": [skills_backend("a", "a")],
    }
    running = await start_gateway(nursery, parse(json.dumps(document), env={}))
    pins = running.gateway.pins
    assert pins is not None
    added = "a+skill://added/SKILL.md"
    with trio.fail_after(20):
        while not pins.pending():  # hold_new holds the first listing too
            await running.gateway.pool.state_changed.wait()
        assert pins.book is not None
        await pins.decide(list(pins.book.pending()), approved=True, by="test")
        while not await _skill_uris(running):
            await running.gateway.pool.state_changed.wait()
        answer = await modern_call(running, 1, "tools/call", {"name": "a__add_skill"})
        assert "result" in answer and not answer["result"].get("isError"), answer
        while not pins.pending():
            await running.gateway.pool.state_changed.wait()
    assert added not in await _skill_uris(running)
    async with http_client(running) as client:
        refused = await send(client, modern(2, "skills/get", {"uri": added}))
    assert refused.json()["error"]["code"] == -32602, refused.text
    record = pins.find(added)
    assert record is not None
    await pins.decide([record], approved=True, by="test")
    assert added in await _skill_uris(running)
    got = await modern_call(running, 3, "skills/get", {"uri": added})
    assert got["result"]["skill"]["uri"] == added, got
    nursery.cancel_scope.cancel()


def _branches_digest(entry: dict[str, Any]) -> str:
    """The digest ``git-workflow``'s entry lists for its references/BRANCHES.md."""
    (found,) = [f["digest"] for f in entry["resources"] if f["uri"].endswith("/BRANCHES.md")]
    return str(found)


@pytest.mark.parametrize("mode", ["hold", "block"])
async def test_a_skill_whose_file_changed_is_held_or_blocked_by_its_pin(
    nursery: trio.Nursery, mode: str
) -> None:
    """Gateway choice: a changed file digest is ``files_changed`` drift; hold serves the
    pinned entry on skills/list and skills/get, block refuses skills/get (-32602,
    awaiting_approval); approval serves the new entry."""
    document = {
        "server": {"host": "127.0.0.1", "port": 0},
        "notifications": {"debounce": 0.05},
        "pinning": {"mode": mode},
        "backends": [skills_backend("a", "a")],
    }
    running = await start_gateway(nursery, parse(json.dumps(document), env={}))
    pins = running.gateway.pins
    assert pins is not None
    uri = "a+skill://git-workflow/SKILL.md"

    async def get(msg_id: int) -> dict[str, Any]:
        async with http_client(running) as client:
            answer: dict[str, Any] = (
                await send(client, modern(msg_id, "skills/get", {"uri": uri}))
            ).json()
        return answer

    with trio.fail_after(20):
        while uri not in await _skill_uris(running):
            await running.gateway.pool.state_changed.wait()
        pinned = _branches_digest((await get(1))["result"]["skill"])
        # The SDK announces a changed file with resources/updated only; the
        # added skill's list_changed makes the gateway list (and judge) again.
        for tool in ("a__change_skill", "a__add_skill"):
            answer = await modern_call(running, 2, "tools/call", {"name": tool})
            assert "result" in answer and not answer["result"].get("isError"), answer
        while not pins.pending():
            await running.gateway.pool.state_changed.wait()
    (pending,) = pins.pending()
    assert pending["public"] == uri and pending["classes"] == ["files_changed"], pending
    listed = await modern_call(running, 3, "skills/list", {})
    [entry] = [s for s in listed["result"]["skills"] if s["uri"] == uri] or [None]
    while entry is None:  # one skill per page
        listed = await modern_call(
            running, 4, "skills/list", {"cursor": listed["result"]["nextCursor"]}
        )
        [entry] = [s for s in listed["result"]["skills"] if s["uri"] == uri] or [None]
    assert _branches_digest(entry) == pinned
    got = await get(5)
    if mode == "block":
        assert got["error"]["code"] == -32602, got
        assert got["error"]["data"]["reason"] == "awaiting_approval", got
    else:
        assert _branches_digest(got["result"]["skill"]) == pinned, got
    record = pins.find(uri)
    assert record is not None
    await pins.decide([record], approved=True, by="test")
    assert _branches_digest((await get(6))["result"]["skill"]) != pinned
    nursery.cancel_scope.cancel()
