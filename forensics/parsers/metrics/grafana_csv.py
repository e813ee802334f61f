"""A Grafana panel's CSV download of Prometheus GPU exporter series (docs/formats.md §9.2).

Grafana writes (packages/grafana-data/src/utils/csv.ts, `toCSV`) each data frame as a header of the
fields' display names, every one quoted (`""` inside), then its rows, `\\r\\n` line ends, a blank line
after each frame; the delimiter is the browser locale's list separator, and "Download for Excel" puts
`sep=<delimiter>` first. The layouts people download:
- series joined by time (Inspect > Data, "Series joined by time"): `"Time","<series 1>","<series 2>",...`,
  a blank cell where a series has no point at that time;
- one frame (one series) per download, or several frames one after another, each with its header;
- Grafana before 7 (panel menu > Export CSV): "series as rows", `"Series";"Time";"Value"`, and "series
  as columns", `"Time";"<series 1>";...`, `;`-separated, times as `YYYY-MM-DDTHH:mm:ssZ` with an offset.
A series' display name is the Prometheus selector when no legend is set
(`DCGM_FI_DEV_FB_USED{Hostname="n1", UUID="GPU-…", gpu="0"}`): the metric name and labels are read
from it (exporters.py says what they mean). A legend that leaves the metric name out (`{{gpu}}`)
leaves nothing to read, and the file is not claimed.

Time cells: epoch milliseconds (the default), ISO 8601 with an offset (wall clock), or the
"Formatted data" `YYYY-MM-DD HH:mm:ss` in the dashboard's zone, which the file does not say: read in
the file's zone (--tz). A value cell formatted with a unit ("Formatted data": "30.5 GiB", rounded) is
not read.
"""
from __future__ import annotations

import re

import polars as pl

from forensics.model import Parsed, Skipped
from forensics.frames import rows_where
from forensics.io.lines import read_whole
from forensics.parsers.metrics import common, exporters
from forensics import clock
from forensics.parsers.contract import Format

NAME = "grafana-csv"

_HEAD_RX = r'^\s*(?:sep=.\s*$|"?(?:Time|Series)"?\s*[,;\t])'
_HEAD_RE = re.compile(_HEAD_RX)
_SEP_RX = r"^\s*sep=(.)\s*$"
_BLANK = {"", "null", "undefined", "NaN"}
NOT_PLAIN = "value is not a plain number (downloaded with \"Formatted data\" on?), not read"
NO_TIME = "no time in the row's first cell, not read"
NO_FIT = "row does not fit the header, not read"


def sniff(head: list[str]) -> str | None:
    lines = [ln for ln in head[:50] if ln.strip()]
    if lines and re.match(_SEP_RX, lines[0]):
        lines = lines[1:]
    if not lines or not _HEAD_RE.match(lines[0]):
        return None
    cells = [c.strip() for c in common.header_cells(lines[0], common.delimiter_of(lines[0]))]
    if len(cells) < 2 or not re.search(exporters.METRIC_NAME_RE, "\n".join(lines)):
        return None
    if cells[:3] == ["Series", "Time", "Value"]:
        return "Grafana CSV export, series as rows (Series, Time, Value)"
    if cells[0] == "Time":
        return f"Grafana CSV download, {len(cells) - 1} series by time"
    return None


def _time(cell: pl.Expr, zone: str) -> tuple[pl.Expr, pl.Expr]:
    """(time UTC, whether the cell carried no zone) of a time cell."""
    c = cell.str.strip_chars()
    digits = c.str.contains(r"^[0-9]+(?:\.[0-9]+)?$")
    n = c.cast(pl.Float64, strict=False)
    epoch = pl.when(digits & (c.str.len_chars() >= 12)).then(common.epoch(n / 1000)).when(digits).then(common.epoch(n))
    zoned = c.str.replace(r"Z$", "+00:00").str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_unit="us",
                                                          time_zone="UTC")
    naive = c.str.replace("T", " ", literal=True).str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")
    local = clock.localize(naive, zone)
    return pl.coalesce(epoch, zoned, local), epoch.is_null() & zoned.is_null() & local.is_not_null()


