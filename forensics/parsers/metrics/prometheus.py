"""The Prometheus HTTP API's JSON (docs/formats.md §9.1): what `curl .../api/v1/query_range` (a
`matrix`: each series' `values` [[t, "v"], ...]) or `/api/v1/query` (a `vector`: each series' one
`value` [t, "v"]) saves, whole, as `{"data": {...}}`, or its `data` or `data.result` alone (`jq .data`).
Times are Unix seconds (UTC), values strings. The GPU memory metrics and what their labels say are in
exporters.py.

The document is read whole (often one line of tens of MB: the line reader's limit does not apply).
A month of 15 s readings of 8 GPUs is over a million points: they are cut out of the document (the
rest, the series' labels, is small enough for json) and read as columns, only for the series of GPU
memory metrics; json reads the whole document where the cut does not fit (a label value holding
`"values":[`). Each point's evidence line is the line holding its value (line 1 for curl's one-line
output). A document that does not parse (cut off by a full disk or a killed curl) is
one line saying where.
"""
from __future__ import annotations

import json
import re

import numpy as np
import polars as pl

from forensics.errors import InputError
from forensics.model import Parsed
from forensics.parsers.metrics import exporters
from forensics.parsers.contract import Format

NAME = "prometheus-json"
WHOLE_DOCUMENT = True

_RESULT_TYPE = re.compile(r'"resultType"\s*:\s*"(matrix|vector)"')
_BARE_RESULT = re.compile(r'^\s*\[\s*\{\s*"(?:metric|values?)"\s*:')


def sniff(head: list[str]) -> str | None:
    text = "\n".join(head[:50])[: 256 << 10]
    m = _RESULT_TYPE.search(text)
    if m and text.lstrip().startswith("{"):
        return f"Prometheus API response ({m.group(1)})"
    if _BARE_RESULT.match(text) and '"metric"' in text:
        return "Prometheus API result list (data.result)"
    return None


def _not_json(src, data: bytes, cut) -> InputError:
    """Where the document stops parsing, for people."""
    try:
        json.loads(data)
    except ValueError as e:   # (also an integer of more digits than Python converts)
        if not isinstance(e, json.JSONDecodeError):
            return InputError(src.path, "JSON document not read", f"{e}"[:160], "export it again")
        # a cut stream stops parsing within its last bytes, where the writer stopped
        at_end = len(data.rstrip()) - e.pos < 4096
        what = "JSON document cut off" if at_end or cut is not None else "not valid JSON"
        return InputError(src.path, what, f"it stops parsing at line {e.lineno} column {e.colno} ({e.msg})",
                          "export it again (a full disk or an interrupted download cuts it); nothing of it was read",
                          line=e.lineno)
    except (RecursionError, UnicodeDecodeError) as e:
        return InputError(src.path, "not valid JSON", f"it cannot be read ({type(e).__name__})",
                          "export it again; nothing of it was read")
    return InputError(src.path, "unexpected JSON layout", "it parses, but not as Prometheus series",
                      "pass the response of /api/v1/query_range or /api/v1/query")


def _result_list(obj, src) -> list:
    """The `result` list of any of the three layouts (the response, its `data`, its `data.result`)."""
    if isinstance(obj, dict) and obj.get("status") == "error":
        raise InputError(src.path, "the query failed", f"Prometheus answered {obj.get('errorType')}: "
                         f"{' '.join(str(obj.get('error')).split())[:200]}", "fix the query and export it again")
    if isinstance(obj, dict) and isinstance(obj.get("data"), dict):
        obj = obj["data"]
    if isinstance(obj, dict) and "result" in obj:
        kind = obj.get("resultType")
        if kind not in (None, "matrix", "vector"):
            raise InputError(src.path, "no series in it", f"the result is a {kind}, not series",
                             "export a query that returns series (a matrix or a vector)")
        obj = obj["result"]
    if not isinstance(obj, list) or not all(isinstance(r, dict) and "metric" in r for r in obj):
        raise InputError(src.path, "unexpected JSON layout", "it has no list of `metric` series",
                         "pass the response of /api/v1/query_range or /api/v1/query")
    return obj


