"""The Markdown summary to paste into a ticket; log text in it is inert."""
from __future__ import annotations

import re

from forensics.detect.leaks import series_words
from forensics.report.formatting import clip
from forensics.report.limits import MAX_GPU_CHARTS
from forensics.units import human

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
# What starts a block where the text starts a line or a list item: a heading (`# `), a list (`- `, `+ `,
# `1. `, `1) `), a setext underline (`===`, `---`); `>` is already an entity, `*` and `_` escaped
_MD_BLOCK_START = re.compile(r"^(?:#{1,6}(?=\s|$)|[-+](?=\s|$)|[-=]+\s*$|[0-9]{1,9}(?=[.)](?:\s|$)))")
# What a linkifier takes for a link: GFM autolinks (a scheme's `https://`, `www.`, an email) and
# markdown-it's linkify with fuzzy links (a domain whose last label is a 2-letter country code or one of
# linkify-it's default gTLDs: `evil.com`, `train.py`). A backslash escape ends the text node that the
# linkifier reads (markdown-it's text_special, cmark's own node), so an escaped character splits the
# candidate in two: the `:` of a scheme, the first `/` of `//`, the dot after `www` and before such a label.
_TLDS = "[a-z]{2}|biz|com|edu|gov|net|org|pro|web|xxx|aero|asia|coop|info|museum|name|shop|xn--[a-z0-9-]+"
_MD_LINKABLE = re.compile(rf"(?<=[a-z]):(?=//)|(?:(?<=mailto)|(?<=xmpp)):|/(?=/)|(?<=\bwww)\."
                          rf"|(?<=\w)\.(?=(?:{_TLDS})(?![\w-]))", re.IGNORECASE)


