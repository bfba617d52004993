"""The ``user_consent`` backend credential and the ``consent:`` block: what a file may say."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.config import NetworkBackend, parse
from gateway.errors import ConfigError

_AUTH: dict[str, Any] = {"bearer_tokens": ["t"]}
_CONSENT_AUTH: dict[str, Any] = {
    "type": "user_consent",
    "client_id": "gateway",
    "client_secret": "s",
    "scopes": ["repo"],
    "authorization_server": "https://idp.test",
}


def _config(backend_auth: dict[str, Any], **top: Any) -> str:
    backend = {"name": "b", "transport": "http", "url": "http://b.test/mcp", "auth": backend_auth}
    return json.dumps({"backends": [backend], **top})


def test_a_user_consent_backend_with_its_vault_and_callers_is_accepted() -> None:
    """gateway choice: the documented settings parse; the callback path has its default."""
    config = parse(_config(_CONSENT_AUTH, auth=_AUTH, consent={"vault_key_file": "/k"}), env={})
    auth = config.backends[0].auth  # type: ignore[union-attr]
    assert auth is not None
    assert auth.type == "user_consent"
    assert auth.catalog_auth is None  # the catalog session sends no person's token
    assert config.consent.callback_path == "/oauth/callback"


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        (
            {"auth": _AUTH},
            "consent.vault_key_file: user_consent backends need the token vault's keys: "
            "set consent.vault_key_file or consent.vault_key_env",
        ),
        (
            {"consent": {"vault_key_file": "/k"}},
            "backends[0].auth.type: user_consent binds tokens to principals: configure auth",
        ),
        (
            {"auth": _AUTH, "consent": {"vault_key_file": "/k", "vault_key_env": "KEYS"}},
            "consent.vault_key_file: set consent.vault_key_file or consent.vault_key_env, not both",
        ),
        (
            {"auth": _AUTH, "consent": {"vault_key_file": "/k", "bind_login": {"client_id": "g"}}},
            "consent.bind_login.issuer: name the OpenID provider people sign in at "
            "(or set auth.jwt.issuer)",
        ),
        (
            {"auth": _AUTH, "consent": {"vault_key_file": "/k", "bind_login": {"client_id": ""}}},
            "consent.bind_login.client_id: bind_login needs the gateway's client id at the issuer",
        ),
        (
            {
                "auth": _AUTH,
                "consent": {
                    "vault_key_file": "/k",
                    "bind_login": {"client_id": "g", "issuer": "x"},
                },
            },
            "consent.bind_login.issuer: must be an http(s) URL",
        ),
        (
            {"auth": _AUTH, "consent": {"vault_key_env": "not a name"}},
            "consent.vault_key_env: must be an environment variable's name",
        ),
        (
            {"auth": _AUTH, "consent": {"vault_key_file": "/k", "callback_path": "cb"}},
            "consent.callback_path: must be a path starting with '/', no query",
        ),
    ],
)
def test_user_consent_without_what_it_needs_is_refused(
    settings: dict[str, Any], problem: str
) -> None:
    """gateway choice: no vault keys, no authenticated callers or a bad path stop the start."""
    with pytest.raises(ConfigError) as caught:
        parse(_config(_CONSENT_AUTH, **settings), env={})
    assert problem in str(caught.value)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"client_id": ""}, "client_secret: a client secret goes with its client_id"),
        ({"token": "x"}, "token: user_consent gets each person's token; it takes none"),
        ({"client_secret_file": "/f"}, "set client_secret or client_secret_file, not both"),
    ],
)
def test_user_consent_auth_rules_name_the_field(change: dict[str, Any], problem: str) -> None:
    """gateway choice: each misuse of the block names its field."""
    text = _config({**_CONSENT_AUTH, **change}, auth=_AUTH, consent={"vault_key_file": "/k"})
    with pytest.raises(ConfigError) as caught:
        parse(text, env={})
    assert problem in str(caught.value)


def test_a_shared_session_for_user_consent_is_refused() -> None:
    """gateway choice: one shared session would serve one person's consent to everyone."""
    backend = {
        "name": "b",
        "transport": "http",
        "url": "http://b.test/mcp",
        "session": "shared",
        "auth": _CONSENT_AUTH,
    }
    text = json.dumps({"backends": [backend], "auth": _AUTH, "consent": {"vault_key_file": "/k"}})
    with pytest.raises(ConfigError) as caught:
        parse(text, env={})
    assert "user_consent acts for each caller" in str(caught.value)


