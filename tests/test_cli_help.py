"""The help reads well on every typer the floors allow (.ci/run runs this file again at the lowest
versions): no Python types (`<list[str]>`, `<bool>`), no `{paths}`, and examples at the top level."""
import pytest
from typer.testing import CliRunner

from forensics.cli import app

COMMANDS = ["report", "sniff", "timeline", "compare", "record", "scan"]


def _help(*args: str) -> str:
    res = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "120"}, terminal_width=120)
    assert res.exit_code == 0, res.output
    return res.output


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_has_no_python_types(command):
    text = _help(*([command] if command else []))
    for bad in ("{", "<list", "<str>", "<bool>", "<int>", "<float>"):
        assert bad not in text, f"{bad!r} in the help of {command or 'gpu-forensics'}:\n{text}"
    assert "Usage:" in text


def test_help_names_arguments_in_capitals():
    assert "PATHS..." in _help("report")
    assert "COMMAND..." in _help("record")


def test_top_level_help_has_examples():
    text = _help()
    assert "Examples:" in text
    assert "gpu-forensics report " in text and "gpu-forensics scan " in text
