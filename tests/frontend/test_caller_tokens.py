"""The caller's raw token kept for token exchange (issue 16 item 4): per principal, bounded,
forgotten with the principal's last session, and never in a repr."""

from __future__ import annotations

from gateway.backends.credentials.grants import CallerToken
from gateway.frontend.clients import ClientRegistry
from gateway.identity.principal import Principal


def _principal(subject: str, token: str) -> Principal:
    return Principal("jwt", subject, "https://idp", token=CallerToken(token))


async def test_a_session_exchanges_its_owners_latest_token() -> None:
    clients = ClientRegistry()
    alice = _principal("alice", "a-1")
    clients.note_caller(alice)
    session = clients.open("2025-11-25", {}, {}, principal=alice.key)
    subject = clients.subject_of(session.session_id)
    assert subject is not None and subject[0] == alice.key and subject[1].value == "a-1"
    clients.note_caller(_principal("alice", "a-2"))  # the host refreshed its token
    subject = clients.subject_of(session.session_id)
    assert subject is not None and subject[1].value == "a-2"
    assert clients.subject_of("unknown") is None


async def test_the_token_is_forgotten_with_the_principals_last_session() -> None:
    clients = ClientRegistry()
    bob = _principal("bob", "b-1")
    clients.note_caller(bob)
    one = clients.open("2025-11-25", {}, {}, principal=bob.key)
    two = clients.open("2025-11-25", {}, {}, principal=bob.key)
    clients.close(one)
    assert clients.subject_of(two.session_id) is not None
    clients.close(two)
    clients.note_caller(None)  # auth off: nothing kept
    assert clients._caller_tokens == {}


async def test_a_modern_request_names_its_caller_while_it_runs() -> None:
    clients = ClientRegistry()
    carol = _principal("carol", "c-1")
    clients.note_caller(carol)
    with clients.modern_caller("modern-7", carol.key):
        subject = clients.subject_of("modern-7")
        assert subject is not None and subject[0] == carol.key
    assert clients.subject_of("modern-7") is None


async def test_tokens_of_principals_without_sessions_are_bounded() -> None:
    clients = ClientRegistry(max_sessions=3)
    keeper = _principal("keeper", "k")
    clients.note_caller(keeper)
    clients.open("2025-11-25", {}, {}, principal=keeper.key)
    for n in range(10):
        clients.note_caller(_principal(f"p{n}", f"t{n}"))
        # The caller at hand always keeps its token, however full the table.
        assert f"jwt:https://idp|p{n}" in clients._caller_tokens
    assert len(clients._caller_tokens) <= 4
    assert keeper.key in clients._caller_tokens


def test_the_principal_repr_holds_no_token() -> None:
    principal = _principal("dave", "very-secret-token")
    assert "very-secret-token" not in repr(principal)
    assert principal == Principal("jwt", "dave", "https://idp")  # the token is not compared
