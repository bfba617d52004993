"""A ``user_consent`` backend refused to the catalog (401), listed and called per principal.

The router's side of ``router.lists`` rule 6 and ``router.calls`` rule 3,
over a fake pool and a fake consent desk; the end-to-end path with a real
backend and authorization server is in
``tests/consent/test_consent_discovery_e2e.py``.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
import pytest
import trio

from gateway.backends.state import BackendState
from gateway.catalog.cursor import CursorCodec
from gateway.catalog.profiles import SEARCH, Globs, Profile, ProfileViews
from gateway.catalog.snapshot import Kind
from gateway.config import PolicyRule
from gateway.errors import BackendUnavailable
from gateway.identity.policy import Policy
from gateway.identity.principal import Principal
from gateway.protocol import jsonrpc
from gateway.router import Router
from gateway.router.access import AccessControl, PersonalView
from tests.router.fakes import FakeBackend, FakeClient, FakePool, ask, started


class Desk:
    """Alice has consented at ``tracker``; nobody else has."""

    login_timeout = 1.0
    consented: frozenset[str] = frozenset({"alice"})

    def acts_for_people(self, backend: str) -> bool:
        """Only the tracker acts for people."""
        return backend == "tracker"

    async def access_token(self, principal: str, backend: str) -> str | None:
        """The token of a principal who signed in."""
        return f"{principal}-token" if principal in self.consented else None

    async def has_consent(self, principal: str, backend: str) -> bool:
        """Whether that principal signed in."""
        return principal in self.consented

    async def new_link(self, principal: str, backend: str) -> tuple[str, str]:
        """A sign-in link."""
        return f"https://gw.example/oauth/start/{principal}", "e1"

    def expect(self, elicitation_id: str) -> None:
        """Nothing to wait for here."""

    async def completed(self, elicitation_id: str) -> None:
        """Never completes in these tests."""
        await trio.sleep_forever()

    def forget(self, elicitation_id: str) -> None:
        """Nothing to forget."""


async def _whoami(params: dict[str, Any], client: str | None) -> msgspec.Raw:
    return jsonrpc.to_raw({"content": [{"type": "text", "text": f"for {client}"}]})


async def _tools(params: dict[str, Any], client: str | None) -> msgspec.Raw:
    return jsonrpc.to_raw({"tools": [{"name": "whoami", "inputSchema": {"type": "object"}}]})


async def _router(
    nursery: trio.Nursery,
    *,
    profiles: ProfileViews | None = None,
    access: AccessControl | None = None,
    desk: Desk | None = None,
) -> tuple[Router, FakeBackend]:
    pool = FakePool()
    pool.add(FakeBackend("notes"), tools=({"name": "read", "inputSchema": {"type": "object"}},))
    tracker = pool.add(
        FakeBackend(
            "tracker",
            per_client=True,
            refused_listing=True,
            state=BackendState.DOWN,
            reason="HTTP 401",
            answers={"tools/list": _tools, "tools/call": _whoami},
        )
    )
    router = Router(
        pool,
        CursorCodec("test"),
        0,
        consent=Desk() if desk is None else desk,
        profiles=profiles,
        access=access,
    )
    return await started(nursery, router), tracker


async def test_a_consented_principal_lists_and_calls_the_backend_on_its_own_session(
    nursery: trio.Nursery,
) -> None:
    """gateway choice: the backend's tools are listed with the caller's own session, under
    its prefix, and a call goes to that session by the name after the prefix."""
    router, tracker = await _router(nursery)
    alice = FakeClient("c-alice", principal="alice")
    listed = await ask(router, alice, "tools/list")
    names = [tool["name"] for tool in listed["result"]["tools"]]
    assert names == ["notes__read", "tracker__whoami"]
    assert "dev.mcp-gateway/consent" not in listed["result"].get("_meta", {})
    called = await ask(router, alice, "tools/call", name="tracker__whoami", arguments={})
    assert called["result"]["content"][0]["text"] == "for c-alice"
    assert [(s.method, s.client) for s in tracker.sent] == [
        ("tools/list", "c-alice"),
        ("tools/call", "c-alice"),
    ]
    assert tracker.sent[1].params["name"] == "whoami"


async def test_a_principal_without_consent_gets_the_hint_and_never_reaches_the_backend(
    nursery: trio.Nursery,
) -> None:
    """gateway choice: no listing is asked for on bob's behalf; his call is the sign-in
    request (-32042), never a forward."""
    router, tracker = await _router(nursery)
    bob = FakeClient("c-bob", principal="bob")
    listed = await ask(router, bob, "tools/list")
    assert [tool["name"] for tool in listed["result"]["tools"]] == ["notes__read"]
    assert listed["result"]["_meta"]["dev.mcp-gateway/consent"] == {
        "required": True,
        "unlisted": ["tracker"],
    }
    refused = await ask(router, bob, "tools/call", name="tracker__whoami", arguments={})
    assert refused["error"]["code"] == -32042
    assert tracker.sent == []


async def test_a_failed_personal_listing_names_the_backend_unavailable(
    nursery: trio.Nursery,
) -> None:
    """gateway choice: a listing on the caller's session that fails is named in
    _meta.unavailable, and the rest of the list is served."""
    router, tracker = await _router(nursery)

    async def lost(params: dict[str, Any], client: str | None) -> msgspec.Raw:
        raise BackendUnavailable("tracker", "the principal's session closed")

    tracker.answers["tools/list"] = lost
    alice = FakeClient("c-alice", principal="alice")
    listed = await ask(router, alice, "tools/list")
    assert [tool["name"] for tool in listed["result"]["tools"]] == ["notes__read"]
    assert listed["result"]["_meta"]["dev.mcp-gateway/unavailable"] == ["tracker"]


async def _three_tools(params: dict[str, Any], client: str | None) -> msgspec.Raw:
    tools = [
        {"name": n, "inputSchema": {"type": "object"}} for n in ("issues", "secrets", "whoami")
    ]
    return jsonrpc.to_raw({"tools": tools})


class TwoConsented(Desk):
    """Alice and carol have both consented at ``tracker``."""

    consented = frozenset({"alice", "carol"})


#: Everyone opens every profile; alice alone is denied the tracker's secrets.
RULES: Final = [
    {"name": "alice", "tokens": ["alice"], "profiles": ["*"], "tools": {"deny": ["*__secrets"]}},
    {"name": "carol", "tokens": ["carol"], "profiles": ["*"]},
]

#: (case, profile, principal, tools listed, tool called -> its outcome).
TABLE: Final = [
    (
        "a profile selecting some of its tools",
        Profile("few", tools=Globs(include=("notes__*", "tracker__whoami"))),
        "alice",
        ["notes__read", "tracker__whoami"],
        {"tracker__whoami": "ok", "tracker__issues": "unknown"},
    ),
    (
        "a profile excluding one of its tools",
        Profile("most", tools=Globs(exclude=("tracker__secrets",))),
        "carol",
        ["notes__read", "tracker__issues", "tracker__whoami"],
        {"tracker__secrets": "unknown", "tracker__issues": "ok"},
    ),
    (
        "a policy denying one tool to one principal",
        Profile("everything"),
        "alice",
        ["notes__read", "tracker__issues", "tracker__whoami"],
        {"tracker__secrets": "unknown", "tracker__whoami": "ok"},
    ),
    (
        "the same policy for another principal",
        Profile("everything"),
        "carol",
        ["notes__read", "tracker__issues", "tracker__secrets", "tracker__whoami"],
        {"tracker__secrets": "ok"},
    ),
    (
        "a profile not selecting the backend",
        Profile("notes-only", backends=Globs(include=("notes",))),
        "alice",
        ["notes__read"],
        {"tracker__whoami": "unknown"},
    ),
    (
        "a search-mode profile pinning one of its tools",
        Profile("find", mode=SEARCH, pinned=("tracker__whoami",)),
        "carol",
        ["gateway__call_tool", "gateway__search_tools", "tracker__whoami"],
        {"tracker__issues": "ok"},
    ),
]


@pytest.mark.parametrize(
    ("profile", "principal", "listed", "calls"),
    [case[1:] for case in TABLE],
    ids=[case[0] for case in TABLE],
)
async def test_items_listed_per_principal_meet_the_profile_and_the_policy(
    nursery: trio.Nursery,
    profile: Profile,
    principal: str,
    listed: list[str],
    calls: dict[str, str],
) -> None:
    """gateway choice: a backend's items listed to one principal pass the rules catalog
    items pass (profile and policy globs on public names); one left out is listed to
    nobody and calling it is "Unknown tool", as for a catalog tool the view hides."""
    access = AccessControl(Policy.from_config(msgspec.convert(RULES, list[PolicyRule])))
    router, tracker = await _router(
        nursery, profiles=ProfileViews([profile]), access=access, desk=TwoConsented()
    )
    tracker.answers["tools/list"] = _three_tools
    client = FakeClient(
        f"c-{principal}",
        profile=profile.name,
        principal=principal,
        caller=Principal("static", principal),
    )
    page = await ask(router, client, "tools/list")
    assert sorted(tool["name"] for tool in page["result"]["tools"]) == listed
    assert "dev.mcp-gateway/consent" not in page["result"].get("_meta", {})
    for name, outcome in calls.items():
        answer = await ask(router, client, "tools/call", name=name, arguments={})
        if outcome == "ok":
            assert answer["result"]["content"][0]["text"] == f"for c-{principal}"
        else:
            assert answer["error"]["code"] == -32602
            assert answer["error"]["message"] == f"Unknown tool: {name}"
    forwarded = [s.params["name"] for s in tracker.sent if s.method == "tools/call"]
    assert forwarded == [
        name.removeprefix("tracker__") for name, outcome in calls.items() if outcome == "ok"
    ]
    if "tracker" not in profile.backends.include and "*" not in profile.backends.include:
        assert tracker.sent == []  # nothing of it is asked for on the caller's behalf


@pytest.mark.parametrize(
    ("profile", "kind", "public", "admitted", "listed"),
    [
        (None, Kind.TOOLS, "tracker__whoami", False, False),
        (Profile("p"), Kind.PROMPTS, "tracker__triage", True, True),
        (
            Profile("p", prompts=Globs(exclude=("tracker__*",))),
            Kind.PROMPTS,
            "tracker__t",
            False,
            False,
        ),
        (
            Profile("p", backends=Globs(include=("notes",))),
            Kind.TOOLS,
            "tracker__whoami",
            False,
            False,
        ),
        (Profile("p", mode=SEARCH), Kind.TOOLS, "tracker__whoami", True, False),
        (Profile("p", mode=SEARCH), Kind.PROMPTS, "tracker__triage", True, True),
        (Profile("p"), Kind.TOOLS, "tracker__secrets", False, False),
    ],
)
def test_the_personal_view_is_the_profile_and_the_policy_on_one_name(
    profile: Profile | None, kind: Kind, public: str, admitted: bool, listed: bool
) -> None:
    """gateway choice: no profile admits nothing; the profile's globs and the policy's
    deny both apply; a search-mode profile lists only pinned tools but may call the rest."""
    policy = Policy.from_config(msgspec.convert(RULES, list[PolicyRule]))
    access = AccessControl(policy).on_profile(Principal("static", "alice"), "p")
    view = PersonalView(profile, lambda: access)
    assert view.admits(kind, public, "tracker") is admitted
    assert view.lists(kind, public, "tracker") is listed
