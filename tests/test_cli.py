"""The ``trio-mcp-gateway`` command, run as a real subprocess.

Exit codes (gateway/cli/main.py): 0 when all is well, 2 for a configuration that
cannot be used, with every problem printed on stderr, each with its place.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Final

from gateway import __version__

REPO: Final = Path(__file__).resolve().parents[1]
SHIPPED_CONFIG: Final = REPO / "config" / "gateway.yaml"
EXIT_CONFIG: Final = 2
# A check loads the config only; nothing is started, so this is generous.
RUN_TIMEOUT: Final = 30

BROKEN_CONFIG: Final = """\
server:
  port: not-a-port
  colour: blue
backends:
  - name: one
    transport: stdio
    command: python
  - name: two
    transport: stdio
    command: python
  - name: three
    transport: stdio
    args: ["-m", "three"]
"""


def run_check(config: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m gateway check -c CONFIG``, output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "gateway", "check", "-c", str(config)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


def test_check_accepts_the_shipped_config(tmp_path: Path) -> None:
    """Gateway choice: the config in the repository is valid; `check` says ok, exits 0."""
    result = run_check(SHIPPED_CONFIG, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{SHIPPED_CONFIG}: ok (2 backends)\n"
    assert result.stderr == ""


def test_check_reports_every_problem_with_its_place_and_exits_2(tmp_path: Path) -> None:
    """Gateway choice (config/decode.py): all problems at once, one per line, each prefixed
    with the file and the place of the mistake; exit code 2."""
    config = tmp_path / "broken.yaml"
    config.write_text(BROKEN_CONFIG, encoding="utf-8")
    result = run_check(config, tmp_path)
    assert result.returncode == EXIT_CONFIG
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    prefix = f"{config}: "
    assert all(line.startswith(prefix) for line in lines), lines
    problems = sorted(line.removeprefix(prefix) for line in lines)
    assert len(problems) == 3, problems
    assert problems[0] == "backends[2].command: required field missing"
    assert problems[1].startswith("server.colour: unknown field")
    assert problems[2].startswith("server.port: expected int")
    assert "not-a-port" in problems[2]


def test_check_of_a_missing_file_says_so_and_exits_2(tmp_path: Path) -> None:
    """Gateway choice: a file that cannot be read is a config error (2), not a traceback."""
    missing = tmp_path / "nowhere.yaml"
    result = run_check(missing, tmp_path)
    assert result.returncode == EXIT_CONFIG
    assert result.stdout == ""
    assert str(missing) in result.stderr
    assert "cannot read the file" in result.stderr
    assert "No such file or directory" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_console_script_prints_its_version(tmp_path: Path) -> None:
    """Gateway choice: `trio-mcp-gateway --version` prints the package version and exits 0."""
    script = Path(sys.executable).parent / "trio-mcp-gateway"
    assert script.is_file(), f"console script not installed next to {sys.executable}"
    result = subprocess.run(
        [str(script), "--version"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"trio-mcp-gateway {__version__}\n"
