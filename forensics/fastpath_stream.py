"""Big inputs parsed in one streamed pass over their lines, in bounded memory.

ingest.parse_one hands a source of STREAM_MIN_BYTES or more here. Its lines come in batches
(Source.iter_frames); each batch goes to the claiming parser's consumer and to the free-text scanners'
prefilters, and only what they keep stays in memory:

- nvidia-smi CSV: each batch is parsed by nvsmi_csv.parse_lines with the header in force carried over;
  when a file holds more than MAX_READINGS readings, each GPU's series is thinned to the lowest and the
  highest reading of every `window` consecutive readings (real lines, so every finding still quotes
  source:line; the window doubles as the file grows, and the result is the same as thinning the whole
  series at once). Every line is still read and counted. A batch of nothing but clean rows (n cells
  each, every `,` followed by a space, `N MiB` memory, stamps and ids that check) has its cells cut by
  polars' CSV reader (only the cells it reads: the commas are counted in the bytes) and read by
  nvsmi_csv.read_plain (no regex or string copy per row, each distinct stamp minute / id / total read
  once); in the usual log, whose lines repeat the same GPUs' ids (and memory.total) right after the
  timestamp, those cells are checked in the lines (nvsmi_csv.id_prefix) and not cut at all (the month
  of bench/perf.py: 18% less CPU). Any other batch takes the general path, with the same result.
  Both count, number and thin their readings in numpy (_NvsmiCsv._number). The cells of the next two
  32 MB batches are read and checked in threads while one is taken (with the header then in force: a
  batch whose header has changed by its turn is read again); the scanners read each batch in a thread
  of their own.
- kernel logs: only the lines around OOM-killer reports, NVRM messages and boots (with context), the
  first and last lines and the lines where the month changes are decoded in full; the rest is counted.
  Most batches are not even cut into lines: fastpath_kernel.py finds in their bytes the few blocks
  that can hold such a line (or one for the scanners) and decodes only what is kept.
Other formats are not streamed here (a step log has its own reader: parsers/steplog/reader.py).
"""
from __future__ import annotations

import numpy as np
import polars as pl

from forensics import parsers
from forensics.model import SAMPLES_SCHEMA, Parsed, conform
from forensics.frames import rows_where
from forensics.parsers.steplog import markers as step_markers

# Files at least this big (decompressed size estimated at 5x for compressed ones) are streamed.
STREAM_MIN_BYTES = 16 << 20
# Readings of one nvidia-smi CSV kept at full resolution; beyond, series are thinned (min/max per window).
# A day of 1 Hz readings of 8 GPUs (0.7 M) is kept whole; a month of them keeps one reading in 32 (the
# lowest and the highest of every 64: a point every ~30 s per GPU, finer than any chart or onset needs).
# What comes after reading (GPU ids, detection, the report's tables) costs time in proportion to it.
MAX_READINGS = 1_000_000


def is_big(src) -> bool:
    return src.encoding == "utf-8" and src.size * (5 if src.compression else 1) >= STREAM_MIN_BYTES


def _own(df: pl.DataFrame) -> pl.DataFrame:
    """df with its text in buffers of its own. A filter or a slice of a batch shares the batch's string
    buffers, so a few lines kept of each batch would keep every batch in memory (a month of step log:
    1 GB held); the kept lines are copied out instead (concat_str with "" writes new strings)."""
    cols = [c for c, t in df.schema.items() if t == pl.String]
    if not cols or not df.height:
        return df
    return df.with_columns(pl.concat_str(pl.col(c), pl.lit("")).alias(c) for c in cols)


# Literals that every line a scanner's SCAN_HINT matches contains: one pass of these (the regex engine
# runs literal alternations at memory speed) leaves the full hints a few lines. Keyed by the hint's
# hash: a scanner whose hint has changed since is prefiltered by its hint itself.
_LITERALS = {
    "b007ddc0f645": r"NVRM: ",
    "1f8bfe8133b7": r"invoked oom-killer:|Kill|oom-kill:constraint=|oom_reaper: reaped process|"
                    r"killed as a result of limit of",
    "09a89e59ff07": r"=========",
    # and a line whose first non-blank is `|` (_PIPE_ROWS; a `|` anywhere passed most lines of step
    # logs that print `step 7 | loss ...`, an anchored `^\s*\|` here slows the whole alternation 5x)
    "a0719ffb2774": r"PyTorch CUDA memory summary, device ID|CUDA OOMs:",
    "d092d4f40949": r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|Allocation on device ",
    "0a95f7384364": step_markers.SCAN_PREFILTER,
}


# Hints whose prefilter above also takes the lines that start with `|` after blanks (a summary row).
_PIPE_ROWS = {"a0719ffb2774"}


# A cheaper first pass for the prefilters above that the regex engine cannot run as a literal search
# (a case-insensitive alternation is none): the step-markers scanner declares its own
# (markers.SCAN_QUICK). Lines it passes then go through the prefilter.
_QUICK = {
    "0a95f7384364": step_markers.SCAN_QUICK,
}


def _prefilter(hint: str) -> str:
    return _LITERALS.get(_hint_key(hint), hint)


def _quick(hint: str) -> str:
    return _QUICK.get(_hint_key(hint)) or _prefilter(hint)


def _hint_key(hint: str) -> str:
    import hashlib

    return hashlib.sha1(hint.encode()).hexdigest()[:12]


