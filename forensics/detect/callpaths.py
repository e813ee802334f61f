"""compute-sanitizer's allocations never freed, grouped by call path: the one grouping behind the
sanitizer findings (detect/events.py), the report's table of leak sites (report/sections.py) and the
sites compare matches across two runs (compare.py).

A leak's call path is its stack's frames in the user's code, innermost first (the parser's
`user_frames`). Grouping by the innermost one names the allocation helper that, in real code, every
leak goes through (`make_buffer`). Here the leaks through one innermost frame are split at the first
frame where their paths differ, so the helper is named with each caller that leaks through it:
`make_buffer ← process_batch (shared_helper.cu:24)` ×5 and `make_buffer ← main (shared_helper.cu:45)`
×1. Leaks whose paths never differ stay one group, named by the innermost frame. Only the first
difference splits: the leaks of one caller reached from two places stay one group (that caller is
what tells them from the helper's other callers; splitting on would make a group per whole stack,
hundreds of them for a PyTorch program).

A backtrace whose user frames are the outer part of other leaks' paths (say compute-sanitizer saved
only `main (shared_helper.cu:48)` where the other stacks read make_buffer ← process_batch ← main:48) was
cut short: the line it ends at is a call that, in every full stack through it, goes on into those frames.
When those full stacks all lie in one group it is counted there, and the group says how many of its
backtraces were cut; when they lie in several, which one it belongs to is unknown and it stays a group
of its own. A leak without user frames is grouped by what its parser says of the stack.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import polars as pl

from forensics.model import detail_dict


@dataclass
class LeakGroup:
    path: tuple                         # the frame keys that name the group, innermost first
    label: str                          # how people read it: `make_buffer ← process_batch (shared_helper.cu:24)`
    frames: list[dict]                  # the user frames of `path` (as the group's first leak has them)
    expected: bool                      # the caching allocator still held these blocks at exit
    rows: list[dict] = field(default_factory=list)      # its leak events, in input order
    details: list[dict] = field(default_factory=list)   # their detail, parsed
    truncated: int = 0                  # backtraces cut short, counted here by their outer frames


def function_name(symbol: str) -> str:
    """`cudaError cudaMalloc<float>(float**, unsigned long)` -> `cudaMalloc<float>`: reports of one
    program spell a frame with and without its return type and parameters."""
    name = re.sub(r"\(.*\)\s*(const)?\s*$", "", symbol.strip())
    return name.split()[-1] if name.split() else symbol


def frame_key(frame: dict, exact: bool = True) -> tuple:
    """A frame's identity: function, file (or module) by its base name and, when `exact`, the line (or
    offset) of the call. Without it (compare) a fix that moves lines keeps the site."""
    where = frame.get("file") or frame.get("module") or ""
    name = function_name(str(frame.get("function") or "?"))
    at = (frame.get("line") if frame.get("file") else frame.get("offset")) if exact else None
    return name, os.path.basename(str(where).replace("\\", "/")), at


def frame_label(frame: dict) -> str:
    """`make_buffer (shared_helper.cu:17)`, `main (leak)`, or `leak+0x2bab3` for a frame without a name."""
    name = frame.get("function")
    file = os.path.basename(str(frame["file"]).replace("\\", "/")) if frame.get("file") else None
    where = f"{file}:{frame['line']}" if file and frame.get("line") is not None else file or frame.get("module")
    if name:
        return f"{function_name(str(name))} ({where})" if where else function_name(str(name))
    return f"{where}+{frame['offset']}" if where and frame.get("offset") else where or "?"


def site_text(site) -> str:
    """An allocation site (a parser's `site`) for people: `symbol (file:line)`, `symbol in
    module+0xoffset`, or as given."""
    if isinstance(site, dict):
        sym = site.get("symbol") or "?"
        if site.get("file"):
            return f"{sym} ({site['file']}:{site.get('line')})" if site.get("line") is not None else f"{sym} ({site['file']})"
        if site.get("module"):
            return f"{sym} in {site['module']}" + (f"+{site['offset']}" if site.get("offset") else "")
        return sym
    return str(site) if site else "an unknown allocation site"


def _path_label(frames: list[dict]) -> str:
    names = [function_name(str(f.get("function") or "?")) for f in frames[:-1]]
    if len(names) > 2:
        names = [names[0], "…"]
    return " ← ".join(names + [frame_label(frames[-1])])


def sanitizer_groups(leaks: pl.DataFrame, exact: bool = True) -> list[LeakGroup]:
    """The `sanitizer_leak` events grouped by call path (the module docstring says how), those the
    caching allocator still held at exit apart and after the others; each part in the order of the
    groups' first leaks."""
    rows = list(leaks.iter_rows(named=True))
    details = [detail_dict(r.get("detail")) for r in rows]
    out: list[LeakGroup] = []
    for expected in (False, True):
        idx = [i for i, d in enumerate(details) if bool(d.get("allocator_cache_at_exit")) == expected]
        paths = [tuple(frame_key(f, exact) for f in details[i].get("user_frames") or [] if isinstance(f, dict))
                 for i in idx]
        fallback = [details[i].get("site_label") or site_text(details[i].get("site")) for i in idx]
        for members, path, cut in _grouped(paths, fallback):
            first = details[idx[members[0]]]
            frames = [f for f in first.get("user_frames") or [] if isinstance(f, dict)][: len(path)]
            if len(path) <= 1:
                label = fallback[members[0]] if first.get("site_label") or not frames else frame_label(frames[0])
            else:
                label = _path_label(frames)
            out.append(LeakGroup(path=path, label=label, frames=frames, expected=expected,
                                 rows=[rows[idx[j]] for j in members], details=[details[idx[j]] for j in members],
                                 truncated=cut))
    return out


def _grouped(paths: list[tuple], fallback: list[str]) -> list[tuple[list[int], tuple, int]]:
    """(members, the path that names them, how many of them were cut short) per group; members are
    indices into `paths`, groups come in the order of their first member."""
    distinct = {p for p in paths if p}
    cut = {p for p in distinct if any(len(q) > len(p) and q[-len(p):] == p for q in distinct)}
    groups = {("path", key): members for key, members in _split([i for i, p in enumerate(paths) if p and p not in cut],
                                                                 paths).items()}
    truncated: dict[tuple, int] = {}
    for i, p in enumerate(paths):
        if not p:
            groups.setdefault(("site", fallback[i]), []).append(i)
        elif p in cut:
            owners = [k for k, members in groups.items() if k[0] == "path" and any(
                paths[j] not in cut and len(paths[j]) > len(p) and paths[j][-len(p):] == p for j in members)]
            if len(owners) == 1:
                groups[owners[0]].append(i)
                truncated[owners[0]] = truncated.get(owners[0], 0) + 1
            else:
                groups.setdefault(("cut", p), []).append(i)
    out = [(sorted(members), () if kind == "site" else key, truncated.get((kind, key), 0))
           for (kind, key), members in groups.items()]
    return sorted(out, key=lambda g: g[0][0])


def _split(indices: list[int], paths: list[tuple]) -> dict[tuple, list[int]]:
    """The leaks by innermost frame, each such set split once, at the first frame where its paths
    differ (a path that ends there is a group of its own): path that names the group -> members."""
    by_first: dict[tuple, list[int]] = {}
    for i in indices:
        by_first.setdefault(paths[i][0], []).append(i)
    out: dict[tuple, list[int]] = {}
    for first, members in by_first.items():
        d = 1
        while True:
            at = {paths[i][d] if d < len(paths[i]) else None for i in members}
            if len(at) > 1 or at == {None}:
                break
            d += 1
        if len(at) == 1:   # one path all the way: named by its innermost frame
            out[(first,)] = members
            continue
        for i in members:
            out.setdefault(paths[i][: d + 1], []).append(i)
    return out
