"""Property tests for the five nvidia-smi parsers: arbitrary lines, and lines close to (and into)
real ones with garbage in the number slots, never raise; and every byte count a parser emits is a
number written, as a whole token, on the very line the sample cites."""
from __future__ import annotations

import os
import re

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.options import Options
from forensics.parsers.free import FALL
from forensics.parsers.nvsmi import apps as nvsmi_apps
from forensics.parsers.nvsmi import common as nvsmi_common
from forensics.parsers.nvsmi import csvlog as nvsmi_csv
from forensics.parsers.nvsmi import dmon as nvsmi_dmon
from forensics.parsers.nvsmi import query as nvsmi_query
from forensics.parsers.nvsmi import table as nvsmi_table

MiB = 1 << 20
OPTS = Options(tz="Europe/Berlin")
# a few dozen examples per run keep the suite fast; NVSMI_PROPERTY_EXAMPLES=2000 for a deep search
SETTINGS = settings(max_examples=int(os.environ.get("NVSMI_PROPERTY_EXAMPLES", 30)), deadline=None,
                    suppress_health_check=list(HealthCheck))

# what goes where a number should be: numbers, and the garbage that must never become one
_value = st.one_of(
    st.integers(0, 200_000).map(str),
    st.sampled_from(["12a", "inf", "nan", "-5", "1e3", "", " ", "[N/A]", "N/A", "[Not Supported]", "lots", "0x10",
                     "1,234", "١٢", "99999999999999999999999", "3.", ".5", "7.25", "-", "+4"]),
)
_mib = st.one_of(_value.map(lambda v: f"{v} MiB"), _value, _value.map(lambda v: f"{v}MiB"))
_junk = st.one_of(
    st.text(max_size=60),
    st.sampled_from(["", "----", "$ nvidia-smi", "# comment", "No devices were found", "Fri Sep 27 20:41:52 2024",
                     "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error", "\t", ", , ,"]),
)
_ts = st.one_of(st.just("2024/06/01 11:27:05.177"), st.just("2024/13/45 99:99:99.000"), st.just("yesterday"),
                st.just("2024/03/31 02:30:00.000"))
_uuid = st.sampled_from(["GPU-8dd637a2-1795-5579-b092-2eda825636d2", "GPU-zz", "[N/A]"])
_bus = st.sampled_from(["00000000:3B:00.0", "0000:01:00.0", "zz:zz", ""])
_idx = st.one_of(st.integers(0, 9).map(str), st.sampled_from(["x", "-1", ""]))

CSV_HEADERS = ["timestamp, index, memory.used [MiB], memory.total [MiB]", "index, uuid, memory.used [MiB]",
               "pci.bus_id, memory.total [MiB], memory.free [MiB], memory.used [MiB]", "memory.used [MiB]",
               "timestamp, name, memory.used [MiB]", "timestamp, index, memory.free [MiB]"]