def md_text(text, *, starts_line: bool = True) -> str:
    """Log text as inert Markdown: one line, HTML escaped, Markdown punctuation backslash-escaped,
    nothing a renderer would turn into a heading, a list or a link (file and folder names, log URLs).
    `starts_line=False` for text that follows other text on its line (no block can start there)."""
    if text is None:
        return ""
    text = " ".join(str(text).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_LINKABLE.sub(r"\\\g<0>", _MD_SPECIAL.sub(r"\\\1", text))
    if not starts_line:
        return text
    return _MD_BLOCK_START.sub(lambda m: m[0] + "\\" if m[0][0].isdigit() else "\\" + m[0], text)


def md_prose(text) -> str:
    """The tool's own sentences (likely causes, checks): their `code` stays a code span, which md_text
    would show as literal backticks; the rest is escaped as md_text escapes it."""
    parts = str(text or "").split("`")
    if len(parts) % 2 == 0:   # an odd backtick: no pairs to trust, all of it is plain text
        return md_text(text)
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 0:   # md_text trims; the spaces between prose and a code span stay
            lead = " " if part[:1].isspace() else ""
            trail = " " if part[-1:].isspace() and part.strip() else ""
            out.append(lead + md_text(part, starts_line=i == 0) + trail)
        else:
            # a code span shows its content as is (no escapes, no HTML), and a space on both sides of the
            # content is stripped again: it lets the span start or end with a backtick-free edge safely
            out.append(f"`{' '.join(part.split())}`")
    return "".join(out)


def _fence(lines: list[str]) -> str:
    """A fenced block whose fence is longer than any backtick run inside it."""
    longest = max((len(m) for line in lines for m in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join([fence + "text", *lines, fence])


def _md_evidence(path, line, text) -> str:
    where = f"{path}:{line}" if line is not None else (path or "")
    return " ".join(f"{where}: {clip(text)}".split())


def render_markdown(ctx: dict) -> str:
    """A Markdown summary to paste into a ticket."""
    v = ctx["verdict"]
    out = [f"## GPU memory report: {md_text(v['label']) if not ctx['empty'] else 'nothing readable'}", ""]
    if ctx["empty"]:
        out.append("No memory readings or events could be read from the inputs:")
        out.append("")
        out.extend(f"- {md_text(r)}" for r in ctx["empty_reasons"][:20])
        out.append("")
    if v["reason"]:
        out += [f"**Verdict:** `{v['code']}`: {md_text(v['reason'])}", ""]
    else:
        out += [f"**Verdict:** `{v['code']}`", ""]
    if v["numbers"]:
        # a header row of its own: CommonMark renderers draw `| | |` as an empty first row
        out += ["| key number | value |", "|---|---|"]
        for n in v["numbers"]:
            val = md_text(n["value"]) + (f" — {md_text(n['sub'])}" if n["sub"] else "")
            out.append(f"| {md_text(n['label'])} | {val} |")
        out.append("")
    sparks = [c for c in ctx["charts"] if c["sparkline"]][:MAX_GPU_CHARTS + 4]
    if sparks:
        out += ["### Memory over time", ""]
        for c in sparks:
            main = c["series"][0]
            cap = f" of {human(c['capacity'])}" if c["capacity"] else ""
            out.append(f"- {md_text(c['title'])}, {md_text(series_words(main['series']))}: `{c['sparkline']}` "
                       f"{human(main['first'])} → {human(main['last'])}, peak {human(main['peak'])}{cap}")
        out.append("")
    if ctx["findings"]:
        out += ["### Findings", ""]
        for n, f in enumerate(ctx["findings"], start=1):
            out.append(f"{n}. **{f['severity']}** `{f['kind']}`: {md_text(f['summary'])}")
            # a nested list: each detail its own item (plain lines would merge into one paragraph)
            facts = [f"{md_text(k)}: {md_text(val)}" for k, val in f["facts"] if k != "Where"]
            if facts:
                out.append("   - " + "; ".join(facts))
            if f["causes"]:
                out.append("   - Likely cause: " + md_prose(f["causes"][0]))
            if f["checks"]:
                out.append("   - Check: " + md_prose(f["checks"][0]))
            if f["evidence"]:
                block = _fence([_md_evidence(e["path"], e["line"], e["text"]) for e in f["evidence"][:4]])
                out.append("\n".join("   " + line for line in block.splitlines()))
            out.append("")
        for o in ctx["findings_omitted"]:
            out.append(f"- and {o['count']} more {md_text(o['severity'])} {md_text(o['kind'])} finding(s)")
        if ctx["findings_omitted"]:
            out.append("")
    fatal = v.get("fatal")
    if fatal:
        out += ["### What ended the job", "", md_text(fatal["label"]) + (f", {fatal['when']['local']}" if fatal["when"] else ""), "",
                _fence([_md_evidence(fatal["path"], fatal["line"], fatal["text"])]), ""]
    if v.get("context_events"):
        out += ["### Other processes' events on this host (not this job's)", ""]
        out += [f"- {md_text(c['label'])}" + (f", {c['when']['local']}" if c["when"] else "") for c in v["context_events"][:5]]
        out += ["", _fence([_md_evidence(c["path"], c["line"], c["text"]) for c in v["context_events"][:5]]), ""]
    san = ctx["sanitizer"]
    if san:
        out += ["### compute-sanitizer leaks by allocation site", ""]
        for g in san["groups"][:10]:
            tag = " (expected: allocator cache at exit)" if g["expected"] else ""
            if g["truncated"]:
                tag += f" ({g['truncated']} of them with a backtrace cut short to its outer frames)"
            out.append(f"- {g['bytes_text']} in {g['count']} allocation(s) at {md_text(g['site'])}{tag}")
        out.append("")
    alloc = ctx["allocations"]
    if alloc:
        out += ["### Live allocations by call path (memory snapshot)", ""]
        for r in alloc["rows"][:15]:
            grew = f", {md_text(r['growth_text'])}" + (f" ({md_text(r['rate'])})" if r["rate"] else "") if r["growth_text"] else ""
            tag = "accumulating" if r["leak"] else "footprint"
            out.append(f"- {md_text(r['site'])} ({tag}): {md_text(r['bytes_text'])} in {r['count']} block(s) live at the dump{grew}")
        out.append("")
    ins = ctx["inputs"]
    out += ["### Inputs", "", "| file | format | lines | records | skipped | time range |", "|---|---|---:|---:|---:|---|"]
    for r in ins["rows"][:50]:
        rng = r["range"]["local"] if r["range"] else ""
        fmt = md_text(r["format"]) if r["format"] else ("**error**" if r["error"] else "not recognized")
        out.append(f"| {md_text(r['path'])} | {fmt} | {r['lines']:,} | {r['records']:,} | {r['skipped']:,} | {md_text(rng)} |")
    more = ins["total"] - min(50, len(ins["rows"]))
    if more > 0:
        out.append(f"| and {more} more | | | | | |")
    out.append("")
    if ctx["problems"]:
        out += ["### Problems", ""]
        out.extend(f"- {md_text(p)}" for p in ctx["problems"][:20])
        extra = len(ctx["problems"]) - 20 + ctx["problems_omitted"]
        if extra > 0:
            out.append(f"- and {extra} more")
        out.append("")
    out.append("_" + md_text(" ".join(ctx["clock_notes"][:2])) + f" Generated by {ctx['tool']} {md_text(ctx['version'], starts_line=False)}._")
    return "\n".join(out) + "\n"
