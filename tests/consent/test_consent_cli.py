"""``trio-mcp-gateway consent {list,revoke}`` against the store file a gateway keeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from gateway.cli.main import main
from gateway.consent.records import StoredTokens, seal_tokens, token_key
from gateway.consent.vault import Vault, generate_key
from gateway.store.embedded import EmbeddedStore


def _config(tmp_path: Path) -> tuple[Path, Path, Vault]:
    key = generate_key()
    keys = tmp_path / "vault.keys"
    keys.write_text(key + "\n")
    state = tmp_path / "state.sqlite"
    backend = {
        "name": "tracker",
        "transport": "http",
        "url": "http://127.0.0.1:9/mcp",
        "auth": {
            "type": "user_consent",
            "client_id": "gw",
            "authorization_server": "http://127.0.0.1:9",
        },
    }
    document = {
        "backends": [backend],
        "auth": {"tokens": {"alice": "a", "bob": "b"}},
        "consent": {"vault_key_file": str(keys)},
        "store": {"path": str(state)},
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps(document))
    return path, state, Vault.from_text(key)


def _store_consents(state: Path, vault: Vault, *principals: str) -> None:
    async def put() -> None:
        store = EmbeddedStore(str(state))
        try:
            for principal in principals:
                tokens = StoredTokens(
                    access_token="secret-" + principal,
                    refresh_token="r",
                    expires_at=2_000_000_000.0,
                    refresh_at=1_999_999_000.0,
                )
                await store.put(
                    token_key(principal, "tracker"),
                    seal_tokens(vault, principal, "tracker", tokens),
                )
        finally:
            store.close()

    trio.run(put)


def test_consent_list_shows_who_consented_where_and_no_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gateway choice: one line per consent, never a token; revoke forgets one person's."""
    config, state, vault = _config(tmp_path)
    _store_consents(state, vault, "token:alice", "token:bob")
    with pytest.raises(SystemExit) as listed:
        main(["consent", "list", "-c", str(config)])
    out = capsys.readouterr().out
    assert listed.value.code == 0
    assert [line.split("\t")[:3] for line in out.splitlines()] == [
        ["token:alice", "tracker", "refresh"],
        ["token:bob", "tracker", "refresh"],
    ]
    assert "secret-" not in out
    with pytest.raises(SystemExit) as revoked:
        main(["consent", "revoke", "-c", str(config), "token:alice"])
    assert revoked.value.code == 0
    # Nothing listens at the authorization server: deleted here all the same, and said.
    assert "token:alice\ttracker\tdeleted\tat the server: failed" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["consent", "list", "-c", str(config)])
    assert [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()] == ["token:bob"]
    with pytest.raises(SystemExit) as nothing:
        main(["consent", "revoke", "-c", str(config), "token:alice"])
    assert nothing.value.code == 1