def test_authorization_server_belongs_to_user_consent_only() -> None:
    """gateway choice: a discovery setting on another grant is a mistake, named."""
    auth = {
        "type": "client_credentials",
        "token_url": "https://t",
        "client_id": "g",
        "authorization_server": "https://idp.test",
    }
    with pytest.raises(ConfigError) as caught:
        parse(_config(auth), env={})
    assert "only user_consent discovers a server" in str(caught.value)


def test_user_consent_without_client_id_or_authorization_server_is_valid() -> None:
    """spec: MCP authorization, both are discovered (resource metadata, then a client ID
    metadata document or dynamic registration) when the config leaves them out."""
    text = _config({"type": "user_consent"}, auth=_AUTH, consent={"vault_key_file": "/k"})
    (backend,) = parse(text, env={}).backends
    assert isinstance(backend, NetworkBackend) and backend.auth is not None
    assert backend.auth.client_id == ""


def _vault_config(**consent: Any) -> Any:
    return parse(_config(_CONSENT_AUTH, auth=_AUTH, consent=consent), env={})


def test_the_vault_keys_may_come_from_an_environment_variable() -> None:
    """gateway choice: consent.vault_key_env names a variable holding the keys (commas,
    spaces or lines between them); the first seals, every one opens."""
    from gateway.consent.vault import Vault, generate_key, record_binding
    from gateway.runtime.app import consent_flow
    from gateway.store.embedded import EmbeddedStore

    old, new = generate_key(), generate_key()
    sealed = Vault.from_text(old).seal(b"t", record_binding("token:a", "b"))
    config = _vault_config(vault_key_env="GATEWAY_VAULT_KEYS")
    assert config.consent.vault_key_file == ""
    flow = consent_flow(config, EmbeddedStore(), environ={"GATEWAY_VAULT_KEYS": f"{new}, {old}"})
    assert flow is not None
    vault = flow._vault  # the vault it built is what is checked
    assert vault.open(sealed, record_binding("token:a", "b")) == b"t"
    assert vault.needs_reseal(sealed)  # the first key (new) seals


@pytest.mark.parametrize(
    ("environ", "problem"),
    [
        ({}, "consent.vault_key_env: the environment variable GATEWAY_VAULT_KEYS is not set"),
        ({"GATEWAY_VAULT_KEYS": ""}, "$GATEWAY_VAULT_KEYS: the vault needs at least one key"),
        ({"GATEWAY_VAULT_KEYS": "c2hvcnQ="}, "$GATEWAY_VAULT_KEYS: key 1: 5 bytes, not 32"),
        ({"GATEWAY_VAULT_KEYS": "not base64!"}, "$GATEWAY_VAULT_KEYS: key 1: not base64"),
    ],
)
def test_a_vault_key_variable_that_is_unset_or_bad_stops_the_start_naming_it(
    environ: dict[str, str], problem: str
) -> None:
    """gateway choice: the start fails naming the setting and the variable, never its value."""
    from gateway.runtime.app import consent_flow
    from gateway.store.embedded import EmbeddedStore

    config = _vault_config(vault_key_env="GATEWAY_VAULT_KEYS")
    with pytest.raises(ConfigError) as caught:
        consent_flow(config, EmbeddedStore(), environ=environ)
    assert problem in str(caught.value)
    assert "c2hvcnQ" not in str(caught.value)


def test_bind_login_takes_the_callers_issuer_when_it_names_none() -> None:
    """gateway choice: the OpenID provider people log in at defaults to auth.jwt.issuer."""
    from gateway.runtime.app import _login_binding

    auth = {**_AUTH, "jwt": {"jwks_url": "https://idp.test/jwks", "issuer": "https://idp.test"}}
    consent = {"vault_key_file": "/k", "bind_login": {"client_id": "g"}}
    config = parse(_config(_CONSENT_AUTH, auth=auth, consent=consent), env={})
    assert config.consent.bind_login is not None
    assert config.consent.bind_login.issuer == ""
    binding = _login_binding(config)
    assert binding is not None and binding.issuer == "https://idp.test"
    assert binding.scopes == ["openid"]
    off = parse(_config(_CONSENT_AUTH, auth=_AUTH, consent={"vault_key_file": "/k"}), env={})
    assert off.consent.bind_login is None and _login_binding(off) is None
