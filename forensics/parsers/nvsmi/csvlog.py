"""`nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits] [-l N]` logs (docs/formats.md §1.1).

One reader (Reader) for a file of any size: it takes the lines in batches (a small file is one batch)
with the same vectorized code. Each line is a header (or a `--query-gpu=` command line, which names
the columns of the rows under it), a data row of the column map in force, or something to skip and
count. Rows are keyed on index / uuid / bus id, never on their position. Rows before any header get
their columns from `--columns`, else from the shapes and values of their cells (csvcolumns.py).

`gpu` is the index, else the UUID, else the bus id (normalised to `00000000:3B:00.0`); a query with
none of them but different GPU names is keyed on the name. `seq` is the sample number: a row's
count of readings of its own GPU so far, carried forward as a running maximum, which is "a new
sample starts when a GPU repeats" for logs whose samples list each GPU once (in any order). When a
file holds more readings than thinning.MAX_READINGS, each series is thinned as it is read.

A batch of nothing but clean rows of the map in force, with its bytes at hand, has its cells cut by
polars' CSV reader (csvcells.read_clean); any other batch takes the general path, with the same
result. A big file's batches come as bytes (io.lines.ByteLines), cut into lines only for the general
path; a batch of blank lines, or of one line repeated, is counted from its first lines. Header
carry-over, numbering, thinning and the GPU ids are the reader's state, so where the batches end never
changes the result.
"""
from __future__ import annotations

import re

import numpy as np
import polars as pl

from forensics import clock
from forensics.io.lines import ByteLines, frame_of, read_whole
from forensics.frames import partitions, rows_where
from forensics.io.sources import Source
from forensics.model import Parsed, Skipped, samples_frame
from forensics.options import Options
from forensics.parsers.nvsmi import common as C
from forensics.parsers.nvsmi import csvcells
from forensics.parsers.nvsmi.csvcolumns import ColumnMap, declared_map, infer_map, map_from_names
from forensics.thinning import RunningCount, Thinner
from forensics.parsers import free
from forensics.parsers.contract import Format

NAME = "nvidia-smi-csv"

HEADER_CHANGED = "header changed (other columns than the header before)"
# The columns of rows before any header are inferred from the first lines of them.
LEAD_LINES = 2000
LEAD_CANDIDATES = 400
# ... and, for the values that tell memory from other numbers, rows drawn from as much of them as came in
# the first batch (GPUs idle until a job starts read 0-65 MiB, like percentages)
LEAD_SCAN_LINES = 200_000
LEAD_SPREAD = 2000
# start-line candidates up to this many are matched to their ids in Python (the grouping's queries cost more)
SMALL_START_ROWS = 64
_SAMPLE_COLUMNS = ["time", "seq", "line", "gpu", "series", "bytes", "total_bytes"]


def sniff(head: list[str]) -> str | None:
    return C.sniff_for(NAME, head)


def parse(src: Source, opts: Options) -> Parsed:
    """A file read whole: its lines are one batch (a big file is fed to a Reader batch by batch)."""
    return read_whole(Reader(src, opts), src)


def parse_lines(df: pl.DataFrame, path: str, opts: Options, nested: bool = False) -> Parsed:
    """Lines of another parser's file that hold a CSV section (`nested`: its leftovers stay its own)."""
    reader = Reader(None, opts, path=path, nested=nested)
    reader.feed(df.select("line", "text"))
    return reader.finish()


