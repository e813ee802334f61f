"""The command line starts without the heavy imports (issue 43): parsing options, `--help` and `--version`
load neither polars nor numpy, the parsers, the detectors nor the report writers; the commands import
them when they run. Checked on `sys.modules` in a fresh interpreter; how long it takes is
bench/startup.py's business, never a test's."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ["polars", "numpy", "forensics.parsers", "forensics.detect", "forensics.pipeline", "forensics.report",
         "jinja2"]


def _loaded(code: str) -> list[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])


def _run_cli(*args: str) -> str:
    return ("import contextlib, io, sys\n"
            f"sys.argv = ['gpu-forensics', *{list(args)!r}]\n"
            "from forensics.cli import main\n"
            "try:\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n"
            "        main()\n"
            "except SystemExit as e:\n"
            "    assert e.code == 0, e.code\n")


def test_importing_the_cli_loads_nothing_heavy():
    assert _loaded("import forensics.cli") == []


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["report", "--help"], ["scan", "--help"]])
def test_help_and_version_load_nothing_heavy(args):
    assert _loaded(_run_cli(*args)) == []


def test_the_probe_sees_a_heavy_import():
    # the check above can fail: a command that runs does load them
    assert set(_loaded("import forensics\nforensics.analyze")) >= {"polars", "forensics.detect"}


def test_public_api_still_there():
    import forensics
    from forensics import report

    assert callable(forensics.analyze) and forensics.Result.__name__ == "Result"
    assert forensics.__version__ and not forensics.__version__.startswith("0.0.0")
    assert callable(report.build_context) and callable(report.summary)