_csv_line = st.one_of(
    st.sampled_from(CSV_HEADERS),
    st.tuples(_ts, _idx, _mib, _mib).map(", ".join),
    st.tuples(_idx, _uuid, _mib).map(", ".join),
    st.tuples(_bus, _mib, _mib, _mib).map(", ".join),
    _mib,
    st.tuples(_ts, st.just("NVIDIA A100"), _mib).map(", ".join),
    st.lists(st.one_of(_mib, _ts, _idx, _uuid, _bus), min_size=2, max_size=6).map(", ".join),
    _junk,
)
_apps_line = st.one_of(
    st.sampled_from(["gpu_uuid, pid, process_name, used_gpu_memory [MiB]",
                     "timestamp, gpu_bus_id, pid, process_name, used_gpu_memory [MiB]"]),
    st.tuples(_uuid, _value, st.sampled_from(["python", "/usr/bin/x", "[Not Found]", "a, b"]), _mib).map(", ".join),
    st.tuples(_ts, _bus, _value, st.sampled_from(["python", "C:\\x.exe"]), _mib).map(", ".join),
    _junk,
)
_dmon_line = st.one_of(
    st.sampled_from(["# gpu   pwr    fb", "# Idx     W    MB", "#Date       Time        gpu        pid  type    fb   command",
                     "#YYYYMMDD   HH:MM:SS    Idx          #   C/G    MB   name"]),
    st.tuples(_idx, _value, _value).map(lambda t: "    " + "   ".join(t)),
    st.tuples(st.sampled_from(["20240104", "2024", "x"]), st.sampled_from(["13:54:35", "99:99:99"]), _idx, _value,
              st.sampled_from(["C", "-"]), _value, st.sampled_from(["python", "-", ""])).map(lambda t: " " + "   ".join(t)),
    _junk,
)
_table_line = st.one_of(
    st.sampled_from(["| NVIDIA-SMI 550.90.07              Driver Version: 550.90.07      CUDA Version: 12.4     |",
                     "+-----------------------------------------+------------------------+",
                     "Fri Sep 27 20:41:52 2024"]),
    st.tuples(_idx, _bus).map(lambda t: f"|   {t[0]}  NVIDIA A100-SXM4-40GB          On  |   {t[1]} Off |     0 |"),
    st.tuples(_value, _value).map(lambda t: f"| N/A   37C    P0    56W /  400W |  {t[0]}MiB /  {t[1]}MiB |   0%  Default |"),
    st.tuples(_idx, _value, _value).map(lambda t: f"|    {t[0]}   N/A  N/A   {t[1]}      C   python    {t[2]}MiB |"),
    st.tuples(_idx, _value, _value).map(lambda t: f"|  {t[0]}    3   0   0  |  {t[1]}MiB / {t[2]}MiB | 28 0 |"),
    _junk,
)
_q_line = st.one_of(
    st.sampled_from(["==============NVSMI LOG==============", "Timestamp                 : Sat Jan 25 22:19:18 2025",
                     "Attached GPUs             : 2", "GPU 00000000:0F:00.0", "GPU 0000:01:00.0", "    FB Memory Usage",
                     "    BAR1 Memory Usage", "    Processes", "Timestamp : garbage"]),
    st.tuples(st.sampled_from(["Total", "Used", "Free", "Reserved", "Used GPU Memory"]), _value,
              st.sampled_from([" MiB", "", " MB"])).map(lambda t: f"        {t[0]}          : {t[1]}{t[2]}"),
    _value.map(lambda v: f"        Process ID          : {v}"),
    _junk,
)

# a whole number token, ASCII digits, optionally with its MiB/MB unit
_TOKEN = re.compile(r"(?<![\w.+-])([0-9]+(?:\.[0-9]+)?)(?: ?Mi?B)?(?=\s|,|\||$)")


def _frame(lines: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"text": lines}, schema={"text": pl.String}).with_row_index("line", offset=1).with_columns(
        pl.col("line").cast(pl.Int64))


def _check(module, lines: list[str]) -> None:
    nvsmi_common.first_section(lines)  # the sniff never raises either
    p = module.parse_lines(_frame(lines), "prop.log", OPTS)
    text = dict(enumerate(lines, start=1))
    for df in (p.samples, p.events):
        assert set(df["line"].drop_nulls().to_list()) <= set(text), "a row cites a line that does not exist"
    _check_fall(p.samples)
    for row in p.samples.filter(pl.col("series") != FALL).iter_rows(named=True):
        for col in ("bytes", "total_bytes"):
            v = row[col]
            if v is None:
                continue
            # a reading's number stands on its own line; its total may stand on another line of the input
            # (`nvidia-smi -q` prints `Total` and `Used` on lines of their own in one section)
            where = [text[row["line"]]] if col == "bytes" else list(text.values())
            tokens = [t for line in where for t in _TOKEN.findall(line)]
            assert v >= 0 and any(round(float(t) * MiB) == v for t in tokens), (col, v, text[row["line"]])
    assert p.skipped.total >= 0 and p.clock in ("wall-assumed", "none")


def _check_fall(samples: pl.DataFrame) -> None:
    """A free.fall reading is no number of the file: it is its GPU's highest free reading less the free reading
    of its own line (free memory falling is memory in use growing)."""
    fall = samples.filter(pl.col("series") == FALL)
    if not fall.height:
        return
    free = samples.filter(pl.col("series") == "memory.free")
    assert set(samples["series"].unique()) == {"memory.free", FALL}, "a fall beside memory in use"
    top = free.group_by("gpu").agg(pl.col("bytes").max().alias("top"))
    got = fall.join(free.select("line", "gpu", pl.col("bytes").alias("free")), on=["line", "gpu"], how="left",
                    nulls_equal=True).join(top, on="gpu", how="left", nulls_equal=True)
    assert got.height == free.height
    assert got.filter((pl.col("bytes") != pl.col("top") - pl.col("free"))
                      | (pl.col("bytes").is_null() != pl.col("free").is_null())).height == 0