_PAIRS_KEY = re.compile(rb'"(values?)"\s*:\s*\[')
_PAIRS_END = re.compile(rb"\]\s*\]")
_IDENTITY = bytes.maketrans(b"", b"")
_DROP = b'[]" \t\r\n'


def _split_points(data: bytes) -> tuple[bytes, list[tuple[int, int, bool]]] | None:
    """The document with each series' points cut out (`"values":[]`, `"value":[]`), small enough for
    json, and where the points were: (start, end, is_matrix) of each array's inside. None when an
    array does not end as a list of pairs does (then the document is read the slow way)."""
    pieces, spans, pos = [], [], 0
    for m in _PAIRS_KEY.finditer(data):
        if m.start() < pos:
            continue
        start = m.end()
        matrix = m.group(1) == b"values"
        if matrix:
            rest = data[start:start + 64].lstrip()
            if rest.startswith(b"]"):
                end = data.index(b"]", start)
            else:
                e = _PAIRS_END.search(data, start)
                if e is None:
                    return None
                end = e.start() + 1
        else:
            end = data.find(b"]", start)
            if end < 0:
                return None
        pieces.append(data[pos:start])
        spans.append((start, end, matrix))
        pos = end
    pieces.append(data[pos:])
    return b"".join(pieces), spans


def _pair_lines(data: bytes, newlines: np.ndarray, start: int, end: int, matrix: bool) -> np.ndarray | None:
    """The line holding each pair's value (its quoted string: `jq .` puts the `[`, the time and the
    value on lines of their own) in data[start:end]; None when pairs and values do not match up."""
    span = np.frombuffer(data, dtype=np.uint8, count=end - start, offset=start)
    quotes = np.flatnonzero(span == 34)[::2]        # each value's opening quote
    if not matrix:
        return np.searchsorted(newlines, quotes[:1] + start) + 1 if quotes.size == 1 else None
    opens = np.flatnonzero(span == 91)
    if opens.size != quotes.size or (opens.size and (quotes < opens).any()):
        return None
    return np.searchsorted(newlines, quotes + start) + 1


