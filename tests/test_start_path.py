"""The start path loads no module only rare paths use (issue 17, "Ready sooner").

A fresh interpreter, as ``trio-mcp-gateway serve`` starts: the command line
parsed, the process and app modules imported, a config of one stdio backend
loaded (what runs after that, the backends' start, is measured by
``benchmarks/imports.py`` on a real ``serve``). PyJWT and cryptography
(token checks and grants), httpx (HTTP backends, token endpoints, JWKS),
``gateway.cli.host_files`` (``import`` and ``connect``), detect-secrets (the
guardrails' secret detectors), jsonschema (the ``schema`` filter, held
calls' argument checks), jinja2 (the console's pages, ``admin.enabled``)
and h11 (only hypercorn's, ``server.engine: hypercorn``, since llhttp parses
for the gateway's own engine) must not be among the modules loaded: each is
imported where it is used. ``-X importtime`` put
them at about a ninth of the start path's import time
(docs/performance.md); no timing is asserted here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RARE = (
    "jwt",
    "cryptography",
    "httpx",
    "gateway.cli.host_files",
    "detect_secrets",
    "jsonschema",
    "jinja2",
    "h11",
)

PROBE = """
import sys
from gateway.cli import main as cli
from gateway.cli import process
from gateway.runtime.app import open_gateway
from gateway.config import load

cli._parser().parse_args(["serve", "-c", sys.argv[1]])
config = load(sys.argv[1])
assert config.backends[0].name == "echo"
rare = {rare!r}
print(sorted(m for m in sys.modules if m in rare or m.split(".")[0] in rare))
"""


def _run_probe(probe: str, config: Path) -> str:
    """Run ``probe`` (RARE filled in) in a fresh interpreter on ``config``; what it printed."""
    done = subprocess.run(
        [sys.executable, "-c", probe.format(rare=RARE), str(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_serving_stdio_backends_without_auth_loads_no_rare_module(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(
        "backends:\n"
        "  - name: echo\n"
        "    transport: stdio\n"
        f"    command: {sys.executable}\n"
        "    args: ['-c', 'pass']\n"
    )
    printed = _run_probe(PROBE, config)
    assert printed.strip() == "[]"


def test_the_probe_sees_a_rare_module_when_one_is_loaded(tmp_path: Path) -> None:
    """The check above can fail: the connect command's module is on its list."""
    probe = PROBE.replace(
        "from gateway.runtime.app import open_gateway", "import gateway.cli.host_files"
    )
    config = tmp_path / "gateway.yaml"
    config.write_text(
        f"backends:\n  - name: echo\n    transport: stdio\n    command: {sys.executable}\n"
    )
    printed = _run_probe(probe, config)
    assert "gateway.cli.host_files" in printed