@SETTINGS
@given(st.lists(_csv_line, max_size=25))
def test_csv_never_raises_and_never_invents_numbers(lines):
    _check(nvsmi_csv, lines)


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 200_000)), min_size=1, max_size=30))
def test_csv_of_free_memory_alone_gives_its_fall_per_gpu(rows):
    """`timestamp, index, memory.free [MiB]`: each free reading is kept, and its fall below its GPU's highest
    is series free.fall, whatever the GPUs' order and values."""
    lines = ["timestamp, index, memory.free [MiB]"] + [
        f"2024/06/01 11:{k // 60:02d}:{k % 60:02d}.000, {gpu}, {mib} MiB" for k, (gpu, mib) in enumerate(rows)]
    p = nvsmi_csv.parse_lines(_frame(lines), "prop.log", OPTS)
    free = p.samples.filter(pl.col("series") == "memory.free")
    assert free["bytes"].to_list() == [mib * MiB for _, mib in rows]
    assert p.samples.filter(pl.col("series") == FALL).height == len(rows)
    _check_fall(p.samples)


@SETTINGS
@given(st.lists(_apps_line, max_size=25))
def test_apps_never_raises_and_never_invents_numbers(lines):
    _check(nvsmi_apps, lines)


@SETTINGS
@given(st.lists(_dmon_line, max_size=25))
def test_dmon_never_raises_and_never_invents_numbers(lines):
    _check(nvsmi_dmon, lines)


@SETTINGS
@given(st.lists(_table_line, max_size=25))
def test_table_never_raises_and_never_invents_numbers(lines):
    _check(nvsmi_table, lines)


@SETTINGS
@given(st.lists(_q_line, max_size=25))
def test_query_never_raises_and_never_invents_numbers(lines):
    _check(nvsmi_query, lines)


@SETTINGS
@given(st.lists(st.one_of(_csv_line, _apps_line, _dmon_line, _table_line, _q_line), max_size=30))
def test_any_mix_through_any_parser(lines):
    for m in (nvsmi_csv, nvsmi_apps, nvsmi_dmon, nvsmi_table, nvsmi_query):
        _check(m, lines)


def test_signed_memory_cells_are_garbage_not_numbers():
    """polars' integer cast takes "+1" and "-0"; nvidia-smi never prints a sign (found by hypothesis)."""
    from forensics.parsers.nvsmi import apps as nvsmi_apps
    from forensics.parsers.nvsmi import csvlog as nvsmi_csv

    _check(nvsmi_apps, ["gpu_uuid, pid, process_name, used_gpu_memory [MiB]", ", 0, , +1 MiB"])
    lines = ["timestamp, index, memory.total [MiB], memory.used [MiB]",
             "2024/01/01 00:00:00.000, 0, 100 MiB, +5 MiB", "2024/01/01 00:00:01.000, 0, -0 MiB, 6 MiB"]
    p = nvsmi_csv.parse_lines(_frame(lines), "prop.log", OPTS)
    assert p.samples.select("line", "bytes", "total_bytes").rows() == [(3, 6 << 20, None)]


# rows as a looped `--query-gpu` prints them, a cell now and then not so
_stamp_cell = st.one_of(st.integers(0, 10**6).map(
    lambda s: f"2024/06/{1 + s // 86400:02d} {s // 3600 % 24:02d}:{s // 60 % 60:02d}:{s % 60:02d}.{s * 7 % 1000:03d}"),
    _ts, st.sampled_from(["2024/06/01 11:27:05", " 2024/06/01 11:27:05.177", "2024/06/01 11:27:60.000"]))
_plain_mib = st.one_of(st.integers(0, 200_000).map(lambda v: f"{v} MiB"), _mib)
_PLAIN_HEADERS = {
    "timestamp, index, name, memory.total [MiB], memory.used [MiB]":
        lambda ts, g, u, t: f"{ts}, {g}, NVIDIA H200, {t}, {u}",
    "timestamp, uuid, memory.used [MiB], memory.total [MiB], utilization.gpu [%]":
        lambda ts, g, u, t: f"{ts}, GPU-{g}aaaaaaa-1795-5579-b092-2eda825636d2, {u}, {t}, 5 %",
    "timestamp, memory.used [MiB], index, pci.bus_id":
        lambda ts, g, u, t: f"{ts}, {u}, {g}, 00000000:{g}B:00.0",
}


@SETTINGS
@given(st.sampled_from(list(_PLAIN_HEADERS)), st.integers(1, 4),
       st.lists(st.tuples(_stamp_cell, st.lists(st.tuples(_plain_mib, _plain_mib), min_size=4, max_size=4)),
                min_size=1, max_size=12),
       st.lists(st.tuples(st.integers(0, 60), st.sampled_from(["junk", "drop", "swap", "comma", "idx"])), max_size=3))
