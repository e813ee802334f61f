"""What the general reader's per-sample expectations compare: each series of a parse, keyed by
`series` or `series@label`, with its count of readings, first and last bytes and steps."""
from __future__ import annotations


def summarize(parsed) -> dict:
    s = parsed.samples.sort("seq")
    out = {}
    for (series, label), g in s.group_by("series", "label", maintain_order=True):
        key = series if label is None else f"{series}@{label}"
        out[key] = {"count": g.height, "first": g["bytes"][0], "last": g["bytes"][-1],
                    "first_step": g["step"][0], "last_step": g["step"][-1],
                    "timed": bool(g["time"].is_not_null().all())}
    return out


def _words(text: str) -> str:
    return " ".join(text.lower().replace("_", " ").split())


def matches(parsed, want: dict) -> list[str]:
    """The differences between a parse and a file's expectations (empty: it is read right)."""
    got = summarize(parsed)
    diffs = []
    if want.get("no_series"):
        if got:
            diffs.append(f"expected no series, got {sorted(got)}")
    for name, exp in want.get("series", {}).items():
        key = name if "@" in name or "label" not in exp else f"{name}@{exp['label']}"
        if "label_has" in exp:      # words the label must hold (a phase), case and `_`/space aside
            words = [_words(w) for w in exp["label_has"]]
            cands = [k for k in got if k.split("@")[0] == name.split("@")[0] and "@" in k
                     and all(w in _words(k.split("@", 1)[1]) for w in words)]
        else:
            cands = [k for k in got if k == key] or [k for k in got if "label" not in exp and k.split("@")[0] == name]
        if not cands:
            diffs.append(f"{key}: not read (got {sorted(got)})")
            continue
        g = got[cands[0]]
        for f in ("count", "first", "last", "first_step", "last_step"):
            if f in exp and g[f] != exp[f]:
                diffs.append(f"{key}.{f}: got {g[f]}, expected {exp[f]}")
        if want.get("timed") and not g["timed"]:
            diffs.append(f"{key}: readings without a clock")
    for name in want.get("absent", []):
        if any(k.split("@")[0] == name for k in got):
            diffs.append(f"{name}: read, but the file holds no such figure")
    if "skipped_min" in want and parsed.skipped.total < want["skipped_min"]:
        diffs.append(f"skipped {parsed.skipped.total} lines, expected at least {want['skipped_min']}")
    return diffs

