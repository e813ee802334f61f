"""The HTML report, and the one jinja2 environment (the report's and scan's index page).

Every piece of log text reaches the HTML through jinja2 with autoescape on (also inside SVG), and the one
JSON block in a <script> tag has `<`, `>` and `&` escaped.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
from pathlib import Path

import jinja2
from markupsafe import Markup, escape

from forensics.report.events import EVENT_STYLE
from forensics.report.formatting import Clock
from forensics.report.svg import svg_model
from forensics.units import human


def template_dirs() -> list[Path]:
    """Where the templates are: inside the installed package first, then the checkout's templates/."""
    pkg = Path(__file__).resolve().parent.parent   # the package folder (forensics/)
    dirs = [pkg / "templates", pkg.parent / "templates"]
    return [d for d in dirs if d.is_dir()]


class _BytecodeCache(jinja2.FileSystemBytecodeCache):
    """The compiled templates kept between runs, in jinja2's per-user cache folder (compiling the report
    template costs far more than loading it). Keyed by the template's source, so an
    edited template is compiled again. A cache that cannot be read or written is passed over."""

    def load_bytecode(self, bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except Exception:  # noqa: BLE001 - unreadable or damaged entry: compile instead
            bucket.reset()

    def dump_bytecode(self, bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:  # a read-only or full disk: nothing is kept, nothing else changes
            pass


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    try:
        return _BytecodeCache()
    except (OSError, RuntimeError):  # no safe per-user folder (jinja2 checks its owner and mode)
        return None


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """One environment per process: compiling the templates costs more than rendering them."""
    return _new_env(_bytecode_cache())


def _new_env(bytecode_cache: jinja2.BytecodeCache | None) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(d) for d in template_dirs()]),
        bytecode_cache=bytecode_cache,
        autoescape=True,  # every file, whatever its name: log text is hostile
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["human"] = human
    env.filters["num"] = lambda n: "—" if n is None else f"{n:,}"
    env.filters["count"] = _count
    env.filters["path"] = _path_breaks
    env.filters["prose"] = _prose
    return env


def _prose(text) -> Markup:
    """The tool's own sentences (likely causes, checks): a `code` span as <code>, the rest escaped; an odd
    backtick leaves all of it plain text (as the Markdown's md_prose does)."""
    parts = str(text or "").split("`")
    if len(parts) % 2 == 0:
        return Markup(escape(text))
    return Markup("".join(escape(p) if i % 2 == 0 else Markup("<code>") + escape(p) + Markup("</code>")
                          for i, p in enumerate(parts)))


def script_json(data) -> str:
    """JSON safe inside <script type="application/json">: no `</`, `<!--`, `&` or line separators."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _count(n, word: str) -> str:
    """`1 line`, `2 lines`: a count with its noun in the right number."""
    if n is None:
        return f"— {word}s"
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _path_breaks(path) -> Markup:
    """A path that may wrap after a slash only, never inside a name (escaped, then <wbr> after each /)."""
    return Markup("/<wbr>").join(Markup.escape(part) for part in str(path or "").split("/"))


def _static(name: str) -> str:
    for d in template_dirs():
        p = d / name
        if p.is_file():
            return p.read_text(encoding="utf-8")
    raise FileNotFoundError(name)


@functools.lru_cache(maxsize=1)
def _script_and_style() -> tuple[str, str, str]:
    """The report's script (indentation stripped), the hash the CSP allows it by, and its style sheet:
    read and hashed once per process, as the templates are compiled once (a scan writes many reports)."""
    script = _INDENT.sub("\n", _static("report.js"))
    script_hash = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return script, script_hash, _static("report.css")


def render_html(ctx: dict) -> str:
    """One self-contained HTML file. Nothing is fetched: a CSP forbids any load, styles and the one
    script are inline, and the script is allowed by its hash only (an injected script would not run)."""
    clock = Clock(ctx["zone"]["name"])
    env = environment()
    script, script_hash, css = _script_and_style()
    svgs = {c["id"]: svg_model(c, clock, 150 if c["kind"] == "process" else 260) for c in ctx["charts"]}
    svgs.update({z["id"]: svg_model(z, clock, 200) for z in ctx["zooms"]})
    html = env.get_template("report.html.j2").render(
        ctx=ctx, svgs=svgs, event_style=EVENT_STYLE,
        script=Markup(script),
        # our own static files and JSON escaped by script_json: trusted, not log text
        script_hash=script_hash, css=Markup(css),
        summary_json=Markup(script_json(ctx["summary"])),
    )
    # template indentation is a tenth of the file; no text in it spans lines (see clip), and the
    # script's own indentation is not hashed twice: the hash above is of the stripped script too
    return _INDENT.sub("\n", html)


_INDENT = re.compile(r"\n[ \t]+")