def test_plain_rows_read_as_read_cells_reads_them(header, gpus, samples, faults):
    """The reader's read_plain (rows as nvidia-smi prints them) gives read_cells' result for any rows: clean
    ones (periodic ids, or not) and rows with a fault anywhere (which it declines)."""
    row_of = _PLAIN_HEADERS[header]
    lines = [header]
    for ts, cells in samples:
        lines += [row_of(ts, g, *cells[g]) for g in range(gpus)]
    for at, fault in faults:
        i = 1 + at % (len(lines) - 1) if len(lines) > 1 else 0
        if not i:
            continue
        if fault == "junk":
            lines.insert(i, "Unable to determine the device handle for GPU 0000:12:00.0: Unknown Error")
        elif fault == "drop":
            del lines[i]
        elif fault == "swap" and i + 1 < len(lines):
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
        elif fault == "comma":
            lines[i] = lines[i].replace(", ", ",", 1)
        elif fault == "idx":
            lines[i] = lines[i].replace(", 0,", ", 00,", 1)
    from forensics.parsers.nvsmi import csvcells

    old = csvcells.PLAIN_MIN_ROWS
    try:
        csvcells.PLAIN_MIN_ROWS = 1
        plain = nvsmi_csv.parse_lines(_frame(lines), "prop.log", OPTS)
        csvcells.PLAIN_MIN_ROWS = 1 << 62
        general = nvsmi_csv.parse_lines(_frame(lines), "prop.log", OPTS)
    finally:
        csvcells.PLAIN_MIN_ROWS = old
    assert plain.samples.equals(general.samples)
    assert plain.events.equals(general.events)
    assert (plain.skipped.counts, plain.skipped.examples, plain.notes, plain.meta, plain.clock) == \
        (general.skipped.counts, general.skipped.examples, general.notes, general.meta, general.clock)


def _boxed_table(gpus: list[tuple[int, int]], procs: list[tuple[int, int, int]]) -> list[str]:
    """One snapshot of the old-layout table (nvsmi_table_01's driver): GPUs (used, total MiB), processes
    (GPU, pid, MiB) in the order nvidia-smi prints them."""
    out = ["+-----------------------------------------------------------------------------+",
           "| NVIDIA-SMI 410.48                 Driver Version: 410.48                    |",
           "|-------------------------------+----------------------+----------------------+",
           "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |",
           "| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |",
           "|===============================+======================+======================|"]
    for i, (used, total) in enumerate(gpus):
        out += [f"|   {i}  Tesla P100-SXM2...  Off  | 00000000:{5 + i:02X}:00.0 Off |                    0 |",
                f"| N/A   36C    P0    41W / 300W |  {used:5d}MiB / {total:5d}MiB |      0%      Default |",
                "+-------------------------------+----------------------+----------------------+"]
    out += ["", "+-----------------------------------------------------------------------------+",
            "| Processes:                                                       GPU Memory |",
            "|  GPU       PID   Type   Process name                             Usage      |",
            "|=============================================================================|"]
    out += [f"|  {g:3d}   {pid:7d}      C   python                                 {mib:6d}MiB |"
            for g, pid, mib in sorted(procs)]
    return out + ["+-----------------------------------------------------------------------------+"]


def _readings(p) -> list[tuple]:
    return p.samples.select("series", "gpu", "pid", "bytes", "total_bytes", "label").sort(
        "series", "gpu", "pid").rows()


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 80000), st.integers(1, 80000)), min_size=1, max_size=8),
       st.lists(st.tuples(st.integers(0, 7), st.integers(1, 4_000_000), st.integers(0, 80000)), max_size=6,
                unique_by=lambda t: t[1]),
       st.sampled_from([r"MiB", r"MiB|python", r"GPU|MiB"]))
def test_grepped_rows_read_as_the_whole_table(gpus, procs, pattern):
    """`nvidia-smi | grep -E <pattern>` keeps the readings of the whole table: every GPU's memory (in
    index order) and every process row."""
    procs = [(g % len(gpus), pid, mib) for g, pid, mib in procs]
    whole = _boxed_table(gpus, procs)
    grepped = [ln for ln in whole if re.search(pattern, ln)]
    assert nvsmi_common.first_section(grepped)[0] == "nvidia-smi-table"
    assert _readings(nvsmi_table.parse_lines(_frame(grepped), "g.txt", OPTS)) == \
        _readings(nvsmi_table.parse_lines(_frame(whole), "t.txt", OPTS))