class Reader:
    """feed(batch) in file order, then finish(). Headers (a handful of lines) are read in Python, the
    rows under them as columns."""

    def __init__(self, src, opts):
        self.zone = opts.tz_for(src.path)
        self.unread: set[str] = set()           # column names that name no GPU memory metric
        self.delim: str | None = None
        self.layout: tuple[str, list[int | None]] | None = None   # ("wide", sid per column) or ("long", [])
        self.names: dict[str, int] = {}          # series display name -> sid
        self.parts: list[pl.DataFrame] = []
        self.skipped = Skipped()
        self.naive = False

    def _sid(self, display: str) -> int:
        return self.names.setdefault(display, len(self.names))

    def _header(self, text: str, line: int) -> None:
        sep = re.match(_SEP_RX, text)
        if sep:
            self.delim = sep.group(1)
            return
        if self.layout is not None:
            self.skipped.add("repeated header", line)
        delim = self.delim or common.delimiter_of(text)
        self.delim = delim
        cells = [c.strip() for c in common.header_cells(text, delim)]
        if cells[:3] == ["Series", "Time", "Value"]:
            self.layout = ("long", [])
        else:
            known = [bool(re.search(exporters.METRIC_NAME_RE + "|" + exporters.GPU_INFO, c)) for c in cells[1:]]
            self.unread.update(c for c, k in zip(cells[1:], known) if not k)
            self.layout = ("wide", [self._sid(c) if k else None for c, k in zip(cells[1:], known)])

    def feed(self, batch: pl.DataFrame, raw=None) -> None:
        """Each header line sets the layout of the rows below it (a frame's header, or a repeated one)."""
        if batch.height == 0:
            return
        heads = rows_where(batch, pl.col("text").str.contains(_HEAD_RX))
        bounds = heads["line"].to_list()
        starts = [int(batch["line"][0])] + [b + 1 for b in bounds]
        ends = [b - 1 for b in bounds] + [int(batch["line"][-1])]
        for i, (lo, hi) in enumerate(zip(starts, ends)):
            if i > 0:
                self._header(heads["text"][i - 1], bounds[i - 1])
            if hi < lo:
                continue
            rows = rows_where(batch, pl.col("line").is_between(lo, hi))
            rows = common.without_blank(rows, self.skipped)
            if self.layout is None:
                self.skipped.add_lines("before the first header, not read", rows["line"])
            elif rows.height:
                self._rows(rows)

    def _rows(self, rows: pl.DataFrame) -> None:
        kind, sids = self.layout
        d = self.delim or ","
        t = pl.col("text")
        if kind == "long":
            rx = (rf'^\s*(?:"(?P<s>(?:[^"]|"")*)"|(?P<u>[^{re.escape(d)}]*)){re.escape(d)}"?(?P<t>[^{re.escape(d)}"]*)"?'
                  rf'{re.escape(d)}"?(?P<v>[^{re.escape(d)}"]*)"?\s*$')
            g = rows.select("line", t.str.extract_groups(rx).alias("g")).unnest("g")
            g = g.with_columns(pl.coalesce(pl.col("s").str.replace_all('""', '"', literal=True), pl.col("u"))
                               .str.strip_chars().alias("name"))
            self.skipped.add_lines(NO_FIT, g.filter(pl.col("name").is_null())["line"])
            g = g.filter(pl.col("name").is_not_null())
            for name in g["name"].unique(maintain_order=True).to_list():
                if re.search(exporters.METRIC_NAME_RE, name):
                    self._sid(name)
            g = g.with_columns(pl.col("name").replace_strict(self.names, default=None, return_dtype=pl.Int64).alias("sid"))
            cols = {"c0": pl.col("t"), "value": pl.col("v"), "sid": pl.col("sid")}
            self._points(g.select("line", *[e.alias(k) for k, e in cols.items()]), [("value", None)])
            return
        n = len(sids) + 1
        split = rows.select("line", t.str.split(d).list.len().alias("_n"), *common.cells(t, d, n))
        self.skipped.add_lines(NO_FIT, split.filter(pl.col("_n") != n)["line"])
        split = split.filter(pl.col("_n") == n)
        self._points(split, [(f"c{j + 1}", sid) for j, sid in enumerate(sids) if sid is not None])

    def _points(self, rows: pl.DataFrame, columns: list[tuple[str, int | None]]) -> None:
        """rows: line, c0 (the time cell) and the value cells named in columns (cell, sid; sid None:
        the rows' own `sid` column)."""
        time, naive = _time(pl.col("c0"), self.zone)
        rows = rows.with_columns(time.alias("time"), naive.alias("_naive"))
        self.skipped.add_lines(NO_TIME, rows.filter(pl.col("time").is_null())["line"])
        rows = rows.filter(pl.col("time").is_not_null())
        self.naive = self.naive or bool(rows["_naive"].any())
        out, bad_lines = [], []
        for cell, sid in columns:
            v = pl.col(cell).str.strip_chars()
            blank = v.is_in(list(_BLANK)) | v.is_null()
            value = common.number(v)
            bad_lines.append(rows.filter(~blank & value.is_null())["line"])
            sid_expr = pl.lit(sid, dtype=pl.Int64) if sid is not None else pl.col("sid")
            out.append(rows.filter(~blank & value.is_not_null()).select(
                sid_expr.alias("sid"), "time", value.alias("value"), "line"))
        bad = pl.concat(bad_lines).unique().sort() if bad_lines else pl.Series([], dtype=pl.Int64)
        self.skipped.add_lines(NOT_PLAIN, bad)
        self.parts.extend(o.filter(pl.col("sid").is_not_null()) for o in out)

    def finish(self) -> Parsed:
        p = Parsed(skipped=self.skipped, clock="wall-assumed" if self.naive else "wall")
        parsed = {display: exporters.parse_selector(display) for display in self.names}
        exported = any("exported_pod" in labels for _, labels in parsed.values())
        index_of = exporters.gpu_index_map([labels for name, labels in parsed.values() if name == exporters.GPU_INFO])
        series = [{"sid": sid, **exporters.describe(parsed[d][0], parsed[d][1], exported, index_of)}
                  for d, sid in self.names.items() if parsed[d][0] in exporters.METRICS]
        # in file order whatever the batches were
        points = pl.concat(self.parts).sort("line", "sid") if self.parts else pl.DataFrame(
            schema={"sid": pl.Int64, "time": common.UTC, "value": pl.Float64, "line": pl.Int64})
        p.samples, notes, p.meta = exporters.to_samples(series, points, p.skipped)
        p.notes.extend(notes)
        if self.unread:
            names = sorted(self.unread)
            p.notes.append(f"{len(names)} columns name no GPU memory metric and were not read (a legend replaces the "
                           f"series' selector): {', '.join(n[:60] for n in names[:3])}" + (" …" if len(names) > 3 else ""))
        if self.naive:
            p.notes.append("times without a zone (\"Formatted data\" download) were read in the file's zone (--tz); "
                           "Grafana wrote them in the dashboard's zone")
        return p


def parse(src, opts) -> Parsed:
    return read_whole(Reader(src, opts), src)


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    reader=Reader,
    files="Grafana panel CSV download of the GPU exporters' series (joined by time, one frame per series, Grafana"
          " ≤ 6 series as rows)",
    yields="the same as `prometheus-json`",
)