class _Scanners:
    """The free-text scanners of ingest._scan_free_text, fed batch by batch: one pass of a quick literal
    filter and the prefilters for all of them together, then each scanner's own hint on the few lines
    that passed."""

    def __init__(self, skip: set[str]):
        self.mods = [m for m in parsers.SCANNERS if m.NAME not in skip]
        self.hits: dict[str, list[pl.DataFrame]] = {m.NAME: [] for m in self.mods}
        self.any_hint = "|".join(f"(?:{_prefilter(m.SCAN_HINT)})" for m in self.mods)
        self.quick = "|".join(f"(?:{_quick(m.SCAN_HINT)})" for m in self.mods)
        self.pipe_rows = any(_hint_key(m.SCAN_HINT) in _PIPE_ROWS for m in self.mods)

    def feed(self, batch: pl.DataFrame, raw: tuple | None = None) -> None:
        """`raw`: the batch's bytes as _batches gives them ((buf, end): its lines are exactly buf[:end]),
        when known: a `|` is then looked for in them first (memchr, ~1 ms per 32 MB against ~10 ms for
        the lines; a `|` byte is a `|` in the lines, whatever else the reader replaced)."""
        if not self.mods:
            return
        t = pl.col("text")
        if self.quick == self.any_hint:
            keep = batch.select(t.str.contains(self.any_hint))["text"]
        else:
            keep = batch.select(t.str.contains(self.quick))["text"]
            passed = keep.arg_true()
            if 4 * passed.len() > batch.height:
                # most lines hold the two letters (a kernel log's "gpuhost", English text): the quick
                # pass only adds to the prefilter's cost, here and in the batches that follow
                self.quick = self.any_hint
            if passed.len():   # the prefilter proper on the lines the quick pass let through
                hit = batch["text"].gather(passed).to_frame().select(t.str.contains(self.any_hint))["text"]
                keep = pl.Series("text", np.zeros(batch.height, dtype=bool))
                keep.scatter(passed.filter(hit), True)
        if self.pipe_rows and (raw is None or raw[0].find(b"|", 0, raw[1]) >= 0):
            # `^\s*\|` in two cheap steps: the lines with a `|`, then of those the ones it starts
            # (strip_chars strips what `\s` matches: Unicode White_Space)
            pipe = batch.select(t.str.contains("|", literal=True))["text"]
            if pipe.any():
                starts = batch.filter(pipe).select(t.str.strip_chars_start().str.starts_with("|"))["text"]
                rows = np.zeros(batch.height, dtype=bool)
                rows[pipe.arg_true().to_numpy()] = starts.to_numpy()
                keep = keep | pl.Series(rows)
        cand = rows_where(batch, keep)
        if not cand.height:
            return
        for m in self.mods:
            h = rows_where(cand, pl.col("text").str.contains(m.SCAN_HINT))
            if h.height:
                self.hits[m.NAME].append(_own(h))

    def finish(self, src, opts) -> list[Parsed]:
        out = []
        for m in self.mods:
            if self.hits[m.NAME]:
                p = m.scan(pl.concat(self.hits[m.NAME]), src, opts)
                if p is not None and p.records:
                    out.append(p)
        return out


def scan_lines(frame: pl.DataFrame, src, opts, skip: set[str]) -> list[Parsed]:
    """ingest._scan_free_text for a file read whole: its lines as one batch."""
    sc = _Scanners(skip)
    sc.feed(frame)
    return sc.finish(src, opts)


def scan_streamed(src, opts, skip: set[str]) -> list[Parsed]:
    """ingest._scan_free_text for a big file: one streamed pass."""
    sc = _Scanners(skip)
    for batch, _ in _batches(src):
        sc.feed(batch)
    return sc.finish(src, opts)


def _batches(src, batch_bytes: int | None = None):
    """(lines, raw bytes of the batch or None) of the whole source; counts its lines on the way."""
    from forensics.io import lines as fastpath

    stats = fastpath.ReadStats()
    # BATCH_BYTES read at call time (tests shrink it); a smaller size only for the default
    size = fastpath.BATCH_BYTES if batch_bytes is None else min(batch_bytes, fastpath.BATCH_BYTES)
    for batch in fastpath.cleaned_batches(src, size, stats=stats):
        yield batch, stats.raw
    src._n_lines = stats.lines


def parse_streamed(src, module, opts, covered: set[str]) -> tuple[Parsed, list[Parsed]] | None:
    """(the claiming parser's result, the scanners' results) from one streamed pass, or None when
    this source is not streamed (small, not UTF-8, or a format without a consumer)."""
    if not is_big(src):
        return None
    make = _CONSUMERS.get(module.NAME)
    consumer = make(src, opts, module) if make else None
    if consumer is None:
        return None
    sc = _Scanners(covered)
    reader = consumer.raw_reader(sc) if hasattr(consumer, "raw_reader") else None
    if reader is not None:
        # a kernel log: most of its bytes are never cut into lines (fastpath_kernel.py)
        for batch in reader.batches():
            if isinstance(batch, pl.DataFrame):
                consumer.feed(batch)
                sc.feed(batch)
            else:
                consumer.feed_raw(batch, sc)
        return consumer.finish(), sc.finish(src, opts)
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    # the scanners read a batch while the parser reads it too (polars lets go of the GIL: two cores);
    # one batch at a time, in file order. A consumer with `prepare` also gets the next batch's
    # stateless work started in a thread while it takes this one.
    prepare = getattr(consumer, "prepare", None)
    with ThreadPoolExecutor(1) as pool, ThreadPoolExecutor(PREPARED_AHEAD) as prep_pool:
        scanned = None
        waiting: deque = deque()

        def take(batch, raw, prepared) -> None:
            nonlocal scanned
            if scanned is not None:
                scanned.result()
            scanned = pool.submit(sc.feed, batch, raw)
            if prepared is None:
                consumer.feed(batch, raw)
            else:
                consumer.feed(batch, raw, prepared)

        for batch, raw in _prefetched_batches(src, PREPARED_BATCH_BYTES if prepare else None):
            waiting.append((batch, raw, prepare(prep_pool, batch, raw) if prepare else None))
            if len(waiting) > (PREPARED_AHEAD if prepare else 0):
                take(*waiting.popleft())
        while waiting:
            take(*waiting.popleft())
        if scanned is not None:
            scanned.result()
    return consumer.finish(), sc.finish(src, opts)


