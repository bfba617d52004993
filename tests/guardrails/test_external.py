"""The external policy filter against the reference service and faults it cannot make."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from jsonschema import exceptions as schema_exceptions
from jsonschema import validators

from gateway.config.schema_filters import ExternalFilter
from gateway.guardrails.external import PolicyClient, Unavailable
from gateway.guardrails.filters import Allow, Deny, Modify, Subject
from tests.redis_server import free_port

SERVICE = Path(__file__).parents[2] / "deploy" / "policy-service" / "policy_service.py"


def subject(text: str) -> Subject:
    """A tool result carrying ``text``."""
    return Subject(
        point="results",
        item="web__fetch",
        principal="alice",
        payload={"content": [{"type": "text", "text": text}]},
    )


@pytest.fixture(name="service_url")
def _service_url() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVICE), "--port", str(port), "--deny", "forbidden",
         "--redact", "secret-word", "--max-age", "60", "--token", "t0ken"],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    assert process.stdout.readline().startswith(b"listening")
    yield f"http://127.0.0.1:{port}/decide"
    process.terminate()
    process.wait(timeout=10)


def client(url: str, **options: object) -> PolicyClient:
    """A client of the filter with the reference service's bearer token."""
    config = ExternalFilter(url=url, headers={"authorization": "Bearer t0ken"}, **options)  # type: ignore[arg-type]
    return PolicyClient(config, "dlp")


async def test_the_reference_service_allows_denies_and_modifies(service_url: str) -> None:
    """docs/security.md: the three decisions of the protocol."""
    policy = client(service_url)
    assert await policy.decide(subject("fine")) == Allow()
    denied = await policy.decide(subject("a forbidden word"))
    assert denied == Deny("dlp", "mentions 'forbidden'")
    modified = await policy.decide(subject("my secret-word here"))
    assert isinstance(modified, Modify)
    assert modified.payload == {"content": [{"type": "text", "text": "my [redacted] here"}]}
    await policy.aclose()


async def test_a_cacheable_decision_is_not_asked_again(service_url: str) -> None:
    """Rule 3: max-age keeps the answer; a different principal's question is another key."""
    calls = 0
    real = httpx.AsyncHTTPTransport()

    class Counting(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            nonlocal calls
            calls += 1
            return await real.handle_async_request(request)

    config = ExternalFilter(url=service_url, headers={"authorization": "Bearer t0ken"})
    policy = PolicyClient(config, "dlp", transport=Counting())
    for _ in range(3):
        assert await policy.decide(subject("fine")) == Allow()
    assert calls == 1
    other = Subject(
        point="results", item="web__fetch", principal="bob", payload=subject("fine").payload
    )
    assert await policy.decide(other) == Allow()
    assert calls == 2
    await policy.aclose()


@pytest.mark.parametrize("fail", ["open", "closed"])
async def test_a_service_that_is_down_follows_fail(fail: str) -> None:
    """E20: fail open passes, fail closed refuses, at once."""
    policy = client(f"http://127.0.0.1:{free_port()}/decide", fail=fail)
    decision = await policy.decide(subject("x"))
    assert decision == (Allow() if fail == "open" else Unavailable("dlp", "ConnectError"))
    await policy.aclose()


async def test_a_wrong_credential_is_a_failure_not_a_decision(service_url: str) -> None:
    """Rule 2: another status is a failure."""
    policy = PolicyClient(ExternalFilter(url=service_url), "dlp")
    assert await policy.decide(subject("x")) == Unavailable("dlp", "HTTP 401")
    await policy.aclose()


def faulty(answer: httpx.Response | None, delay: float = 0.0) -> httpx.MockTransport:
    """A service that answers ``answer`` after ``delay`` seconds (faults a real one won't make)."""

    async def handler(_: httpx.Request) -> httpx.Response:
        await trio.sleep(delay)
        assert answer is not None
        return answer

    return httpx.MockTransport(handler)


@pytest.mark.parametrize(
    ("answer", "detail"),
    [
        (httpx.Response(200, content=b"<html>not json"), "answer is not a decision"),
        (httpx.Response(200, json={"decision": "maybe"}), "answer is not a decision"),
        (httpx.Response(200, json={"decision": "modify"}), "modify without a payload object"),
        (httpx.Response(503, json={"decision": "allow"}), "HTTP 503"),
    ],
)
async def test_garbage_is_handled_as_fail_says(answer: httpx.Response, detail: str) -> None:
    """Rule 2: any other status or shape is a failure, handled by fail."""
    config = ExternalFilter(url="http://policy.test/decide")
    policy = PolicyClient(config, "dlp", transport=faulty(answer))
    assert await policy.decide(subject("x")) == Unavailable("dlp", detail)
    await policy.aclose()


async def test_a_slow_service_is_cut_at_its_timeout(autojump_clock: trio.testing.MockClock) -> None:
    """E20: no request waits past the filter's timeout."""
    config = ExternalFilter(url="http://policy.test/decide", timeout=2.0, fail="open")
    policy = PolicyClient(config, "dlp", transport=faulty(httpx.Response(200, json={}), delay=30))
    started = trio.current_time()
    assert await policy.decide(subject("x")) == Allow()
    assert trio.current_time() - started == 2.0
    await policy.aclose()


async def test_what_travels_both_ways_fits_the_documented_json_schema(service_url: str) -> None:
    """docs/security.md: the gateway's request and the reference service's three answers
    validate against deploy/policy-service/policy-service.schema.json."""
    schema = json.loads((SERVICE.parent / "policy-service.schema.json").read_text())
    validators.validator_for(schema).check_schema(schema)
    exchanges: list[tuple[Any, Any]] = []
    real = httpx.AsyncHTTPTransport()

    class Recording(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            response = await real.handle_async_request(request)
            body = await response.aread()
            exchanges.append((json.loads(request.content), json.loads(body)))
            return httpx.Response(response.status_code, headers=response.headers, content=body)

    config = ExternalFilter(url=service_url, headers={"authorization": "Bearer t0ken"})
    policy = PolicyClient(config, "dlp", transport=Recording())
    for text in ("fine", "a forbidden word", "my secret-word here"):
        await policy.decide(subject(text))
    await policy.aclose()
    assert [answer["decision"] for _, answer in exchanges] == ["allow", "deny", "modify"]
    for part, values in (
        ("request", [q for q, _ in exchanges]),
        ("response", [a for _, a in exchanges]),
    ):
        checker = validators.validator_for(schema)({**schema, "$ref": f"#/$defs/{part}"})
        for value in values:
            checker.validate(value)
    with pytest.raises(schema_exceptions.ValidationError):  # the schema can fail
        validators.validator_for(schema)({**schema, "$ref": "#/$defs/response"}).validate(
            {"decision": "modify"}
        )