class Reader:
    """nvidia-smi CSV lines fed in batches (`line`, `text`; in file order), the Parsed at finish().

    `raw` (feed, prepare): the batch's bytes (buf, end) when its lines are exactly buf[:end] (the clean
    path cuts them again); `prepare` starts that stateless work in a thread pool ahead of feed. A batch
    may come as io.lines.ByteLines: cut into lines only where the clean path does not take it."""

    TAKES_BYTES = True

    def __init__(self, src: Source | None, opts: Options, path: str | None = None, nested: bool = False):
        self.src, self.opts, self.nested = src, opts, nested
        # None until the first 200 unusable lines tell whether another parser reads them; when none does,
        # they are counted as they come (kept, a log of millions of junk lines held them all)
        self.rest_counted: bool | None = True if nested else None
        self.rest_rows = 0
        self.path = src.path if src is not None else path
        self.zone = opts.tz_for(self.path)
        # start lines (headers, commands) by text: their map id, map (None: another section) and why
        self.start_ids: dict[str, int] = {}
        self.maps: dict[int, ColumnMap | None] = {}
        self.whys: dict[int, str] = {}
        self.in_force = 0                 # the map id in force after what was fed (0: rows before any start)
        self.prev_header: int | None = None
        self.first_header: int | None = None
        self.lead: list[tuple] | None = []   # (batch, raw) held until the lead rows' columns are known
        self.lead_notes: list[str] = []
        self.declared = opts.columns
        if self.declared:
            self.maps[0] = declared_map(self.declared)
            self.lead = None
        self.headerless = False           # rows were read before any start line (with map 0)
        self.gpu_ids: dict[str | None, int] = {}
        self.seq = RunningCount()
        self.seq_max = 0
        self.thinner = Thinner()
        self.sized = src is None or src.compression is not None
        self.id_parts: list[pl.DataFrame] = []
        self.rest: list[pl.DataFrame] = []
        self.errors: list[pl.DataFrame] = []
        self.skipped = Skipped()
        self.last_row: pl.DataFrame | None = None   # line and time of the last row read
        self.rows = self.timed_rows = self.out_rows = self.valued = self.unnamed = 0
        self.free = False
        self._guess: ColumnMap | None | bool = None
        self.clean = False                # the last batch fed was read whole by the clean path

    # -- feeding ------------------------------------------------------------------------------------

    def prepare(self, pool, batch: pl.DataFrame, raw):
        """The clean path for this batch, started in `pool` with the map in force now ((map, Future, lines
        of the batch left out in front), or None). feed() checks that the map is still the one in force
        when the batch's turn comes (a batch before it may change it). Before anything is fed, the map is
        guessed from the batch's first line (the header, which feed() reads alone), or for a headerless log
        from the batch's first lines."""
        m, skip = self.maps.get(self.in_force), 0
        if self.in_force == 0 and raw is not None and self.lead is not None and not self.rows:
            if self._guess is None:
                self._guess = self._map_of_first_line(batch)
                skip = 1 if self._guess else 0
                if not self._guess:
                    self._guess = (self._lead_map(frame_of(batch)) or (False,))[0] or False
            m = self._guess or None
        if m is None or raw is None or batch.height <= skip or (isinstance(batch, ByteLines) and batch.blank):
            return None
        work = frame_of(batch).slice(skip) if skip else batch
        return m, pool.submit(csvcells.read_clean, work, (*raw, skip) if skip else raw, m, self.zone), skip

    def feed(self, batch: pl.DataFrame, raw: tuple[bytes, int] | None = None, prepared=None) -> bool:
        """Take a batch. True when every line of it was a clean row of the columns in force (the clean
        path reads a batch only then) or blank: no such line can hold what a free-text scanner looks for."""
        self.clean = False
        if batch.height:
            self._feed_batch(batch, raw, prepared)
        return self.clean

    def _feed_batch(self, batch: pl.DataFrame, raw, prepared) -> None:
        if not self.sized:
            # an uncompressed file's size tells how many readings will come: thin with that window from
            # the start rather than thinning everything kept again each time it doubles
            self.sized = True
            if isinstance(batch, ByteLines):   # its bytes are its lines and their newlines
                size = batch.end + (batch.buf[batch.end - 1:batch.end] != b"\n")
            else:
                size = int(batch.select(pl.col("text").str.len_bytes().sum()).item()) + batch.height
            self.thinner.expect(self.src.size * batch.height / max(1, size))
        if prepared is not None:
            m, future, skip = prepared
            if skip:
                batch = frame_of(batch)
                self._feed(batch.head(skip), None)
                batch, raw = batch.slice(skip), (*raw, skip)
            if self.lead is not None and not skip:
                self._hold(batch, raw, prepared)
                return
            if m == self.maps.get(self.in_force) and self.lead is None:
                done = future.result()
                if done is not None:
                    self._take_clean(done)
                    return
            else:
                future.cancel()
        self._feed(batch, raw)

    def _feed(self, batch: pl.DataFrame, raw) -> None:
        if self.lead is not None:
            self._hold(batch, raw)
            return
        if raw is not None and batch.height > 1 and self._map_of_first_line(batch):
            # a batch that starts with a header (the file's first): the header alone, then its rows
            # may take the clean path
            batch = frame_of(batch)
            self._general(batch.head(1))
            batch, raw = batch.slice(1), (*raw, 1)
        if isinstance(batch, ByteLines) and batch.blank and self._blank(batch):
            return
        if raw is not None:
            done = csvcells.read_clean(batch, raw, self.maps.get(self.in_force), self.zone)
            if done is not None:
                self._take_clean(done)
                return
        if isinstance(batch, ByteLines) and batch.unit() is not None and self._repeated(batch):
            return
        self._general(frame_of(batch))

    # copies of a repeated line the general path reads before the rest are counted like them
    REPEAT_HEAD = 256

    def _repeated(self, batch: ByteLines) -> bool:
        """A batch of one line repeated (a progress bar's or a junk line's megabytes): its first copies
        read by the general path; when they were all counted as skipped for one reason (the unusable
        lines are known to be no other parser's), so are the others, without cutting them into lines.
        False when the general path must read the batch."""
        if self.rest_counted is None:
            # the first unusable lines decide whether another parser reads them
            k = min(batch.height, 200)
            self._general(batch.head(k))
            if k < batch.height:
                rest = batch.after(k)
                if self.rest_counted is None or not self._repeated(rest):
                    self._general(rest.frame())
            return True
        if self.rest_counted is not True:
            return False
        k = min(batch.height, self.REPEAT_HEAD)
        before = (self.rows, len(self.errors), len(self.rest), self.in_force, dict(self.skipped.counts))
        self._general(batch.head(k))
        grew = {r: n - before[4].get(r, 0) for r, n in self.skipped.counts.items() if n != before[4].get(r, 0)}
        rest = batch.after(k)
        if (self.rows, len(self.errors), len(self.rest), self.in_force) == before[:4] and len(grew) == 1 \
                and list(grew.values()) == [k] and self.rest_counted:
            if rest.height:
                self.rest_rows += rest.height
                self.skipped.add_count(next(iter(grew)), rest.height,
                                       list(range(rest.first, rest.first + min(5, rest.height))))
        elif rest.height:
            self._general(rest.frame())
        return True

    def _blank(self, batch: ByteLines) -> bool:
        """A batch of blank lines under columns with a memory column, counted as the general path counts
        them (each a blank line, once the unusable lines are known to be no other parser's) without
        cutting it into lines: a gigabyte of them costs what reading its bytes costs. False when the
        general path must read it."""
        m = self.maps.get(self.in_force)
        if m is None or not m.roles or self.rest_counted is False:
            return False
        if self.rest_counted is None:
            # the first unusable lines decide whether another parser reads them
            k = min(batch.height, 200)
            self._general(batch.head(k))
            if k < batch.height:
                rest = ByteLines(batch.buf[k:batch.end], batch.end - k, batch.first + k, batch.height - k)
                if self.rest_counted:
                    self._blank(rest)
                else:
                    self._general(rest.frame())
            self.clean = True
            return True
        self.headerless = self.headerless or self.in_force == 0
        self.rest_rows += batch.height
        self.skipped.add_count("blank line", batch.height, list(range(batch.first, batch.first + min(5, batch.height))))
        self.clean = True
        return True

    def _hold(self, batch: pl.DataFrame, raw, prepared=None) -> None:
        """Lines before the first start line wait until the columns of their rows are known: inferred from
        their first LEAD_LINES (or all of them, once a start line ends them or the file ends)."""
        before = sum(b.height for b, _ in self.lead)
        batch = frame_of(batch)
        self.lead.append((batch, raw))
        if before + batch.height >= LEAD_LINES or self._start_rows(batch).height:
            self._decide_lead(prepared)

    def _decide_lead(self, prepared=None) -> None:
        held, self.lead = self.lead, None
        if not held:
            return
        df, raw = held[0] if len(held) == 1 else (pl.concat([b for b, _ in held]), None)
        found = self._lead_map(df)
        if found is not None:
            self.maps[0], notes = found
            self.lead_notes.extend(notes)
        if prepared is not None and len(held) == 1:
            m, future, _ = prepared
            done = future.result() if m == self.maps.get(0) else None
            if done is not None:   # (the clean path takes no batch that holds a start line)
                self._take_clean(done)
                return
        self._feed(df, raw)

    def _lead_map(self, df: pl.DataFrame) -> tuple[ColumnMap | None, list[str]] | None:
        """The columns of the rows before the first start line, inferred from their first rows' shapes
        and values drawn from up to LEAD_SCAN_LINES of them (map, notes); None when no row comes before it."""
        head = df.head(LEAD_SCAN_LINES)
        starts = self._start_rows(head)
        # the lines before the first start line as they come (another parser's leftovers may not be sorted)
        lead = head if not starts.height else head.head(int(head["line"].is_in(starts["line"].implode()).arg_true()[0]))
        if not lead.height:
            return None
        rows = lead.filter(pl.col("text").str.contains(", ", literal=True))
        spread = rows.gather_every(max(1, rows.height // LEAD_SPREAD))
        return infer_map(rows.head(LEAD_CANDIDATES)["text"].to_list(), spread["text"].to_list())

    # -- start lines ---------------------------------------------------------------------------------

    def _start_rows(self, df: pl.DataFrame) -> pl.DataFrame:
        """The start lines (headers, commands) among these lines: line, start (map id), text; each new
        distinct text is registered once."""
        header_like = pl.col("text").str.contains(C.HEADER_LINE_RE) | pl.col("text").str.contains("--query-", literal=True)
        cand = rows_where(df, header_like).select("line", pl.col("text").str.strip_chars().alias("t"))
        if not cand.height:
            return pl.DataFrame(schema={"line": pl.Int64, "start": pl.Int32})
        if cand.height <= SMALL_START_ROWS:
            # a file's one header, a few commands: read in Python, two queries fewer than the grouping
            rows = list(zip(cand["t"].to_list(), cand["line"].to_list()))
            for t, line in rows:
                if t not in self.start_ids:
                    self._register(t, line)
            known = self.start_ids
            return pl.DataFrame({"line": [line for t, line in rows if known[t]],
                                 "start": [known[t] for t, _ in rows if known[t]]},
                                schema={"line": cand.schema["line"], "start": pl.Int32})
        for t, line in cand.group_by("t", maintain_order=True).agg(pl.col("line").first()).iter_rows():
            if t not in self.start_ids:
                self._register(t, line)
        known = {t: i for t, i in self.start_ids.items() if i}
        return rows_where(cand, pl.col("t").is_in(list(known))).select(
            "line", pl.col("t").replace_strict(known, return_dtype=pl.Int32).alias("start"))

    def _register(self, t: str, line: int) -> None:
        kind = C.header_kind(t)
        if kind == "gpu":
            m = map_from_names(C.header_names(t), f"header at line {line}")
        elif kind == "apps":
            m = None
        elif re.match(C.PROMPT_RE, t) and C.query_list(t, "gpu"):
            m = map_from_names([(n, None) for n in C.query_list(t, "gpu")], f"the command at line {line}")
        elif re.match(C.PROMPT_RE, t) and C.query_list(t, "apps"):
            m = None
        else:
            self.start_ids[t] = 0   # header-like, but no start line
            return
        i = self.start_ids[t] = len(self.maps) + 1
        self.maps[i] = m
        self.whys[i] = "repeated header" if kind else "shell prompt"

    def _map_of_first_line(self, batch: pl.DataFrame) -> ColumnMap | bool:
        """The column map that the batch's first line starts (a GPU header or command), else False."""
        found = self._start_rows(batch.head(1))
        return (self.maps.get(int(found["start"][0])) if found.height else None) or False

    # -- the general path -----------------------------------------------------------------------------

    def _general(self, batch: pl.DataFrame) -> None:
        starts = self._start_rows(batch)
        if starts.height:
            df = batch.join(starts, on="line", how="left", maintain_order="left").with_columns(
                pl.col("start").forward_fill().fill_null(self.in_force).alias("map"))
            body = rows_where(df, pl.col("start").is_null())
            self._count_starts(starts)
            self.in_force = int(starts["start"][-1])
        else:
            df = body = batch.with_columns(pl.lit(None, dtype=pl.Int32).alias("start"),
                                           pl.lit(self.in_force, dtype=pl.Int32).alias("map"))
        parts, rest = [], []
        map_ids = body["map"].unique(maintain_order=True).to_list()
        groups = partitions(body, "map") if len(map_ids) > 1 else \
            {(map_ids[0],): body} if map_ids else {}
        for (mid, *_), part in groups.items():
            m = self.maps.get(mid)
            self.headerless = self.headerless or (mid == 0 and m is not None)
            if m is None:
                reason = "compute-apps section" if mid else "unrecognized line"
                rest.append(part.select("line", "text").with_columns(pl.lit(reason).alias("reason")))
                continue
            good, ids, bad = csvcells.read_rows(part, m, self.zone, plain=True)
            parts.append(good)
            self._take_ids(ids)
            rest.append(bad)
        # a compute-apps header and the rows under it are another section: the rest, for its parser
        foreign = [i for i, m in self.maps.items() if m is None and i]
        if starts.height and foreign:
            rest.append(df.filter(pl.col("start").is_in(foreign)).select(
                "line", "text", pl.lit("compute-apps section").alias("reason")))
        rows = pl.concat(parts) if parts else pl.DataFrame(schema=csvcells.ROW_SCHEMA)
        if len(parts) > 1:
            rows = rows.sort("line")
        rest = pl.concat(rest).sort("line") if rest else pl.DataFrame(schema=csvcells.BAD_SCHEMA)
        rest, errors = C.classify_rest(rest)
        if errors.height:
            self.skipped.add_lines("driver error", errors["line"])
            # an error line happened after the reading just above it (maybe in the batch before)
            before = rows.select("line", "time")
            if self.last_row is not None:
                before = pl.concat([self.last_row, before])
            self.errors.append(_own(errors).sort("line").join_asof(
                before.rename({"time": "prev_time"}).sort("line"), on="line", strategy="backward"))
        if rest.height:
            self._keep_rest(rest)
        if rows.height:
            self._take_rows(rows)

    def _count_starts(self, starts: pl.DataFrame) -> None:
        """Repeated headers and command lines are counted; the first GPU header is the file's own. A
        header with other columns than the header before is news (another query appended), not a repeat."""
        foreign = {i for i, m in self.maps.items() if m is None}
        for line, start in starts.iter_rows():
            why = self.whys[start]
            if why == "repeated header":
                if self.prev_header is not None and start != self.prev_header:
                    why = HEADER_CHANGED
                self.prev_header = start
                if self.first_header is None and start not in foreign:
                    self.first_header = line
                    continue
            if start not in foreign:
                self.skipped.add(why, line)

    # -- readings -------------------------------------------------------------------------------------

    def _take_ids(self, ids: pl.DataFrame) -> None:
        if ids.height:
            self.id_parts.append(ids)
            if len(self.id_parts) > 64:
                self.id_parts = [csvcells.merge_ids(pl.concat(self.id_parts))]

    def _gid(self, keys: list) -> np.ndarray:
        return np.array([self.gpu_ids.setdefault(g, len(self.gpu_ids)) for g in keys], dtype=np.int64)

    def _number(self, gid: np.ndarray) -> np.ndarray:
        """The sample number of each row (a new sample starts when a GPU repeats), across batches."""
        seq = np.maximum(np.maximum.accumulate(self.seq.rank(gid) + 1), self.seq_max)
        self.seq_max = int(seq[-1])
        return seq

    def _take_clean(self, done: tuple) -> None:
        self.clean = True
        self.headerless = self.headerless or self.in_force == 0
        if done[0] == "cells":
            _, rows, ids = done
            self._take_ids(ids)
            self._take_rows(rows)
            return
        _, rows, keys, ids = done
        self._take_ids(ids)
        gid = self._gid(keys)[rows["_key"].to_numpy()]
        self._count(rows.height, rows.height, rows.height, rows.height)
        self.last_row = rows.select("line", "time").tail(1)
        seq = pl.Series("seq", self._number(gid), dtype=pl.Int64)
        # thinned before the frame of samples is made: only the rows kept get their GPU's name
        keep, index = self.thinner.select(gid * 2, rows["bytes"])
        if keep is not None:
            rows, gid, seq, index = rows.filter(pl.Series(keep)), gid[keep], seq.filter(pl.Series(keep)), index[keep]
        s = rows.select(
            "time", seq, "line", pl.Series("gpu", keys, dtype=pl.String).gather(rows["_key"]).alias("gpu"),
            pl.lit("memory.used", dtype=pl.String).alias("series"), "bytes", "total_bytes")
        self.thinner.hold(s, gid * 2, index)

    def _count(self, rows: int, timed: int, out: int, valued: int, unnamed: int = 0) -> None:
        self.rows += rows
        self.timed_rows += timed
        self.out_rows += out
        self.valued += valued
        self.unnamed += unnamed

    def _take_rows(self, rows: pl.DataFrame) -> None:
        """Readings of the general path (ROW_SCHEMA, in file order)."""
        gid = self._gid(rows["gpu"].to_list()) if rows.height <= 64 else self._gids(rows["gpu"])
        seq = self._number(gid)
        is_out = rows.select(pl.col("series").is_not_null() & (pl.col("bytes").is_not_null() | pl.col("ph")))["series"]
        out = rows.with_columns(pl.Series("seq", seq, dtype=pl.Int64)).filter(is_out)
        free = out["series"] == "memory.free"
        self.free = self.free or bool(free.any())
        self._count(rows.height, rows.height - rows["time"].null_count(), out.height, out.height - out["bytes"].null_count(),
                    rows["series"].null_count())
        self.last_row = rows.select("line", "time").tail(1)
        if out.height:
            sid = gid[is_out.to_numpy()] * 2 + free.cast(pl.Int64).to_numpy()
            self.thinner.add(out.select(_SAMPLE_COLUMNS), sid)

    def _gids(self, gpu: pl.Series) -> np.ndarray:
        uniq = gpu.unique(maintain_order=True)
        ids = self._gid(uniq.to_list())
        lut = pl.DataFrame({"gpu": uniq, "_gid": ids}, schema={"gpu": pl.String, "_gid": pl.Int64})
        return gpu.to_frame().join(lut, on="gpu", how="left", nulls_equal=True, maintain_order="left")["_gid"].to_numpy()

    # -- the end --------------------------------------------------------------------------------------

    def _keep_rest(self, rest: pl.DataFrame) -> None:
        self.rest.append(_own(rest))
        self.rest_rows += rest.height
        if self.rest_counted is None and self.rest_rows >= 200:
            head = pl.concat(self.rest)["text"].head(200).to_list()
            self.rest_counted = not C.hands_on(head, NAME)
        if self.rest_counted:
            # date lines may still give the rows their times (_time_from_date_lines): kept
            kept = pl.concat(self.rest)
            dates = kept["reason"] == "date line"
            C.count_rest(self.skipped, kept.filter(~dates))
            self.rest = [kept.filter(dates)] if dates.any() else []

    def finish(self) -> Parsed:
        if self.lead is not None:
            self._decide_lead()
        p = Parsed()
        if self.declared and self.headerless:
            p.notes.append("no header: columns declared with --columns: " + ", ".join(self.declared))
        p.notes.extend(self.lead_notes)
        p.skipped = self.skipped
        samples = self.thinner.result()
        samples = samples if samples is not None else pl.DataFrame(schema={c: csvcells.ROW_SCHEMA.get(c, pl.Int64)
                                                                        for c in _SAMPLE_COLUMNS})
        ids = csvcells.merge_ids(pl.concat(self.id_parts)) if self.id_parts else pl.DataFrame(schema=csvcells.ID_SCHEMA)
        rest = pl.concat(self.rest).sort("line") if self.rest else pl.DataFrame(schema=csvcells.BAD_SCHEMA)
        errors = pl.concat(self.errors) if self.errors else None
        if self.rows:
            no_id = ids["index"].null_count() == ids.height and ids["uuid"].null_count() == ids.height \
                and ids["bus"].null_count() == ids.height
            if no_id and ids["name"].drop_nulls().n_unique() > 1:
                p.notes.append("no index, uuid or pci.bus_id column: GPUs are told apart by their names")
            elif no_id:
                samples = samples.with_columns(pl.lit(None, dtype=pl.String).alias("gpu"))
                ids = ids.with_columns(pl.lit(None, dtype=pl.String).alias("gpu"))
                p.notes.append("no index, uuid or pci.bus_id column: all rows are taken as one GPU")
        timed = self.timed_rows > 0
        if not timed and self.rows:
            samples, rest, used_dates = _time_from_date_lines(samples, rest, self.zone)
            if used_dates:
                timed = True
                p.notes.append(f"no timestamp column: times taken from the {used_dates} `date` lines between the rows")
                if errors is not None:
                    errors = errors.drop("prev_time").join_asof(
                        samples.select("line", pl.col("time").alias("prev_time")).sort("line"), on="line",
                        strategy="backward")
        p.clock = "wall-assumed" if timed else "none"
        if not timed and self.rows:
            p.notes.append("no timestamp column: rows are ordered by sample number (a new sample starts when a GPU repeats)")
        samples = samples.select(_SAMPLE_COLUMNS)
        p.samples = samples_frame(free.with_fall(samples, "memory.free") if self.free else samples)
        if self.out_rows and not self.valued:
            p.notes.append("memory is a placeholder such as [N/A] on every row (a unified-memory GPU such as GB10 "
                           "reports none): no memory readings")
        if self.free:
            p.notes.append(f"no memory.used column: memory.free is given as series memory.free, and how far each "
                           f"reading is below its GPU's highest as series {free.FALL}, judged as memory in use growing")
        told = [n for n in p.notes if "cannot tell" in n]
        if self.rows and not self.valued and told:
            p.meta["unread"] = told[0]   # (ingest says it as the input's one-line problem)
        if self.rows and self.unnamed == self.rows and not told:
            p.notes.append("no memory column in this query: GPU rows were read but give no memory samples")
        if errors is not None:
            p.events = C.driver_error_events(errors, pl.col("prev_time") if timed else None)
        _meta(p, ids)
        thinned = self.thinner.note(p.samples.height)
        p = C.finish(p, rest, self.path, self.opts, NAME, self.nested)
        if thinned is not None:
            p.notes.append(thinned[0])
            p.meta["thinned"] = thinned[1]
        return p


def _own(df: pl.DataFrame) -> pl.DataFrame:
    """df with its text in buffers of its own: a few lines kept of each batch would otherwise keep
    every batch's string buffers in memory (concat_str with "" writes new strings)."""
    if not df.height:
        return df
    return df.with_columns(pl.concat_str(pl.col("text"), pl.lit("")).alias("text"))


def _time_from_date_lines(rows: pl.DataFrame, rest: pl.DataFrame, zone: str) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """A shell loop that runs `date` before each query gives an untimed CSV its clock."""
    dates = rest.filter(pl.col("reason") == "date line").with_columns(
        pl.col("text").str.strip_chars().alias("d")
    ).with_columns(
        pl.col("d").str.extract(r" ([A-Z]{2,5}) [0-9]{4}$", 1).alias("zone"),
        C.asctime_expr(pl.col("d").str.replace(r" [A-Z]{2,5}( [0-9]{4})$", "$1")).alias("naive"),
    ).filter(pl.col("naive").is_not_null())
    if dates.height == 0:
        return rows, rest, 0
    utc_named = pl.col("zone").is_in(["UTC", "GMT", "Z"])
    dates = dates.with_columns(
        pl.when(utc_named).then(pl.col("naive").dt.replace_time_zone("UTC"))
        .otherwise(clock.localize(pl.col("naive"), zone)).alias("dtime")
    )
    rows = rows.drop("time").join_asof(dates.select("line", pl.col("dtime").alias("time")).sort("line"),
                                       on="line", strategy="backward")
    rest = rest.filter(~pl.col("line").is_in(dates["line"].implode()))
    return rows, rest, dates.height


def _meta(p: Parsed, ids: pl.DataFrame) -> None:
    if ids.height == 0:
        return
    gpus = ids.group_by("gpu", maintain_order=True).agg(
        pl.col("index").drop_nulls().first(), pl.col("name").drop_nulls().first(),
        pl.col("uuid").drop_nulls().first(), pl.col("bus").drop_nulls().first(),
        pl.col("total_bytes").drop_nulls().max(),
    )
    p.meta["gpus"] = [
        {"gpu": g, "index": i, "name": n, "uuid": u, "bus_id": b, "total_bytes": tb}
        for g, i, n, u, b, tb in gpus.iter_rows()
        if any(x is not None for x in (g, n, tb))
    ]
    gpu_map = {}
    for g in p.meta["gpus"]:
        if g["index"] is not None:
            for k in ("uuid", "bus_id"):
                if g[k]:
                    gpu_map[g[k]] = g["index"]
    if gpu_map:
        p.meta["gpu_map"] = gpu_map


C.register_section(NAME, parse_lines)


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    reader=Reader,
    files="`nvidia-smi --query-gpu … --format=csv` (header or not, units or not, timestamp or not, repeated "
          "headers, driver errors)",
    yields="`memory.used` per GPU, capacity",
)
