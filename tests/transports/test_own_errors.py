"""streamable_post.own_errors: a 4xx body's JSON-RPC errors are the answers, not a fault.

A 2026-07-28 server refuses a request with HTTP 400 and a JSON-RPC error for
it (-32022 naming its versions, -32020, -32602); the caller must get that
code and its data, which the probe's retry (backends/handshake.py rule 4)
and every host's error depend on. The client scenario ``request-metadata``
exercises it against the conformance suite's server.
"""

from __future__ import annotations

import json

from gateway.transports.streamable_post import own_errors


def _error(request_id: object, code: int) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": "no"}}


def test_an_error_for_one_of_our_requests_is_delivered_as_it_is() -> None:
    """Its id leaves the unanswered set; the others still get the transport's error."""
    body = json.dumps(_error(3, -32022)).encode()
    unanswered: set[int | str] = {3, 4}
    found = own_errors(body, unanswered)
    assert [json.loads(m)["error"]["code"] for m in found] == [-32022]
    assert unanswered == {4}


def test_anything_else_in_the_body_answers_nothing() -> None:
    """Other ids, results, garbage and non-JSON leave every request unanswered."""
    unanswered: set[int | str] = {1}
    for body in (
        json.dumps(_error(9, -32602)).encode(),
        json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}}).encode(),
        json.dumps([_error(9, -32602), {"x": 1}]).encode(),
        b"<html>Bad Request</html>",
        b"",
    ):
        assert own_errors(body, unanswered) == []
    assert unanswered == {1}


def test_a_batch_body_answers_each_of_its_ids() -> None:
    """An array of errors answers each request it names, once."""
    body = json.dumps([_error(1, -32020), _error(2, -32602), _error(1, -32020)]).encode()
    unanswered: set[int | str] = {1, 2, 3}
    assert len(own_errors(body, unanswered)) == 2
    assert unanswered == {3}


def test_a_null_id_error_answers_the_posts_only_request_with_its_own_code() -> None:
    """A 400 refusing the POST before its id was read (-32021, missing capability) keeps
    its code and data for the one request it carried, never a -32603."""
    error = _error(None, -32021)
    error["error"] = {"code": -32021, "message": "missing", "data": {"requiredCapabilities": {}}}
    unanswered: set[int | str] = {5}
    assert own_errors(json.dumps(error).encode(), unanswered) == []  # handshake era
    [found] = own_errors(json.dumps(error).encode(), unanswered, modern=True)
    assert json.loads(found) == {**error, "id": 5}
    assert unanswered == set()
    several: set[int | str] = {5, 6}
    assert own_errors(json.dumps(error).encode(), several, modern=True) == []
    assert several == {5, 6}
