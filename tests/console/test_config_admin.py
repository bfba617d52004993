"""``admin:``: off by default; refused on a non-loopback bind without a credential."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.config import parse
from gateway.errors import ConfigError


def config(**sections: Any) -> Any:
    return parse(json.dumps({"backends": [], **sections}), env={})


def test_off_by_default() -> None:
    admin = config().admin
    assert (admin.enabled, admin.path, admin.tokens) == (False, "/admin", [])


def test_two_lines_on_loopback() -> None:
    assert config(admin={"enabled": True}).admin.enabled


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::", "gateway.internal"])
def test_non_loopback_bind_needs_a_credential(host: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config(server={"host": host}, admin={"enabled": True})
    assert any(
        p.startswith("admin.enabled:") and "needs an admin credential" in p
        for p in caught.value.problems
    ), caught.value.problems
    # Either list of admin tokens satisfies it; an empty ${VAR:-} does not.
    assert config(server={"host": host}, admin={"enabled": True, "tokens": ["t"]}).admin.enabled
    assert config(server={"host": host}, admin={"enabled": True}, auth={"admin_tokens": ["t"]})
    with pytest.raises(ConfigError):
        config(server={"host": host}, admin={"enabled": True, "tokens": [""]})


def test_disabled_console_needs_nothing() -> None:
    assert not config(server={"host": "0.0.0.0"}).admin.enabled


@pytest.mark.parametrize(
    ("admin", "server", "problem"),
    [
        ({"path": "admin"}, {}, "absolute path"),
        ({"path": "/admin/"}, {}, "absolute path"),
        ({"path": "/metrics"}, {}, "gateway's own paths"),
        ({"enabled": True, "path": "/mcp/admin"}, {}, "inside the MCP path"),
        ({"session_ttl": 0}, {}, ""),
    ],
)
def test_bad_paths_and_ttl(admin: dict[str, Any], server: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config(admin=admin, server=server)
    assert problem in " ".join(caught.value.problems)


def test_a_policy_role_admin_is_a_credential_off_loopback() -> None:
    policy = [{"tokens": ["ops"], "role": "admin"}]
    loaded = config(
        server={"host": "0.0.0.0"},
        admin={"enabled": True},
        auth={"tokens": {"ops": "t"}},
        policy=policy,
    )
    assert loaded.policy[0].role == "admin"


@pytest.mark.parametrize("matcher", [{"everyone": True}, {"anonymous": True}])
def test_a_role_names_its_principals(matcher: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as caught:
        config(policy=[{**matcher, "role": "admin"}])
    assert "a role is for named principals" in " ".join(caught.value.problems)
