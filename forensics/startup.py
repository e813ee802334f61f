"""What the command line does to start quickly: a command's imports made without garbage collection
(`imported`), and typer's help renderer imported without what this app's help never uses
(`import_help_renderer`, for `--help`).

typer renders help with `typer.rich_utils`, which imports at its top rich.markdown (markdown-it,
pygments: for the "markdown" markup mode) and rich.traceback (rich.pretty, attrs: for a crash's pretty
traceback): two thirds of that module's import, and the largest part of what `--help` costs beyond
importing typer and rich. The help reads the same (tests/test_cli_help.py).
"""
from __future__ import annotations

import gc
import importlib
import sys
import types


class _OnUse(type):
    """A stand-in for class `__name__` of module `__module__`, which imports that module when the class is first
    called or asked for an attribute (`Traceback.from_exception`)."""

    def _real(cls):
        real = getattr(importlib.import_module(cls.__module__), cls.__name__)
        if real is cls:   # used while typer.rich_utils is imported: that import is then made plainly
            raise ImportError(f"{cls.__module__}.{cls.__name__} used while the help renderer is imported")
        return real

    def __call__(cls, *args, **kw):
        return cls._real()(*args, **kw)

    def __getattr__(cls, name: str):
        return getattr(cls._real(), name)


# the classes of those two modules that typer.rich_utils imports
HELP_SPARES = {"rich.markdown": "Markdown", "rich.traceback": "Traceback"}


def import_help_renderer() -> None:
    """Import typer.rich_utils with stand-ins for the classes in `HELP_SPARES`: the real module is imported
    when one is used. The stand-ins leave `sys.modules` once it is imported, and where the typer installed
    imports more from those modules than the stand-ins hold, it is imported as it is."""
    spared = [m for m in HELP_SPARES if m not in sys.modules]
    if "typer.rich_utils" in sys.modules or not spared:
        return
    for name in spared:
        stand_in = types.ModuleType(name)
        setattr(stand_in, HELP_SPARES[name], _OnUse(HELP_SPARES[name], (), {"__module__": name}))
        sys.modules[name] = stand_in
    try:
        import typer.rich_utils  # noqa: F401
    except ImportError:
        pass
    finally:
        for name in spared:
            del sys.modules[name]
    if "typer.rich_utils" not in sys.modules:   # (the ImportError above)
        import typer.rich_utils  # noqa: F401,F811


_FROZEN = False


def imported() -> None:
    """A command's modules are imported: what they made (modules, functions, compiled regexes, classes;
    hundreds of thousands of objects, none of them garbage) goes to the collector's permanent generation,
    never walked again, and collection starts. cli.main() holds it off until then: collecting while they
    are made walks them again and again (docs/benchmarks.md). Frozen once: a
    process that runs commands again (a test's) imports nothing new."""
    global _FROZEN
    if not _FROZEN:
        _FROZEN = True
        gc.freeze()
    gc.enable()