def _points(data: bytes, spans: list[tuple[int, int, bool]], wanted: list[int]) -> pl.DataFrame | None:
    """sid, t, value, line of the wanted series' points; None when a series' numbers do not pair up.
    All series' numbers are split in one query (one per series cost time per series: a cluster's export
    holds tens of thousands)."""
    multi = b"\n" in data.rstrip()
    newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10) if multi else None
    flats = [data[spans[sid][0]:spans[sid][1]].translate(_IDENTITY, _DROP).decode("ascii", errors="replace")
             for sid in wanted]
    nums = (pl.DataFrame({"sid": wanted, "flat": flats}, schema={"sid": pl.Int64, "flat": pl.String})
            .filter(pl.col("flat") != "")
            .select("sid", pl.col("flat").str.split(",").list.eval(pl.element().cast(pl.Float64, strict=False))))
    n = nums["flat"].list.len()
    if (n % 2 != 0).any():
        return None
    lines = []
    for sid, k in zip(nums["sid"].to_list(), (n // 2).to_list()):
        start, end, matrix = spans[sid]
        at = _pair_lines(data, newlines, start, end, matrix) if multi else np.ones(k, dtype=np.int64)
        if at is None or at.size != k:
            return None
        lines.append(at)
    pts = nums.select("sid", pl.col("flat").list.gather_every(2).alias("t"),
                      pl.col("flat").list.gather_every(2, offset=1).alias("value")).explode("t", "value")
    return pts.with_columns(pl.Series("line", np.concatenate(lines) if lines else [], dtype=pl.Int64))


def _whole(data: bytes, src, cut) -> tuple[list, pl.DataFrame]:
    """(series, points) the slow way, with json: for what _split_points cannot cut."""
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        raise _not_json(src, data, cut)
    result = _result_list(obj, src)
    rows = []
    for sid, r in enumerate(result):
        pairs = r.get("values") if "values" in r else [r.get("value")]
        for pair in pairs or []:
            if isinstance(pair, list) and len(pair) == 2:
                rows.append((sid, pair[0], pair[1]))
    pts = pl.DataFrame(rows, schema={"sid": pl.Int64, "t": pl.String, "value": pl.String}, orient="row",
                       strict=False) if rows else None
    if pts is None:
        return result, pl.DataFrame(schema={"sid": pl.Int64, "t": pl.Float64, "value": pl.Float64, "line": pl.Int64})
    return result, pts.select("sid", *[pl.col(c).cast(pl.Float64, strict=False) for c in ("t", "value")],
                              pl.Series("line", _value_lines(data, [v for _, _, v in rows]), dtype=pl.Int64))


def _value_lines(data: bytes, values: list) -> list[int]:
    """The line of each point's value, found in document order (json keeps it): each value's quoted
    text after the one before; a value not found as written is cited at the line of the one before."""
    newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    pos, out = 0, []
    for v in values:
        k = data.find(b'"' + str(v).encode("utf-8", "replace") + b'"', pos) if isinstance(v, str) else -1
        if k >= 0:
            pos = k + 1
        out.append(int(np.searchsorted(newlines, max(pos - 1, 0), side="right")) + 1)
    return out


def parse(src, opts) -> Parsed:
    data, cut = src.read_bytes()
    p = Parsed(clock="wall")
    split = _split_points(data)
    result = pts = None
    if split is not None:
        try:
            result = _result_list(json.loads(split[0]), src)
        except (ValueError, RecursionError):
            result = None
        if result is not None and len(result) != len(split[1]):
            result = None
    if result is None:
        result, pts = _whole(data, src, cut)
    if cut is not None:
        raise InputError(src.path, "JSON document cut off", f"the {src.compression} stream ends early",
                         "export it again; nothing of it was read")
    if not result:
        p.notes.append("the query returned no series")
        return p
    labels = [{k: v for k, v in (r.get("metric") or {}).items() if isinstance(v, str)} for r in result]
    names = [lb.get("__name__") for lb in labels]
    wanted = [i for i, n in enumerate(names) if n in exporters.METRICS]
    if not wanted:
        p.notes.append("no GPU memory series in it (" + (exporters.other_metrics_note(names) or "no metric names")
                       + "; docs/formats.md §9 lists the ones read)")
        return p
    if pts is None:
        pts = _points(data, split[1], wanted)
        if pts is None:
            result, pts = _whole(data, src, cut)
    pts = pts.filter(pl.col("sid").is_in(wanted))
    bad_t = pts.filter(~pl.col("t").is_between(0, 7.3e9).fill_null(False))
    if bad_t.height:
        p.skipped.add_lines("point without a valid time, not read", bad_t["line"].sort())
    pts = pts.filter(pl.col("t").is_between(0, 7.3e9).fill_null(False)).with_columns(
        (pl.col("t") * 1e6).round().cast(pl.Int64).cast(pl.Datetime("us", "UTC")).alias("time")).drop("t")
    exported = any("exported_pod" in lb for lb in labels)
    index_of = exporters.gpu_index_map([lb for lb, n in zip(labels, names) if n == exporters.GPU_INFO])
    series = [{"sid": i, **exporters.describe(names[i], labels[i], exported, index_of)} for i in wanted]
    p.samples, notes, p.meta = exporters.to_samples(series, pts, p.skipped)
    p.notes.extend(notes)
    other = exporters.other_metrics_note(names)
    if other:
        p.notes.append(other)
    return p


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    whole_document=WHOLE_DOCUMENT,
    files="Prometheus HTTP API JSON (`query_range`, `query`; whole, `jq .data`, `jq .data.result`) of "
          "dcgm-exporter, nvidia_gpu_exporter, nvidia_gpu_prometheus_exporter and cAdvisor GPU memory",
    yields="`memory.used` per GPU and host, `process.used` per pod or process (the leak finding names the pod), "
           "capacity",
)
