"""The router's sans-IO bookkeeping tables (synchronous)."""

from __future__ import annotations

import pytest

from gateway.protocol.tables import LogLevels, Owners, Subscribe, Subscriptions


def test_the_first_subscriber_sends_and_holds_only_once_the_backend_accepts() -> None:
    """Gateway rule: nobody holds a subscription the backend has not accepted."""
    table = Subscriptions()
    assert table.subscribe("a", "u", "c1") is Subscribe.SEND
    assert table.subscribers("a", "u") == frozenset()
    table.confirm("a", "u")
    assert table.subscribers("a", "u") == {"c1"}
    assert table.subscribe("a", "u", "c2") is Subscribe.HELD
    assert table.subscribers("a", "u") == {"c1", "c2"}


def test_a_subscriber_during_a_pending_subscribe_waits_and_sends_its_own_if_it_fails() -> None:
    """Issue 13: a rolled-back first subscribe leaves nobody believing in it."""
    table = Subscriptions()
    assert table.subscribe("a", "u", "c1") is Subscribe.SEND
    assert table.subscribe("a", "u", "c2") is Subscribe.WAIT
    table.abandon("a", "u")
    assert table.subscribers("a", "u") == frozenset()
    assert table.uris_of("a") == []
    assert table.subscribe("a", "u", "c2") is Subscribe.SEND


def test_only_the_last_holder_leaving_unsubscribes_the_backend() -> None:
    """Gateway rule: the backend sees one subscription per URI."""
    table = Subscriptions()
    for client in ("c1", "c2"):
        if table.subscribe("a", "u", client) is Subscribe.SEND:
            table.confirm("a", "u")
    assert table.unsubscribe("a", "u", "c1") is False
    assert table.unsubscribe("a", "u", "c1") is False  # not a holder any more
    assert table.drop_client("c2") == [("a", "u")]
    assert table.subscribe("a", "u", "c3") is Subscribe.SEND


def test_uris_of_lists_what_someone_holds_at_a_backend() -> None:
    """Gateway rule: what a restarted backend is subscribed to again."""
    table = Subscriptions()
    for uri in ("u2", "u1"):
        table.subscribe("a", uri, "c1")
        table.confirm("a", uri)
    table.subscribe("b", "u3", "c1")
    assert table.uris_of("a") == ["u1", "u2"]
    assert table.uris_of("b") == []  # still pending


def test_log_levels_give_the_most_verbose_and_admit_by_rank() -> None:
    """Spec (logging): syslog ranks; a client that never asked gets nothing."""
    levels = LogLevels()
    assert levels.most_verbose() is None
    levels.set("c1", "warning")
    levels.set("c2", "info")
    assert levels.most_verbose() == "info"
    assert levels.wants("c1", "error") and not levels.wants("c1", "info")
    assert not levels.wants("c3", "emergency")
    levels.drop_client("c2")
    assert levels.most_verbose() == "warning"
    with pytest.raises(ValueError, match="unknown log level"):
        levels.set("c1", "chatty")


def test_owners_name_a_sole_owner_only() -> None:
    """Router rule: a backend's request is attributed only to a single client."""
    owners: Owners[str] = Owners()
    owners.add("a", "c1", "call-1")
    owners.add("a", "c1", "call-2")
    assert owners.sole_owner("a") == ("c1", "call-2")
    owners.add("a", "c2", "call-3")
    assert owners.sole_owner("a") is None
    owners.remove("a", "c2", "call-3")
    assert owners.latest("a", "c1") == "call-2"
    assert owners.count() == 2
