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


# --help imports typer's help renderer with stand-ins for what it imports and this app's help does not use
# (rich.markdown, rich.traceback: forensics.startup.HELP_SPARES); the help must read the same as with the real ones
_PRINT_HELP = ("import contextlib, io, json, sys\n"
               "{before}"
               "sys.argv = ['gpu-forensics', *{args!r}]\n"
               "from forensics.cli import main\n"
               "out = io.StringIO()\n"
               "try:\n"
               "    with contextlib.redirect_stdout(out):\n"
               "        main()\n"
               "except SystemExit:\n"
               "    pass\n"
               "print(json.dumps([out.getvalue(), sorted(m for m in sys.modules if m.startswith(('rich.', 'markdown_it')))]))")


def _help_in_a_fresh_process(args: list[str], before: str = "") -> tuple[str, list[str]]:
    import json
    import os
    import subprocess
    import sys

    code = _PRINT_HELP.format(before=before, args=args)
    env = {**os.environ, "COLUMNS": "100", "FORCE_COLOR": "1"}   # rich's colours and panels, as on a terminal
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    return tuple(json.loads(res.stdout.splitlines()[-1]))


@pytest.mark.parametrize("args", [[], ["--help"], ["report", "--help"], ["record", "-h"]])
def test_help_reads_the_same_without_the_modules_it_spares(args):
    light, loaded = _help_in_a_fresh_process(args)
    full, _ = _help_in_a_fresh_process(args, before="import rich.markdown, rich.traceback\n")
    assert "Usage:" in light and "\x1b[" in light
    assert light == full
    assert "rich.markdown" not in loaded and "rich.traceback" not in loaded
    assert not any(m.startswith("markdown_it") for m in loaded)


def test_the_stand_ins_give_the_real_classes_when_used():
    # a crash's pretty traceback (`Traceback.from_exception`) and the markdown mode (`Markdown(text)`)
    code = ("import sys\n"
            "from forensics import startup\n"
            "startup.import_help_renderer()\n"
            "from typer import rich_utils\n"
            "assert 'rich.markdown' not in sys.modules\n"
            "try:\n"
            "    1 / 0\n"
            "except ZeroDivisionError as e:\n"
            "    tb = rich_utils.Traceback.from_exception(type(e), e, e.__traceback__)\n"
            "md = rich_utils.Markdown('*x*')\n"
            "import rich.markdown, rich.traceback\n"
            "assert type(tb) is rich.traceback.Traceback and type(md) is rich.markdown.Markdown\n")
    _runs_cleanly(code)


def test_a_typer_that_imports_more_than_the_stand_ins_hold_gets_the_real_modules():
    # (a stand-in module holding another class than the one typer imports: its import fails, and is made plainly)
    code = ("import sys\n"
            "from forensics import startup\n"
            "startup.HELP_SPARES = {'rich.markdown': 'NotWhatTyperImports'}\n"
            "startup.import_help_renderer()\n"
            "from typer import rich_utils\n"
            "import rich.markdown\n"
            "assert rich_utils.Markdown is rich.markdown.Markdown\n")
    _runs_cleanly(code)


def _runs_cleanly(code: str) -> None:
    """Run `code` in a fresh interpreter (what a module import leaves in sys.modules is per process)."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