# For a consumer with `prepare`: batches whose stateless work runs ahead of the one being taken, and
# their size (two 32 MB batches ahead: 25% faster than one 64 MB one on 2 cores, in less memory).
PREPARED_AHEAD = 2
PREPARED_BATCH_BYTES = 32 << 20


def _prefetched_batches(src, batch_bytes: int | None = None):
    """_batches(src), the next batch read (cut into lines) by a thread of its own meanwhile."""
    from forensics.io import lines as fastpath

    return fastpath._prefetched(_batches(src, batch_bytes), depth=1)


# -- nvidia-smi CSV ----------------------------------------------------------------------------------

_CSV_COLUMNS = ["time", "seq", "line", "gpu", "series", "bytes", "total_bytes"]


def thin(df: pl.DataFrame, window: int) -> pl.DataFrame:
    """Per series (`_sid`) and window of `window` consecutive readings (by `_i`, the reading's index in
    its series): the lowest and the highest reading (the first of equals), and the first reading
    without a value; in file order. Thinning a thinned frame with a multiple of its window gives what
    thinning the original would. (numpy on the rows sorted by series: a group_by over hundreds of
    thousands of tiny windows is ten times slower.)"""
    if window <= 1 or df.height == 0:
        return df
    return df.filter(pl.Series(_thin_mask(df["_sid"].to_numpy(), df["_i"].to_numpy(), df["bytes"].is_null().to_numpy(),
                                          df["bytes"].fill_null(0).to_numpy(), window)))


def _by_series(sid):
    """The stable sort of rows by series (radix sort for small ids, 3x faster than a merge sort)."""
    top = sid.max()
    return np.argsort(sid.astype(np.int16) if top < 1 << 15 else sid.astype(np.int32) if top < 1 << 31 else sid,
                      kind="stable")


def _thin_mask(sid, index, none, value, window: int, order=None):
    """thin's rows to keep, as a mask over the rows (numpy arrays; `order`: _by_series(sid))."""
    # rows are in file order, where `_i` grows within each series: a stable sort by series suffices
    if order is None:
        order = _by_series(sid)
    key = sid[order] * (1 << 40) + index[order] // window
    none = none[order]
    value = value[order]
    new = np.empty(key.size, dtype=bool)
    new[0] = True
    new[1:] = key[1:] != key[:-1]
    starts = np.flatnonzero(new)
    grp = np.cumsum(new) - 1
    keep = np.zeros(key.size, dtype=bool)
    if not none.any():
        # every reading has a value (a clean log): the first lowest and highest of each window are the
        # smallest positions holding the window's min and max
        at = np.arange(key.size)
        for extreme in (np.minimum, np.maximum):
            hit = value == extreme.reduceat(value, starts)[grp]
            keep[np.minimum.reduceat(np.where(hit, at, key.size), starts)] = True
        mask = np.zeros(key.size, dtype=bool)
        mask[order[keep]] = True
        return mask
    big, small = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    lo_src, hi_src = np.where(none, big, value), np.where(none, small, value)
    lo = ~none & (lo_src == np.minimum.reduceat(lo_src, starts)[grp])
    hi = ~none & (hi_src == np.maximum.reduceat(hi_src, starts)[grp])
    for flag in (lo, hi, none):
        pos = np.flatnonzero(flag)
        if pos.size:
            g = grp[pos]
            first = np.empty(pos.size, dtype=bool)
            first[0] = True
            first[1:] = g[1:] != g[:-1]
            keep[pos[first]] = True
    mask = np.zeros(key.size, dtype=bool)
    mask[order[keep]] = True
    return mask


