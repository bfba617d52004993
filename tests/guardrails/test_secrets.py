"""Secrets found and widened to the whole secret (gateway/guardrails/secrets.py)."""

from __future__ import annotations

import pytest

from gateway.guardrails.secrets import find_secrets, redact

PEM = (
    "config follows\n"
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    "-----END RSA PRIVATE KEY-----\n"
    "done"
)
ROWS = [
    (
        "an AWS key pair: the id and its secret",
        "id AKIAIOSFODNN7EXAMPLE\nsecret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
        "id [redacted: AWS Access Key]\nsecret [redacted: AWS Secret Access Key]\n",
    ),
    (
        "a GitHub token, whole",
        "token ghp_1234567890abcdefghijklmnopqrstuvwxyzAB!",
        "token [redacted: GitHub Token]!",
    ),
    ("a PEM block from BEGIN to END", PEM, "config follows\n[redacted: Private Key]\ndone"),
    ("plain prose", "The quick brown fox jumps over the lazy dog 42 times.", None),
]


@pytest.mark.parametrize(("name", "text", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_each_secret_is_redacted_whole(name: str, text: str, expected: str | None) -> None:
    """Rule 2: a finding is widened to the whole secret, and prose is left alone."""
    spans = find_secrets(text)
    assert redact(text, spans) == (text if expected is None else expected)


def test_a_pem_block_without_its_end_is_redacted_to_the_end() -> None:
    """Rule 2: a truncated key is still key material."""
    text = "x\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA"
    assert redact(text, find_secrets(text)) == "x\n[redacted: Private Key]"
