"""Redaction: every secret-bearing field of the config, filled with a canary, never shows."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from gateway.config import GatewayConfig, parse
from gateway.console.redact import REDACTED, SECRET_KEYS, redacted

#: A canary per secret-bearing place in the schema. tests/console/test_http.py
#: serves a gateway with this same config and looks for them in every page.
CANARIES = {
    "auth.bearer_tokens": "canary-bearer-0001",
    "auth.tokens": "canary-named-0002",
    "auth.admin_tokens": "canary-admin-0003",
    "auth.jwt.secret": "canary-jwtsecret-0004",
    "admin.tokens": "canary-console-0005",
    "pagination.cursor_secret": "canary-cursor-0006",
    "mrtr.state_secret": "canary-state-0007",
    "backends.env": "canary-env-0008",
    "backends.headers": "canary-header-0009",
    "backends.auth.token": "canary-backendtoken-0010",
    "backends.auth.client_secret": "canary-clientsecret-0011",
    "backends.auth.catalog.client_secret": "canary-catalogsecret-0012",
    "backends.url.password": "canary-urlpassword-0013",
    "tracing.headers": "canary-otlp-0014",
}


def secret_document(backends: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A config with a canary in every secret-bearing field."""
    c = CANARIES
    return {
        "server": {"host": "127.0.0.1", "port": 0},
        "admin": {"enabled": True, "tokens": [c["admin.tokens"]]},
        "auth": {
            "bearer_tokens": [c["auth.bearer_tokens"]],
            "tokens": {"ci": c["auth.tokens"]},
            "admin_tokens": [c["auth.admin_tokens"]],
            "jwt": {"secret": c["auth.jwt.secret"]},
        },
        "pagination": {"cursor_secret": c["pagination.cursor_secret"]},
        "mrtr": {"state_secret": c["mrtr.state_secret"]},
        "tracing": {"headers": {"api-key": c["tracing.headers"]}},
        "backends": [
            *(backends or []),
            {
                "name": "secretive",
                "transport": "stdio",
                "command": "/nonexistent/secretive-server",
                "env": {"API_KEY": c["backends.env"]},
                "restart": {"initial_delay": 60, "max_delay": 60},
            },
            {
                "name": "remote",
                "transport": "http",
                "url": f"http://user:{c['backends.url.password']}@127.0.0.1:9/mcp",
                "headers": {"X-Api-Key": c["backends.headers"]},
                "auth": {"type": "static", "token": c["backends.auth.token"]},
                "restart": {"initial_delay": 60, "max_delay": 60},
            },
            {
                "name": "oauth",
                "transport": "http",
                "url": "http://127.0.0.1:9/mcp",
                "auth": {
                    "type": "token_exchange",
                    "token_url": "http://127.0.0.1:9/token",
                    "client_id": "gateway",
                    "client_secret": c["backends.auth.client_secret"],
                    "catalog": {
                        "type": "client_credentials",
                        "token_url": "http://127.0.0.1:9/token",
                        "client_id": "catalog",
                        "client_secret": c["backends.auth.catalog.client_secret"],
                    },
                },
                "restart": {"initial_delay": 60, "max_delay": 60},
            },
        ],
    }


def secret_config(backends: list[dict[str, Any]] | None = None) -> GatewayConfig:
    return parse(json.dumps(secret_document(backends)), env={})


def test_no_canary_survives() -> None:
    config = secret_config()
    text = json.dumps(redacted(config), ensure_ascii=False)
    for place, canary in CANARIES.items():
        assert canary in json.dumps(msgspec.to_builtins(config)), place  # the canary is there
        assert canary not in text, place
    assert REDACTED in text


def test_keys_of_secret_maps_stay_and_empty_stays_empty() -> None:
    data = redacted(secret_config())
    secretive = next(b for b in data["backends"] if b["name"] == "secretive")
    assert secretive["env"] == {"API_KEY": REDACTED}
    assert data["auth"]["tokens"] == {"ci": REDACTED}
    remote = next(b for b in data["backends"] if b["name"] == "remote")
    assert remote["url"] == f"http://user:{REDACTED}@127.0.0.1:9/mcp"
    assert remote["auth"]["token_file"] == ""  # not set: shown as not set
    oauth = next(b for b in data["backends"] if b["name"] == "oauth")
    assert oauth["auth"]["client_id"] == "gateway"  # not a secret


def _field_names(root: type) -> set[str]:
    """Every field name, at any depth, of the config's Structs (recursive types visited once)."""
    names: set[str] = set()
    visited: set[type] = set()
    stack: list[msgspec.inspect.Type] = [msgspec.inspect.type_info(root)]
    while stack:
        node = stack.pop()
        if isinstance(node, msgspec.inspect.StructType):
            if node.cls in visited:
                continue
            visited.add(node.cls)
            for field in node.fields:
                names.add(field.name)
                stack.append(field.type)
        elif isinstance(node, msgspec.inspect.UnionType):
            stack.extend(node.types)
        elif isinstance(node, msgspec.inspect.ListType):
            stack.append(node.item_type)
        elif isinstance(node, msgspec.inspect.DictType):
            stack.append(node.value_type)
    return names


#: Field names that look like credentials but are not: paths to files the
#: gateway reads, URLs of endpoints, names, algorithms, counts.
NOT_SECRETS = {
    "token_file",
    "client_secret_file",
    "token_url",
    "private_key_file",
    "client_key",
    "key_file",
    "jwks_url",
    "jwks_file",
    "previous_secret_grace",
    "token_rate",
    "token_burst",
    "client_auth",
    "inherit_env",
    "password_file",  # store.password_file: the file's path
    "key_prefix",  # store.key_prefix: the namespace in front of every key
    "vault_key_file",  # consent.vault_key_file: the key file's path
    "vault_key_env",  # consent.vault_key_env: the variable's name, not its value
    "signing_key_file",  # pinning.signing_key_file: the key file's path
}


@pytest.mark.parametrize("word", ["secret", "token", "password", "key", "header", "env"])
def test_every_field_that_sounds_secret_is_listed(word: str) -> None:
    """A new credential field must join SECRET_KEYS (or NOT_SECRETS, with a reason)."""
    names = _field_names(GatewayConfig)
    suspicious = {n for n in names if word in n.lower()}
    assert suspicious <= SECRET_KEYS | NOT_SECRETS, suspicious - SECRET_KEYS - NOT_SECRETS