class _NvsmiCsv:
    """nvsmi_csv.parse_lines batch by batch. Each batch after the first is read with the file's first
    GPU header and the header (or command line) in force at its start put in front, so its rows get
    the same columns and its repeated headers the same counts as in one pass; what those carried lines
    add (a repeated count) is taken off again."""

    def __init__(self, src, opts, module):
        from forensics.parsers.nvsmi import common as C

        self.src, self.opts, self.module = src, opts, module
        self.C = C
        self.carry: pl.DataFrame | None = None      # first GPU header + last start line (line, text)
        self.map = None                               # the column map of the last start line
        self.last_time = None                         # time of the last reading so far
        self.first_header: pl.DataFrame | None = None
        self.parts: list[pl.DataFrame] = []
        self.kept = 0
        self.window = 1
        self.readings = 0
        self.gpu_ids: dict[str | None, int] = {}
        self.per_series: dict[int, int] = {}        # readings so far per series id
        self.per_gpu: dict[int, int] = {}           # rows so far per GPU id (for seq)
        self.seq_max = 0
        self.results: list[Parsed] = []
        self._guess = None                           # the map guessed from the first line (prepare)

    def _starts(self, batch: pl.DataFrame) -> pl.DataFrame:
        from forensics.parsers.nvsmi import csvlog as nvsmi_csv

        starts, maps, _ = nvsmi_csv._start_lines(batch)
        if not starts.height:
            return starts.select("line").with_columns(pl.lit(False).alias("gpu"))
        # as parse_lines picks the file's own header: a GPU header line (not a command line)
        gpu_ids = [i for i, m in maps.items() if m is not None]
        return starts.select("line", (pl.col("start").is_in(gpu_ids) & (pl.col("why") == "repeated header")).alias("gpu"))

    def prepare(self, pool, batch: pl.DataFrame, raw):
        """The stateless part of _fast for this batch, started in `pool` with the header in force now
        ((map, Future, lines of the batch left out in front), or None when the batch cannot take the
        fast path with it). feed() checks that the header is still the one in force when the batch's
        turn comes (a batch before it may change it). Before the first batch is taken, the header in
        force is guessed from its first line (the header, which feed() reads alone): without the guess
        the first batches, all of a day's log, would be read one after the other by the main thread."""
        m, skip = self.map, 0
        if m is None and not self.results and raw is not None:
            if self._guess is None:
                self._guess = self._header_map(batch.head(1))
                skip = 1 if batch.height > 1 else 0
            m = self._guess or None
        if m is None or raw is None or batch.height <= skip:
            return None
        work = batch.slice(skip) if skip else batch
        return m, pool.submit(self._prepared, work, (*raw, skip) if skip else raw, m), skip

    @staticmethod
    def _header_map(line: pl.DataFrame):
        """The column map of the last start line (header or command) in these lines, else False."""
        from forensics.parsers.nvsmi import csvlog as nvsmi_csv

        found, maps, _ = nvsmi_csv._start_lines(line)
        return (maps.get(int(found["start"][-1])) if found.height else None) or False

    def feed(self, batch: pl.DataFrame, raw=None, prepared=None) -> None:
        if self.window == 1 and not self.results and batch.height and self.src.compression is None:
            # an uncompressed file's size tells how many readings will come: thin with that window
            # from the start rather than thinning everything kept again each time it doubles
            lines = self.src.size * batch.height / max(1, int(batch.select(pl.col("text").str.len_bytes().sum()).item())
                                                        + batch.height)
            while lines * 2 / self.window > MAX_READINGS:
                self.window *= 2
        if prepared is not None:
            m, future, skip = prepared
            if skip:
                self._feed(batch.head(skip), None)   # the header, read alone: it sets the map
                batch, raw = batch.slice(skip), (*raw, skip)
            if m == self.map:
                self._feed(batch, raw, future.result())
                return
            future.cancel()
            if skip:
                self._feed(batch, raw)
                return
        if not self.results and self.map is None and raw is not None and batch.height > 1:
            # the first batch: its first line (the header) alone, so that its rows can take the fast
            # path (the result does not depend on where batches end)
            self._feed(batch.head(1), None)
            self._feed(batch.slice(1), (*raw, 1))
            return
        self._feed(batch, raw)

    def _feed(self, batch: pl.DataFrame, raw, prepared=None) -> None:
        p = self._fast(batch, raw, prepared)
        if p is None:
            p = self._slow(batch)
            if p.events.height and self.last_time is not None:
                # an error line takes the time of the reading above it, which may be in the batch before
                p.events = p.events.with_columns(
                    pl.when((pl.col("kind") == "driver_error") & pl.col("time").is_null())
                    .then(pl.lit(self.last_time, dtype=SAMPLES_SCHEMA["time"])).otherwise(pl.col("time")).alias("time"))
        timed = p.samples.filter(pl.col("time").is_not_null())
        if timed.height:
            self.last_time = timed.sort("line")["time"][-1]
        self._take_samples(p)
        p.samples, p.events = _own(p.samples), _own(p.events)   # an error line's text, a row's ids
        self.results.append(p)

    def _slow(self, batch: pl.DataFrame) -> Parsed:
        from forensics.parsers.nvsmi import csvlog as nvsmi_csv

        df = batch if self.carry is None else pl.concat([self.carry, batch])
        p = nvsmi_csv.parse_lines(df, self.src.path, self.opts)
        if self.carry is not None:
            _uncount(p.skipped, self.carry["line"].to_list())
        starts = self._starts(batch)
        if starts.height:
            if self.first_header is None:
                first_gpu = starts.filter(pl.col("gpu"))
                if first_gpu.height:
                    self.first_header = _own(batch.filter(pl.col("line") == first_gpu["line"][0]))
            last = batch.filter(pl.col("line") == starts["line"][-1])
            carry = [f for f in (self.first_header, last) if f is not None]
            self.carry = _own(pl.concat(carry).unique("line", maintain_order=True).sort("line"))
            self.map = self._header_map(last) or None
        return p

    def _fast(self, batch: pl.DataFrame, raw, prepared=None) -> Parsed | None:
        """A batch of nothing but well-formed rows under the header in force, its cells cut by polars'
        CSV reader from the batch's own bytes (3x faster than splitting the lines): the same result as
        parse_lines, which any other batch goes to. None when the batch is not such a batch.
        `prepared`: what _prepared gave for it (else it is called here)."""
        done = prepared if prepared is not None else self._prepared(batch, raw, self.map)
        if done is False:
            return None
        p, plain = done
        if plain is not None:
            self._take_plain(*plain)
        return p

    def _prepared(self, batch: pl.DataFrame, raw, m) -> tuple[Parsed, tuple | None] | bool:
        """_fast's work that depends on the batch and the header map only (it may run in a thread):
        (the batch's Parsed, (rows, keys) for _take_plain when read_plain read it), or False when the
        batch does not take the fast path."""
        from forensics.parsers.nvsmi import csvlog as nvsmi_csv

        if raw is None or m is None or not batch.height or not {"timestamp", "memory.used"} <= set(m.roles) \
                or not {"index", "uuid", "pci.bus_id"} & set(m.roles):
            return False
        buf, end, *skip = raw   # skip: lines at the start of buf that are not in the batch
        n = m.ncols
        if buf.find(b"\r", 0, end) >= 0 and buf.count(b"\r", 0, end) != buf.count(b"\r\n", 0, end):
            return False   # a CR inside a line: the CSV reader would end the row there
        start = 0
        for _ in range(sum(skip)):
            start = buf.index(b"\n", start) + 1
        if not _cells_cut_clean(buf, start, end, batch.height, n):
            return False
        memory = {m.roles[r] for r in nvsmi_csv.MEMORY if r in m.roles}
        want = nvsmi_csv.plain_cells(m)

        def cut(columns: list[int]) -> pl.DataFrame | None:
            try:
                # only the wanted cells: a cell left out is not copied (27% of the reader's CPU with the 9
                # columns of bench/perf.py, more with the usual longer queries). The line numbers as the
                # reader's row index: chunked as the cells are (a column added afterwards is one chunk,
                # and every select of the frame would copy the cells to align them)
                cells = pl.read_csv(buf, has_header=False, separator=",", quote_char=None, skip_lines=sum(skip),
                                    schema={f"field_{i}": pl.String for i in range(n)}, columns=columns,
                                    truncate_ragged_lines=False, row_index_name="line",
                                    row_index_offset=int(batch["line"][0]))
            except pl.exceptions.PolarsError:
                return None   # invalid UTF-8 (its replacement is parse_lines' business)
            if end < len(buf):
                cells = cells.slice(0, cells.height - 1)
            # no row is short (its last cell would be null); with the count of commas, each row has n cells
            if cells.height != batch.height or cells[f"field_{n - 1}"].null_count():
                return None
            return cells.with_columns(pl.col("line").cast(pl.Int64))

        # the usual log: the GPU's ids right after the timestamp, repeating with the number of GPUs,
        # checked in the lines and not cut
        prefix = nvsmi_csv.id_prefix(batch["text"], m)
        cells = cut([i for i in want if not (prefix and 1 <= i <= prefix.k)])
        if cells is None:
            return False
        zone = self.opts.tz_for(self.src.path)
        p = Parsed(clock="wall-assumed")
        plain = nvsmi_csv.read_plain(cells, m, zone, prefix)
        if plain is None and prefix is not None:
            cells = cut(want)   # read_cells reads every wanted cell
            if cells is None:
                return False
        if plain is not None:
            rows, keys, ids = plain
            plain = (rows, keys)
        else:
            # the id and name checks strip the space themselves, the memory cells must lose it (their
            # fast path reads "N MiB"); memory.free is read only without memory.used
            cells = cells.select(
                "line", batch["text"],
                *[(pl.col(f"field_{i}").str.strip_prefix(" ") if i in memory else pl.col(f"field_{i}"))
                  for i in want],
                pl.lit(None, dtype=pl.String).alias(f"field_{n}"))
            rows, ids, bad = nvsmi_csv.read_cells(cells, m, zone)
            if bad.height or rows["ph"].any() or rows["gpu"].null_count():
                return False
            p.samples = conform(rows.select("time", "line", "gpu", "series", "bytes", "total_bytes"), SAMPLES_SCHEMA)
        nvsmi_csv._meta(p, nvsmi_csv.merge_ids(ids))
        return p, plain

    def _take_plain(self, rows: pl.DataFrame, keys: list[str]) -> None:
        """_take_samples for read_plain's rows (all memory.used readings, with a time): only the rows
        kept become a frame."""
        gid = np.array([self.gpu_ids.setdefault(g, len(self.gpu_ids)) for g in keys], dtype=np.int64)[
            rows["_key"].to_numpy()]
        sid = gid * 2
        self.last_time = rows["time"][-1]
        seq, index, keep = self._number(gid, sid, np.zeros(gid.size, dtype=bool), rows["bytes"].to_numpy())
        if keep is not None:
            rows = rows.filter(pl.Series(keep))
            sid, seq, index = sid[keep], seq[keep], index[keep]
        s = rows.select(
            "time", pl.Series("seq", seq, dtype=pl.Int64), "line",
            pl.Series("gpu", keys, dtype=pl.String).gather(rows["_key"]).alias("gpu"),
            pl.lit("memory.used", dtype=pl.String).alias("series"), "bytes", "total_bytes",
            pl.Series("_sid", sid, dtype=pl.Int64), pl.Series("_i", index, dtype=pl.Int64))
        self._keep(s)

    def _number(self, gid, sid, none, value):
        """For a batch's own readings in file order (numpy: GPU id, series id, no value, value): `seq`
        (a new sample starts when a GPU repeats) and `_i` (the reading's index in its series), counted
        across batches as in one pass, and which readings thinning keeps (None: all)."""
        one_series = np.array_equal(sid, gid * 2)   # one series per GPU (the usual log)
        period = _period(gid) if one_series and not none.any() else None
        if period:
            return self._number_periodic(gid, value, period)
        order_g, rank_g, seen_g = _ranks(gid)
        if one_series:   # the same ranks
            order_s, rank_s, seen_s = order_g, rank_g, [(2 * k, c) for k, c in seen_g]
        else:
            order_s, rank_s, seen_s = _ranks(sid)
        n = rank_g + 1 + _carried(self.per_gpu, gid)
        seq = np.maximum(np.maximum.accumulate(n), self.seq_max)
        index = rank_s + _carried(self.per_series, sid)
        for counts, seen in ((self.per_gpu, seen_g), (self.per_series, seen_s)):
            for k, c in seen:
                counts[k] = counts.get(k, 0) + c
        self.seq_max = int(seq[-1])
        self.readings += gid.size
        keep = None if self.window <= 1 else _thin_mask(sid, index, none, value, self.window, order_s)
        return seq, index, keep

    def _number_periodic(self, gid, value, period: int):
        """_number for the usual log: each sample lists the same GPUs in the same order (row r is the
        (r // period)-th reading of GPU gid[r % period]), one series per GPU, every reading with a value.
        Ranks are then arithmetic and each series is a column of a (samples x period) matrix, thinned
        with a reshape: 10x faster than sorting the rows by series."""
        h, w = gid.size, self.window
        phases = gid[:period]
        rows = -(-h // period)
        carried_g = _carried(self.per_gpu, phases)
        carried_s = _carried(self.per_series, phases * 2)
        step = np.arange(rows, dtype=np.int64)[:, None]
        seq = np.maximum(np.maximum.accumulate((step + 1 + carried_g).ravel()[:h]), self.seq_max)
        index = (step + carried_s).ravel()[:h]
        for j, k in enumerate(phases.tolist()):
            c = (h - j + period - 1) // period
            self.per_gpu[k] = self.per_gpu.get(k, 0) + c
            self.per_series[2 * k] = self.per_series.get(2 * k, 0) + c
        self.seq_max = int(seq[-1])
        self.readings += h
        if w <= 1:
            return seq, index, None
        keep = np.zeros(h, dtype=bool)
        big, small = np.iinfo(np.int64).max, np.iinfo(np.int64).min
        for j in range(period):
            col = value[j::period]
            # windows of the series' index (carried + t): pad the front so they start at multiples of w
            pad = int(carried_s[j]) % w
            full = -(-(pad + col.size) // w) * w
            for fill, pick in ((big, np.argmin), (small, np.argmax)):
                m = np.full(full, fill, dtype=np.int64)
                m[pad:pad + col.size] = col
                first = pick(m.reshape(-1, w), axis=1) + np.arange(0, full, w) - pad   # first of equals
                keep[j + period * first] = True
        return seq, index, keep

    def _keep(self, s: pl.DataFrame) -> None:
        """Hold a batch's (thinned) readings; past MAX_READINGS the window doubles and all are thinned again."""
        self.parts.append(s)
        self.kept += s.height
        while self.kept > MAX_READINGS:
            self.window *= 2
            whole = thin(pl.concat(self.parts), self.window)
            self.parts, self.kept = [whole], whole.height

    def _take_samples(self, p: Parsed) -> None:
        s = p.samples
        if not s.height:
            return
        own = s["series"].is_in(["memory.used", "memory.free"])
        if not own.any():
            return
        s = s.filter(own).select(_CSV_COLUMNS)
        p.samples = p.samples.filter(~own)
        # small integer ids for the GPU and the series: windows over them are cheap
        for g in s["gpu"].unique().to_list():
            self.gpu_ids.setdefault(g, len(self.gpu_ids))
        gid = pl.DataFrame({"gpu": list(self.gpu_ids), "_gid": list(self.gpu_ids.values())},
                           schema={"gpu": pl.String, "_gid": pl.Int64})
        ids = s.select("gpu").join(gid, on="gpu", how="left", nulls_equal=True, maintain_order="left").select(
            "_gid", (pl.col("_gid") * 2 + (s["series"] == "memory.free").cast(pl.Int64)).alias("_sid"))
        gid, sid = ids["_gid"].to_numpy(), ids["_sid"].to_numpy()
        seq, index, keep = self._number(gid, sid, s["bytes"].is_null().to_numpy(), s["bytes"].fill_null(0).to_numpy())
        s = s.with_columns(pl.Series("seq", seq, dtype=pl.Int64), pl.Series("_sid", sid, dtype=pl.Int64),
                           pl.Series("_i", index, dtype=pl.Int64))
        self._keep(s if keep is None else s.filter(pl.Series(keep)))

    def finish(self) -> Parsed:
        out = Parsed()
        ps = self.results
        samples = thin(pl.concat(self.parts), self.window).drop("_i", "_sid") if self.parts else None
        rest = [p.samples for p in ps if p.samples.height]
        out.samples = pl.concat([conform(samples, SAMPLES_SCHEMA), *rest]) if rest else conform(samples, SAMPLES_SCHEMA)
        events = [p.events for p in ps if p.events.height]
        if events:
            out.events = pl.concat(events)
        for p in ps:
            out.skipped.merge(p.skipped)
            for n in p.notes:
                if n not in out.notes:
                    out.notes.append(n)
        clocks = [p.clock for p in ps if p.clock != "none"]
        out.clock = clocks[0] if clocks else "none"
        out.meta = _merge_meta([p.meta for p in ps])
        if self.window > 1:
            out.notes.append(
                f"{self.readings} readings: for analysis each GPU's series was thinned to the lowest and highest "
                f"reading of every {self.window} consecutive ones ({out.samples.height} kept, each with its own "
                "line); every line was read and checked")
            out.meta["thinned"] = {"readings": self.readings, "kept": int(samples.height), "window": self.window}
        return out


def _cells_cut_clean(buf: bytes, start: int, end: int, rows: int, n: int) -> bool:
    """Whether buf[start:end] (`rows` lines, none of them short: the caller checks that) holds exactly
    n - 1 commas per line, each followed by a space: then cutting its lines at "," gives parse_lines'
    cells (cut at ", ") with a space in front. Counted in the bytes, in pieces that stay in the CPU's
    cache (~12 ms per 32 MB, against ~18 ms for whole-buffer masks): a CSV reader told to leave cells
    out no longer refuses a row with an extra cell (nor can it be given a column after the last). It
    still refuses invalid UTF-8 anywhere in its input."""
    a = np.frombuffer(buf, np.uint8, count=end - start, offset=start)
    # ", " as a little-endian 16-bit word, at even and at odd offsets: every pair of bytes once
    word = ord(",") | ord(" ") << 8
    even = np.frombuffer(buf, "<u2", count=(end - start) // 2, offset=start)
    odd = np.frombuffer(buf, "<u2", count=(end - start - 1) // 2, offset=start + 1)
    step = 1 << 18
    commas = pairs = 0
    for i in range(0, a.size, step):
        commas += int(np.count_nonzero(a[i:i + step] == ord(",")))
        w = i // 2
        pairs += int(np.count_nonzero(even[w:w + step // 2] == word)) + int(np.count_nonzero(odd[w:w + step // 2] == word))
    return commas == rows * (n - 1) and pairs == commas


def _ranks(keys):
    """(the stable order of the rows by key, each row's rank among the rows of its key in file order,
    [(key, rows)] of the keys present) of a numpy array of small non-negative ids."""
    h = keys.size
    order = _by_series(keys)
    ordered = keys[order]
    new = np.empty(h, dtype=bool)
    new[0] = True
    new[1:] = ordered[1:] != ordered[:-1]
    starts = np.flatnonzero(new)
    sizes = np.diff(np.append(starts, h))
    rank = np.empty(h, dtype=np.int64)
    rank[order] = np.arange(h) - np.repeat(starts, sizes)
    return order, rank, list(zip(ordered[starts].tolist(), sizes.tolist()))


def _period(gid) -> int | None:
    """p when the ids repeat with period p (gid[r] == gid[r % p]) and the first p are distinct: each
    sample lists the same GPUs in the same order. None otherwise (or when the batch is not longer than
    one period)."""
    head = gid[:256]
    again = np.flatnonzero(head[1:] == head[0])
    if not again.size:
        return None
    p = int(again[0]) + 1
    if gid.size <= p or np.unique(gid[:p]).size != p or not np.array_equal(gid[p:], gid[:-p]):
        return None
    return p


def _carried(counts: dict[int, int], keys):
    """counts[key] for each of the keys (0 for a key not in counts)."""
    lut = np.zeros(int(keys.max()) + 1, dtype=np.int64)
    for k, v in counts.items():
        if k < lut.size:
            lut[k] = v
    return lut[keys]


def _uncount(skipped, lines: list[int]) -> None:
    """Take the carried lines (read again in front of a batch) off the skipped counts."""
    for line in lines:
        for reason, ex in list(skipped.examples.items()):
            if line in ex:
                ex.remove(line)
                skipped.counts[reason] -= 1
                if skipped.counts[reason] <= 0:
                    del skipped.counts[reason]
                    del skipped.examples[reason]


def _merge_meta(metas: list[dict]) -> dict:
    out: dict = {}
    for m in metas:
        for k, v in m.items():
            if k not in out:
                out[k] = v
            elif k == "gpus" and isinstance(v, list):
                have = {g.get("gpu"): g for g in out[k]}
                for g in v:
                    old = have.get(g.get("gpu"))
                    if old is None:
                        out[k].append(g)
                        have[g.get("gpu")] = g
                    else:
                        for f, x in g.items():
                            if old.get(f) is None:
                                old[f] = x
                        if g.get("total_bytes") is not None and (old.get("total_bytes") or 0) < g["total_bytes"]:
                            old["total_bytes"] = g["total_bytes"]
            elif k == "gpu_map" and isinstance(v, dict):
                out[k] = {**v, **out[k]}
    return out


def _csv_consumer(src, opts, module):
    """Streamed only when the file's columns are named by a header with a timestamp (a headerless or
    untimed CSV is read in one piece, as before)."""
    from forensics.parsers.nvsmi import common as C

    head = src.head()
    for t in head:
        if C.header_kind(t.strip()) == "gpu":
            names = [n for n, _ in C.header_names(t)]
            return _NvsmiCsv(src, opts, module) if "timestamp" in names else None
    return None


# -- kernel logs -------------------------------------------------------------------------------------

# A line worth decoding, with the lines around it: the OOM killer's report, the driver, boots. (The
# task table between a report's first and last line is kept as part of the report.)
_KERNEL_HINT = (r"oom|Killed process|Kill process|killed as a result of limit|Memory cgroup|memory: usage|"
                r"NVRM|Tasks state|Linux version|fallen off the bus")
_REPORT_OPEN = "invoked oom-killer:"
_REPORT_CLOSE = ("Killed process", "oom_reaper: reaped")
_CONTEXT = 8             # lines kept before and after each hint line
_MAX_REPORT = 50_000     # an OOM report (with its task table) is never longer than this
_EDGE = 200              # first and last lines kept (the file's first/last time, the year anchor)
_MONTH_MARKS = 1000      # at most this many month-change lines per batch


class _Kernel:
    def __init__(self, src, opts, module):
        from forensics.parsers.kernel import syslog as kernel

        self.src, self.opts, self.kernel = src, opts, kernel
        self.kept: list[pl.DataFrame] = []
        self.tail: pl.DataFrame | None = None       # the last lines seen (context before the next batch)
        self.after_until = 0                          # keep lines up to this one (context after a hint)
        self.report_open_at: int | None = None        # line of an `invoked oom-killer` whose report goes on
        self.prev_month: str | None = None
        self.lines = 0

    def _ranges(self, hits: pl.DataFrame) -> list[tuple[int, int]]:
        """Line ranges to keep for these hint lines: each with its context, each OOM report whole."""
        out = []
        for line, text in hits.iter_rows():
            out.append((line - _CONTEXT, line + _CONTEXT))
            if _REPORT_OPEN in text:
                self.report_open_at = line
            elif self.report_open_at is not None and any(c in text for c in _REPORT_CLOSE):
                out.append((self.report_open_at, line))
                self.report_open_at = None
        return out

    def _plan(self, hits: pl.DataFrame, first: int, last: int) -> list[tuple[int, int]]:
        """The line ranges to keep of the batch first..last with these hint lines."""
        self.lines = last
        ranges = [(0, _EDGE), (0, self.after_until)]
        if hits.height:
            ranges += self._ranges(hits)
            self.after_until = max(self.after_until, int(hits["line"][-1]) + _CONTEXT)
            if self.tail is not None and int(hits["line"][0]) - _CONTEXT < first:
                self.kept.append(_own(self.tail.filter(pl.col("line") >= int(hits["line"][0]) - _CONTEXT)))
        if self.report_open_at is not None:
            if last - self.report_open_at > _MAX_REPORT:
                self.report_open_at = None
            else:
                ranges.append((self.report_open_at, last))
        return ranges

    def raw_reader(self, sc: _Scanners):
        """A fastpath_kernel.Reader for this source, or None where it does not apply."""
        from forensics.parsers.kernel import blocks as fastpath_kernel

        if self.src.wrapper is not None:
            return None
        pre = fastpath_kernel.block_prefilter(_KERNEL_HINT, [m.SCAN_HINT for m in sc.mods])
        return fastpath_kernel.Reader(self.src, *pre) if pre is not None else None

    def feed_raw(self, rb, sc: _Scanners) -> None:
        """feed() and the scanners' feed for a fastpath_kernel.RawBatch: the same lines kept, from the
        few blocks that can hold a hint line (every other line of the batch holds none)."""
        if not rb.height:
            return
        found = rb.analysis()
        if found is None:   # bytes the general reader must read (not UTF-8, NULs)
            frame = rb.general_frame()
            self.feed(frame)
            sc.feed(frame)
            return
        cand = rb.blocks(found.nonzero()[0])
        sc.feed(cand)
        tail = rb.tail(_EDGE)
        months = (rb.first_text()[:3], tail["text"][-1][:3])
        if months[0] != months[1] or (self.prev_month is not None and months[0] != self.prev_month):
            self.feed(rb.frame())   # a month changes in this batch: the general path finds where
            return
        hits = cand.filter(pl.col("text").str.contains(_KERNEL_HINT)).select("line", "text")
        ranges = self._plan(hits, rb.first, rb.last)
        self.prev_month = months[1]
        self.kept.append(rb.lines_in(ranges))
        self.tail = tail

    def feed(self, batch: pl.DataFrame, raw=None) -> None:
        if not batch.height:
            return
        first, last = int(batch["line"][0]), int(batch["line"][-1])
        hits = batch.filter(pl.col("text").str.contains(_KERNEL_HINT))
        ranges = self._plan(hits, first, last)
        lo = np.array([r[0] for r in ranges])
        hi = np.array([r[1] for r in ranges])
        line = batch["line"].to_numpy()
        keep = np.zeros(line.size, dtype=bool)
        for a, b in zip(lo, hi):
            if b >= first and a <= last:
                keep[max(a, first) - first: min(b, last) - first + 1] = True
        # the lines where a syslog month changes (the year inference walks them)
        months = (batch["text"][0][:3], batch["text"][-1][:3])
        if months[0] != months[1] or (self.prev_month is not None and months[0] != self.prev_month):
            month = pl.col("text").str.slice(0, 3)
            change = batch.select((month != month.shift(1).fill_null(self.prev_month or "")).alias("c"))["c"]
            if change.sum() <= _MONTH_MARKS:
                keep |= change.to_numpy()
        self.prev_month = months[1]
        self.kept.append(_own(batch.filter(pl.Series(keep))))
        self.tail = _own(batch.tail(_EDGE))

    def finish(self) -> Parsed:
        from forensics.parsers.kernel import prefix as kp

        kept = [k for k in self.kept if k.height]
        if self.tail is not None:
            kept.append(self.tail)
        lines = (pl.concat(kept).unique("line").sort("line") if kept
                 else pl.DataFrame(schema={"line": pl.Int64, "text": pl.String}))
        # a blank line where lines were left out, so no record is joined across the gap
        gaps = lines.filter(pl.col("line").diff().fill_null(pl.col("line")) > 1).select(
            (pl.col("line") - 1).alias("line"), pl.lit("").alias("text"))
        lines = pl.concat([lines, gaps]).sort("line")
        decoded = lines.height - gaps.height
        dec = kp.decode(lines, self.opts, self.src.path, self.src.mtime)
        p = self.kernel.parse_decoded(dec)
        p.notes.append(f"a big kernel log: of its {self.lines} lines, the {decoded} around OOM-killer reports, "
                       "NVRM and boot messages (and the first and last lines) were decoded in full; the others "
                       "hold none of those and were only counted")
        p.meta["decoded_lines"] = decoded
        return p


_CONSUMERS = {
    "nvidia-smi-csv": _csv_consumer,
    "kernel-log": _Kernel,
    "nvrm-xid": _Kernel,
}
