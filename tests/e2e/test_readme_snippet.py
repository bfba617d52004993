"""The README's Python client snippet, run as a user would run it (issue 24 item 8).

The one fenced ``python`` block of README.md runs with the official SDK
2.x (``.venv-sdk2``, what ``pip install mcp`` installs today) against a
gateway serving the shipped config, as ``make run`` does; only the port in
its URL is changed to the test gateway's.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Final

import pytest
import trio

from tests.e2e.shipped_gateway import ROOT, shipped_gateway

SDK2_PYTHON: Final = ROOT / ".venv-sdk2" / "bin" / "python"
README: Final = ROOT / "README.md"
MAKE_RUN_URL: Final = "http://127.0.0.1:8000/mcp"
RUN_LIMIT: Final = 60.0  # an interpreter start, the SDK's import, two requests
_PYTHON_BLOCK: Final = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)

pytestmark = [
    pytest.mark.sdk2,
    pytest.mark.skipif(
        not SDK2_PYTHON.exists(),
        reason=".venv-sdk2 is missing: run `make sdk2-venv` (make test always creates it)",
    ),
]


def readme_snippet() -> str:
    """The README's one Python block."""
    (block,) = _PYTHON_BLOCK.findall(README.read_text(encoding="utf-8"))
    assert MAKE_RUN_URL in block, "the snippet talks to what `make run` serves"
    return str(block)


async def test_the_readme_client_snippet_runs_against_the_shipped_config(
    tmp_path: Path,
) -> None:
    """Issue 24: it lists the demo tools and adds 2 and 3, with the current official SDK."""
    snippet = tmp_path / "snippet.py"
    async with shipped_gateway(tmp_path) as running:
        snippet.write_text(readme_snippet().replace(MAKE_RUN_URL, running.url))
        with trio.fail_after(RUN_LIMIT):
            done = await trio.run_process(
                [str(SDK2_PYTHON), str(snippet)],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                cwd=tmp_path,
            )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
    tools, added = done.stdout.decode().splitlines()
    assert {"toolbox__add", "notes__add_note"} <= set(ast.literal_eval(tools))
    assert added == "5"
