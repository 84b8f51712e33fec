"""The memlab command line."""

from __future__ import annotations

import subprocess
import sys

from memlab.cli import main


def test_demo_runs_and_explains(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "remembered 12 memories for 2 users" in out
    assert "PagerDuty" in out and "weights:" in out


def test_unknown_command_exits_nonzero(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["frobnicate"]) == 2
    assert "unknown command" in capsys.readouterr().err


def test_console_script_prints_errors_without_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "memlab.cli", "frobnicate"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
