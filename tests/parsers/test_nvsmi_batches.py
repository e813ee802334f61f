"""nvidia-smi CSV: one reader for any file size. Its lines split into batches of 1, 7 or all lines (with
their bytes or without, as io.lines.ByteLines or as frames, the clean path prepared ahead in threads or
not) give the same Parsed: samples, events, skipped counts and examples, notes, meta, clock."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl
import pytest
from conftest import REALWORLD, SAMPLE_LOGS
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from forensics import parsers
from forensics.io import lines as io_lines
from forensics.io.sources import Source
from forensics.options import Options
from forensics.parsers.nvsmi import csvlog

OPTS = Options(tz="Europe/Berlin")
SETTINGS = settings(max_examples=int(os.environ.get("NVSMI_PROPERTY_EXAMPLES", 40)), deadline=None,
                    suppress_health_check=list(HealthCheck))


def _frame(lines: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"line": list(range(1, len(lines) + 1)), "text": lines},
                        schema={"line": pl.Int64, "text": pl.String})


def _fed(df: pl.DataFrame, size: int | None, raw: bool | str, ahead: bool, opts: Options = OPTS):
    """The reader fed `size` lines at a time (None: all), the bytes with each batch when `raw` (as
    io.lines.ByteLines where they allow when raw == "bytes", as ingest feeds a big file), the clean path
    prepared two batches ahead when `ahead`."""
    reader = csvlog.Reader(None, opts, path="prop.csv")
    size = size or max(1, df.height)
    batches = [df.slice(i, size) for i in range(0, df.height, size)]
    with ThreadPoolExecutor(2) as pool:
        waiting = []
        for b in batches:
            data = ("\n".join(b["text"].to_list()) + "\n").encode() if raw else None
            r = (data, len(data)) if raw else None
            if raw == "bytes":
                stats = io_lines.ReadStats()
                b = io_lines.parse_bytes(data, len(data), int(b["line"][0]), stats)
                r = stats.raw
            waiting.append((b, r, reader.prepare(pool, b, r) if ahead else None))
            if len(waiting) > 2:
                b0, r0, p0 = waiting.pop(0)
                reader.feed(b0, r0, p0) if p0 is not None else reader.feed(b0, r0)
        for b0, r0, p0 in waiting:
            reader.feed(b0, r0, p0) if p0 is not None else reader.feed(b0, r0)
    return reader.finish()


def _same(a, b) -> None:
    assert a.samples.equals(b.samples), (a.samples, b.samples)
    assert a.events.equals(b.events), (a.events, b.events)
    assert (a.skipped.counts, a.skipped.examples) == (b.skipped.counts, b.skipped.examples)
    assert (a.notes, a.meta, a.clock) == (b.notes, b.meta, b.clock)


def _check(lines: list[str], size, raw, ahead, opts: Options = OPTS) -> None:
    df = _frame(lines)
    _same(_fed(df, size, raw, ahead, opts), _fed(df, None, False, False, opts))


# -- logs as loops print them, with what real ones hold besides rows --------------------------------

HEADS = {
    "usual": "timestamp, index, name, pci.bus_id, memory.total [MiB], memory.used [MiB], utilization.gpu [%]",
    "uuid": "timestamp, index, uuid, name, memory.used [MiB], memory.total [MiB], utilization.gpu [%]",
    "wide": "timestamp, name, pci.bus_id, driver_version, pstate, temperature.gpu, utilization.gpu [%], "
            "utilization.memory [%], memory.total [MiB], memory.free [MiB], memory.used [MiB]",
    "nounits": "timestamp, index, memory.used [MiB], memory.total [MiB]",
    "headerless": None,
    "headerless_units": None,
    "command": "$ nvidia-smi --query-gpu=timestamp,index,memory.used,memory.total --format=csv,noheader,nounits",
}


def _row(head: str, i: int, g: int) -> str:
    ts = f"2026/10/01 {i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}.{(i * 37 + g) % 1000:03d}"
    used = 30000 + g * 100 + (i * 7 + g) % 50 + (i // 3 if g == 1 else 0)
    if head == "usual":
        return f"{ts}, {g}, NVIDIA H100 80GB HBM3, 00000000:{16 + g:02X}:00.0, 81559 MiB, {used} MiB, {(i + g) % 100} %"
    if head == "uuid":
        return f"{ts}, {g}, GPU-{g:08x}-aaaa-bbbb-cccc-dddddddddddd, NVIDIA H200, {used} MiB, 143771 MiB, 5 %"
    if head == "wide":
        return (f"{ts}, NVIDIA A100-SXM4-80GB, 00000000:{16 + g:02X}:00.0, 550.90.07, P0, {40 + g}, 97 %, 40 %, "
                f"81920 MiB, {81920 - used - 300} MiB, {used} MiB")
    if head == "headerless_units":
        return f"{ts}, {g}, {used} MiB, 81559 MiB"
    return f"{ts}, {g}, {used}, 143771"


FAULTS = ["junk", "driver error", "blank", "header again", "header changed", "placeholder", "prompt", "apps",
          "bad stamp", "extra cell", "short", "no comma space", "order", "gone", "date", "gib", "bad id", "bare mib",
          "comma stamp", "quoted comma"]


def _log(head_name: str, gpus: int, samples: int, faults: list[tuple[int, str]]) -> list[str]:
    head = HEADS[head_name]
    kind = "nounits" if head_name in ("command", "headerless") else head_name
    lines = [head] if head else []
    at = {}
    for i, f in faults:
        at.setdefault(i % samples, []).append(f)
    for i in range(samples):
        rows = [_row(kind, i, g) for g in range(gpus)]
        for f in at.get(i, []):
            if f == "junk":
                rows.insert(1, "garbage, line, here")
            elif f == "driver error":
                rows.append("Unable to determine the device handle for GPU 0000:12:00.0: Unknown Error")
            elif f == "blank":
                rows.append("")
            elif f == "header again" and head:
                rows.insert(0, head)
            elif f == "header changed":
                rows.insert(0, "timestamp, index, memory.used [MiB]")
                rows.append(head or "timestamp, index, memory.used [MiB], memory.total [MiB]")
            elif f == "placeholder":
                rows[0] = rows[0].replace("81559 MiB", "[N/A]").replace(", 143771", ", [N/A]")
            elif f == "prompt":
                rows.append("$ nvidia-smi --query-gpu=timestamp,index,memory.used --format=csv")
            elif f == "apps":
                rows += ["gpu_uuid, pid, process_name, used_gpu_memory [MiB]",
                         "GPU-00000000-aaaa-bbbb-cccc-dddddddddddd, 123, python, 4 MiB"]
                if head:
                    rows.append(head)
            elif f == "bad stamp":
                rows[-1] = rows[-1].replace(":", ";", 1)
            elif f == "extra cell":
                rows[-1] += ", 5"
            elif f == "short":
                rows[-1] = rows[-1].rsplit(", ", 1)[0]
            elif f == "no comma space":
                rows[-1] = ",".join(rows[-1].rsplit(", ", 1))
            elif f == "order":
                rows.reverse()
            elif f == "gone" and len(rows) > 1:
                del rows[1]
            elif f == "date":
                rows.insert(0, "Thu Oct  1 00:00:00 UTC 2026")
            elif f == "gib":
                rows[0] = rows[0].replace("81559 MiB", "79.6 GiB")
            elif f == "bad id":
                rows[-1] = rows[-1].replace(", 0, ", ", x, ", 1)
            elif f == "bare mib":   # a bare number in a MiB column, after or before cells with the unit
                rows[-1] = rows[-1].replace(" MiB,", ",", 1)
            elif f == "comma stamp":   # a comma inside the timestamp's 23 characters
                rows[-1] = rows[-1].replace(":", ",", 1)
            elif f == "quoted comma" and ", " in rows[-1]:   # a CSV writer's quotes around a cell holding ", "
                # (nvidia-smi quotes none; a row a fault before made one cell, a driver's error line, has none)
                cells = rows[-1].split(", ")
                cells[1] = f'"{cells[1]}, x"'
                rows[-1] = ", ".join(cells)
        lines += rows
    return lines


@SETTINGS
@given(st.sampled_from(list(HEADS)), st.integers(1, 4), st.integers(1, 40),
       st.lists(st.tuples(st.integers(0, 39), st.sampled_from(FAULTS)), max_size=4),
       st.sampled_from([1, 7, None]), st.sampled_from([False, True, "bytes"]), st.booleans())
@example("usual", 1, 1, [(0, "driver error"), (0, "quoted comma")], 1, False, False)   # (a fault on a faulted row)
def test_batches_give_the_same_parsed(head, gpus, samples, faults, size, raw, ahead):
    _check(_log(head, gpus, samples, faults), size, raw, ahead)


@pytest.mark.parametrize("head", ["usual", "headerless", "command"])
@pytest.mark.parametrize("size", [1, 7, 150, 450, None])
@pytest.mark.parametrize("repeated", ["x", "Unable to determine the device handle for GPU 0000:12:00.0: Unknown Error",
                                      "Thu Oct  1 00:00:00 UTC 2026", "row"])
def test_blank_and_repeated_lines_in_bytes_are_counted_as_lines_are(head, size, repeated):
    """Stretches of blank lines and of one line repeated (a gigabyte of them after a CSV: junk, a driver
    error, a date, a data row) fed as ByteLines: counted without being cut into lines where the first
    copies say how; the same Parsed as the lines read one by one, before and after the first 200
    unusable lines decide that no other parser reads them."""
    lines = _log(head, 3, 20, [(4, "junk")])
    again = lines[-1] if repeated == "row" else repeated
    for log in (lines[:30] + [""] * 700 + lines[30:] + [again] * 900 + [""] * 300,
                lines + [again] * 900):   # (the first unusable lines: no other parser's yet decided)
        for raw in ("bytes", True):
            _check(log, size, raw, True)


@pytest.mark.parametrize("size", [1, 7])
def test_declared_columns_in_batches(size):
    opts = Options(tz="UTC", columns=["timestamp", "index", "memory.used", "memory.total"])
    lines = _log("headerless", 3, 20, [(5, "junk"), (9, "driver error")])
    _check(lines, size, True, True, opts)
    _check(lines, size, "bytes", True, opts)


def _recorded() -> list[Path]:
    files = [f for f in sorted(REALWORLD.rglob("*")) if f.is_file()]
    files += [f for f in sorted(SAMPLE_LOGS.rglob("*")) if f.is_file() and f.suffix != ".md"]
    out = []
    for f in files:
        src = Source.open(f, str(f))
        try:
            module, _ = parsers.claim(src.head())
        except Exception:   # noqa: BLE001 - a file the reader refuses is no CSV log
            continue
        if module is csvlog.FORMAT:
            out.append(f)
    return out


@pytest.mark.parametrize("size", [1, 7])
def test_recorded_logs_in_batches(size):
    files = _recorded()
    assert files
    for f in files:
        df = Source.open(f, str(f)).frame()
        try:
            for raw in (False, True, "bytes"):
                _same(_fed(df, size, raw, bool(raw)), _fed(df, None, False, False))
        except AssertionError as e:
            raise AssertionError(f"{f}: {e}") from e


@pytest.mark.parametrize("head, raw", [("usual", True), ("usual", False), ("nounits", True), ("usual", "bytes")])
def test_thinned_as_it_reads_is_thinning_the_whole(monkeypatch, head, raw):
    """Past thinning.MAX_READINGS each series is thinned batch by batch, the window doubling as more
    come: what is kept is what thinning all readings at once with the final window keeps (placeholders
    and a GPU that drops out included), and every reading keeps its sample number."""
    from forensics import thinning

    lines = _log(head, 3, 2500, [(i, f) for i in range(0, 2500, 97) for f in ("placeholder", "gone")])
    df = _frame(lines)
    whole = _fed(df, None, False, False)
    monkeypatch.setattr(thinning, "MAX_READINGS", 2000)
    thinned = _fed(df, 700, raw, raw)
    window = thinned.meta["thinned"]["window"]
    assert window >= 4 and thinned.samples.height <= 2000
    assert thinned.samples.equals(thinning.thin(whole.samples, window))
    assert thinned.meta["thinned"]["readings"] == whole.samples.height


@pytest.mark.parametrize("head", ["usual", "uuid", "wide", "headerless"])
def test_faults_in_a_streamed_file_keep_their_line_numbers(tmp_path, monkeypatch, head):
    """A file streamed as ingest streams a big one (batches of bytes, most of them cut by the clean path
    from their bytes, prepared ahead in threads): a malformed row, a quoted cell holding a comma, a short
    row, a row with a cell too many, one without the space after a comma and a driver error in its
    middle are counted with their exact line numbers, which the report
    quotes as path:line; samples, counts and examples are those of one read of the whole file."""
    from forensics import ingest, thinning
    from forensics.parsers.nvsmi import csvcells

    lines = _log(head, 4, 600, [])
    bad = {"junk": 1201, "quoted comma": 1402, "short": 1603, "driver error": 1804, "extra cell": 2005,
           "no comma space": 2206}
    good = _row("nounits" if head == "headerless" else head, 9, 2)
    for fault, at in sorted(bad.items(), key=lambda kv: kv[1]):
        if fault == "junk":
            line = "garbage, line, here"
        elif fault == "quoted comma":   # (in the last cell, which the clean path does not cut)
            cells = good.split(", ")
            line = ", ".join([*cells[:-1], f'"{cells[-1]}, x"'])
        elif fault == "short":
            line = good.rsplit(", ", 1)[0]
        elif fault == "extra cell":
            line = good + ", 5"
        elif fault == "no comma space":
            line = ",".join(good.rsplit(", ", 1))
        else:
            line = "Unable to determine the device handle for GPU 0000:12:00.0: Unknown Error"
        lines.insert(at - 1, line)
    p = tmp_path / "gpu.csv"
    p.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(thinning, "MAX_READINGS", 1 << 62)
    monkeypatch.setattr(io_lines, "BATCH_BYTES", 4096)
    taken = []
    read_clean = csvcells.read_clean

    def counted(*a):
        done = read_clean(*a)
        taken.append(done is not None)
        return done
    monkeypatch.setattr(csvcells, "read_clean", counted)

    def parsed(streamed: bool):
        monkeypatch.setattr(ingest, "STREAM_MIN_BYTES", 0 if streamed else 1 << 62)
        info, results = ingest.parse_one(Source.open(p), OPTS)
        return info, results[0]

    info, whole = parsed(False)
    taken.clear()
    info_s, streamed = parsed(True)
    assert sum(taken) > len(taken) / 2, taken   # the clean path read most batches
    _same(streamed, whole)
    assert info_s.skip_examples == info.skip_examples
    assert info_s.skip_reasons == info.skip_reasons
    examples = sorted(x for ex in info_s.skip_examples.values() for x in ex)
    assert examples == sorted(bad.values()), info_s.skip_examples
    assert info_s.skip_reasons["driver error"] == 1
    assert streamed.samples.height == 4 * 600
    assert streamed.samples["line"].is_in(list(bad.values())).sum() == 0
